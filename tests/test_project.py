"""The project's own promises: the README's commands, CI, and the Snakemake workflow."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.report.build import REPORT_FIGURES, REPORT_TABLES

ROOT = Path(__file__).resolve().parents[1]


def _fenced_command(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- {marker} -->\n```bash\n(.+)\n```", text)
    assert match, f"README.md has no {marker}"
    return match.group(1)


def test_ci_runs_the_readme_test_command():
    ci = subprocess.run(
        ["bash", "-c", "awk '/<!-- test-command -->/{found=1; next} found && /^```bash/{getline; print; exit}' README.md"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert ci == _fenced_command("test-command")
    assert "--clear" in ci and "pytest" in ci
    assert 'awk' in (ROOT / ".ci/run").read_text()


def test_readme_main_command_runs_snakemake():
    assert _fenced_command("main-command").endswith("snakemake --cores 1")


def _snakemake(args, cwd):
    """Run snakemake from this interpreter's environment, with its scripts (strassenbench) on PATH."""
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True, env=env)


@pytest.fixture()
def workdir(tmp_path):
    for name in ("Snakefile", "config", "workflow", "environment.yml"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    return tmp_path


def test_lint_is_clean(workdir):
    proc = _snakemake(["--lint"], workdir)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "Congratulations" in proc.stdout + proc.stderr


def _job_counts(stdout):
    counts, table = {}, False
    for line in stdout.splitlines():
        if line.startswith("job ") and "count" in line:
            table = True
            continue
        if table:
            fields = line.split()
            if len(fields) == 2 and fields[1].isdigit():
                counts[fields[0]] = int(fields[1])
            elif counts:
                break
    return counts


def test_dry_run_of_paper_profile_lists_every_gpu_job(workdir):
    proc = _snakemake(["-n", "-p", "--config", "profile=paper", "assume_gpu=NVIDIA H100 80GB HBM3@sm_90"], workdir)
    assert proc.returncode == 0, proc.stderr
    counts = _job_counts(proc.stdout)
    from strassenbench.impls import IMPLS

    assert counts["sweep"] == 3 * len(IMPLS)  # one job per (sweep, implementation), cutlass included on a GPU
    assert counts["verify"] == 3 * 2 * 4 and counts["verify_impl"] == sum(len(i.dtypes) for i in IMPLS.values())
    for rule in ("build", "strategies", "memlimit", "sysinfo", "report", "model_crossover", "collect_verify"):
        assert counts[rule] == 1, rule
    assert counts["collect_sweep"] == 3 and counts["model_predict"] == 3
    assert "data/nvidia-h100-80gb-hbm3/square.csv" in proc.stdout
    assert "--sizes 512:20480:512" in proc.stdout and "--strategy best" in proc.stdout
    assert "--arch sm_80 --arch sm_90" in proc.stdout


def test_dry_run_with_compare(workdir):
    (workdir / "data/other-gpu").mkdir(parents=True)
    proc = _snakemake(["-n", "--config", "compare=[data/other-gpu]"], workdir)
    assert proc.returncode == 0, proc.stderr
    assert _job_counts(proc.stdout).get("compare") == 1


@pytest.mark.parametrize(("text", "message"), [
    (None, "config file config/config.yaml does not exist"),
    ('profile: "paper\n', "config file config/config.yaml, line 2, column 1"),
])
def test_config_file_errors_name_the_file_and_line(workdir, text, message):
    config = workdir / "config/config.yaml"
    if text is None:
        config.unlink()
    else:
        config.write_text(text)
    proc = _snakemake(["-n"], workdir)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr


def test_config_errors_stop_the_run_before_any_job(workdir):
    """What the schema cannot say (a size range whose start is past its stop, a compare folder that does not
    exist) stops the workflow before any job, naming the key."""
    proc = _snakemake(["-n", "--config", "compare=[data/nothere]"], workdir)
    assert proc.returncode != 0 and "compare folder 'data/nothere' does not exist" in proc.stdout + proc.stderr
    config = workdir / "config/config.yaml"
    text = config.read_text()
    assert 'square: {sizes: "64,128,192"}' in text
    config.write_text(text.replace('square: {sizes: "64,128,192"}', 'square: {sizes: "5:1:2"}'))
    proc = _snakemake(["-n"], workdir)
    assert proc.returncode != 0
    assert "profiles.smoke.sweeps.square.sizes '5:1:2'" in proc.stdout + proc.stderr
    assert "start <= stop" in proc.stdout + proc.stderr


def test_bad_config_key_is_rejected(workdir):
    proc = _snakemake(["-n", "--config", "profile=enormous"], workdir)
    assert proc.returncode != 0
    assert "enormous" in proc.stdout + proc.stderr


def test_smoke_run_end_to_end_on_cpu(workdir):
    proc = _snakemake(["--cores", "1", "--config", "profile=smoke", "backend=numpy"], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CPU run" in proc.stderr
    frame = pd.read_csv(workdir / "data/cpu/verify.csv")
    assert len(frame) == 3 * 2 * 4
    assert (frame["status"] == "ok").all()
    assert (frame["rel_error"] <= frame["bound"]).all()
    variants = (workdir / "report/tables/variants_L2.md").read_text()
    assert len([line for line in variants.splitlines() if line.startswith("|")]) == 12
    assert "makespan 4 products (lower bound 4" in (workdir / "report/tables/schedule_L1_S2.md").read_text()
    page = (workdir / "report/index.html").read_text()
    assert "CPU run: no GPU was used" in page
    linked = set(re.findall(r"(?:href|src)='([^'#]+)'", page))
    report_files = {str(p.relative_to(workdir / "report")) for p in (workdir / "report").rglob("*") if p.is_file()}
    assert report_files - {"index.html"} <= linked, sorted(report_files - linked)
    assert "strassenbench: report in" in proc.stderr and "the smoke profile on the numpy engine" in proc.stderr
    for fig in REPORT_FIGURES:
        for ext in ("png", "pdf"):
            assert (workdir / f"report/figures/{fig}.{ext}").is_file(), fig
    for table in REPORT_TABLES:
        assert (workdir / f"report/tables/{table}.md").is_file(), table
    for sweep in ("square", "rankk", "panel"):
        frame = pd.read_csv(workdir / f"data/cpu/{sweep}.csv")
        assert len(frame) == len(set(frame["x"])) * 7 and (frame["status"] == "ok").all()
    assert (workdir / "data/cpu/system.json").is_file() and (workdir / "data/cpu/memlimit.csv").is_file()
    assert (workdir / "build/resources.csv").is_file()
    checked = pd.read_csv(workdir / "data/cpu/verify_impls.csv")
    assert len(checked) == 7 * 2 and (checked["status"] == "ok").all()
    assert set(checked[checked["impl"].isin(["gemm", "strassen1", "strassen2-hybrid"])]["engine"]) == {"emu"}
    checks = (workdir / "report/tables/numerical_error_checks.md").read_text()
    assert "strassen1" in checks and "| emu " in checks and "plan: strassen" in checks
    rerun = _snakemake(["--cores", "1", "--config", "profile=smoke", "backend=numpy"], workdir)
    assert rerun.returncode == 0 and "Nothing to be done" in rerun.stdout + rerun.stderr
