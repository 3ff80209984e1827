"""The benchmark runner on a GPU (marked ``gpu``: skipped without CuPy and a CUDA device)."""

from __future__ import annotations

import pandas as pd
import pytest

from strassenbench.cli import main

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    from strassenbench.fused.build import build
    from strassenbench.fused.cuda import device_arch

    out = tmp_path_factory.mktemp("gpu-build")
    build([device_arch()], out, dtypes=("float32",))
    return str(out)


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
    assert (frame["timing"] == "graph").all(), frame[["impl", "timing"]]  # every implementation timed alike
    assert (frame["sm_clock_median_mhz"].astype(str) != "").all() and (frame["host_enqueue_s"] > 0).all()
    assert (tmp_path / "system.json").is_file() and (tmp_path / "square.samples.jsonl").is_file()


def test_memlimit_confirms_under_a_budget(build_dir: str, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "mem.csv"
    assert main(["memlimit", "--engine", "cuda", "--impl", "cublas,strassen1,strassen1-ref", "--memory-budget",
                 "2GiB", "--step", "256", "--out", str(out), "--build-dir", build_dir]) == 0
    frame = pd.read_csv(out)
    assert frame["confirmed"].all(), frame


def test_graph_replay_removes_host_time_and_leaves_cublas_alone(build_dir: str) -> None:
    """1-level Strassen at n = 1024 (7 launches and their parameters per call): its graph replays, back to
    back, take no longer per call than its Python calls back to back between the same events; cuBLAS (one
    call) times the same by graph and by events, within noise."""
    import statistics

    from strassenbench.bench.backends import CudaBackend
    from strassenbench.bench.timing import CudaTimer, Criterion, sample
    from strassenbench.impls import get_impl

    backend = CudaBackend()
    A, B, C = backend.operands(1024, 1024, 1024, "float32", 0)
    strassen = get_impl("strassen1").prepare(A, B, C, 1.0, 1.0, engine="cuda", build_dir=build_dir)
    graph, events = CudaTimer(backend.l2_bytes), CudaTimer(backend.l2_bytes)
    strassen()
    assert graph.prepare(strassen) == "graph"
    replayed = min(graph.batch(strassen, 100) for _ in range(5))
    called = min(events.batch(strassen, 100) for _ in range(5))  # events stays in "events": never prepared
    assert replayed <= called * 1.02, (replayed, called)

    cublas = get_impl("cublas").prepare(A, B, C, 1.0, 1.0, engine="cuda")
    criterion = Criterion(min_samples=30, min_time=0.2, max_noise=0.01, max_time=5.0, warmup_time=0.3)
    by_graph = sample(cublas, CudaTimer(backend.l2_bytes), criterion)

    class EventsOnly(CudaTimer):
        def prepare(self, fn) -> str:  # noqa: ANN001
            return "events"

    by_events = sample(cublas, EventsOnly(backend.l2_bytes), criterion)
    assert by_graph.timing == "graph" and by_events.timing == "events"
    ratio = statistics.median(by_graph.times) / statistics.median(by_events.times)
    noise = max(by_graph.rel_stdev, by_events.rel_stdev, 0.02)
    assert abs(ratio - 1) <= 3 * noise, (ratio, noise)
    assert by_graph.host_enqueue_s > 0
