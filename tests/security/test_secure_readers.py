"""Readers' bounds and malformed files: every file a command is given is a regular file or refused before a
byte is read (a FIFO never blocks, /dev/zero is never read), every reader is bounded in size, CSV cell size and
JSON nesting, system.json is checked against its schema naming the key, and collect checks every input (one
device, each point once, samples that belong to their rows). Every refusal: exit 2, one line, nothing written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.bench.backends import NumpyBackend
from strassenbench.bench.runner import Point, run_sweep
from strassenbench.bench.timers import Criterion
from strassenbench.cli import main
from strassenbench.readers import (MAX_CELL_BYTES, MAX_JSON_DEPTH, MAX_TABLE_BYTES, ReadError, json_depth, read_bytes,
                                   read_json)
from strassenbench.results import ResultsError, read_results, read_system
from strassenbench.samples import samples_path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
Cap = pytest.CaptureFixture[str]
FAST = Criterion(min_samples=3, min_time=0.0, precision=0.5, max_time=0.2, warmup=1, warmup_time=0.0)


def _run(argv: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI in its own process: a reader that blocks or reads without end fails the test by the timeout."""
    return subprocess.run([sys.executable, "-m", "strassenbench", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _one_line(proc: subprocess.CompletedProcess, *messages: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(m in err for m in messages), err
    return err


def _refused(capsys: Cap, argv: list[str], *messages: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and all(m in err for m in messages), err
    return err


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep part: 2 points of the numpy engine, with their samples file and system.json."""
    out = tmp_path_factory.mktemp("part") / "square.csv"
    run_sweep([Point("cublas", x, x, x, sweep="square", x=x) for x in (32, 48)], NumpyBackend(), out, FAST,
              progress=False)
    assert samples_path(out).is_file()
    return out


@pytest.fixture
def part(sweep: Path, tmp_path: Path) -> Path:
    """A fresh copy of the sweep part (CSV, samples, system.json) in its own folder."""
    folder = tmp_path / "part"
    shutil.copytree(sweep.parent, folder)
    return folder / "square.csv"


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    return path


# --- special files: refused before they are read, at once ---------------------------------------------------

@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_special_file_as_algorithm_is_refused_at_once(special: str, tmp_path: Path, fifo: Path) -> None:
    path = str(fifo) if special == "fifo" else special
    started = time.perf_counter()
    proc = _run(["variants", "--levels", "1", "--algorithm", path], tmp_path)
    _one_line(proc, path, "not a regular file")
    assert time.perf_counter() - started < 30


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_special_file_as_collect_input_is_refused_at_once(special: str, tmp_path: Path, fifo: Path,
                                                            sweep: Path) -> None:
    path = str(fifo) if special == "fifo" else special
    out = tmp_path / "out" / "c.csv"
    _one_line(_run(["collect", str(sweep), path, "--out", str(out)], tmp_path), path, "not a regular file")
    assert not out.exists() and not any(p.is_file() for p in tmp_path.rglob("*") if p != fifo)


def test_a_fifo_beside_the_results_is_refused_not_waited_for(part: Path, tmp_path: Path) -> None:
    """A samples file or system.json that is a FIFO: collect and report refuse it instead of blocking."""
    samples = samples_path(part)
    samples.unlink()
    os.mkfifo(samples)
    _one_line(_run(["collect", str(part), "--out", str(tmp_path / "c.csv")], tmp_path), str(samples),
              "named pipe")
    samples.unlink()
    system = part.parent / "system.json"
    system.unlink()
    os.mkfifo(system)
    _one_line(_run(["report", "--data", str(part.parent), "--out", str(tmp_path / "r")], tmp_path), str(system),
              "named pipe")
    assert not (tmp_path / "c.csv").exists() and not (tmp_path / "r").exists()


def test_the_checked_reader_refuses_by_kind_and_size(tmp_path: Path, fifo: Path) -> None:
    with pytest.raises(ReadError, match="character device"):
        read_bytes("/dev/zero", limit=10)
    with pytest.raises(ReadError, match="named pipe"):
        read_bytes(fifo, limit=10)
    with pytest.raises(ReadError, match="is a folder"):
        read_bytes(tmp_path, limit=10)
    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * 11)
    with pytest.raises(ReadError, match="11 bytes, above the limit of 10"):
        read_bytes(big, limit=10)
    assert read_bytes(big, limit=11) == b"x" * 11


def test_a_results_file_over_the_size_bound_is_refused_before_it_is_read(tmp_path: Path, capsys: Cap) -> None:
    big = tmp_path / "square.csv"
    with big.open("wb") as handle:  # sparse: no disk space, and never read
        handle.truncate(MAX_TABLE_BYTES + 1)
    started = time.perf_counter()
    _refused(capsys, ["collect", str(big), "--out", str(tmp_path / "c.csv")], str(big), "above the limit")
    assert time.perf_counter() - started < 5 and not (tmp_path / "c.csv").exists()


# --- long names ----------------------------------------------------------------------------------------------

def test_a_5000_character_algorithm_name_is_one_line(tmp_path: Path) -> None:
    proc = _run(["variants", "--levels", "1", "--algorithm", "a" * 5000], tmp_path)
    err = _one_line(proc, "too long", "at most 255")
    assert len(err) < 400 and "File name too long" not in err


@pytest.mark.parametrize("argv", [
    ["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--algorithm", "{tmp}/" + "b" * 256 + ".txt"],
    ["collect", "{tmp}/" + "c" * 300 + ".csv", "--out", "{tmp}/c.csv"],
    ["report", "--data", "{tmp}/run", "--out", "{tmp}/r", "--resources", "{tmp}/" + "r" * 300 + ".csv"],
    ["report", "--data", "{tmp}/" + "d" * 300, "--out", "{tmp}/r"],
    ["compare", "{tmp}/run", "{tmp}/" + "d" * 300, "--out", "{tmp}/r"],
    ["model", "predict", "--gpu", "V100", "--sizes", "512", "--resources", "{tmp}/" + "r" * 300 + ".csv"],
])
def test_a_path_component_over_255_bytes_is_one_line(argv: list[str], tmp_path: Path, capsys: Cap) -> None:
    shutil.copytree(FIXTURES / "gpu_a", tmp_path / "run")
    _refused(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv], "too long")
    assert not (tmp_path / "c.csv").exists() and not (tmp_path / "r").exists()


# --- CSV cells ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [200 * 1024, MAX_CELL_BYTES + 1])
def test_a_csv_cell_over_the_bound_is_refused(size: int, part: Path, tmp_path: Path, capsys: Cap) -> None:
    frame = pd.read_csv(part, dtype=str, keep_default_na=False)
    frame.loc[1, "message"] = "x" * size
    frame.to_csv(part, index=False)
    with pytest.raises(ResultsError, match=f"line 3 has a cell .*above the limit of {MAX_CELL_BYTES:,}"):
        read_results(part)
    _refused(capsys, ["collect", str(part), "--out", str(tmp_path / "c.csv")], str(part), "cell")
    _refused(capsys, ["report", "--data", str(part.parent), "--out", str(tmp_path / "r")], str(part), "cell")
    assert not (tmp_path / "c.csv").exists() and not (tmp_path / "r").exists()


def test_a_cell_within_the_bound_is_read(part: Path) -> None:
    frame = pd.read_csv(part, dtype=str, keep_default_na=False)
    frame.loc[0, "message"] = "y" * (MAX_CELL_BYTES - 1)
    frame.to_csv(part, index=False)
    assert read_results(part)["message"].iloc[0] == "y" * (MAX_CELL_BYTES - 1)


# --- JSON nesting -----------------------------------------------------------------------------------------

def test_deeply_nested_system_json_is_refused_before_parsing(part: Path, tmp_path: Path, capsys: Cap) -> None:
    system = part.parent / "system.json"
    system.write_text("[" * 100_000)
    _refused(capsys, ["report", "--data", str(part.parent), "--out", str(tmp_path / "r")], str(system),
             "nested 100,000 deep")
    system.write_text('{"engine": "numpy", "gpu": {}, "host": ' + "[" * 50 + "]" * 50 + "}")
    with pytest.raises(ResultsError, match="nested 51 deep"):
        read_system(system)


def test_deeply_nested_samples_line_is_refused(part: Path, tmp_path: Path, capsys: Cap) -> None:
    samples = samples_path(part)
    samples.write_text(samples.read_text() + '{"sweep": ' + "[" * 100_000 + "\n")
    _refused(capsys, ["collect", str(part), "--out", str(tmp_path / "c.csv")], str(samples), "line 3", "nested")


def test_json_depth_counts_brackets_outside_strings() -> None:
    assert json_depth('{"a": [1, {"b": "[[[[["}]}') == 3
    assert json_depth('"[[[" ') == 0 and json_depth("[]") == 1 and json_depth('["\\"[", [[]]]') == 3
    for text in ('{"a": ' + "[" * 40 + "]" * 40 + "}", json.dumps({"k": [[1, 2], {"x": [None]}]})):
        parsed_depth = _depth(json.loads(text))
        assert json_depth(text) == parsed_depth
    started = time.perf_counter()  # an unterminated string of escaped quotes: linear, not quadratic
    assert json_depth('"' + '\\"' * 200_000) == 0
    assert time.perf_counter() - started < 2


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def test_read_json_bounds_depth_and_refuses_nan(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))
    with pytest.raises(ReadError, match=f"above the limit of {MAX_JSON_DEPTH}"):
        read_json(path, what="a document")
    path.write_text("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert _depth(read_json(path, what="a document")) == MAX_JSON_DEPTH
    path.write_text('{"a": NaN}')
    with pytest.raises(ReadError, match="NaN"):
        read_json(path, what="a document")


# --- system.json against its schema -----------------------------------------------------------------------

SPEC = {"name": "X", "arch": "sm_90", "sm_count": 132, "fp32_cores_per_sm": 128, "fp64_cores_per_sm": 64,
        "boost_clock_hz": 1.98e9, "dram_bandwidth": 3.35e12, "source": "query"}
MALFORMED = [
    ([], "not a system description (a list, not a JSON object)"),
    ("cpu", "not a system description"),
    ({"engine": "numpy"}, "key 'gpu' is missing"),
    ({"gpu": {}}, "key 'engine' is missing"),
    ({"engine": "numpy", "gpu": {"gpu": 3}}, "key 'gpu.gpu' is 3, not string"),
    ({"engine": "numpy", "gpu": "H100"}, "key 'gpu' is \"H100\", not object"),
    ({"engine": 7, "gpu": {}}, "key 'engine' is 7, not string"),
    ({"engine": "cuda", "gpu": {}}, "key 'gpu.gpu' is missing"),
    ({"engine": "cuda", "gpu": {"driver": "550"}}, "key 'gpu.gpu' is missing"),
    ({"engine": "numpy", "gpu": {}, "host": ["a"]}, "key 'host' is a list, not object"),
    ({"engine": "numpy", "gpu": {}, "host": {"cpu": {"x": 1}}}, "key 'host.cpu' is an object, not string"),
    ({"engine": "numpy", "gpu": {}, "commit": 12}, "key 'commit' is 12, not string"),
    ({"engine": "cuda", "gpu": {"gpu": "X"}, "model_spec": {"name": "X"}}, "key 'model_spec.arch' is missing"),
    ({"engine": "cuda", "gpu": {"gpu": "X"}, "model_spec": {**SPEC, "sm_count": "132"}},
     "key 'model_spec.sm_count' is \"132\", not integer"),
    ({"engine": "cuda", "gpu": {"gpu": "X"}, "model_spec": {**SPEC, "arch": "sm_99"}},
     "key 'model_spec.arch' is 'sm_99'"),
    ({"engine": "cuda", "gpu": {"gpu": "X"}, "model_spec": {**SPEC, "extra": 1}}, "key 'model_spec'"),
    ({"engine": "cuda", "gpu": {"gpu": "X"}, "model_spec": {**SPEC, "boost_clock_hz": 0}},
     "key 'model_spec.boost_clock_hz' is 0"),
]


@pytest.mark.parametrize(("system", "message"), MALFORMED, ids=[m for _, m in MALFORMED])
def test_a_malformed_system_json_is_one_line_naming_the_key(system: object, message: str, tmp_path: Path) -> None:
    path = tmp_path / "system.json"
    path.write_text(json.dumps(system))
    with pytest.raises(ResultsError, match=None) as caught:
        read_system(path)
    assert message in str(caught.value) and str(path) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("case", [0, 4, 7, 13])
def test_report_and_compare_refuse_a_malformed_system_json(case: int, tmp_path: Path, capsys: Cap) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "gpu_a", run)
    system, message = MALFORMED[case]
    (run / "system.json").write_text(json.dumps(system))
    _refused(capsys, ["report", "--data", str(run), "--out", str(tmp_path / "r")], message)
    _refused(capsys, ["compare", str(FIXTURES / "gpu_b"), str(run), "--out", str(tmp_path / "c")], message)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_what_bench_and_the_fixtures_write_is_valid(sweep: Path) -> None:
    for path in (sweep.parent / "system.json", FIXTURES / "gpu_a" / "system.json", FIXTURES / "gpu_b" / "system.json"):
        system = read_system(path)
        assert system == json.loads(path.read_text())
    full = {"engine": "cuda", "commit": "abc", "host": {"cpu": "x", "cores": 8},
            "gpu": {"gpu": "NVIDIA H100", "driver": "550.1", "cuda_runtime": 12040, "cublas": "", "mig_mode": [0, 0],
                    "memory_total_bytes": None, "power_limit_w": 700.0},
            "model_spec": {**SPEC, "tau_smop_published": None, "tf32_flops": 4.9e14}}
    path = sweep.parent.parent / "full.json"
    path.write_text(json.dumps(full))
    assert read_system(path) == full
    assert read_system(sweep.parent.parent / "absent.json") is None


# --- collect: one device, each point once, samples of their rows --------------------------------------------

def test_collect_refuses_a_point_given_twice_across_inputs(part: Path, tmp_path: Path, capsys: Cap) -> None:
    copy = tmp_path / "copy.csv"
    shutil.copy(part, copy)
    out = tmp_path / "out" / "c.csv"
    err = _refused(capsys, ["collect", str(part), str(copy), "--out", str(out)], "given twice", "impl=cublas",
                   str(part), str(copy))
    assert "m=32" in err and not out.exists()


def test_collect_refuses_a_point_given_twice_within_one_input(part: Path, tmp_path: Path, capsys: Cap) -> None:
    frame = pd.read_csv(part, dtype=str, keep_default_na=False)
    twice = tmp_path / "twice.csv"
    pd.concat([frame, frame.iloc[[1]]]).to_csv(twice, index=False)
    err = _refused(capsys, ["collect", str(twice), "--out", str(tmp_path / "c.csv")], "given twice", "m=48")
    assert "row 2 of" in err and "row 3 of" in err and not (tmp_path / "c.csv").exists()


def test_collect_takes_other_points_of_the_same_sweep(part: Path, tmp_path: Path) -> None:
    frame = pd.read_csv(part, dtype=str, keep_default_na=False)
    other = tmp_path / "other.csv"
    frame.assign(impl="gemm").to_csv(other, index=False)
    assert main(["collect", str(part), str(other), "--out", str(tmp_path / "c.csv")]) == 0
    assert len(read_results(tmp_path / "c.csv")) == 2 * len(frame)


def test_collect_refuses_rows_of_two_devices(part: Path, tmp_path: Path, capsys: Cap) -> None:
    frame = pd.read_csv(part, dtype=str, keep_default_na=False)
    other = tmp_path / "h100.csv"
    frame.assign(gpu="NVIDIA H100 80GB HBM3", sweep="rankk").to_csv(other, index=False)
    _refused(capsys, ["collect", str(part), str(other), "--out", str(tmp_path / "c.csv")], "two devices",
             "cpu", "NVIDIA H100 80GB HBM3", str(other))
    mixed = tmp_path / "mixed.csv"
    frame.assign(gpu=["cpu", "NVIDIA A100"][: len(frame)]).to_csv(mixed, index=False)
    _refused(capsys, ["collect", str(mixed), "--out", str(tmp_path / "c.csv")], "two devices", "cpu", "NVIDIA A100")
    assert not (tmp_path / "c.csv").exists()


def test_a_recollect_checks_samples_against_rows(part: Path, tmp_path: Path, capsys: Cap) -> None:
    """A table collected before (data/) is checked as a part is: its samples must be of its rows."""
    published = tmp_path / "data" / "square.csv"
    assert main(["collect", str(part), "--out", str(published)]) == 0
    assert main(["collect", str(published), "--out", str(tmp_path / "again.csv")]) == 0
    frame = pd.read_csv(published, dtype=str, keep_default_na=False)
    frame.loc[0, "samples"] = str(int(frame.loc[0, "samples"]) + 1)  # rows no longer of these samples
    frame.to_csv(published, index=False)
    _refused(capsys, ["collect", str(published), "--out", str(tmp_path / "c.csv")],
             str(samples_path(published)), "its row counts", "same run")
    # a table written before the request columns: its samples are checked too (they were skipped)
    frame.loc[0, "samples"] = str(int(frame.loc[0, "samples"]) - 1)
    old = frame.drop(columns=["strategy_request", "scheme_request"])
    old.assign(m=old["m"].replace({"32": "64"})).to_csv(published, index=False)
    _refused(capsys, ["collect", str(published), "--out", str(tmp_path / "c.csv")], "do not measure", "32")
    old.to_csv(published, index=False)
    assert main(["collect", str(published), "--out", str(tmp_path / "c.csv")]) == 0


def test_samples_of_one_input_are_not_matched_by_another_inputs_rows(part: Path, tmp_path: Path, capsys: Cap) -> None:
    """Each input's samples against its own rows: a samples line of a point only the other input measures is
    refused."""
    frame = pd.read_csv(part, dtype=str, keep_default_na=False)
    first, second = tmp_path / "a" / "square.csv", tmp_path / "b" / "square.csv"
    for path, rows in ((first, frame.iloc[[0]]), (second, frame.iloc[[1]])):
        path.parent.mkdir()
        rows.to_csv(path, index=False)
        shutil.copy(samples_path(part), samples_path(path))  # both samples files hold both points
    _refused(capsys, ["collect", str(first), str(second), "--out", str(tmp_path / "c.csv")],
             str(samples_path(first)), "do not measure")
    assert not (tmp_path / "c.csv").exists()
