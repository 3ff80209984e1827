"""The workflow on a real SLURM: a one-node cluster brought up by .ci/slurm.sh (Debian's SLURM with
accounting), the smoke workflow submitted through snakemake-executor-plugin-slurm with the project's profile.

Marked ``slurm``. Where SLURM cannot start (not root, no apt-get, no Debian packages) the tests skip and say
why; `pytest -m "not slurm"` leaves them out.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from support.workflow_helpers import ROOT, SMOKE, copy_workflow, cpu_impls, snakemake, swept

pytestmark = pytest.mark.slurm
SLURM = ROOT / ".ci" / "slurm.sh"
PROFILE = ["--profile", str(ROOT / "workflow" / "profiles" / "slurm"), "--slurm-init-seconds-before-status-checks",
           "2", "--slurm-no-account", "--jobs", "16", *SMOKE]
SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: \S*/rule_(\w+)/")


@pytest.fixture(scope="module")
def slurm() -> None:
    up = subprocess.run(["bash", str(SLURM), "up"], capture_output=True, text=True, check=False, timeout=600)
    if up.returncode != 0:
        reason = (up.stderr.strip().splitlines() or ["no output"])[0]
        if "needs root and apt-get" in reason:
            pytest.skip(f"SLURM cannot start here: {reason}")
        said = [line for line in up.stderr.splitlines() if line.startswith("slurm.sh:")]
        pytest.fail(f".ci/slurm.sh up failed: {' '.join(said) or reason}\n{up.stderr[-2000:]}")
    yield
    subprocess.run(["bash", str(SLURM), "down"], capture_output=True, check=False, timeout=120)


@pytest.fixture(scope="module")
def cluster_run(slurm, local_smoke, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """The smoke workflow through SLURM. To keep CI within its time, what does not depend on where it runs
    is taken from the local run: the kernel build, the verification results, the sweeps of all but the
    SWEPT implementations (dozens of short jobs, each a SLURM job's start-up for a second of work) and the
    model's winners table (REUSED_MODEL: half a minute of the model, from build/resources.csv alone). The
    sweeps of SWEPT, memory limits, system description, the other model tables and the report run as SLURM
    jobs."""
    workdir = copy_workflow(tmp_path_factory.mktemp("slurm-run"))
    local = local_smoke[0]
    parts = [str(path.relative_to(local)) for path in sorted((local / "results" / "cpu" / "parts").glob("*/*"))
             if path.name.split(".")[0] not in SWEPT]
    for reused in ("build", "results/cpu/verify", "results/cpu/verify_impls", "data/cpu/verify.csv",
                   "data/cpu/verify_impls.csv", *(f"data/cpu/{rule}.csv" for rule in REUSED_MODEL), *parts):
        (workdir / reused).parent.mkdir(parents=True, exist_ok=True)
        if reused == "build":  # read only here (its rule does not run): hard links, not a gigabyte's copy
            shutil.copytree(local / reused, workdir / reused, copy_function=os.link)
        else:
            (shutil.copytree if (local / reused).is_dir() else shutil.copy)(local / reused, workdir / reused)
    return workdir, snakemake(PROFILE, workdir, cluster=True)


SWEPT = ("cublas", "strassen1")  # the implementations whose sweeps run as SLURM jobs
REUSED_MODEL = ("model_winners",)  # the model rules whose tables are the local run's (by rule = file name)


def _jobs(output: str) -> dict[str, list[str]]:
    """SLURM job ids by rule, from Snakemake's submission lines."""
    jobs: dict[str, list[str]] = {}
    for job_id, rule in SUBMITTED.findall(output):
        jobs.setdefault(rule, []).append(job_id)
    return jobs


def _accounting(job_ids: list[str]) -> dict[str, str]:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(job_ids)],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if line)


def test_smoke_workflow_runs_as_slurm_jobs(cluster_run) -> None:  # noqa: ANN001
    """Every step that runs (all but the localrules, which join or render small files) is a SLURM job that
    the accounting shows completed; the sweeps ask for no GPU on the CPU backend (a cluster without GPU gres
    accepts them)."""
    workdir, proc = cluster_run
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    jobs = _jobs(proc.stdout + proc.stderr)
    steps = int(re.findall(r"(\d+) of \1 steps \(100%\) done", proc.stdout + proc.stderr)[-1])
    local = re.findall(r"^localrule (\w+):", proc.stdout + proc.stderr, flags=re.MULTILINE)
    assert set(local) <= {"all", "collect_sweep", "collect_verify", "collect_verify_impls", "collect_memlimit",
                          "schedule_table", "model_crossover"}  # the Snakefile's localrules
    assert sum(map(len, jobs.values())) == steps - len(local)
    assert not {"build", "verify", "verify_impl", *REUSED_MODEL} & set(jobs)
    assert {"memlimit", "sysinfo", "report", "model_predict", "model_strategies", "model_build_tables"} <= set(jobs)
    assert len(jobs.get("sweep", [])) == 3 * len(SWEPT)  # one job per (sweep, implementation) not reused
    assert set(SWEPT) < set(cpu_impls())
    states = _accounting([j for ids in jobs.values() for j in ids])
    assert set(states.values()) == {"COMPLETED"} and len(states) == sum(map(len, jobs.values()))
    detail = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,AllocTRES,Partition", "-j", jobs["sweep"][0]],
                            capture_output=True, text=True, check=True).stdout
    assert "gres/gpu" not in detail and "|gpu" in detail  # the GPU partition, but no GPU asked for
    assert (workdir / "report" / "index.html").is_file()


def _report_files(workdir: Path) -> set[str]:
    return {str(p.relative_to(workdir / "report")) for p in (workdir / "report").rglob("*") if p.is_file()}


# Report tables that do not depend on timings: equal to the byte between two runs of the same commit.
STABLE_TABLES = ["variants_L1.md", "variants_L2.md", "schedule_L1_S2.md", "schedule_L2_S4.md",
                 "numerical_error_checks.md", "model_bounds.md"]


def test_the_cluster_report_is_the_local_report(cluster_run, local_smoke) -> None:  # noqa: ANN001
    """The same files as a local `snakemake --cores 1` run, and the same tables wherever no timing enters."""
    workdir, proc = cluster_run
    assert proc.returncode == 0
    local, _ = local_smoke
    assert _report_files(workdir) == _report_files(local)
    for table in STABLE_TABLES:
        path = Path("tables") / table
        assert (workdir / "report" / path).read_text() == (local / "report" / path).read_text(), table
    ours = pd.read_csv(workdir / "data/cpu/memlimit.csv")  # measured again on SLURM: the same limits
    theirs = pd.read_csv(local / "data/cpu/memlimit.csv")
    assert ours[["impl", "predicted_n", "predicted_bytes"]].equals(theirs[["impl", "predicted_n", "predicted_bytes"]])


def test_a_job_cancelled_by_slurm_is_redone_and_nothing_is_lost(cluster_run) -> None:  # noqa: ANN001
    """The square sweep's strassen1 job is redone and cancelled by `scancel` while it runs: that invocation
    fails, the next one runs that job again and nothing else, and the published sweep is whole."""
    workdir, proc = cluster_run
    assert proc.returncode == 0
    kept = {p: p.stat().st_mtime_ns for p in (workdir / "results/cpu/parts/square").glob("*.csv")
            if p.stem != "strassen1"}
    for path in ("results/cpu/parts/square/strassen1.csv", "results/cpu/sweep/square/strassen1.csv",
                 "data/cpu/square.csv"):
        (workdir / path).unlink()
    target = ["data/cpu/square.csv"]
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    run = subprocess.Popen([sys.executable, "-m", "snakemake", *target, *PROFILE], cwd=workdir, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen, cancelled = [], None
    assert run.stdout is not None
    for line in run.stdout:
        seen.append(line)
        match = SUBMITTED.search(line)
        if match and match.group(2) == "sweep":
            cancelled = match.group(1)
            deadline = time.monotonic() + 60  # cancel it once SLURM runs it
            while time.monotonic() < deadline and subprocess.run(
                    ["squeue", "-h", "-j", cancelled, "-o", "%T"], capture_output=True, text=True).stdout.strip() \
                    not in ("RUNNING", ""):
                time.sleep(0.2)
            subprocess.run(["scancel", cancelled], check=True)
    assert run.wait(timeout=600) != 0 and cancelled, "".join(seen)[-3000:]
    assert _accounting([cancelled])[cancelled].startswith("CANCELLED")
    again = snakemake([*target, *PROFILE], workdir, cluster=True)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    redone = _jobs(again.stdout + again.stderr)
    assert len(redone["sweep"]) == 1 and redone["sweep"][0] != cancelled
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # the other parts were not run again
    square = pd.read_csv(workdir / "data/cpu/square.csv")
    assert len(square) == swept("square") * 3 and (square["status"] == "ok").all()
