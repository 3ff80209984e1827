"""The cuda engine's own code on the CPU device of tests/support/cudasim/: real CuPy, the kernels of a real sm_90 build
(their PTX signatures) run by the emulator, streams and graphs ordered as CUDA orders them.

What runs here is the GPU path itself (strassenbench.fused.cuda, the implementations' cuda calls, the reference's
cuBLAS and elementwise kernels, bench.timers' GPU timers, the runner, memlimit), not a mock of it."""

from __future__ import annotations

import ast
import ctypes
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support import cudasim
from strassenbench.cli import main
from strassenbench.impls import ImplError, get_impl

pytestmark = pytest.mark.cudasim

ROOT = Path(__file__).resolve().parents[2]
CUDA_IMPLS = ["gemm", "strassen1", "strassen2-direct", "strassen2-hybrid", "cublas", "strassen1-ref", "strassen2-ref",
              "cublas-tf32", "gemm-3xtf32", "strassen1-tf32", "strassen2-3xtf32", "strassen1-dmma", "gemm-tf32-wgmma",
              "strassen1-3xtf32-wgmma"]
SHAPE = (37, 29, 41)  # m, k, n: odd, every level pads


def _operands(dtype: str, shape: tuple[int, int, int] = SHAPE, seed: int = 0):  # noqa: ANN202
    """Small integers: every product and sum is exact in float32, so every correct order gives the same C."""
    m, k, n = shape
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-4, 5, s).astype(dtype) for s in ((m, k), (k, n), (m, n)))


def _options(impl: str, **extra: object) -> dict:
    strategy = get_impl(impl).family.defaults["emu"]
    return {"strategy": strategy, **extra} if "strategy" in get_impl(impl).options else {}


def _want(A, B, C, alpha: float, beta: float) -> np.ndarray:  # noqa: ANN001
    return alpha * (A.astype(np.float64) @ B) + beta * C


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("impl", CUDA_IMPLS)
def test_every_implementation_is_exact_through_the_cuda_path(cpu_device, sim_build, impl, dtype) -> None:  # noqa: ANN001
    A, B, C = _operands(dtype)
    got = C.copy()
    if dtype not in get_impl(impl).dtypes:  # the tensor-core implementations compute one dtype and say so
        with pytest.raises(ImplError, match=f"computes {get_impl(impl).dtypes[0]}, not {dtype}"):
            get_impl(impl)(A, B, got, 2.0, 0.5, engine="cuda", build_dir=sim_build, **_options(impl))
        return
    get_impl(impl)(A, B, got, 2.0, 0.5, engine="cuda", build_dir=sim_build, **_options(impl))
    assert np.array_equal(got, _want(A, B, C, 2.0, 0.5))
    launched = {name for name, _, _ in cpu_device.device.launches}
    if get_impl(impl).kind in ("fused", "hybrid"):
        prefix = f"strassen_{get_impl(impl).mode}_" if get_impl(impl).mode != "simt" else "strassen_f"
        assert any(name.startswith(prefix) for name in launched)
    elif get_impl(impl).tensor:  # cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32
        assert cpu_device.device.executed.count("cublas gemmex tf32") == 1
    else:
        assert "cublas sgemm" in cpu_device.device.executed or "cublas dgemm" in cpu_device.device.executed


def test_the_wg_tile_reductions_through_the_cuda_path(cpu_device, sim_build) -> None:  # noqa: ANN001
    """strassen1-3xtf32-wgmma in the atomic scheme at aligned leading dimensions: the TMA kernel, C's tensor map
    encoded by the driver (32 x 16 boxes, the 128-byte swizzle) and the tile reductions into it, exact."""
    A, B, C = _operands("float32", (260, 40, 264))
    got = C.copy()
    get_impl("strassen1-3xtf32-wgmma")(A, B, got, 2.0, 0.5, engine="cuda", build_dir=sim_build,
                                       **_options("strassen1-3xtf32-wgmma", scheme="atomic"))
    assert np.array_equal(got, _want(A, B, C, 2.0, 0.5))
    launched = {name for name, _, _ in cpu_device.device.launches}
    assert "strassen_wg3xtf32_wglarge_w2x2x2_atomic" in launched, launched


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("impl", ["strassen1-presum", "strassen2-presum"])
def test_presum_is_exact_through_the_cuda_path(cpu_device, sim_build, impl, dtype) -> None:  # noqa: ANN001
    """The presum implementations on the cuda engine: the sums by the presum kernel into a workspace of the
    device's memory, then the products on the (1, 1, W_C) kernels, one after another."""
    A, B, C = _operands(dtype)
    got = C.copy()
    get_impl(impl)(A, B, got, 2.0, 0.5, engine="cuda", build_dir=sim_build, strategy="Small")
    assert np.array_equal(got, _want(A, B, C, 2.0, 0.5))
    launched = [name for name, _, _ in cpu_device.device.launches]
    short = {"float32": "f32", "float64": "f64"}[dtype]
    sums = [i for i, name in enumerate(launched) if name == f"presum_{short}"]
    products = [i for i, name in enumerate(launched) if name.startswith("strassen_")]
    assert len(sums) >= 2 and max(sums) < min(products)  # the sums of A and of B, then the products
    assert {name.split("_")[3] for name in launched if name.startswith("strassen_")} <= {"w1x1x1", "w1x1x2", "w1x1x4"}


@pytest.mark.parametrize("order", ["lifo", "random"])
@pytest.mark.parametrize(("impl", "scheme"), [("strassen1", "streams"), ("strassen1", "atomic"),
                                              ("strassen2-direct", "streams"), ("strassen2-direct", "atomic"),
                                              ("strassen2-hybrid", "atomic")])
def test_task_parallel_schemes_are_exact_in_any_order_the_streams_allow(cpu_device, sim_build, impl, scheme,
                                                                        order) -> None:  # noqa: ANN001
    """The paper's streams and atomic schemes (Sec. s:task) on several CUDA streams: the latest-enqueued-first
    order and random orders both keep every event wait, and the result is exact."""
    A, B, C = _operands("float32")
    for seed in range(3 if order == "random" else 1):
        device = cpu_device.install(order=order, seed=seed)
        got = C.copy()
        get_impl(impl)(A, B, got, 1.0, 0.5, engine="cuda", build_dir=sim_build, **_options(impl, scheme=scheme))
        assert np.array_equal(got, _want(A, B, C, 1.0, 0.5)), seed
        assert len({s.ptr for s in device.streams.values()}) > 2  # the pool's streams were used


def test_a_dropped_stream_wait_is_caught(cpu_device, sim_build, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The streams scheme with one event wait dropped: the device runs the next stage's product before the
    scale of C it depends on, and C is wrong (how a missing wait shows on a GPU, made certain here)."""
    A, B, C = _operands("float32")
    cpu_device.install(order="lifo")
    original, dropped = cudasim.Stream.wait_event, []

    def wait_event(self, event):  # noqa: ANN001, ANN202
        if not dropped and not self.null and self.ptr != 0:
            dropped.append(self)
            return None
        return original(self, event)

    monkeypatch.setattr(cudasim.Stream, "wait_event", wait_event)
    got = C.copy()
    get_impl("strassen1")(A, B, got, 1.0, 0.5, engine="cuda", build_dir=sim_build, strategy="Small", scheme="streams")
    assert dropped and not np.array_equal(got, _want(A, B, C, 1.0, 0.5))


def test_the_device_reads_parameters_at_their_ptx_widths(cpu_device, sim_build) -> None:  # noqa: ANN001
    """A Python int for an `int` parameter goes as 8 bytes, a float64 for a `float` as a double: refused."""
    from strassenbench.fused import cuda

    kernel = cuda.function(sim_build, "sm_90", "scale_f32")
    assert kernel.params == (("u64", 8), ("u32", 4), ("u32", 4), ("u32", 4), ("f32", 4))
    import cupy

    C = cupy.asarray(np.ones((4, 4), np.float32))
    good = (C, np.int32(4), np.int32(4), np.int32(4), np.float32(3))
    kernel((1,), (256,), good)
    assert np.array_equal(cupy.asnumpy(C), np.full((4, 4), 3, np.float32))
    for i, bad in ((1, 4), (4, np.float64(3)), (4, 3.0)):
        args = list(good)
        args[i] = bad
        with pytest.raises(cudasim.LaunchError, match=f"parameter {i} is"):
            kernel((1,), (256,), tuple(args))


def test_kernels_a_build_adds_are_found_by_the_same_process(cpu_device, sim_build, tmp_path) -> None:  # noqa: ANN001
    """A process that has launched from a build folder and then builds more into it (the gpu tests' tensor-core
    fixture does) finds the new kernels: the kernel index is read again once the build has rewritten it."""
    import json
    import shutil

    from strassenbench.fused import cuda

    for path in Path(sim_build).iterdir():
        shutil.copy(path, tmp_path)
    index = tmp_path / "strassen_sm_90.json"
    full = json.loads(index.read_text())
    tensor = next(name for name in full if "tcsmall" in name)
    index.write_text(json.dumps({name: module for name, module in full.items() if "tcsmall" not in name}))
    assert cuda.function(str(tmp_path), "sm_90", "scale_f32").params[0] == ("u64", 8)
    with pytest.raises(cuda.CudaError, match=f"{tensor} was not built"):
        cuda.function(str(tmp_path), "sm_90", tensor)
    index.write_text(json.dumps(full))  # what `strassenbench build` of the tensor-core strategy leaves
    assert cuda.function(str(tmp_path), "sm_90", tensor).params


@pytest.mark.parametrize("defect", [
    lambda a: int(a) if isinstance(a, np.int32) else a,  # lda, ldb, ldc, bk as Python ints
    lambda a: np.float64(a) if isinstance(a, np.float32) else a,  # alpha, beta of a float kernel as doubles
])
def test_planted_launch_argument_defects_are_caught(cpu_device, sim_build, defect,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The launch builder with its NumPy scalars replaced (the defects the CPU device exists to catch): no
    implementation runs."""
    from dataclasses import replace

    from strassenbench.fused import launch

    original = launch._launches
    monkeypatch.setattr(launch, "_launches", lambda *a, **k: [replace(x, args=tuple(map(defect, x.args)))
                                                               for x in original(*a, **k)])
    A, B, C = _operands("float32")
    with pytest.raises(cudasim.LaunchError, match="parameter"):
        get_impl("strassen1")(A, B, C, 1.0, 0.0, engine="cuda", build_dir=sim_build, strategy="Small")


def test_cublas_through_cupys_wrapper_refuses_capture_as_cupy_does(cpu_device) -> None:  # noqa: ANN001
    import cupy
    from cupy_backends.cuda.libs import cublas

    stream = cupy.cuda.Stream(non_blocking=True)
    stream.begin_capture()
    with pytest.raises(NotImplementedError, match="during stream capture is currently unsupported"):
        cublas.setStream(cupy.cuda.device.get_cublas_handle(), stream.ptr)
    stream.end_capture()


@pytest.mark.parametrize("impl", CUDA_IMPLS)
def test_graph_timing_captures_every_implementation(cpu_device, sim_build, impl) -> None:  # noqa: ANN001
    """--timing graph: cuBLAS (its C API) and the references are captured like the fused kernels; every replay
    computes C += A B again."""
    import cupy

    from strassenbench.bench.backends import CudaBackend

    backend = CudaBackend(timing="graph")
    A, B, C = (cupy.asarray(x) for x in _operands(get_impl(impl).dtypes[0]))
    start = cupy.asnumpy(C)
    call = get_impl(impl).prepare(A, B, C, 1.0, 1.0, engine="cuda", build_dir=sim_build, **_options(impl))
    timer = backend.timer(sim_build)
    assert timer.prepare(call) == "graph"  # the first replay (an upload) ran: C += A B once
    assert timer.time(call) > 0
    want = start + 2 * (cupy.asnumpy(A).astype(np.float64) @ cupy.asnumpy(B))
    assert np.array_equal(cupy.asnumpy(C), want)
    assert timer._graph is not None and timer._graph.replays == 2


def test_a_call_that_cannot_be_captured_is_an_error_naming_it(cpu_device, sim_build) -> None:  # noqa: ANN001
    from strassenbench.bench.backends import CudaBackend
    from strassenbench.bench.timers import TimingError

    import cupy

    def allocates() -> None:
        cupy.empty(16, dtype=np.float32)

    timer = CudaBackend(timing="graph").timer(sim_build)
    with pytest.raises(TimingError, match="cannot be captured.*time it with --timing blocking"):
        timer.prepare(allocates)


def test_capture_rules_unjoined_work_synchronisation_allocation(cpu_device) -> None:  # noqa: ANN001
    import cupy
    from cupy_backends.cuda.api.runtime import CUDARuntimeError

    origin, side = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    origin.begin_capture()
    side.wait_event(origin.record())  # the side stream joins the capture ...
    side.record()  # ... works, and is never waited for by the origin
    with pytest.raises(CUDARuntimeError, match="Unjoined"):
        origin.end_capture()
    for forbidden in (lambda: origin.synchronize(), lambda: cupy.empty(4, dtype=np.float32)):
        origin.begin_capture()
        with pytest.raises(CUDARuntimeError, match="Unsupported"):
            forbidden()
        with pytest.raises(CUDARuntimeError, match="Invalidated"):
            origin.end_capture()


def _slow_call(kernel, args, pause: float):  # noqa: ANN001, ANN202
    """Two launches with ``pause`` seconds of host work between them (the reference's Python between its
    launches, a library wrapper's overhead)."""
    def call() -> None:
        kernel((1,), (256,), args)
        time.sleep(pause)
        kernel((1,), (256,), args)

    return call


def test_blocking_keeps_host_time_out_of_the_interval_and_events_do_not(cpu_device, sim_build) -> None:  # noqa: ANN001
    import cupy

    from strassenbench.bench.backends import CudaBackend
    from strassenbench.fused import cuda

    kernel = cuda.function(sim_build, "sm_90", "scale_f32")
    C = cupy.asarray(np.ones((8, 8), np.float32))
    call = _slow_call(kernel, (C, np.int32(8), np.int32(8), np.int32(8), np.float32(1)), 0.05)
    blocking = CudaBackend(timing="blocking").timer(sim_build)
    assert blocking.prepare(call) == "blocking"
    behind = blocking.time(call)
    assert behind < 1e-3, behind  # two modelled launches, not the 50 ms the host spent
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()  # the old "events" method: the host's 50 ms inside
    start.record()
    call()
    stop.record()
    stop.synchronize()
    assert cupy.cuda.get_elapsed_time(start, stop) / 1e3 > 0.04
    assert blocking.timeouts == 0 and "block_stream" in [name for name, _, _ in cpu_device.device.launches]


def test_the_blocking_kernel_gives_up_after_its_timeout(cpu_device, sim_build) -> None:  # noqa: ANN001
    """A host that never releases the flag: the kernel (on the emulator) stops at its timeout and says so."""
    import cupy

    from strassenbench.fused import cuda

    runtime = cupy.cuda.runtime
    host = runtime.hostAlloc(8, runtime.hostAllocMapped)
    words = (ctypes.c_int * 2).from_address(host)
    words[0] = words[1] = 0
    ptr = runtime.pointerGetAttributes(host).devicePointer
    kernel = cuda.function(sim_build, "sm_90", "block_stream")
    kernel((1,), (32,), (np.uint64(ptr), np.uint64(ptr + 4), np.uint64(20_000_000)))  # 20 ms
    began = time.perf_counter()
    cupy.cuda.runtime.deviceSynchronize()
    assert words[1] == 1 and time.perf_counter() - began >= 0.02


def test_timing_bookkeeping_samples_and_replays(cpu_device, sim_build) -> None:  # noqa: ANN001
    """sample() on the cuda timer: warm-up calls measure the host's enqueue time, every sample is one blocking
    kernel and one call between two events, and the mode is recorded."""
    import cupy

    from strassenbench.bench.backends import CudaBackend
    from strassenbench.bench.timers import Criterion, sample

    A, B, C = (cupy.asarray(x) for x in _operands("float32"))
    call = get_impl("strassen1").prepare(A, B, C, 1.0, 1.0, engine="cuda", build_dir=sim_build, strategy="Small")
    criterion = Criterion(min_samples=5, min_time=0.0, precision=1.0, max_time=5.0, warmup=2, warmup_time=0.0)
    out = sample(call, CudaBackend(timing="blocking").timer(sim_build), criterion)
    launches = [name for name, _, _ in cpu_device.device.launches]
    assert out.timing == "blocking" and out.timeouts == 0 and len(out.times) == 5
    assert launches.count("block_stream") == 5 and out.host_enqueue_s > 0
    assert sum(name.startswith("strassen_") for name in launches) == 7 * (2 + 5)  # 7 products per call


def test_a_bench_sweep_through_the_runner_times_every_row_alike(cpu_device, sim_build, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    # a float32 sweep (DMMA's is float64), with presum's workspace held to its declared bytes too
    single = [i for i in [*CUDA_IMPLS, "strassen1-presum"] if "float32" in get_impl(i).dtypes]
    argv = ["bench", "--engine", "cuda", "--impl", ",".join(single), "--sizes", "57", "--out", str(out),
            "--build-dir", sim_build, "--strategy", "Small", "--min-time", "0", "--min-samples", "3",
            "--precision", "1", "--warmup-time", "0", "--no-progress"]
    assert main(argv) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    assert len(frame) == len(single)
    assert (frame["status"] == "ok").all(), frame[["impl", "m", "status", "message"]]
    # auto: the 2-level references and direct Strassen do not fit behind the blocking kernel, so all by graph
    assert set(frame["timing"]) == {"graph"} and (frame["blocking_timeouts"] == 0).all()
    assert (frame["memory_check"] == "ok").all(), frame[["impl", "extra_bytes", "measured_extra_bytes"]]
    assert (tmp_path / "square.samples.jsonl").is_file() and (tmp_path / "system.json").is_file()
    # Resuming into these rows with the other method is refused: a sweep is timed alike. Auto times by graph
    # points that alone would be blocking (cuBLAS in float64 here, as gpu_run.sh's DMMA step adds them).
    assert main([*argv, "--timing", "blocking"]) == 2
    assert main([*argv[:4], "cublas", "--dtype", "float64", "--sizes", "57", "--out", str(out),
                 *argv[argv.index("--build-dir"):]]) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    assert len(frame) == len(single) + 1 and set(frame["timing"]) == {"graph"}
    assert (frame[frame["dtype"] == "float64"]["status"] == "ok").all()
    fits = tmp_path / "fits.csv"  # GEMM, 1-level Strassen and the 1-level reference fit: blocking
    assert main([*argv[:4], "cublas,gemm,strassen1,strassen1-ref", "--sizes", "40", "--out", str(fits),
                 *argv[argv.index("--build-dir"):]]) == 0
    frame = pd.read_csv(fits, keep_default_na=False)
    assert set(frame["timing"]) == {"blocking"} and (frame["status"] == "ok").all()
    assert main([*argv[:4], "cublas", "--sizes", "40", "--out", str(fits), "--timing", "graph",
                 *argv[argv.index("--build-dir"):]]) == 2


def test_a_splitk_sweep_runs_and_records_the_models_split(cpu_device, sim_build, tmp_path) -> None:  # noqa: ANN001
    """bench --scheme splitk on the cuda engine: each point's S is the model's for its shape on the device's GPU
    (split_options, with the build's resources.csv), the launches run each product in that many parts, and the
    row says which S ran; exact on integers."""
    from strassenbench.model.pick import split_options
    from strassenbench.plan import make_plan, split_chunk
    from strassenbench.strategies import STRATEGIES

    cpu_device.install()
    out = tmp_path / "square.csv"
    assert main(["bench", "--engine", "cuda", "--impl", "strassen1,strassen2-hybrid", "--sizes", "96", "--scheme",
                 "splitk", "--out", str(out), "--build-dir", sim_build, "--strategy", "Small", "--min-time", "0",
                 "--min-samples", "3", "--precision", "1", "--warmup-time", "0", "--no-progress"]) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    assert (frame["status"] == "ok").all() and set(frame["scheme"]) == {"splitk"}, frame[["impl", "message"]]
    for impl in ("strassen1", "strassen2-hybrid"):
        options = get_impl(impl).run_options("cuda", "Small", "splitk", sim_build)
        split = split_options(options, impl, 96, 96, 96, "float32", "cuda").split_k
        assert frame.set_index("impl").loc[impl, "split_k"] == split
    split = int(frame.set_index("impl").loc["strassen1", "split_k"])
    assert split > 1  # 96 x 96: few blocks, and the model splits k
    A, B, C = (np.random.default_rng(1).integers(-4, 5, (96, 96)).astype(np.float32) for _ in range(3))
    device = cpu_device.install()
    got = C.copy()
    get_impl("strassen1")(A, B, got, 1.0, 1.0, engine="cuda", build_dir=sim_build, strategy="Small",
                          scheme="splitk", split_k=split)
    assert np.array_equal(got, _want(A, B, C, 1.0, 1.0))
    bk = make_plan("strassen", 1, 96, 96, 96).block[1]
    parts = -(-bk // split_chunk(bk, split, STRATEGIES["Small"].k_S))
    assert sum(grid[2] for name, grid, _ in device.launches if name.startswith("strassen_")) == 7 * parts


def test_a_graph_sweep_captures_cublas_and_the_references(cpu_device, sim_build, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    assert main(["bench", "--engine", "cuda", "--impl", "cublas,strassen1-ref,strassen2-hybrid,gemm", "--sizes",
                 "48", "--out", str(out), "--build-dir", sim_build, "--strategy", "Small", "--timing", "graph",
                 "--min-time", "0", "--min-samples", "3", "--precision", "1", "--warmup-time", "0",
                 "--no-progress"]) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    assert (frame["status"] == "ok").all(), frame[["impl", "status", "message"]]
    assert set(frame["timing"]) == {"graph"}


def test_bench_on_cuda_without_a_build_is_one_line(cpu_device, tmp_path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    assert main(["bench", "--engine", "cuda", "--impl", "cublas", "--sizes", "32", "--out", str(out),
                 "--build-dir", str(tmp_path / "nobuild")]) == 2
    assert "strassenbench build" in capsys.readouterr().err and not out.exists()


def test_memlimit_on_the_cuda_path_confirms_the_declared_memory(cpu_device, sim_build, tmp_path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """memlimit through CudaBackend: cudaMemGetInfo after warming every implementation, a ballast down to the
    budget, then runs at n (fits) and n + step (out of memory), on a device of 256 MiB."""
    from strassenbench.families import FAMILIES, SIMT

    monkeypatch.setitem(FAMILIES[SIMT].defaults, "cuda", "Small")  # the build the CPU device has
    cpu_device.install(memory_bytes=256 << 20)
    out = tmp_path / "mem.csv"
    assert main(["memlimit", "--engine", "cuda", "--impl", "gemm,strassen1,strassen1-ref,cublas,strassen1-presum",
                 "--memory-budget", "2MiB", "--step", "64", "--out", str(out), "--build-dir", sim_build]) == 0
    frame = pd.read_csv(out)
    assert frame["confirmed"].all(), frame
    ref = frame.set_index("impl")
    assert ref.loc["strassen1-ref", "predicted_n"] < ref.loc["strassen1", "predicted_n"]
    # the presum workspace, 5/4 (mk + kn), is counted: it fits a smaller n than the workspace-free kernels
    assert ref.loc["strassen1-presum", "predicted_n"] < ref.loc["strassen1-ref", "predicted_n"]


def test_memlimit_runs_the_wgmma_implementations(cpu_device, sim_build, tmp_path) -> None:  # noqa: ANN001
    """memlimit of the Wg kernels through CudaBackend (persistent launches, tensor maps from the driver, the tile
    reductions' dynamic shared memory): the workspace-free GEMM and 1-level product fit the n their operands
    predict, confirmed by runs at n and n + step."""
    cpu_device.install(memory_bytes=256 << 20)
    out = tmp_path / "mem.csv"
    assert main(["memlimit", "--engine", "cuda", "--impl", "gemm-tf32-wgmma,strassen1-3xtf32-wgmma",
                 "--memory-budget", "1MiB", "--step", "64", "--out", str(out), "--build-dir", sim_build]) == 0
    frame = pd.read_csv(out).set_index("impl")
    assert frame["confirmed"].all(), frame
    assert frame.loc["gemm-tf32-wgmma", "predicted_n"] == frame.loc["strassen1-3xtf32-wgmma", "predicted_n"] > 0


@pytest.mark.parametrize(("impl", "mode"), [("cutlass", "simt"), ("cutlass-3xtf32", "3xtf32"), ("cutlass-dmma", "dmma")])
def test_memlimit_gives_the_build_folder_to_cutlass_too(cpu_device, sim_build, tmp_path, impl, mode,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """`memlimit --impl cutlass --build-dir X` loads CUTLASS from X, the SIMT baseline, the 3xTF32 one or the
    DMMA one, in its dtype (a stand-in entry computing on the host records where it was loaded from and which
    baseline)."""
    from strassenbench.fused import cutlass

    loaded = []
    dtype = np.dtype(cutlass.BASELINES[mode].dtype)

    def sgemm(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream):  # noqa: ANN001, ANN202
        op = cudasim._gemm_op(dtype, 0, 0, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc)
        device = cudasim.device()
        device.enqueue(device.streams[stream], op)
        return 0

    def entry(build_dir: str, arch: str, which: str):  # noqa: ANN202
        loaded.append((build_dir, which))
        return sgemm

    monkeypatch.setattr(cutlass, "_entry", entry)
    cpu_device.install(memory_bytes=128 << 20)
    out = tmp_path / "mem.csv"
    assert main(["memlimit", "--engine", "cuda", "--impl", impl, "--memory-budget", "16MiB", "--step", "64",
                 "--out", str(out), "--build-dir", sim_build, "--dtype", str(dtype)]) == 0
    assert loaded and set(loaded) == {(sim_build, mode)} and pd.read_csv(out)["confirmed"].all()


def test_prepared_calls_own_their_operands_and_reuse_their_events(cpu_device, sim_build) -> None:  # noqa: ANN001
    """A graph holds raw addresses: the prepared call keeps its operands alive after the caller drops them, and
    replaying it makes no new events (timing-disabled ones are made once)."""
    import cupy

    from strassenbench.bench.timers import GraphTimer
    from strassenbench.fused import cuda

    A0, B0, C0 = _operands("float32")
    A, B, C = (cupy.asarray(x) for x in (A0, B0, C0))
    call = get_impl("strassen1").prepare(A, B, C, 1.0, 1.0, engine="cuda", build_dir=sim_build, strategy="Small",
                                         scheme="streams")
    result = C
    del A, B
    timer = GraphTimer(1 << 16, cuda.function(sim_build, "sm_90", "block_stream"))
    timer.prepare(call)
    for _ in range(3):
        cupy.empty(A0.size, dtype=np.float32).fill(7.0)  # memory churn: a freed operand would now read 7s
        timer.time(call)
    assert np.array_equal(cupy.asnumpy(result), C0 + 4 * (A0.astype(np.float64) @ B0))
    made = []
    original = cudasim.Event.__init__
    cudasim.Event.__init__ = lambda self, *a, **k: (made.append(1), original(self, *a, **k))[1]
    try:
        call()
        call()
    finally:
        cudasim.Event.__init__ = original
    assert made == []


def test_the_model_queries_the_gpu_cuda_runs_on_by_pci_bus_id(cpu_device, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """Under CUDA_VISIBLE_DEVICES NVML's index 0 is another GPU: query_device asks NVML by CUDA's PCI bus id."""
    import pynvml

    from strassenbench.device import query_device
    from strassenbench.model.gpus import get_gpu

    asked = []
    fake = {"nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
            "nvmlDeviceGetHandleByIndex": lambda i: pytest.fail("looked up by NVML's index"),
            "nvmlDeviceGetHandleByPciBusId": lambda bus: asked.append(bus) or "handle",
            "nvmlDeviceGetName": lambda h: "NVIDIA H100 80GB HBM3",
            "nvmlDeviceGetMaxClockInfo": lambda h, which: 1980}
    for name, value in fake.items():
        monkeypatch.setattr(pynvml, name, value)
    figures = query_device(0)
    assert asked == ["0000:00:00.0"] and figures["sm_count"] == 2
    assert get_gpu("device").sm_count == 2 and asked == ["0000:00:00.0"] * 2  # the model's spec, from the same query


def test_the_timer_probe_makes_one_nvml_call_for_the_throttle_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    import pynvml

    from strassenbench.bench.telemetry import Device

    calls = []

    def reasons(handle: object) -> int:
        calls.append("reasons")
        return 0

    def old_reasons(handle: object) -> int:
        calls.append("old")
        return 0

    for name, value in {"nvmlInit": lambda: None, "nvmlDeviceGetHandleByPciBusId": lambda bus: "h",
                        "nvmlDeviceGetCurrentClocksEventReasons": reasons,
                        "nvmlDeviceGetCurrentClocksThrottleReasons": old_reasons,
                        "nvmlDeviceGetClockInfo": lambda h, which: 1755,
                        "nvmlDeviceGetPowerUsage": lambda h: 412_500}.items():
        monkeypatch.setattr(pynvml, name, value)
    device = Device(pci_bus_id="0000:00:00.0")
    calls.clear()
    assert device.probe() == (1755.0, 0, 412.5)  # the clock, the reasons' mask, the power in W
    assert calls == ["reasons"]


def test_a_gpu_that_runs_only_ptx_needs_a_toolchain_no_newer_than_its_driver() -> None:
    from strassenbench.fused.toolchain import Toolchain, ToolchainError, choose

    newer = (Toolchain((13, 5), "nvcc", "nvcc", "ptxas"),)
    assert choose("sm_90", (13, 0), newer) == newer[0]  # SASS: same major suffices
    with pytest.raises(ToolchainError, match=r"nvidia-cuda-nvcc==13\.0\.\*"):
        choose("sm_90", (13, 0), newer, jit=True)
    assert choose("sm_90", (13, 5), newer, jit=True) == newer[0]


def _imports(path: Path, package: str) -> set[str]:
    """The strassenbench.fused modules ``path`` imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package + "."):
            found.add(node.module.split(".")[2])
    return found


def test_the_fused_package_has_no_import_circle() -> None:
    folder = ROOT / "strassenbench" / "fused"
    graph = {p.stem: _imports(p, "strassenbench.fused") & {q.stem for q in folder.glob("*.py")}
             for p in folder.glob("*.py") if p.stem != "__init__"}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            assert state.get(nxt) != 1, f"import circle: {' -> '.join([*path, node, nxt])}"
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert "build" not in graph["cuda"] and "cuda" not in graph["build"]


def test_auto_runs_what_pick_chose_on_the_cpu_device(cpu_device, sim_build, tmp_path) -> None:  # noqa: ANN001
    """`auto` on the cuda engine ranks by the device's model (the CPU device is sm_90: the H100's) and runs its
    choice through the real CuPy; a sweep's row keeps the name auto and says what ran."""
    from strassenbench.model.pick import resolve

    out = tmp_path / "square.csv"
    assert main(["bench", "--engine", "cuda", "--impl", "auto,auto-3xtf32", "--sizes", "40", "--out", str(out),
                 "--build-dir", sim_build, "--strategy", "Small", "--min-time", "0", "--min-samples", "3",
                 "--precision", "1", "--warmup-time", "0", "--no-progress"]) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    assert (frame["status"] == "ok").all(), frame[["impl", "status", "message"]]
    for _, row in frame.iterrows():
        chosen, _, _ = resolve(row["impl"], 40, 40, 40, "float32", "cuda")
        assert row["message"].startswith(f"{row['impl']} chose {chosen} (H100"), row["message"]
    assert resolve("auto-3xtf32", 40, 40, 40, "float32", "cuda")[0].endswith("-3xtf32")
