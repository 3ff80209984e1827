"""The benchmark runner on the numpy engine (the same code path as on a GPU, with host timers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from strassenbench.bench.backends import NumpyBackend
from strassenbench.bench.memlimit import needed_bytes, parse_bytes, predict_max_n
from strassenbench.bench.runner import COLUMNS, Point, run_point, run_sweep
from strassenbench.bench.timers import Criterion, Samples, Timer, median_interval, sample
from strassenbench.cli import main
from strassenbench.strategies import STRATEGIES

FAST = Criterion(min_samples=3, min_time=0.0, precision=0.5, max_time=0.2, warmup=1, warmup_time=0.0)
REQUIRED = ["gpu", "m", "n", "k", "dtype", "impl", "strategy", "scheme", "status", "time_median_s", "tflops",
            "extra_bytes", "rel_error"]


def points(sizes=(64, 96)) -> list[Point]:  # noqa: ANN001
    return [Point(impl, x, x, x, sweep="square", x=x) for x in sizes for impl in ("cublas", "strassen1", "strassen1-ref")]


def test_sweep_rows_schema_and_values(tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    frame = run_sweep(points(), NumpyBackend(), out, FAST, progress=False)
    on_disk = pd.read_csv(out, keep_default_na=False)
    assert list(on_disk.columns[: len(COLUMNS)]) == COLUMNS
    assert [c for c in on_disk.columns if c in REQUIRED] == REQUIRED  # the fixed names, in the profiler's order
    assert len(frame) == 6 and (frame["status"] == "ok").all()
    for row in frame.itertuples():
        assert row.tflops == pytest.approx(2 * row.m * row.n * row.k / row.time_median_s / 1e12)
        assert 0 < row.rel_error <= row.error_bound
        assert row.time_min_s <= row.time_median_s and row.samples >= 3
    ref = frame[frame["impl"] == "strassen1-ref"]
    assert (ref["extra_bytes"] == [3 * 32 * 32 * 4, 3 * 48 * 48 * 4]).all()
    assert (ref["measured_extra_bytes"] >= ref["extra_bytes"]).all()  # the workspace really was allocated
    system = json.loads((tmp_path / "system.json").read_text())
    assert system["engine"] == "numpy" and system["host"]["cores"] >= 1


def test_interrupted_sweep_resumes_without_redoing(tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "r.csv"
    seen: list[tuple] = []

    def stop_after_two(row: dict) -> None:
        seen.append((row["impl"], row["m"]))
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(points(), NumpyBackend(), out, FAST, progress=False, on_point=stop_after_two)
    first = pd.read_csv(out, keep_default_na=False)
    assert len(first) == 2  # both finished points are on disk, nothing half-written
    again: list[tuple] = []
    frame = run_sweep(points(), NumpyBackend(), out, FAST, progress=False,
                      on_point=lambda row: again.append((row["impl"], row["m"])))
    assert len(frame) == 6 and len(again) == 4 and not set(again) & set(seen)
    final = pd.read_csv(out, keep_default_na=False)
    assert list(final["time_median_s"][:2]) == list(first["time_median_s"])


def test_failure_at_one_point_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", "strassen1:64:64:64")
    frame = run_sweep(points(), NumpyBackend(), tmp_path / "f.csv", FAST, progress=False)
    bad = frame[frame["status"] != "ok"]
    assert list(zip(bad["impl"], bad["m"], bad["status"])) == [("strassen1", 64, "error")]
    assert "injected failure" in bad["message"].iloc[0]
    assert (frame["status"] == "ok").sum() == 5


def test_out_of_memory_is_a_status(monkeypatch) -> None:  # noqa: ANN001
    import strassenbench.bench.backends as backends

    def no_memory(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise MemoryError("cannot allocate")

    monkeypatch.setattr(backends.NumpyBackend, "operands", no_memory)
    row = run_point(Point("cublas", 32, 32, 32), NumpyBackend(), FAST)
    assert row["status"] == "oom" and "out of memory" in row["message"]


def test_failed_check_is_a_status(monkeypatch) -> None:  # noqa: ANN001
    from strassenbench.freivalds import Freivalds, Reference

    monkeypatch.setattr(Reference, "check", lambda self, C: Freivalds(1.0, 1.0))
    row = run_point(Point("cublas", 32, 32, 32), NumpyBackend(), FAST)
    assert row["status"] == "check_failed" and "above the tolerance" in row["message"]


class EmulatorTiming(NumpyBackend):
    """The emulator timed by host clocks: only to exercise --strategy best without a GPU."""

    engine = "emu"


def test_best_strategy_is_the_fastest_and_recorded() -> None:
    row = run_point(Point("strassen1", 40, 40, 40, strategy="best", scheme="atomic"), EmulatorTiming(),
                    Criterion(min_samples=2, min_time=0.0, precision=1.0, max_time=0.1, warmup=0, warmup_time=0.0))
    assert row["status"] == "ok", row["message"]
    assert row["strategy"] in STRATEGIES and row["scheme"] == "atomic"


def test_sampling_stops_on_noise_or_cap() -> None:
    class Fake(Timer):
        def __init__(self, times):  # noqa: ANN001
            self.times = iter(times)

        def time(self, fn) -> float:  # noqa: ANN001
            return next(self.times)

    steady = sample(lambda: None, Fake([1.0] * 100), Criterion(min_samples=5, min_time=3.0, warmup=0, warmup_time=0.0))
    assert steady.converged and len(steady.times) == 5
    noisy = sample(lambda: None, Fake([1.0, 3.0] * 50), Criterion(min_samples=5, min_time=0.0, max_samples=20,
                                                                  warmup=0, warmup_time=0.0))
    assert not noisy.converged and len(noisy.times) == 20 and noisy.stop == "sample_cap"
    assert steady.stop == "precision" and steady.median_ci_rel == 0.0
    assert Samples([1.0, 1.0]).rel_stdev == 0.0


class _Replay(Timer):
    """A timer that returns a fixed sequence of sample times."""

    def __init__(self, times) -> None:  # noqa: ANN001
        self.times = iter(times)

    def time(self, fn) -> float:  # noqa: ANN001
        return next(self.times)


def test_precision_is_the_median_interval_and_a_settled_clock() -> None:
    """A point stops on precision only once the median's 95% interval is within it and the SM clock has
    settled: noise that will not narrow the interval runs to the cap, and so does a clock still falling."""
    criterion = Criterion(min_samples=5, min_time=0.0, precision=0.001, max_samples=400, warmup=0, warmup_time=0.0)
    bimodal = sample(lambda: None, _Replay([1.0, 3.0] * 5000), criterion)
    assert bimodal.stop == "sample_cap" and not bimodal.converged and bimodal.median_ci_rel > 0.001
    # 2% noise: the interval of the median narrows as 1/sqrt(n), below 0.5% after a few hundred samples
    rng = np.random.default_rng(0)
    noisy = sample(lambda: None, _Replay(list(1 + 0.02 * rng.standard_normal(5000))),
                   Criterion(min_samples=10, min_time=0.0, precision=0.005, max_samples=5000, warmup=0,
                             warmup_time=0.0))
    assert noisy.stop == "precision" and 30 < len(noisy.times) < 400 and noisy.median_ci_rel <= 0.005
    steady = iter([1900.0] * 10_000)
    falling = iter([1900.0 - 5 * i for i in range(80)] + [1500.0] * 10_000)  # above 0.75 x 1,980
    settled = sample(lambda: None, _Replay([1.0] * 5000), criterion, lambda: (next(steady), 0, None), 1980.0)
    assert settled.stop == "precision" and len(settled.times) == criterion.clock_window
    ramp = sample(lambda: None, _Replay([1.0] * 5000), criterion, lambda: (next(falling), 0x4, 690.0), 1980.0)
    assert ramp.stop == "precision" and len(ramp.times) > 80  # not before the clock stopped falling
    summary = ramp.summary()
    assert summary["capped_share"] == 1.0 and summary["throttle_reasons"] == "0x4" and summary["power_w"] == 690.0


def test_median_interval_holds_its_confidence() -> None:
    """The distribution-free interval covers the true median in about 95% of draws (of skewed samples too)."""
    rng = np.random.default_rng(1)
    for n in (10, 40, 200):
        draws = np.sort(rng.lognormal(0.0, 0.5, size=(2000, n)), axis=1)
        covered = np.mean([low <= 1.0 <= high for low, high in (median_interval(list(d)) for d in draws)])
        assert 0.93 <= covered <= 0.99, (n, covered)


def test_memlimit_prediction_matches_the_formula() -> None:
    budget = 16 * 2**30  # the paper's 16 GB V100
    for impl in ("cublas", "strassen1-ref", "strassen2-ref"):
        n = predict_max_n(impl, "float32", budget, 64)
        assert needed_bytes(impl, n, "float32") <= budget < needed_bytes(impl, n + 64, "float32")
    assert predict_max_n("cublas", "float32", budget, 64) > predict_max_n("strassen1-ref", "float32", budget, 64)
    assert parse_bytes("256MiB") == 256 << 20 and parse_bytes("16GB") == 16 * 10**9
    with pytest.raises(ValueError):
        parse_bytes("lots")


def test_memlimit_cli_confirms_on_the_cpu(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    out = tmp_path / "mem.csv"
    assert main(["memlimit", "--impl", "cublas,strassen1-ref", "--memory-budget", "32MiB", "--step", "128",
                 "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame["confirmed"]) == [True, True]
    assert list(frame["run_at_n"]) == ["ok", "ok"] and list(frame["run_above"]) == ["oom", "oom"]
    # an implementation of another dtype is said in its row, not run into an error
    assert main(["memlimit", "--impl", "strassen1-dmma", "--memory-budget", "32MiB", "--step", "128",
                 "--out", str(out)]) == 0
    row = pd.read_csv(out, keep_default_na=False).iloc[0]
    assert (row["run_at_n"], row["run_above"]) == ("", "")
    assert row["message"] == "strassen1-dmma computes float64, not float32"


def test_a_capped_probe_is_forked_with_its_own_environment_and_a_failure_is_its_last_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each CPU probe is a process of its own, forked (after one warm-up per implementation) from a server that
    has the probe's module imported and one malloc arena and one BLAS thread (whatever this process has); a
    probe that raises is an error naming its exception, and the next one is served as before; a server that
    died is replaced."""
    from strassenbench.bench import memlimit as module

    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")  # the server is started with _PROBE_ENV, not this
    module._prober.cache_clear()
    budget = 32 * 2**20
    assert module._run_capped("cublas", [64, 2048], "float32", budget) == ["ok", "oom"]
    server = module._prober()
    with open(f"/proc/{server.pid}/environ", "rb") as environ:
        assert b"MALLOC_ARENA_MAX=1\0" in environ.read()
    failed = module._run_capped("strassen1-dmma", [64], "float32", budget)[0]
    assert failed.startswith("error: ") and "computes float64" in failed
    assert module._run_capped("cublas", [64], "float32", budget) == ["ok"] and module._prober() is server
    server.kill()
    server.wait()
    assert module._run_capped("cublas", [64, 96], "float32", budget) == ["error: the probe's server ended"] * 2
    assert module._run_capped("cublas", [64], "float32", budget) == ["ok"] and module._prober() is not server
    assert os.environ["MALLOC_ARENA_MAX"] == "8"


def test_bench_cli_end_to_end_and_resume(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    out = tmp_path / "b.csv"
    argv = ["bench", "--impl", "cublas,strassen2-hybrid", "--sweep", "rankk", "--sizes", "64", "--out", str(out),
            "--min-time", "0", "--max-time", "0.1", "--min-samples", "2"]
    assert main(argv) == 0
    frame = pd.read_csv(out)
    assert list(frame["k"]) == [4096, 4096] and list(frame["sweep"]) == ["rankk", "rankk"]
    assert "not GPU numbers" in capsys.readouterr().err
    assert main([*argv[:6], "64,32", *argv[7:]]) == 0
    assert len(pd.read_csv(out)) == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "--impl", "nope", "--out", "x.csv"], "unknown implementation"),
        (["bench", "--impl", "cutlass", "--out", "x.csv"], "cutlass runs on cuda, not numpy"),
        (["bench", "--impl", "gemm", "--sweep", "custom", "--out", "x.csv"], "needs --shapes"),
        (["bench", "--impl", "gemm", "--sweep", "custom", "--shapes", "4x4", "--out", "x.csv"], "bad shape"),
        (["bench", "--impl", "gemm", "--engine", "emu", "--out", "x.csv"], "invalid choice"),
        (["bench", "--impl", "gemm", "--engine", "cuda", "--out", "x.csv"], "cuda engine"),
        (["bench", "--impl", "gemm", "--throttle-threshold", "1.5", "--out", "x.csv"], "not a fraction in (0, 1]"),
        (["bench", "--impl", "gemm", "--warmup-time", "-1", "--out", "x.csv"], "-1 s is negative"),
        (["memlimit", "--impl", "gemm"], "--memory-budget"),
        (["memlimit", "--impl", "gemm", "--memory-budget", "lots"], "bad size"),
    ],
)
def test_bench_bad_input_is_one_line(argv, message, capsys, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def test_progress_bar_is_quiet_off_a_terminal(tmp_path) -> None:  # noqa: ANN001
    result = subprocess.run(
        [sys.executable, "-m", "strassenbench", "bench", "--impl", "cublas", "--sizes", "32", "--out",
         str(tmp_path / "p.csv"), "--min-time", "0", "--max-time", "0.05"],
        capture_output=True, text=True, env=dict(os.environ), check=False,
    )
    assert result.returncode == 0 and "point/s" not in result.stderr and "it/s" not in result.stderr


def test_sweep_options_apply_only_where_they_mean_something(tmp_path) -> None:  # noqa: ANN001
    """--strategy/--scheme in a mixed sweep: the implementations without them run plainly, not as errors."""
    points = [Point(impl, 48, 48, 48, strategy="Huge", scheme="atomic") for impl in ("cublas", "gemm", "strassen1")]
    frame = run_sweep(points, NumpyBackend(), tmp_path / "o.csv", FAST, progress=False)
    assert (frame["status"] == "ok").all(), frame["message"].tolist()
    assert (frame["strategy"] == "").all() and (frame["scheme"] == "").all()  # nothing to choose on numpy


def _error(name: str, status: int) -> BaseException:
    """An exception of CuPy's class name and status, without CuPy."""
    cls = type(name, (RuntimeError,), {})
    err = cls(f"{name}: status {status}")
    err.status = status
    return err


@pytest.mark.parametrize(("err", "oom"), [
    (MemoryError(), True),
    (_error("OutOfMemoryError", 0), True),
    (_error("CUDARuntimeError", 2), True),   # cudaErrorMemoryAllocation
    (_error("CUDADriverError", 2), True),    # CUDA_ERROR_OUT_OF_MEMORY
    (_error("CUBLASError", 3), True),        # CUBLAS_STATUS_ALLOC_FAILED
    (_error("CUDARuntimeError", 700), False),  # an illegal address is an error, not an oom
    (_error("CUBLASError", 13), False),
    (ValueError("bad"), False),
])
def test_allocation_failures_of_every_layer_are_oom(err: BaseException, oom: bool) -> None:
    from strassenbench.bench.backends import is_oom

    assert is_oom(err) is oom


def test_a_cublas_allocation_failure_is_recorded_as_oom(monkeypatch: pytest.MonkeyPatch) -> None:
    import strassenbench.bench.runner as runner

    def fail(*_: object) -> None:
        raise _error("CUBLASError", 3)

    monkeypatch.setattr(runner, "_inject", fail)
    row = run_point(Point("cublas", 32, 32, 32), NumpyBackend(), FAST, 0, "build")
    assert row["status"] == "oom" and row["message"].startswith("out of memory")


class _FakeDevice:
    """A device with ``total`` bytes: warming takes ``warm`` bytes for good (cuBLAS workspace, modules),
    ballasts take what they are asked for; mem_free is what cudaMemGetInfo would say."""

    def __init__(self, total: int, warm: int) -> None:
        self.total, self.warm_bytes, self.used, self.held = total, warm, 0, []

    def warm(self) -> None:
        self.used += self.warm_bytes

    def free(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def mem_free(self) -> int:
        return self.total - self.used - sum(self.held)

    def hold(self, nbytes: int) -> int:
        assert nbytes > 0
        self.held.append(nbytes)
        return nbytes


def test_memlimit_predicts_from_the_free_memory_measured_after_warming_and_ballast() -> None:
    from strassenbench.bench.memlimit import device_free

    device = _FakeDevice(total=10_000, warm=1_500)
    free, ballast, note = device_free(device, None, device.warm)
    assert free == 8_500 and ballast is None and note == ""  # after warming, not before
    device = _FakeDevice(total=10_000, warm=1_500)
    free, ballast, note = device_free(device, 4_000, device.warm)
    assert ballast == 4_500 and free == 4_000 and note == ""  # measured again after the ballast
    device = _FakeDevice(total=10_000, warm=1_500)
    free, ballast, note = device_free(device, 9_000, device.warm)  # more than is free: no (negative) ballast
    assert ballast is None and device.held == [] and free == 8_500 and "above the 8500 B free" in note


def test_the_hybrid_declares_every_leaf_program_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hybrid keeps one prepared fused 1-level program per product of its top level (products on the same
    views share one): at most Winograd's rank, and its declared extra memory counts that many."""
    import numpy as np

    from strassenbench import impls
    from strassenbench.algebra.algorithm import get_algorithm
    from strassenbench.reference.strassen_ref import level_blocks

    made = []
    real = impls._leaf_call

    def counting(*args):  # noqa: ANN002, ANN202
        made.append(args)
        return real(*args)

    monkeypatch.setattr(impls, "_leaf_call", counting)
    m = n = k = 64
    A, B, C = (np.ones((64, 64), dtype=np.float32) for _ in range(3))
    call = impls.get_impl("strassen2-hybrid").prepare(A, B, C, 1.0, 1.0, engine="numpy")
    call()
    first = len(made)
    call()
    rank = get_algorithm("winograd").rank
    assert 1 < first <= rank == 7 and len(made) == first  # prepared once each (shared views share one), replayed
    (bm, bk, bn), = level_blocks(m, k, n, 1)
    declared = impls.get_impl("strassen2-hybrid").extra_bytes(m, n, k, "float32")
    assert declared == impls._ref_bytes(1, m, n, k, "float32") + rank * impls._fused_bytes(1, bm, bn, bk, "float32")


def test_a_dtype_an_implementation_does_not_compute_is_no_point_of_it(tmp_path, capsys) -> None:  # noqa: ANN001
    """bench --dtype float32 --dtype float64 times each implementation in the dtypes it computes (the TF32 ones in
    float32, the DMMA ones in float64, the rest in both); an implementation that computes none of them is one
    line, exit 2, and no file."""
    from strassenbench.cli import main

    out = tmp_path / "square.csv"
    common = ["--engine", "numpy", "--sizes", "24", "--min-time", "0", "--min-samples", "1", "--precision", "1", "--no-progress"]
    assert main(["bench", "--impl", "gemm,strassen1-tf32,strassen1-dmma", "--dtype", "float32", "--dtype", "float64",
                 "--out", str(out), *common]) == 0
    frame = pd.read_csv(out)
    assert sorted(zip(frame["impl"], frame["dtype"])) == [("gemm", "float32"), ("gemm", "float64"),
                                                          ("strassen1-dmma", "float64"), ("strassen1-tf32", "float32")]
    assert (frame["status"] == "ok").all()
    capsys.readouterr()
    refused = tmp_path / "refused.csv"
    assert main(["bench", "--impl", "gemm,strassen1-dmma", "--dtype", "float32", "--out", str(refused), *common]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["strassenbench: error: strassen1-dmma computes float64 only, not float32"]
    assert not refused.exists()


def test_auto_timing_reads_a_sweep_cut_short_by_an_interruption(tmp_path) -> None:  # noqa: ANN001
    """bench's auto timing follows the graph-timed rows of its --out even when the last row was cut short (the
    run resumes that point), and finds nothing in a file that is not a results file."""
    from pathlib import Path

    from strassenbench.cli.runs import _timings_of

    text = (Path(__file__).resolve().parents[2] / "data" / "nvidia-h100-80gb-hbm3" / "square.csv").read_text()
    cut = tmp_path / "square.csv"
    cut.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 40])  # the last row cut after 40 characters
    assert _timings_of(str(cut)) == {"graph"}
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    assert _timings_of(str(tmp_path / "other.csv")) == set() and _timings_of(str(tmp_path / "none.csv")) == set()
