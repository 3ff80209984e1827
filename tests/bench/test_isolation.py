"""A fault costs one point (worker processes, fault rows, resume), the timing never queues more than a GPU
holds behind the blocking kernel, timed-out samples are discarded, and the report and compare say what they
leave out. The CPU device's side of these is in test_cudasim.py."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.bench import isolate
from strassenbench.bench.backends import NumpyBackend, sticky_error
from strassenbench.bench.queue import QUEUE_LIMIT, TIMER_OPS, call_ops, choose_timing
from strassenbench.bench.runner import Point, injection, run_sweep
from strassenbench.bench.timers import Criterion, Timer, TimingError, _half_width, median_interval, sample
from strassenbench.cli import main
from strassenbench.report.analysis import left_out, ok_rows

FAST = Criterion(min_samples=2, min_time=0.0, precision=1.0, max_time=1.0, warmup=1, warmup_time=0.0)
ROOT = Path(__file__).resolve().parents[2]


def _points() -> list[Point]:
    return [Point(impl, x, x, x, sweep="square", x=x) for x in (32, 48) for impl in ("cublas", "strassen1")]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_crash_costs_its_point_and_a_rerun_measures_nothing(tmp_path, monkeypatch, method) -> None:  # noqa: ANN001
    """The worker dies hard (SIGKILL) at one point: that point is a fault row naming the signal, every other
    point is measured by a fresh worker, and a rerun measures nothing again; --retry-faults measures it again.
    Both start methods: fork (numpy, the tests' CPU device), spawn (a GPU)."""
    monkeypatch.setattr(isolate, "START_METHOD", method)
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", "strassen1:32:32:32:crash")
    out = tmp_path / "square.csv"
    frame = run_sweep(_points(), NumpyBackend(), out, FAST, progress=False)
    bad = frame[frame["status"] != "ok"]
    assert list(zip(bad["impl"], bad["m"], bad["status"])) == [("strassen1", 32, "fault")]
    assert "killed by SIGKILL" in bad["message"].iloc[0] and len(frame) == 4
    assert list(pd.read_csv(out, keep_default_na=False)["status"]).count("ok") == 3
    again: list = []
    run_sweep(_points(), NumpyBackend(), out, FAST, progress=False, on_point=again.append)
    assert again == []  # a fault row is done
    monkeypatch.delenv("STRASSENBENCH_INJECT_FAILURE")
    frame = run_sweep(_points(), NumpyBackend(), out, FAST, progress=False, on_point=again.append, retry_faults=True)
    assert [(r["impl"], r["m"]) for r in again] == [("strassen1", 32)]
    assert (frame["status"] == "ok").all() and len(frame) == 4


def test_bench_reports_faults_and_collect_keeps_them(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", "cublas:48:48:48:crash")
    out = tmp_path / "square.csv"
    assert main(["bench", "--impl", "cublas,strassen1", "--sizes", "32,48", "--out", str(out), "--min-time", "0",
                 "--min-samples", "2", "--precision", "1", "--warmup-time", "0", "--no-progress"]) == 0
    assert "(1 not ok, 1 faults)" in capsys.readouterr().err
    assert main(["collect", str(out), "--out", str(tmp_path / "all.csv")]) == 0
    collected = pd.read_csv(tmp_path / "all.csv", keep_default_na=False)
    assert list(collected["status"]).count("fault") == 1 and len(collected) == 4


def test_bench_publishes_what_collect_would_and_refuses_a_bad_target(tmp_path, capsys) -> None:  # noqa: ANN001
    """--publish writes --out's table and samples as `collect` does (the workflow's sweep job, one process); a
    target that is --out itself or another kind of file is refused before anything runs, and nothing is written."""
    out, published = tmp_path / "results" / "square.csv", tmp_path / "parts" / "square.csv"
    args = ["bench", "--impl", "cublas,strassen1", "--sizes", "32,48", "--min-time", "0", "--min-samples", "2",
            "--precision", "1", "--warmup-time", "0", "--no-progress", "--out", str(out)]
    assert main([*args, "--publish", str(published)]) == 0
    assert main(["collect", str(out), "--out", str(tmp_path / "collected.csv")]) == 0
    assert published.read_bytes() == (tmp_path / "collected.csv").read_bytes()
    assert published.with_suffix(".samples.jsonl").read_bytes() == (tmp_path / "collected.samples.jsonl").read_bytes()
    capsys.readouterr()
    other = tmp_path / "verify.csv"
    other.write_text("impl,engine\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for into, target, message in ((out, out, "is --out itself"),
                                  (tmp_path / "fresh.csv", other, "is not a bench results file"),
                                  (tmp_path / "fresh.csv", "", "is a folder; give a file name")):
        assert main([*args[:-1], str(into), "--publish", str(target)]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("value", ["strassen1:32:32", "strassen1:32:32:32:boom", "strassen1:a:32:32",
                                   "strassen1:32:32:32:crash:x"])
def test_a_malformed_injection_is_one_line(tmp_path, monkeypatch, capsys, value) -> None:  # noqa: ANN001
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", value)
    out = tmp_path / "square.csv"
    assert main(["bench", "--impl", "cublas", "--sizes", "32", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "STRASSENBENCH_INJECT_FAILURE" in err and not out.exists()


def test_injection_reads_its_kinds(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", "strassen1:1:2:3")
    hook = injection()
    assert (hook.impl, hook.sizes, hook.kind) == ("strassen1", (1, 2, 3), "error")
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", "grey322-11-50x1:4:5:6:fault")
    hook = injection()
    assert (hook.impl, hook.sizes, hook.kind) == ("grey322-11-50x1", (4, 5, 6), "fault")
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", "strassen1-3xtf32:*:64:*:tf32")
    hook = injection()
    assert hook.matches("strassen1-3xtf32", 8, 64, 9) and not hook.matches("strassen1-3xtf32", 8, 63, 9)
    for wrong in ("strassen1:*:*:*:tf32", "strassen1:**:1:1:zero", "strassen1:1:1:1:nothing"):
        monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", wrong)
        with pytest.raises(ValueError, match="STRASSENBENCH_INJECT_FAILURE="):
            injection()


def test_a_fault_needs_a_cuda_context(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", "cublas:32:32:32:fault")
    assert main(["bench", "--impl", "cublas", "--sizes", "32", "--out", str(tmp_path / "s.csv")]) == 2
    assert "needs --engine cuda" in capsys.readouterr().err


def _cuda_error(name: str, status: int) -> Exception:
    return type(name, (RuntimeError,), {"status": status})()


@pytest.mark.parametrize(("name", "status", "sticky"), [
    ("CUDARuntimeError", 700, "cudaErrorIllegalAddress"), ("CUDARuntimeError", 716, "cudaErrorMisalignedAddress"),
    ("CUDADriverError", 719, "cudaErrorLaunchFailure"), ("CUDARuntimeError", 715, "cudaErrorIllegalInstruction"),
    ("CUDARuntimeError", 2, None), ("CUDADriverError", 1, None), ("CUBLASError", 700, None)])
def test_sticky_errors_are_told_from_the_others(name, status, sticky) -> None:  # noqa: ANN001
    assert sticky_error(_cuda_error(name, status)) == sticky


def test_the_running_half_width_is_the_interval_of_every_prefix() -> None:
    """The precision test's bookkeeping (a sorted list, O(1) per test) gives the median's interval over the whole
    prefix, as a sort of it would."""
    rng = random.Random(1)
    xs = [1e-3 * (1 + 0.1 * rng.random()) for _ in range(200)]
    for i in range(1, len(xs) + 1):
        ordered = sorted(xs[:i])
        low, high = median_interval(ordered)
        assert _half_width(ordered) == pytest.approx((high - low) / 2 / statistics.median(xs[:i]), rel=1e-12)
        assert low <= statistics.median(xs[:i]) <= high


class _TimingOut(Timer):
    """A timer whose blocking kernel reaches its timeout on the samples ``bad`` (0-based) of the timed loop."""

    method = "blocking"
    gpu = True

    def __init__(self, bad: set[int], every: bool = False) -> None:
        self.bad, self.every, self.timeouts, self.n = bad, every, 0, 0

    def enqueue(self, fn) -> float:  # noqa: ANN001 - warm-up: no blocking kernel
        return 1e-6

    def time(self, fn) -> float:  # noqa: ANN001
        if self.every or self.n in self.bad:
            self.timeouts += 1
            seconds = 1.0  # what a timed-out sample looks like: host time in the interval
        else:
            seconds = 1e-3
        self.n += 1
        return seconds


def test_a_timed_out_sample_is_discarded_and_counted() -> None:
    criterion = Criterion(min_samples=5, min_time=0.0, precision=1.0, max_time=5.0, warmup=1, warmup_time=0.0)
    out = sample(lambda: None, _TimingOut({1, 3}), criterion)
    assert out.timeouts == 2 and len(out.times) == 5 and max(out.times) == 1e-3
    assert [kept for _, _, _, kept, _ in out.records] == [True, False, True, False, True, True, True]
    assert out.summary()["blocking_timeouts"] == 2


def test_every_sample_timed_out_is_an_error() -> None:
    criterion = Criterion(min_samples=3, min_time=0.0, precision=1.0, max_time=0.05, max_samples=5, warmup=1,
                          warmup_time=0.0)
    with pytest.raises(TimingError, match="blocking kernel's timeout"):
        sample(lambda: None, _TimingOut(set(), every=True), criterion)


def test_queue_counts_follow_the_implementations() -> None:
    """One cuBLAS or CUTLASS call; a fused program's launches; the references' kernels and GEMMs (25 per
    Winograd level, more where odd blocks pad); the hybrid's leaves."""
    assert call_ops("cublas", 256, 256, 256) == call_ops("cutlass", 256, 256, 256) == 1
    assert call_ops("gemm", 256, 256, 256) == 1 and call_ops("strassen1", 256, 256, 256) == 7
    assert call_ops("strassen2-direct", 256, 256, 256) == 49
    assert call_ops("strassen1-ref", 256, 256, 256) == 25 < call_ops("strassen1-ref", 257, 257, 257)
    assert call_ops("strassen2-ref", 256, 256, 256) > 150
    assert call_ops("strassen1", 256, 256, 256, "float32", "Small", "streams") > 7  # events and waits
    assert call_ops("strassen2-hybrid", 256, 256, 256) > 49


def test_auto_timing_is_blocking_only_when_every_call_fits() -> None:
    small = [("cublas", 256, 256, 256, "float32", None, None), ("strassen1", 256, 256, 256, "float32", None, None)]
    assert choose_timing("auto", small).method == "blocking" and choose_timing(None, small).reason == ""
    big = [*small, ("strassen2-ref", 256, 256, 256, "float32", None, None)]
    choice = choose_timing("auto", big)
    assert choice.method == "graph" and "strassen2-ref" in choice.reason
    assert f"more than the {QUEUE_LIMIT - TIMER_OPS}" in choice.reason
    with pytest.raises(ValueError, match="strassen2-ref enqueues .* --timing graph"):
        choose_timing("blocking", big)
    assert choose_timing("graph", big).method == "graph"


def test_bench_with_blocking_refuses_a_sweep_that_does_not_fit(tmp_path, capsys, monkeypatch) -> None:  # noqa: ANN001
    """Checked before any device is touched: the CLI decides the method from the points."""
    import strassenbench.cli.runs as cli

    def no_backend(*_: object, **__: object) -> None:
        raise AssertionError("the timing is decided before the backend is made")

    monkeypatch.setattr(cli, "_backend", no_backend)
    out = tmp_path / "s.csv"
    assert main(["bench", "--engine", "cuda", "--impl", "strassen2-ref", "--sizes", "256", "--timing", "blocking",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--timing graph" in err and not out.exists()


def test_report_and_compare_leave_out_faults_and_timeouts() -> None:
    frame = pd.DataFrame([
        {"sweep": "square", "impl": "cublas", "m": 64, "n": 64, "k": 64, "dtype": "float32", "status": "ok",
         "message": "", "blocking_timeouts": 0},
        {"sweep": "square", "impl": "strassen1", "m": 64, "n": 64, "k": 64, "dtype": "float32", "status": "fault",
         "message": "cudaErrorIllegalAddress", "blocking_timeouts": ""},
        {"sweep": "square", "impl": "gemm", "m": 64, "n": 64, "k": 64, "dtype": "float32", "status": "ok",
         "message": "", "blocking_timeouts": 3},
    ])
    assert list(ok_rows(frame)["impl"]) == ["cublas"]
    out = left_out(frame)
    assert list(out["impl"]) == ["strassen1", "gemm"]
    assert out["why"].iloc[0] == "cudaErrorIllegalAddress" and "3 samples reached" in out["why"].iloc[1]


def test_workflow_plans_one_timing_for_a_gpu_run(tmp_path) -> None:  # noqa: ANN001
    """A dry run for an assumed H100: the paper profile's references do not fit behind the blocking kernel, so
    every timing job of the run says --timing graph, and the reason is printed once."""
    from support.workflow_helpers import copy_workflow, snakemake

    workdir = copy_workflow(tmp_path)
    proc = snakemake(["-n", "-p", "--cores", "1", "--config", "assume_gpu=H100@sm_90", "profile=paper"], workdir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    commands = [line for line in text.splitlines() if "strassenbench bench" in line]
    assert commands and all("--timing graph" in line for line in commands)
    assert text.count("strassenbench: timing by graph") == 1
