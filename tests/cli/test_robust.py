"""Bad input as a hostile but realistic user gives it: every refusal is one line with exit status 2, before any
work, and leaves every file as it was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.cli import main
from strassenbench.io import output_lock
from support.refusals import refused as _refused, snapshot as _snapshot

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "gpu_a"
QUICK = ["--min-time", "0", "--warmup-time", "0", "--min-samples", "2", "--precision", "1", "--no-progress"]


@pytest.fixture
def bench_folder(tmp_path: Path) -> Path:
    """A folder with one CPU bench result (square.csv, its samples, system.json)."""
    assert main(["bench", "--impl", "gemm", "--sizes", "32", "--out", str(tmp_path / "square.csv"), *QUICK]) == 0
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["memlimit", "--impl", "gemm", "--memory-budget", "16MiB", "--step", "64", "--out", "{out}"],
    ["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--out", "{out}"],
    ["variants", "--levels", "1", "--out", "{out}"],
    ["model", "predict", "--gpu", "V100", "--sizes", "512", "--out", "{out}"],
    ["algorithms", "--out", "{out}"],
])
def test_an_output_of_another_kind_is_never_replaced(bench_folder: Path, capsys, argv) -> None:  # noqa: ANN001
    out = str(bench_folder / "square.csv")
    _refused(capsys, [a.replace("{out}", out) for a in argv], "square.csv", bench_folder)


def test_a_rerun_replaces_its_own_output(tmp_path: Path) -> None:
    out = tmp_path / "v.csv"
    assert main(["variants", "--levels", "1", "--out", str(out)]) == 0
    assert main(["variants", "--levels", "2", "--out", str(out)]) == 0
    assert len(pd.read_csv(out)) > 4


def test_memlimit_refuses_a_bench_file_before_any_work(bench_folder: Path, capsys) -> None:  # noqa: ANN001
    started = time.perf_counter()
    _refused(capsys, ["memlimit", "--impl", "gemm", "--memory-budget", "16MiB", "--step", "64", "--out",
                      str(bench_folder / "square.csv")], "not a memlimit results file", bench_folder)
    assert time.perf_counter() - started < 5  # the confirmation runs (child processes) never started


def test_one_writer_per_output(bench_folder: Path, capsys) -> None:  # noqa: ANN001
    out = bench_folder / "square.csv"
    with output_lock(out):
        err = _refused(capsys, ["bench", "--impl", "gemm,strassen1", "--sizes", "32", "--out", str(out), *QUICK],
                       "another strassenbench", bench_folder)
    assert f"PID {os.getpid()}" in err
    assert main(["bench", "--impl", "gemm,strassen1", "--sizes", "32", "--out", str(out), *QUICK]) == 0
    assert len(pd.read_csv(out)) == 2 and not list(bench_folder.glob(".*.lock"))


def test_a_second_process_on_the_same_out_is_refused_and_no_row_is_lost(bench_folder: Path) -> None:
    out = bench_folder / "square.csv"
    argv = [sys.executable, "-m", "strassenbench", "bench", "--impl", "gemm,strassen1,cublas", "--sizes",
            "32,48,64,80,96,112", "--out", str(out), "--max-time", "0.4", "--warmup-time", "0", "--no-progress"]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not list(bench_folder.glob(".square.csv.lock")) and time.time() < deadline:
        time.sleep(0.05)
    second = subprocess.run(argv, capture_output=True, text=True, check=False)
    first.communicate()
    assert first.returncode == 0 and second.returncode == 2, second.stderr
    assert "another strassenbench" in second.stderr
    assert len(pd.read_csv(out)) == 1 + 17  # the fixture's point and the first run's 17 new ones


def test_one_device_per_folder(bench_folder: Path, capsys) -> None:  # noqa: ANN001
    system = bench_folder / "system.json"
    system.write_text(json.dumps({"engine": "cuda", "gpu": {"gpu": "NVIDIA H100 80GB HBM3"}}))
    _refused(capsys, ["bench", "--impl", "gemm", "--sizes", "48", "--out", str(bench_folder / "rankk.csv"), *QUICK],
             "one device per folder", bench_folder)
    _refused(capsys, ["sysinfo", "--engine", "numpy", "--out", str(system)], "one device per folder", bench_folder)
    _refused(capsys, ["memlimit", "--impl", "gemm", "--memory-budget", "16MiB", "--out", str(bench_folder / "m.csv")],
             "one device per folder", bench_folder)
    _refused(capsys, ["report", "--data", str(bench_folder), "--out", str(bench_folder.parent / "rep")],
             "several devices", bench_folder)


def test_report_and_compare_never_write_into_their_inputs(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    data = tmp_path / "gpu_a"
    data.mkdir()
    for f in FIXTURE.iterdir():
        (data / f.name).write_bytes(f.read_bytes())
    _refused(capsys, ["report", "--data", str(data), "--out", str(data / "report")], "inside the results folder", data)
    _refused(capsys, ["compare", str(data), str(data) + "/", "--out", str(tmp_path / "cmp")], "given twice", data)
    _refused(capsys, ["compare", str(data), str(FIXTURE.parent / "gpu_b"), "--out", str(data)],
             "inside the results folder", data)


def test_a_failed_report_leaves_the_report_folder_as_it_was(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from strassenbench.report import contents

    out = tmp_path / "report"
    assert main(["report", "--data", str(FIXTURE), "--out", str(out)]) == 0
    before = _snapshot(out)

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("a figure failed")

    monkeypatch.setattr(contents, "fig_memlimit", broken)  # the registry's drawing of fig_memlimit
    with pytest.raises(RuntimeError):
        main(["report", "--data", str(FIXTURE), "--out", str(out)])
    assert _snapshot(out) == before and not list(tmp_path.glob(".report.partial.*"))


@pytest.mark.parametrize(("argv", "message"), [
    (["verify", "--impl", "strassenx5", "--m", "8", "--n", "8", "--k", "8"], "above the maximum 4"),
    (["build", "--arch", "sm_90", "--plan", "strassen:9", "--out", "{tmp}/b"], "above the maximum 4"),
    (["variants", "--levels", "1", "--algorithm", "strassen+winograd"], "has 2 levels, not 1"),
    (["schedule", "--levels", "4"], "above the limit of 343"),
    (["model", "crossover", "--gpu", "V100", "--sizes", "1:100000000:1"], "above the limit of 10,000"),
    (["bench", "--impl", "gemm", "--sizes", "64,,96", "--out", "{tmp}/x.csv"], "empty item"),
    (["bench", "--impl", "gemm", "--sizes", "1_024", "--out", "{tmp}/x.csv"], "plain decimal"),
    (["verify", "--levels", "1", "--m", " 64 ", "--n", "4", "--k", "4"], "not a plain decimal integer"),
    (["verify", "--levels", "1", "--m", "١٢", "--n", "4", "--k", "4"], "not a plain decimal integer"),
    (["bench", "--impl", "gemm", "--sweep", "custom", "--shapes", "8x8x8,,9x9x9", "--out", "{tmp}/x.csv"],
     "empty item"),
    (["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--alpha", "-inf"], "'-inf' is not finite"),
    (["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--out", "{tmp}/" + "x" * 300 + ".csv"],
     "too long"),
    (["model", "predict", "--gpu", "V100", "--resources", "{tmp}/missing.csv"], "no such file"),
    (["model", "predict", "--gpu", "V100", "--resources", "{tmp}"], "is a folder"),
    (["verify", "--algorithm", "{tmp}", "--levels", "1", "--m", "4", "--n", "4", "--k", "4"], "is a folder"),
    (["verify", "--algorithm", "{tmp}/" + "a" * 300 + ".txt", "--levels", "1", "--m", "4", "--n", "4", "--k", "4"],
     "too long"),
])
def test_work_is_bounded_and_inputs_checked_before_it_starts(tmp_path: Path, capsys, argv, message) -> None:  # noqa: ANN001
    _refused(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv], message, tmp_path)


def test_a_negative_alpha_in_any_spelling(capsys) -> None:  # noqa: ANN001
    assert main(["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--alpha", "-1e5", "--beta", "-2"]) == 0
    assert "alpha=-100000.0" in capsys.readouterr().out


@pytest.mark.parametrize(("content", "message"), [
    (b"", "empty"), (b"\x00\x01\x02", "binary"), (b"kernel,arch\nx,sm_90\n", "no column"),
])
def test_resources_are_checked_by_kind(tmp_path: Path, capsys, content: bytes, message: str) -> None:  # noqa: ANN001
    path = tmp_path / "resources.csv"
    path.write_bytes(content)
    _refused(capsys, ["model", "predict", "--gpu", "V100", "--resources", str(path)], message, tmp_path)
    _refused(capsys, ["report", "--data", str(FIXTURE), "--out", str(tmp_path / "r"), "--resources", str(path)],
             message, tmp_path)


@pytest.mark.parametrize(("text", "message"), [
    ("1 0\n#\n1\n#\n1\n", "expected 2"),
    ("1e999999999\n#\n1\n#\n1\n", "not an integer or a fraction"),
    ("12345678901\n#\n1\n#\n1\n", "larger than"),
    ("\x00\x01", "binary"),
    (" ".join(["1"] * 1001) + "\n#\n1\n#\n1\n", "above the limit of 1,000"),
])
def test_algorithm_files_are_bounded_before_they_are_parsed(tmp_path: Path, capsys, text: str, message: str) -> None:  # noqa: ANN001
    path = tmp_path / "alg.txt"
    path.write_text(text)
    started = time.perf_counter()
    _refused(capsys, ["variants", "--levels", "1", "--algorithm", str(path)], message, tmp_path)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize(("value", "message"), [("nan", "not a number"), ("inf", "finite non-negative time"),
                                                ("-1", "finite non-negative time")])
def test_readers_refuse_times_that_cannot_be_right(tmp_path: Path, capsys, value: str, message: str) -> None:  # noqa: ANN001
    data = tmp_path / "run"
    data.mkdir()
    frame = pd.read_csv(FIXTURE / "square.csv", dtype=str, keep_default_na=False)
    frame.loc[0, "time_median_s"] = value
    frame.to_csv(data / "square.csv", index=False)
    _refused(capsys, ["report", "--data", str(data), "--out", str(tmp_path / "r")], message, data)
    _refused(capsys, ["collect", str(data / "square.csv"), "--out", str(tmp_path / "c.csv")], message, data)


def test_samples_that_cannot_be_right_are_refused(bench_folder: Path, capsys) -> None:  # noqa: ANN001
    csv, samples = bench_folder / "square.csv", bench_folder / "square.samples.jsonl"
    out = bench_folder / "all.csv"
    _refused(capsys, ["collect", str(csv), str(csv), "--out", str(out)], "given twice", bench_folder)
    text = samples.read_text()
    line = json.loads(text)
    for broken, message in ((text.rstrip("\n"), "cut short"),
                            (json.dumps({**line, "samples": [[float("nan"), None, False, True]]}) + "\n", "finite"),
                            (json.dumps({**line, "m": 999}) + "\n", "do not measure")):
        samples.write_text(broken)
        _refused(capsys, ["collect", str(csv), "--out", str(out)], message, bench_folder)


def test_build_stops_at_ctrl_c_with_its_compilers(tmp_path: Path) -> None:
    """SIGINT to the build's process group (a terminal's Ctrl-C) in the middle of its compiles: it exits with
    130 at once (before this, it let every queued compile finish), no compiler of it keeps running and no
    half-written file is left."""
    out = tmp_path / "build"
    proc = subprocess.Popen([sys.executable, "-m", "strassenbench", "build", "--arch", "sm_90", "--dtype", "float32",
                             "--out", str(out), "--force", "--no-cutlass"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while not list(out.glob(".*.tmp")) and time.time() < deadline:  # a compile is under way
        time.sleep(0.05)
    assert proc.poll() is None
    began = time.perf_counter()
    os.killpg(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    stopped = time.perf_counter() - began
    assert proc.returncode == 130 and "interrupted" in output.decode(), output[-500:]
    assert stopped < 30, stopped  # it was the whole queue: minutes (a loaded machine took 11 s to unwind)
    time.sleep(0.5)
    survivors = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout.split()
    assert not survivors and not list(out.glob(".*.tmp"))


# The workflow's config: the checks themselves, then two runs of Snakemake (a dry run takes seconds).
def _schema() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())


def _config(**changes: object) -> dict:
    import yaml

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config.update(changes)
    return config


@pytest.mark.parametrize(("changes", "message"), [
    ({"nope": 1}, "unknown key 'nope'"),
    ({"streams": [99]}, "streams.0 = 99"),
    ({"impls": []}, "impls = []"),
    ({"backend": "gpu"}, "one of auto, cuda, numpy"),
    ({"profiles": {**_config()["profiles"], "smoke": {**_config()["profiles"]["smoke"],
                                                       "memlimit": {"step": 64, "budget": "5XB"}}}},
     "budget = '5XB'"),
    ({"profiles": {**_config()["profiles"], "smoke": {**_config()["profiles"]["smoke"],
                                                       "memlimit": {"step": 64, "budget": "256"}}}},
     "budget = '256'"),
])
def test_a_config_that_breaks_the_schema_is_named_in_three_lines(changes: dict, message: str) -> None:
    from strassenbench.configfile import schema_error

    error = schema_error(_config(**changes), _schema())
    assert error is not None and message in error and len(error.splitlines()) <= 3, error
    assert schema_error(_config(), _schema()) is None


def test_config_values_are_read_with_their_yaml_types() -> None:
    from strassenbench.configfile import schema_error, yaml_types

    given = _config(streams=["2", "4"], profiles={**_config()["profiles"], "smoke": {
        **_config()["profiles"]["smoke"], "memlimit": {"step": "64", "budget": "32MiB"}}})
    typed = yaml_types(given, _schema())
    assert typed["streams"] == [2, 4] and typed["profiles"]["smoke"]["memlimit"] == {"step": 64, "budget": "32MiB"}
    assert schema_error(typed, _schema()) is None


@pytest.mark.parametrize(("text", "message"), [
    ("streams: [2]\nstreams: [4]\n", "line 2, column 1: key 'streams' is given twice"),
    ("", "not a mapping"),
    ("a: [1\n", "line 2"),
])
def test_config_files_are_named_with_the_line(tmp_path: Path, text: str, message: str) -> None:
    from strassenbench.configfile import ConfigFileError, check_config_file

    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError, match=message) as err:
        check_config_file(path)
    assert str(path) in str(err.value)


def test_nan_and_infinities_in_the_config_are_refused() -> None:
    from strassenbench.configfile import ConfigFileError, check_finite

    with pytest.raises(ConfigFileError, match="profiles.smoke.timing.min_time = nan"):
        check_finite({"profiles": {"smoke": {"timing": {"min_time": float("nan")}}}})


def test_the_workflow_says_the_config_error_in_one_line_and_takes_yaml_types(tmp_path: Path) -> None:
    from support.workflow_helpers import copy_workflow, snakemake

    workdir = copy_workflow(tmp_path)
    (workdir / "dup.yaml").write_text("streams: [2]\nstreams: [4]\n")
    for args, message in ((["--config", "nope=1"], "unknown key 'nope'"),
                          (["--configfile", "dup.yaml"], "key 'streams' is given twice")):
        proc = snakemake(["-n", *args], workdir)
        text = proc.stdout + proc.stderr
        assert proc.returncode == 2 and message in text, text[-2000:]
        assert [line for line in proc.stderr.splitlines() if line.strip()] == [proc.stderr.strip()], proc.stderr
        assert "Traceback" not in text and 'File "' not in text, text[-2000:]
    proc = snakemake(["-n", "--config", "streams=[2]", "backend=numpy"], workdir)  # the paper profile, asked
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "profile paper replaced by smoke" in proc.stderr and "assume_gpu=" in proc.stderr  # said, not silent


@pytest.mark.parametrize("confirmed", [True, False])
def test_the_claims_table_says_what_the_memory_limits_say(tmp_path: Path, confirmed: bool) -> None:
    """`confirmed` is read as a boolean by the checked reader: the claims table and the memory-limit table
    cannot disagree (a False written as text was once truthy)."""
    from strassenbench.report.analysis import claims
    from strassenbench.results import read_results

    frame = pd.read_csv(FIXTURE / "memlimit.csv", dtype=str, keep_default_na=False)
    frame["confirmed"] = str(confirmed)
    path = tmp_path / "memlimit.csv"
    frame.to_csv(path, index=False)
    memlimit = read_results(path)
    assert memlimit["confirmed"].dtype == bool and (memlimit["confirmed"] == confirmed).all()
    verdicts = [v for v in claims(pd.DataFrame(), memlimit)["this run"] if "confirmed" in v]
    assert verdicts and all(("not confirmed" in v) != confirmed for v in verdicts)
    frame["confirmed"] = "maybe"
    frame.to_csv(path, index=False)
    with pytest.raises(Exception, match="True or False"):
        read_results(path)
