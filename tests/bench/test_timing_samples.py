"""How samples are timed and kept, without a GPU: the timing mode and host enqueue time, warm-up by time, the
throttle rule, the per-sample files beside a sweep, and the statistical compare built on them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from strassenbench.bench.backends import NumpyBackend
from strassenbench.bench.runner import Point, run_sweep
from strassenbench.bench.timers import Criterion, Timer, sample
from strassenbench.cli import main
from strassenbench.report.compare import compare_runs, interval_verdict
from strassenbench.results import ResultsError, read_results
from strassenbench.samples import (append_samples, collect_samples, median_ratio_interval, read_samples,
                                   samples_path)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUICK = Criterion(min_samples=3, min_time=0.0, precision=0.5, max_time=0.2, warmup=1, warmup_time=0.0)


class GraphLike(Timer):
    """A GPU-shaped timer: the warm-up calls report their host enqueue time; prepare captures the call (mode
    "graph") and later samples replay it without calling into Python."""

    def __init__(self, enqueue_times: list[float], capturable: bool = True) -> None:
        self.enqueue_times, self.capturable = iter(enqueue_times), capturable
        self.calls = 0

    def enqueue(self, fn) -> float:  # noqa: ANN001
        fn()
        return next(self.enqueue_times)

    def prepare(self, fn) -> str:  # noqa: ANN001
        self.mode = "graph" if self.capturable else "events"
        return self.mode

    def time(self, fn) -> float:  # noqa: ANN001
        if self.mode != "graph":
            fn()
        return 1e-3


def test_timing_mode_and_host_enqueue_are_recorded() -> None:
    calls = []
    criterion = Criterion(min_samples=5, min_time=0.0, precision=0.5, warmup=3, warmup_time=0.0)
    graph = sample(lambda: calls.append(1), GraphLike([3e-5, 1e-5, 2e-5]), criterion)
    assert graph.timing == "graph" and graph.summary()["timing"] == "graph"
    assert graph.host_enqueue_s == pytest.approx(2e-5)  # the median of the warm-up calls' enqueue times
    assert len(calls) == 3  # the warm-up only: replayed samples run no Python
    calls.clear()
    events = sample(lambda: calls.append(1), GraphLike([1e-5] * 3, capturable=False), criterion)
    assert events.timing == "events" and len(calls) == 3 + len(events.times)


def test_warm_up_runs_for_its_time() -> None:
    calls = []
    criterion = Criterion(min_samples=2, min_time=0.0, precision=1.0, warmup=1, warmup_time=0.05)

    def call() -> None:
        calls.append(1)

    out = sample(call, Timer(), criterion)
    warmups = len(calls) - len(out.times)
    assert warmups > 1 and out.host_enqueue_s >= 0  # more than the minimum of one call: 50 ms of them


def test_samples_below_the_throttle_threshold_are_discarded() -> None:
    """nvbench's rule: a sample taken below 75% of the maximum SM clock is left out of the statistics and
    counted; every sample stays in the records with its clock and flag."""
    clocks = iter([1800.0, 1000.0, 1900.0, 1300.0, 1850.0, 1820.0, 1810.0] * 10)
    times = iter([1.0, 5.0, 1.0, 5.0, 1.0, 1.0, 1.0] * 10)

    class Fixed(Timer):
        def time(self, fn) -> float:  # noqa: ANN001
            return next(times)

    criterion = Criterion(min_samples=5, min_time=0.0, precision=0.01, warmup=0, warmup_time=0.0, clock_window=4,
                          clock_drift=0.05)
    out = sample(lambda: None, Fixed(), criterion, probe=lambda: (next(clocks), 0, None), max_clock_mhz=1980.0)
    assert out.discarded == 2 and out.times == [1.0] * 5 and out.converged
    assert [kept for _, _, _, kept, _ in out.records] == [True, False, True, False, True, True, True]
    assert out.summary()["low_clock_discards"] == 2 and out.summary()["sm_clock_median_mhz"] == 1820.0


def test_a_sweep_keeps_every_sample_beside_its_csv(tmp_path: Path) -> None:
    out = tmp_path / "square.csv"
    points = [Point(i, 48, 48, 48, sweep="square", x=48) for i in ("cublas", "strassen1")]
    frame = run_sweep(points, NumpyBackend(), out, QUICK, progress=False)
    assert (frame["timing"] == "host").all() and (frame["host_enqueue_s"] > 0).all()
    lines = read_samples(samples_path(out))
    assert samples_path(out).name == "square.samples.jsonl" and len(lines) == 2
    for row in frame.itertuples():
        line = lines[("square", row.impl, "48", "48", "48", "float32", "", "")]
        assert line["timing"] == "host" and len(line["samples"]) == row.samples
        assert sorted(t for t, *_ in line["samples"])[len(line["samples"]) // 2] >= row.time_min_s
    # collect carries them from the parts to the published file
    assert main(["collect", str(out), "--out", str(tmp_path / "pub" / "square.csv")]) == 0
    assert read_samples(tmp_path / "pub" / "square.samples.jsonl") == lines


def test_samples_file_last_line_wins_and_a_cut_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.samples.jsonl"
    row = {"sweep": "square", "impl": "gemm", "m": 8, "n": 8, "k": 8, "dtype": "float32"}
    append_samples(path, row, "graph", [(1.0, 1800.0, 0, True, 300.0)])
    append_samples(path, row, "graph", [(2.0, None, 0x4, True, None)])  # the point measured again
    key = ("square", "gemm", "8", "8", "8", "float32", "", "")
    assert read_samples(path)[key]["samples"] == [[2.0, None, 0x4, True, None]]
    with path.open("a") as handle:
        handle.write('{"sweep": "square", "impl": "gemm", "m"')  # an interrupted write
    assert len(read_samples(path, allow_cut=True)) == 1  # the file a running sweep appends to
    with pytest.raises(ResultsError, match="line 3 is not a samples record .cut short"):
        read_samples(path)  # every other reader: a cut line cannot be right
    path.write_text('not json\n' + path.read_text())
    with pytest.raises(ResultsError, match="line 1 is not a samples record"):
        read_samples(path)


def test_median_ratio_interval() -> None:
    rng = np.random.default_rng(1)
    base = 1.0 + 0.01 * rng.standard_normal(200)
    same = 1.0 + 0.01 * rng.standard_normal(200)
    slower = 1.1 + 0.01 * rng.standard_normal(200)
    ratio, low, high = median_ratio_interval(base, same)
    assert low < 1.0 < high and interval_verdict(low, high) == "SAME"
    ratio, low, high = median_ratio_interval(base, slower)
    assert 1.08 < low < ratio < high < 1.12 and interval_verdict(low, high) == "SLOW"
    assert interval_verdict(*median_ratio_interval(slower, base)[1:]) == "FAST"
    assert median_ratio_interval(base, slower) == (ratio, low, high)  # a fixed seed: reproducible
    # significant but within the runs' own spread (thousands of samples, 0.05% apart, 0.5% spread): SAME
    assert interval_verdict(1.0004, 1.0006) == "SLOW" and interval_verdict(1.0004, 1.0006, 0.005) == "SAME"
    assert interval_verdict(0.93, 0.95, 0.02) == "FAST" and interval_verdict(1.01, 1.03, 0.02) == "SAME"


def _with_samples(source: Path, target: Path, factor: float, noise: float, seed: int) -> None:
    """A copy of a fixture run whose square sweep has samples: n draws around its median time x factor."""
    shutil.copytree(source, target)
    square = read_results(target / "square.csv", "bench")
    rng = np.random.default_rng(seed)
    for row in square.to_dict("records"):
        times = row["time_median_s"] * factor * (1 + noise * rng.standard_normal(100))
        append_samples(samples_path(target / "square.csv"), row, "graph", [(t, None, 0, True, None) for t in times])
    table = pd.read_csv(target / "square.csv", keep_default_na=False, dtype=str)
    table["samples"] = "100"  # the rows count the samples written beside them (compare checks that they agree)
    table.to_csv(target / "square.csv", index=False)


def test_compare_tests_differences_on_the_samples(tmp_path: Path) -> None:
    """With samples on both sides, a point's verdict comes from the bootstrap interval of the median ratio
    (method "bootstrap"); points without samples keep the noise rule (method "noise")."""
    _with_samples(FIXTURES / "gpu_a", tmp_path / "a", 1.0, 0.01, 0)
    _with_samples(FIXTURES / "gpu_a", tmp_path / "a_again", 1.0, 0.01, 1)
    _with_samples(FIXTURES / "gpu_a", tmp_path / "a_slower", 1.05, 0.01, 2)
    same = compare_runs([tmp_path / "a", tmp_path / "a_again"], tmp_path / "c1")
    tested = same[same["method"] == "bootstrap"]
    assert (tested["sweep"] == "square").all() and len(tested) == (same["sweep"] == "square").sum() > 0
    assert (same.loc[same["method"] == "noise", "sweep"] != "square").all()
    assert (tested["verdict"] == "SAME").mean() >= 0.9  # a 95% interval: the odd false alarm is allowed
    slower = compare_runs([tmp_path / "a", tmp_path / "a_slower"], tmp_path / "c2")
    tested = slower[slower["method"] == "bootstrap"]
    assert (tested["verdict"] == "SLOW").all()
    assert ((tested["ratio_low"] > 1.0) & (tested["ratio_high"] < 1.1)).all()
    on_disk = pd.read_csv(tmp_path / "c2" / "compare.csv")
    assert {"ratio_low", "ratio_high", "method"} <= set(on_disk.columns)


def test_results_from_before_the_timing_columns_still_read(tmp_path: Path) -> None:
    """A sweep CSV written before the timing, host_enqueue_s and sm_clock_median_mhz columns reads with them
    blank, and collects together with a new one."""
    fixture = read_results(FIXTURES / "gpu_a" / "square.csv", "bench")
    assert (fixture["timing"] == "").all() and fixture["host_enqueue_s"].isna().all()
    new = tmp_path / "new.csv"
    run_sweep([Point("cublas", x, x, x, sweep="square", x=x) for x in (32, 40)], NumpyBackend(), new, QUICK,
              progress=False)
    old = tmp_path / "old.csv"
    pd.read_csv(new, keep_default_na=False).drop(columns=["timing", "host_enqueue_s", "sm_clock_median_mhz"]).assign(
        sweep="rankk").to_csv(old, index=False)  # other points (a point given twice is refused)
    assert main(["collect", str(old), str(new), "--out", str(tmp_path / "c.csv")]) == 0
    both = read_results(tmp_path / "c.csv", "bench")
    assert len(both) == 4 and list(both["timing"]) == ["", "", "host", "host"]
    assert json.loads((tmp_path / "system.json").read_text())["engine"] == "numpy"


def test_clocks_in_the_row_are_read_in_the_timed_loop() -> None:
    """With a device, the row's SM clocks are those read after the first and last kept sample (not before the
    operands exist or after freeing), slow samples are discarded, temperature and power come from the end of
    the timed loop."""
    from strassenbench.bench.runner import run_point

    class Watched:
        def __init__(self) -> None:
            self.clocks = iter([1900.0, 1000.0] + [1850.0] * 1000)
            self.phase = "before"

        def snapshot(self) -> dict:
            return {"sm_clock_mhz": 1.0 if self.phase == "before" else 2.0, "temperature_c": 61,
                    "power_w": 300.0, "throttle_reasons": "0x0", "mem_clock_mhz": 2600}

        def probe(self) -> tuple[float, int, float]:
            self.phase = "after"
            return next(self.clocks), 0x4, 500.0

        def max_sm_clock_mhz(self) -> float:
            return 1980.0

        def process_bytes(self) -> None:
            return None

    class WithDevice(NumpyBackend):
        watched = Watched()

        def device(self):  # noqa: ANN202
            return self.watched

    criterion = Criterion(min_samples=4, min_time=0.0, precision=10.0, warmup=0, warmup_time=0.0, clock_window=4,
                          clock_drift=0.05)
    row = run_point(Point("cublas", 32, 32, 32, sweep="square", x=32), WithDevice(), criterion)
    assert row["status"] == "ok", row["message"]
    assert row["sm_clock_start_mhz"] == 1900.0 and row["sm_clock_end_mhz"] == 1850.0
    assert row["low_clock_discards"] == 1 and row["samples"] == 4 and row["sm_clock_median_mhz"] == 1850.0
    assert row["power_w"] == 500.0 and row["capped_share"] == 1.0 and row["throttle_reasons"] == "0x4"
    assert row["energy_pj_per_flop"] == pytest.approx(500.0 * row["time_median_s"] / (2 * 32**3) * 1e12)
    assert row["temperature_c"] == 61 and row["mem_clock_end_mhz"] == 2600


def test_one_timer_class_per_method_behind_one_interface() -> None:
    """nvbench's way: each timing method its own class (the CSV's ``timing`` value its ``method``), the GPU ones
    made by name in one place, and one entry point plans a sweep's method for `bench` and the workflow alike."""
    from strassenbench.bench.queue import plan_timing
    from strassenbench.bench.runner import Point
    from strassenbench.bench.timers import (GPU_TIMING, TIMERS, BlockingTimer, GraphTimer, HostTimer, Timer,
                                            gpu_timer)

    assert set(TIMERS) == {"blocking", "graph", "host"} and GPU_TIMING == ("blocking", "graph")
    assert all(issubclass(cls, Timer) and cls.method == name for name, cls in TIMERS.items())
    assert issubclass(GraphTimer, BlockingTimer) and not HostTimer.gpu
    assert HostTimer(64).prepare(lambda: None) == "host"
    with pytest.raises(ValueError, match="unknown GPU timing 'host'"):
        gpu_timer("host", 1 << 20, None)
    point = Point("cublas", 64, 64, 64, "float32", None, None, "square", 64)
    assert plan_timing("auto", [point]).method == "blocking"
    assert plan_timing("auto", [point], {"graph"}).method == "graph"  # a sweep's rows are timed alike
    assert plan_timing("graph", [point]).method == "graph"
    deep = Point("strassen2-ref", 512, 512, 512, "float32", None, None, "square", 512)
    with pytest.raises(ValueError, match="time this sweep with --timing graph"):
        plan_timing("blocking", [deep])
