"""The benchmark runner on a GPU (marked ``gpu``: skipped without CuPy and a CUDA device)."""

from __future__ import annotations

import pandas as pd
import pytest

from strassenbench.cli import main

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def build_dir(gpu_build: str) -> str:
    return gpu_build  # conftest.py: one build per session, or the folder --gpu-build names


def test_small_square_sweep_on_the_gpu(tmp_path, build_dir: str) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    impls = "cublas,gemm,strassen1,strassen1-ref,strassen2-ref,strassen2-hybrid,strassen2-direct"
    assert main(["bench", "--engine", "cuda", "--impl", impls, "--sizes", "1024,2048", "--out", str(out),
                 "--build-dir", build_dir, "--scheme", "atomic", "--max-time", "2"]) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    assert (frame["status"] == "ok").all(), frame[["impl", "m", "status", "message"]]
    assert (frame["gpu"] != "cpu").all() and (frame["driver"] != "").all()
    assert (frame["memory_check"] == "ok").all(), frame[["impl", "extra_bytes", "measured_extra_bytes"]]
    assert (frame["sm_clock_start_mhz"].astype(str) != "").all()
    # every implementation timed alike: by graph, since the 2-level ones queue more than the blocking kernel holds
    assert (frame["timing"] == "graph").all(), frame[["impl", "timing"]]
    assert (frame["blocking_timeouts"] == 0).all()
    assert (frame["sm_clock_median_mhz"].astype(str) != "").all() and (frame["host_enqueue_s"] > 0).all()
    assert (tmp_path / "system.json").is_file() and (tmp_path / "square.samples.jsonl").is_file()


def test_a_real_fault_costs_one_point(tmp_path, build_dir: str, monkeypatch) -> None:  # noqa: ANN001
    """impl:m:n:k:fault makes the worker read a null pointer on the GPU (a sticky illegal address): that point
    is a fault row, and the other points, measured by fresh workers, are ok."""
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", "strassen1:1024:1024:1024:fault")
    out = tmp_path / "square.csv"
    assert main(["bench", "--engine", "cuda", "--impl", "gemm,strassen1", "--sizes", "512,1024,1536", "--out",
                 str(out), "--build-dir", build_dir, "--max-time", "1", "--no-progress"]) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    bad = frame[frame["status"] != "ok"]
    assert list(zip(bad["impl"], bad["m"], bad["status"])) == [("strassen1", 1024, "fault")], frame
    assert bad["message"].iloc[0].startswith("cudaErrorIllegalAddress") and len(frame) == 6
    assert set(frame.loc[frame["status"] == "ok", "timing"]) == {"blocking"}


def test_memlimit_confirms_under_a_budget(build_dir: str, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "mem.csv"
    assert main(["memlimit", "--engine", "cuda", "--impl", "cublas,strassen1,strassen1-ref", "--memory-budget",
                 "2GiB", "--step", "256", "--out", str(out), "--build-dir", build_dir]) == 0
    frame = pd.read_csv(out)
    assert frame["confirmed"].all(), frame


def test_blocking_time_is_free_of_host_time(build_dir: str) -> None:
    """At n = 512 and 1,024: cuBLAS's blocking-mode time equals its graph-mode time within noise and the launch
    gap a graph saves (the blocking kernel leaves no host time in the interval, as a graph replay does), and the reference's blocking time is
    below its time by events around the Python call (the old method, which counted its launches' host time)."""
    import statistics

    from strassenbench.bench.backends import CudaBackend
    from strassenbench.bench.timers import BlockingTimer, Criterion, sample
    from strassenbench.impls import get_impl

    criterion = Criterion(min_samples=30, min_time=0.2, precision=0.01, max_time=5.0, warmup_time=0.3)
    blocking, graph = CudaBackend(timing="blocking"), CudaBackend(timing="graph")

    class EventsAroundTheCall(BlockingTimer):
        """The old method: events around the Python call, no blocking kernel."""

        def batch(self, fn, count: int) -> float:  # noqa: ANN001
            with self._stream:
                self._start.record(self._stream)
                for _ in range(count):
                    fn()
                self._stop.record(self._stream)
            self._stop.synchronize()
            return self.cupy.cuda.get_elapsed_time(self._start, self._stop) / 1e3 / count

    for n in (512, 1024):
        A, B, C = blocking.operands(n, n, n, "float32", 0)
        cublas = get_impl("cublas").prepare(A, B, C, 1.0, 1.0, engine="cuda")
        by_blocking = sample(cublas, blocking.timer(build_dir), criterion)
        by_graph = sample(cublas, graph.timer(build_dir), criterion)
        assert by_blocking.timing == "blocking" and by_graph.timing == "graph" and by_blocking.timeouts == 0
        at_blocking, at_graph = statistics.median(by_blocking.times), statistics.median(by_graph.times)
        noise = max(by_blocking.rel_stdev, by_graph.rel_stdev, 0.02)
        # plus 2 us: a graph's kernel node starts sooner after the one before than a stream launch does, on
        # the device (an H100 at n = 512: 0.4 to 1.3 us of 18); a Python call's host time is far more
        assert abs(at_blocking - at_graph) <= 3 * noise * at_graph + 2e-6, (n, at_blocking, at_graph, noise)

        reference = get_impl("strassen1-ref").prepare(A, B, C, 1.0, 1.0, engine="cuda")
        ref_blocking = sample(reference, blocking.timer(build_dir), criterion)
        old = EventsAroundTheCall(blocking.l2_bytes, blocking._block_kernel(build_dir))
        ref_events = sample(reference, old, criterion)
        assert statistics.median(ref_blocking.times) < statistics.median(ref_events.times), n
