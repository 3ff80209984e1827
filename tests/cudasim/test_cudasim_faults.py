"""What the first GPU run meets that a CPU cannot show by itself, shown by the CPU device (tests/support/cudasim/): a
poisoned context, the queue behind a spinning kernel, waits that cover only their own work, cuBLAS's workspace
after setStream, launch limits; and the GPU path's answers to each (fault rows, the queue count, joins, the
workspace set again, checked launches). The cuda engine's own code runs here, on real CuPy."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support import cudasim
from strassenbench.cli import main
from strassenbench.impls import get_impl

pytestmark = pytest.mark.cudasim

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--min-time", "0", "--min-samples", "3", "--precision", "1", "--warmup-time", "0", "--no-progress"]


def _operands(shape: tuple[int, int, int] = (40, 40, 40), dtype: str = "float32"):  # noqa: ANN202
    m, k, n = shape
    rng = np.random.default_rng(0)
    return tuple(rng.integers(-4, 5, s).astype(dtype) for s in ((m, k), (k, n), (m, n)))


def test_a_poisoned_point_is_a_fault_and_the_others_are_measured(cpu_device, sim_build, tmp_path,  # noqa: ANN001
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """impl:m:n:k:fault launches the blocking kernel with a null flag: an illegal address that poisons the
    worker's context. That point is a fault row naming cudaErrorIllegalAddress; the others, before and after
    it and of the other implementation in the same process, are ok."""
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", "strassen1:48:48:48:fault")
    out = tmp_path / "square.csv"
    assert main(["bench", "--engine", "cuda", "--impl", "strassen1-ref,strassen1", "--sizes", "40,48,56", "--out",
                 str(out), "--build-dir", sim_build, "--strategy", "Small", *FAST]) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    bad = frame[frame["status"] != "ok"]
    assert list(zip(bad["impl"], bad["m"], bad["status"])) == [("strassen1", 48, "fault")], frame[["impl", "status"]]
    assert bad["message"].iloc[0].startswith("cudaErrorIllegalAddress") and len(frame) == 6
    assert set(frame["timing"]) - {""} == {"blocking"}  # 25 and 7 operations per call: both fit


def test_every_call_into_a_poisoned_context_fails(cpu_device) -> None:  # noqa: ANN001
    import cupy
    from cupy_backends.cuda.api.runtime import CUDARuntimeError

    device = cpu_device.device
    stream, event = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Event()
    device.poison(cudasim.ERR_ILLEGAL_ADDRESS, "planted")
    for call in (lambda: cupy.cuda.runtime.deviceSynchronize(), lambda: cupy.cuda.runtime.malloc(16),
                 lambda: cupy.cuda.runtime.memGetInfo(), lambda: cupy.cuda.Stream(), lambda: cupy.cuda.Event(),
                 stream.synchronize, lambda: event.record(stream), lambda: cupy.empty(4, np.float32)):
        with pytest.raises(CUDARuntimeError) as caught:
            call()
        assert caught.value.status == 700
    library = cudasim.CublasLibrary()
    assert library._cublasSetStream_v2(device.cublas_handle, 0) == cudasim.CUBLAS_EXECUTION_FAILED


def test_a_misaligned_access_poisons_the_context(cpu_device, sim_build,  # noqa: ANN001
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A vector kernel whose loads are made off their alignment (the loader's row offset planted one element
    off) faults as on a GPU: cudaErrorMisalignedAddress, the kernel's name and the address in the device's
    record, and the context is unusable after."""
    from cupy_backends.cuda.api.runtime import CUDARuntimeError

    from strassenbench.fused import emu

    original = emu.take_fault
    monkeypatch.setattr(emu, "take_fault", lambda kernel: original(kernel) or
                        (f"misaligned 16-byte global load at 0x1004 in {kernel}" if kernel.startswith("strassen_")
                         else None))
    A, B, C = _operands()
    with pytest.raises(CUDARuntimeError) as caught:
        get_impl("gemm")(A, B, C, 1.0, 0.0, engine="cuda", build_dir=sim_build, strategy="Small")
    assert caught.value.status == cudasim.ERR_MISALIGNED_ADDRESS
    assert "0x1004 in strassen_f32_small" in cpu_device.device.fault


def test_an_access_outside_every_allocation_poisons_the_context(cpu_device, sim_build) -> None:  # noqa: ANN001
    """A kernel that reads past its allocation (B's recorded one row short on the device: the kernel's last
    loads of B fall outside every allocation) faults as on a GPU: cudaErrorIllegalAddress, the kernel's name and
    the access in the device's record, and the context is unusable after."""
    import cupy
    from cupy_backends.cuda.api.runtime import CUDARuntimeError

    from strassenbench.fused import emu

    A, B, C = (cupy.asarray(x) for x in _operands((64, 64, 64)))
    device = cpu_device.device
    host = device.pooled[B.data.ptr]
    device.pooled[B.data.ptr] = host[:host.nbytes - B.strides[0]]
    with pytest.raises(CUDARuntimeError) as caught:
        get_impl("gemm")(A, B, C, 1.0, 0.0, engine="cuda", build_dir=sim_build, strategy="Small")
        cupy.cuda.runtime.deviceSynchronize()
    assert caught.value.status == cudasim.ERR_ILLEGAL_ADDRESS
    assert device.fault.startswith("out-of-bounds") and "global load" in device.fault, device.fault
    assert "in strassen_f32_small_w1x1x1" in device.fault
    assert emu.bounds_count() == 0  # the device's allocations bound its launches only
    with pytest.raises(CUDARuntimeError):
        cupy.cuda.runtime.deviceSynchronize()


def test_queue_counts_are_what_the_device_sees(cpu_device, sim_build) -> None:  # noqa: ANN001
    """strassenbench.bench.queue counts without a device; each call's enqueued operations, as the CPU device
    counts them, are that number, for every kind of implementation, even and odd shapes, every scheme."""
    import cupy

    from strassenbench.bench.queue import call_ops

    device = cpu_device.device
    cases = [("cublas", None, None), ("gemm", "Small", None), ("strassen1", "Small", "sequential"),
             ("strassen1", "Small", "streams"), ("strassen1", "Small", "atomic"),
             ("strassen2-direct", "Small", "streams"), ("strassen1-ref", None, None), ("strassen2-ref", None, None),
             ("strassen2-hybrid", "Small", "atomic"), ("strassen1-tf32", "TcSmall", "sequential")]
    for shape in ((40, 40, 40), (37, 29, 41)):
        A, B, C = (cupy.asarray(x) for x in _operands(shape))
        m, k, n = shape
        for impl, strategy, scheme in cases:
            options = {k: v for k, v in (("strategy", strategy), ("scheme", scheme)) if v}
            call = get_impl(impl).prepare(A, B, C, 1.0, 1.0, engine="cuda", build_dir=sim_build, **options)
            call()  # first call: the hybrid prepares its leaves
            cupy.cuda.runtime.deviceSynchronize()
            before = next(device._seq)
            call()
            enqueued = next(device._seq) - before - 1
            cupy.cuda.runtime.deviceSynchronize()
            assert enqueued == call_ops(impl, m, n, k, "float32", strategy, scheme), (impl, scheme, shape)


def test_the_queue_behind_a_spinning_kernel_is_bounded(cpu_device, sim_build) -> None:  # noqa: ANN001
    """A call of 49 launches behind the blocking kernel fills the device's queue: the enqueue waits until the
    spin times out, and that sample is discarded; 7 launches fit and never time out."""
    import cupy

    from strassenbench.bench.timers import BlockingTimer, Criterion, TimingError, sample
    from strassenbench.fused.cuda import device_arch, function
    from strassenbench.fused.instances import BLOCK_KERNEL

    A, B, C = (cupy.asarray(x) for x in _operands((32, 32, 32)))
    # Two samples each, bounded by max_samples: a max_time that a loaded machine could reach first would end the
    # 49-launch call after one sample.
    criterion = Criterion(min_samples=2, min_time=0.0, precision=1.0, max_time=600.0, max_samples=2, warmup=1,
                          warmup_time=0.0)
    block = function(sim_build, device_arch(), BLOCK_KERNEL)
    for impl, full in (("strassen1", False), ("strassen2-direct", True)):
        call = get_impl(impl).prepare(A, B, C, 1.0, 1.0, engine="cuda", build_dir=sim_build, strategy="Small",
                                      scheme="sequential")
        timer = BlockingTimer(1 << 20, block, timeout_s=0.05)
        before = cpu_device.device.queue_full
        if full:
            with pytest.raises(TimingError, match="every sample .* blocking kernel's timeout"):
                sample(call, timer, criterion)
            assert cpu_device.device.queue_full > before and timer.timeouts == 2
        else:
            assert sample(call, timer, criterion).timeouts == 0 and cpu_device.device.queue_full == before


def test_a_wait_covers_only_its_own_work(cpu_device) -> None:  # noqa: ANN001
    """A non-blocking stream's work runs when that stream (or an event after it) is waited for, not when the
    default stream is: without a join, a read on the default stream does not see it."""
    import cupy

    device = cpu_device.device
    side = cupy.cuda.Stream(non_blocking=True)
    x = cupy.asarray(np.zeros(4, np.float32))
    with side:
        x.fill(1.0)
    assert cupy.asnumpy(x).sum() == 0 and len(device.pending) == 1  # not covered: still queued
    done = cupy.cuda.Event()
    with side:
        done.record(side)
    done.synchronize()
    assert cupy.asnumpy(x).sum() == 4 and not device.pending


def test_a_dropped_join_of_the_pool_streams_is_caught(cpu_device, sim_build,  # noqa: ANN001
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The cuda runner's final join (the current stream waits for the last stage's streams) dropped: the
    result is read before the pool streams ran, and C is wrong."""
    from strassenbench.fused import cuda

    A, B, C = _operands((37, 29, 41))
    original = cudasim.Stream.wait_event
    call = cuda.Prepared.__call__

    def no_join(self) -> None:  # noqa: ANN001
        origin = cudasim.device().current[-1]
        monkeypatch.setattr(cudasim.Stream, "wait_event",
                            lambda s, e: None if s is origin and not s.capture else original(s, e))
        try:
            call(self)
        finally:
            monkeypatch.setattr(cudasim.Stream, "wait_event", original)

    got = C.copy()
    get_impl("strassen1")(A, B, got, 1.0, 0.5, engine="cuda", build_dir=sim_build, strategy="Small", scheme="atomic")
    assert np.array_equal(got, 1.0 * (A.astype(np.float64) @ B) + 0.5 * C)  # with the join
    monkeypatch.setattr(cuda.Prepared, "__call__", no_join)
    got = C.copy()
    get_impl("strassen1")(A, B, got, 1.0, 0.5, engine="cuda", build_dir=sim_build, strategy="Small", scheme="atomic")
    assert not np.array_equal(got, 1.0 * (A.astype(np.float64) @ B) + 0.5 * C)


def test_cublas_set_stream_resets_the_workspace(cpu_device, sim_build, tmp_path,  # noqa: ANN001
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """cublasSetStream resets the workspace (cuBLAS documentation); a captured GEMM without one is refused.
    The reference sets it again after every setStream, so graph timing captures it; with that line dropped,
    every reference point of a graph sweep fails."""
    from strassenbench.reference import array_ops

    device = cpu_device.device
    library = cudasim.CublasLibrary()
    library._cublasSetWorkspace_v2(device.cublas_handle, 0x1000, 64)
    assert library._cublasSetStream_v2(device.cublas_handle, 0) == 0 and device.cublas_handle not in \
        device.cublas_workspace
    argv = ["bench", "--engine", "cuda", "--impl", "strassen1-ref", "--sizes", "32", "--build-dir", sim_build,
            "--timing", "graph", *FAST]
    assert main([*argv, "--out", str(tmp_path / "good.csv")]) == 0
    assert (pd.read_csv(tmp_path / "good.csv", keep_default_na=False)["status"] == "ok").all()
    checked = array_ops.Cublas._check

    def without_workspace(self, name: str, *args: object) -> None:  # noqa: ANN001
        if name != "cublasSetWorkspace_v2" or not device.cublas_stream:
            checked(self, name, *args)

    monkeypatch.setattr(array_ops.Cublas, "_check", without_workspace)
    array_ops.clear_caches()
    assert main([*argv, "--out", str(tmp_path / "bad.csv")]) == 0
    bad = pd.read_csv(tmp_path / "bad.csv", keep_default_na=False)
    assert (bad["status"] == "error").all() and "status 15" in bad["message"].iloc[0]


def test_launch_limits_are_the_drivers(cpu_device, sim_build) -> None:  # noqa: ANN001
    """A grid past 65,535 in y, a block past the kernel's .maxntid, and the kernel's attributes (threads and
    static shared memory) read from its PTX and machine code."""
    import cupy
    from cupy_backends.cuda.api.driver import CUDADriverError

    from strassenbench.fused import cuda
    from strassenbench.fused.cuda import device_arch

    kernel = cuda.function(sim_build, device_arch(), "scale_f32")
    C = cupy.asarray(np.ones((4, 4), np.float32))
    args = (C, np.int32(4), np.int32(4), np.int32(4), np.float32(3))
    for grid, block in (((1, 65536, 1), (256,)), ((2**31, 1, 1), (256,)), ((1,), (512,)), ((1,), (1, 1, 65))):
        with pytest.raises(CUDADriverError):
            kernel(grid, block, args)
    kernel((1, 65535, 1), (256,), args)
    small = cuda.function(sim_build, device_arch(), "strassen_f32_small_w1x1x1_plain")
    assert kernel.max_threads_per_block == 256 and small.max_threads_per_block == 64
    assert small.shared_size_bytes > 0 and kernel.shared_size_bytes == 0


def test_prepared_refuses_a_block_its_device_cannot_launch(cpu_device, sim_build,  # noqa: ANN001
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner checks each kernel's block and static shared memory against the device before any launch."""
    from strassenbench.fused import cuda
    from strassenbench.fused.arch import CudaError

    A, B, C = _operands()
    for limits, message in (({"threads": 1024, "smem": 1024}, "bytes of shared memory per block, above the "
                                                               "device's 1024"),
                            ({"threads": 32, "smem": 49152}, "a block of 64 threads, above the 32")):
        monkeypatch.setattr(cuda, "_device_limits", lru_cache()(lambda limits=limits: limits))  # cleared after
        launched = len(cpu_device.device.launches)
        with pytest.raises(CudaError, match=message):
            get_impl("gemm")(A, B, C, 1.0, 0.0, engine="cuda", build_dir=sim_build, strategy="Small")
        assert len(cpu_device.device.launches) == launched


def test_any_command_runs_on_a_cpu_device_from_a_shell(sim_build, tmp_path) -> None:  # noqa: ANN001
    """`python -m tests.support.cudasim [--inject ...] strassenbench bench --engine cuda ...`: the whole GPU path by
    hand, its workers included; the injected fault is one fault row, and auto timing chose one method."""
    out = tmp_path / "square.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.cudasim", "--inject", "strassen1:40:40:40:fault", "strassenbench", "bench",
         "--engine", "cuda", "--impl", "strassen2-ref,strassen1", "--sizes", "32,40", "--strategy", "Small",
         "--build-dir", sim_build, "--out", str(out), *FAST], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = pd.read_csv(out, keep_default_na=False)
    assert list(frame.loc[frame["status"] != "ok", "impl"]) == ["strassen1"] and len(frame) == 4
    assert set(frame.loc[frame["status"] == "ok", "timing"]) == {"graph"} and "timing by graph" in proc.stderr
    assert (pd.to_numeric(frame.loc[frame["status"] == "ok", "blocking_timeouts"]) == 0).all()


@pytest.mark.parametrize("command", [["verify", "--m", "8", "--n", "8", "--k", "8", "--impl", "cutlass"],
                                     ["accuracy", "--sizes", "8", "--impl", "cutlass", "--out", "{out}"]])
def test_a_cutlass_failure_is_one_line(cpu_device, monkeypatch, tmp_path, capsys, command) -> None:  # noqa: ANN001
    """A CUTLASS status other than success stops verify and accuracy in one line (CudaError), writing nothing;
    a bench records it as the point's error (any exception of a point is its row)."""
    from strassenbench.cli import main
    from strassenbench.fused import cutlass

    monkeypatch.setattr(cutlass, "_entry", lambda *_: lambda *_args: 7)
    argv = [a.replace("{out}", str(tmp_path / "a.csv")) for a in command]
    assert main([*argv, "--engine", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert "CUTLASS returned status 7 for 8x8x8" in err and len(err.splitlines()) == 1, err
    assert not any(tmp_path.iterdir())
