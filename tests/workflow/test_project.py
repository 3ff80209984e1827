"""The project's own promises: the README's commands, CI, and the Snakemake workflow."""

import re
import subprocess

import pandas as pd
import pytest

from strassenbench.report.page import REPORT_FIGURES, REPORT_TABLES
from support.workflow_helpers import (ROOT, SMOKE, config, copy_workflow, cpu_impls, impl_checks, snakemake, swept,
                                      verify_cases, verify_jobs)


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


def test_readme_is_short_and_links_every_manual_page():
    """A newcomer reads the README in minutes; the manual is docs/, every page linked from it, and every link
    into docs/ leads to a page."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    linked = set(re.findall(r"\]\((docs/[^)#]+)\)", text))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages and linked == pages, (pages - linked, linked - pages)
    for page in pages:
        assert "](../README.md)" in (ROOT / page).read_text(), page


_snakemake = snakemake


@pytest.fixture()
def workdir(tmp_path):
    return copy_workflow(tmp_path)


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


@pytest.mark.parametrize(("gpu", "wgmma"), [("NVIDIA H100 80GB HBM3@sm_90", True), ("NVIDIA A100-SXM4-80GB@sm_80", False)])
def test_the_tensorcore_profile_times_wgmma_on_sm_90_only(workdir, gpu, wgmma):
    """The tensorcore profile's wgmma implementations (and their CUTLASS baseline) are swept, and the wgmma ones
    are in the accuracy table, on an sm_90 GPU; a run on an sm_80 one leaves them out of both, and its other
    tensor-core implementations stay."""
    proc = _snakemake(["-n", "-p", "--config", "profile=tensorcore", f"assume_gpu={gpu}"], workdir)
    assert proc.returncode == 0, proc.stderr
    swept = {impl for impl in config()["tensor_impls"] if f"--impl {impl} " in proc.stdout}
    wg = {impl for impl in config()["tensor_impls"] if impl.endswith("-wgmma") or impl == "cutlass-tf32-sm90"}
    assert wg and (wg <= swept) == wgmma and not (wg & swept and not wgmma)
    assert "gemm-3xtf32" in swept
    accuracy = next(line for line in proc.stdout.splitlines() if "strassenbench accuracy --engine" in line)
    listed = set(accuracy.split("--impl ")[1].split()[0].strip("'").split(","))
    wg_accuracy = {impl for impl in config()["accuracy_impls"] if impl.endswith("-wgmma")}
    assert wg_accuracy and (wg_accuracy <= listed) == wgmma and not (wg_accuracy & listed and not wgmma)
    assert "strassen1-3xtf32" in listed


def test_dry_run_of_paper_profile_lists_every_gpu_job(workdir):
    proc = _snakemake(["-n", "-p", "--config", "profile=paper", "assume_gpu=NVIDIA H100 80GB HBM3@sm_90"], workdir)
    assert proc.returncode == 0, proc.stderr
    counts = _job_counts(proc.stdout)
    from strassenbench.impls import get_impl

    impls = config()["impls"]
    assert "grey322-11-50x1" in impls and config()["algorithms"] == ["grey322-11-50"]
    controls = config()["controls"]
    assert controls == ["classical222-8-24x1"] and "--plan classical222-8-24:1" in proc.stdout
    # one job per (sweep, implementation), cutlass included on a GPU; the control in the square sweep only
    assert counts["sweep"] == 3 * len(impls) + len(controls)
    # Strassen at levels 0, 1, 2 and every other algorithm at 1 and 2; 2 dtypes, 4 shapes.
    assert counts["verify"] == verify_jobs("paper") == (3 + 2 * len(config()["algorithms"])) * 2  # 4 shapes a job
    assert verify_cases("paper") == 4 * verify_jobs("paper")
    assert counts["verify_impl"] == sum(len(get_impl(i).dtypes) for i in impls)
    assert "--plan grey322-11-50:1 --plan grey322-11-50:2" in proc.stdout  # the build has their kernels
    for rule in ("build", "strategies", "memlimit", "sysinfo", "report", "model_crossover", "collect_verify"):
        assert counts[rule] == 1, rule
    assert counts["collect_sweep"] == 3 and counts["model_predict"] == 3
    assert "data/nvidia-h100-80gb-hbm3/square.csv" in proc.stdout
    assert "--sizes 512:20480:512" in proc.stdout and "--strategy best" in proc.stdout
    from strassenbench.sweeps import parse_sizes

    assert {2560, 3072, 3584} <= set(parse_sizes(config()["profiles"]["paper"]["sweeps"]["square"]["sizes"]))
    assert "--arch sm_80 --arch sm_90" in proc.stdout
    assert "--strategy best+Huge+Small --scheme sequential" in proc.stdout and "--by-strategy" in proc.stdout
    # the dry run ends with the forecast of its timed jobs (strassenbench.bench.forecast), a prediction
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"strassenbench: profile paper on NVIDIA H100 80GB HBM3: predicted wall time "
                        r"[0-9.]+ (s|min|h)", last), last


def test_dry_run_of_records_profile_on_the_cpu_takes_every_catalogue_algorithm(workdir):
    """The records profile (a CPU run too): every algorithm `strassenbench algorithms` lists at one level in both
    dtypes, its kernels in the build, and the winners table among the model's files."""
    from strassenbench.algebra.algorithm import algorithm_names

    proc = _snakemake(["-n", "-p", "--config", "profile=records", "backend=numpy"], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = _job_counts(proc.stdout)
    catalogue = [a for a in algorithm_names() if a not in ("strassen", "classical")]
    assert len(catalogue) >= 45 and counts["verify"] == (1 + len(catalogue)) * 2  # Strassen and each, L1, 2 dtypes
    for name in ("plinopt-4x4x4-48-rational", "perminov-5x5x5-93", "alphatensor-3x9x11-225"):
        assert f"--algorithm {name} --levels 1 --shape 37x29x41 " in proc.stdout, name
    assert counts["model_winners"] == 1 and "--gpu V100 --gpu A100 --gpu H100 --sizes" in proc.stdout


TWO_GPUS = 'gpus=["NVIDIA A100-SXM4-80GB@sm_80@a100","NVIDIA H100 80GB HBM3@sm_90@h100"]'


def _planned(stdout):
    """(rule, wildcards, resources) of every job in a dry run's listing."""
    jobs, rule, wildcards = [], None, ""
    for line in stdout.splitlines():
        if match := re.match(r"(?:local)?rule (\w+):", line):
            rule, wildcards = match.group(1), ""
        elif line.strip().startswith("wildcards:"):
            wildcards = line.split(":", 1)[1].strip()
        elif line.strip().startswith("resources:") and rule:
            jobs.append((rule, wildcards, line.split(":", 1)[1].strip()))
    return jobs


def test_dry_run_on_slurm_with_two_gpu_models(workdir):
    """The paper profile through the SLURM profile for two GPU models: one sweep job per (sweep,
    implementation) per model, each asking for one GPU of its model on its node alone, its results in its
    device's folder and refused on another GPU; the two runs are compared."""
    proc = _snakemake(["-n", "-p", "--profile", str(ROOT / "workflow/profiles/slurm"), "--config", "profile=paper",
                       TWO_GPUS], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    impls, controls = config()["impls"], config()["controls"]
    sweeps = [job for job in _planned(proc.stdout) if job[0] == "sweep"]
    assert len(sweeps) == 2 * (3 * len(impls) + len(controls))  # the controls in the square sweep only
    for model, device in (("a100", "nvidia-a100-sxm4-80gb"), ("h100", "nvidia-h100-80gb-hbm3")):
        mine = [job for job in sweeps if f"device={device}" in job[1]]
        assert len(mine) == 3 * len(impls) + len(controls)
        assert all("gpu=1" in res and f"gpu_model={model}" in res and "slurm_extra=--exclusive" in res
                   and "slurm_partition=gpu" in res for _, _, res in mine)
        assert f"--expect-device {device}" in proc.stdout
    predictions = [res for rule, _, res in _planned(proc.stdout) if rule == "model_predict"]
    # A100 and H100 are built-in specs: their predictions query no GPU, so they go to the CPU partition.
    assert predictions and all("slurm_partition=cpu" in res and "gpu=0" in res for res in predictions)
    counts = _job_counts(proc.stdout)
    assert counts["compare"] == 1 and counts["sysinfo"] == 2 and counts["memlimit"] == 2
    assert counts["verify"] == 2 * verify_jobs("paper") and counts["build"] == 1
    assert "--arch sm_80 --arch sm_90" in proc.stdout


def test_cpu_backend_jobs_ask_for_no_gpu(workdir):
    """With the CPU backend no job asks for a GPU (a cluster without GPU gres takes them all), and the build
    compiles the fused implementations' plans but not the verified algorithms' (only a GPU runs those)."""
    proc = _snakemake(["-n", "-p", "--config", "profile=smoke", "backend=numpy"], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--plan grey322-11-50:1 --out" in proc.stdout and "grey322-11-50:2" not in proc.stdout
    planned = _planned(proc.stdout)
    assert planned and not any(re.search(r"\bgpu=[1-9]", res) for _, _, res in planned)
    assert not any("--exclusive" in res for _, _, res in planned)


def test_dry_run_with_compare(workdir):
    (workdir / "data/other-gpu").mkdir(parents=True)
    proc = _snakemake(["-n", "--config", "compare=[data/other-gpu]"], workdir)
    assert proc.returncode == 0, proc.stderr
    assert _job_counts(proc.stdout).get("compare") == 1


@pytest.mark.parametrize(("text", "message"), [
    (None, "config/config.yaml: no such file"),
    ('profile: "paper\n', "config file config/config.yaml, line 2, column 1"),
])
def test_config_file_errors_name_the_file_and_line(workdir, text, message):
    config = workdir / "config/config.yaml"
    if text is None:
        config.unlink()
    else:
        config.write_text(text)
    proc = _snakemake(["-n"], workdir)
    assert proc.returncode == 2 and message in proc.stderr, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_config_errors_stop_the_run_before_any_job(workdir):
    """What the schema cannot say (a size range whose start is past its stop, a compare folder that does not
    exist, an unknown algorithm or implementation) stops the workflow before any job, naming the key."""
    proc = _snakemake(["-n", "--config", "compare=[data/nothere]"], workdir)
    assert proc.returncode != 0 and "compare folder 'data/nothere' does not exist" in proc.stdout + proc.stderr
    for key, value, message in (("algorithms", "[nope333]", "config: algorithms 'nope333': unknown algorithm"),
                                ("impls", "[nope333x1]", "config: impls 'nope333x1': unknown algorithm"),
                                ("algorithm", "strassen+", "config: algorithm 'strassen+': algorithm spec")):
        proc = _snakemake(["-n", "--config", f"{key}={value}"], workdir)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2 and message in proc.stderr and 'File "' not in out, out[-2000:]
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
    assert proc.returncode == 2 and proc.stderr.startswith("config: profile = 'enormous'"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not list(workdir.glob("results")), proc.stderr


def test_backend_cuda_without_a_gpu_is_refused(workdir, monkeypatch):
    """`backend: cuda` where no GPU is visible (CUDA_VISIBLE_DEVICES empty hides every one) stops the workflow
    in one line, not with the device module's exception."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    proc = _snakemake(["-n", "--config", "backend=cuda"], workdir)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == "config: backend 'cuda': backend cuda requested but no NVIDIA GPU is visible"


def test_smoke_run_end_to_end_on_cpu(local_smoke):
    workdir, proc = local_smoke
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CPU run" in proc.stderr
    frame = pd.read_csv(workdir / "data/cpu/verify.csv")
    assert len(frame) == verify_cases("smoke") and set(frame["algorithm"]) == {"strassen", *config()["algorithms"]}
    assert (frame["status"] == "ok").all()
    assert (frame["rel_error"] <= frame["bound"]).all()
    variants = (workdir / "report/tables/variants_L2.md").read_text()
    assert len([line for line in variants.splitlines() if line.startswith("|")]) == 12
    assert "makespan 4 products (lower bound 4" in (workdir / "report/tables/schedule_L1_S2.md").read_text()
    page = (workdir / "report/index.html").read_text()
    assert "CPU run: no GPU was used" in page
    linked = set(re.findall(r'(?:href|src)="([^"#]+)"', page))
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
        assert len(frame) == len(set(frame["x"])) * swept(sweep) and (frame["status"] == "ok").all()
    square = pd.read_csv(workdir / "data/cpu/square.csv")  # the DMMA implementation beside cuBLAS in float64
    assert set(square[square["dtype"] == "float64"]["impl"]) == {"cublas", "gemm", "strassen1-dmma"}
    assert (workdir / "data/cpu/system.json").is_file() and (workdir / "data/cpu/memlimit.csv").is_file()
    assert (workdir / "build/resources.csv").is_file()
    from strassenbench.model.files import MODEL_FILES

    assert [name for name in MODEL_FILES if not (workdir / "data/cpu" / name).is_file()] == []  # the report's model
    checked = pd.read_csv(workdir / "data/cpu/verify_impls.csv")
    assert len(checked) == impl_checks(cpu_impls()) and (checked["status"] == "ok").all()
    accuracy = pd.read_csv(workdir / "data/cpu/accuracy.csv")  # the smoke profile has the tensor cores on
    assert set(accuracy["impl"]) == set(config()["accuracy_impls"]) and (accuracy["status"] == "ok").all()
    assert set(accuracy["inputs"]) == {"uniform", "wide"} and "3xtf32" in set(accuracy["mode"])
    assert set(accuracy[accuracy["mode"] == "dmma"]["dtype"]) == {"float64"}  # DMMA's rows beside SIMT FP64's
    assert {"float32", "float64"} <= set(accuracy[accuracy["impl"] == "strassen1"]["dtype"])
    assert set(checked[checked["impl"].isin(["gemm", "strassen1", "strassen2-hybrid", "grey322-11-50x1"])]["engine"]) \
        == {"emu"}
    checks = (workdir / "report/tables/numerical_error_checks.md").read_text()
    assert "strassen1" in checks and "| emu " in checks and "plan: strassen" in checks
    rerun = _snakemake(["--cores", "1", *SMOKE], workdir)
    assert rerun.returncode == 0 and "Nothing to be done" in rerun.stdout + rerun.stderr
