"""Run launches on the GPU: CuPy loads the fatbin built by `strassenbench build` (cupy.RawModule).

This is the only GPU-facing code of the fused path. Without a GPU its tests (marker ``cudasim``) run it on
strassenbench's CPU device (tests/support/cudasim/): real CuPy, its launches run by the emulator.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from .arch import BUILD_FOR_MAJOR, CudaError, build_arch
from .program import Program, TensorMapArg, map_bytes
from .modules import built_by, toolchain_for, unit_fresh, unit_of
from .toolchain import ToolchainError

__all__ = ["CudaError", "BUILD_FOR_MAJOR", "build_arch", "device_arch", "driver_mismatch", "runtime_mismatch",
           "function", "module", "on_device", "Prepared", "program_ops", "run", "clear_caches", "driver_library",
           "encode_tensor_map"]


def _cupy():  # noqa: ANN202
    try:
        import cupy
    except ImportError:
        raise CudaError("the cuda engine needs CuPy (pip install -e '.[gpu]')") from None
    return cupy


def on_device(fn, A, B, C):  # noqa: ANN001, ANN201
    """fn(A, B, C) on CuPy arrays; NumPy operands are copied to the device and C is copied back."""
    import numpy as np

    if not isinstance(C, np.ndarray):
        return fn(A, B, C)
    cupy = _cupy()
    dC = cupy.asarray(C)
    result = fn(cupy.asarray(A), cupy.asarray(B), dC)
    C[...] = cupy.asnumpy(dC)
    return result


def driver_mismatch() -> str | None:
    """Why CuPy's CUDA cannot run on this machine's driver (one line naming the fix), or None: the driver
    (NVML's CUDA version) is older than the CUDA major CuPy was built for. None without a driver."""
    from .toolchain import driver_cuda

    return runtime_mismatch(driver_cuda(), _cupy().cuda.runtime.runtimeGetVersion())


def runtime_mismatch(driver: tuple[int, int] | None, runtime: int) -> str | None:
    """runtime_mismatch((12, 4), 13020): the message for a CUDA 12.4 driver under CuPy built for CUDA 13."""
    major = runtime // 1000
    if driver is None or driver[0] >= major:
        return None
    fix = ("pip install -e '.[gpu-cu12]' (CuPy for CUDA 12), then `strassenbench build` again"
           if driver[0] == 12 else "update the NVIDIA driver (CUDA 12 or newer)")
    return f"the NVIDIA driver runs CUDA {driver[0]}.{driver[1]}, and CuPy is built for CUDA {major}: {fix}"


def device_arch() -> str:
    """The build the current GPU runs (build_arch of its compute capability)."""
    return build_arch(str(_cupy().cuda.Device().compute_capability))  # e.g. "86" -> "sm_80"


def _index(build_dir: str, arch: str) -> dict[str, str]:
    """The build's kernel index, read again when a build in this process (or another) has rewritten it."""
    path = Path(build_dir) / f"strassen_{arch}.json"
    if not path.is_file():
        raise CudaError(f"{path} not found: run `strassenbench build --arch {arch} --out {build_dir}`")
    stat = path.stat()
    return _read_index(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=None)
def _read_index(path: str, mtime_ns: int, size: int) -> dict[str, str]:  # noqa: ARG001 (the cache's key)
    return json.loads(Path(path).read_text())


@lru_cache(maxsize=None)
def _check_fresh(build_dir: str, arch: str, module_file: str) -> None:
    """A module built from other kernel sources, or by another toolchain than the one this machine's driver
    needs (its stamp; strassenbench.fused.modules.toolchain_for), is refused, naming the fix."""
    unit = unit_of(module_file)
    try:
        fresh = unit_fresh(Path(build_dir), unit, arch)
        wanted = toolchain_for(arch).name
    except ToolchainError as err:
        raise CudaError(f"cannot load {module_file}: {err}") from None
    if not fresh:
        raise CudaError(f"{Path(build_dir) / module_file} is stale: built by {built_by(Path(build_dir), unit)} from "
                        f"the kernel sources of then, and this machine builds {arch} with {wanted}: run "
                        f"`strassenbench build --arch {arch} --out {build_dir}` again")


@lru_cache(maxsize=None)
def module(build_dir: str, module_file: str):  # noqa: ANN201
    return _cupy().RawModule(path=str(Path(build_dir) / module_file))


@lru_cache(maxsize=None)
def function(build_dir: str, arch: str, kernel: str):  # noqa: ANN201
    """The kernel from the fatbin the build put it in (strassen_<arch>.json), resolved once."""
    module_file = _index(build_dir, arch).get(kernel)
    if module_file is None:
        raise CudaError(f"{kernel} was not built for {arch}: run `strassenbench build --arch {arch} "
                        f"--out {build_dir}` with its dtype, strategy and counts (--presum: the presum scheme's)")
    _check_fresh(build_dir, arch, module_file)
    return module(build_dir, module_file).get_function(kernel)


def program_ops(program: Program) -> int:
    """The operations one ``Prepared(program)`` call enqueues: its kernel launches, and on several streams also
    its event records and stream waits (strassenbench.bench.queue counts what a call queues behind the
    blocking kernel with this)."""
    launches = len(program.launches)
    if program.num_streams == 1:
        return launches
    ops, previous = 1, 1  # the start event
    for stage in program.stages:
        ops += len(stage) * (previous + 1)  # each stream waits for the stage before, then records its event
        previous = len(stage)
    return launches + ops + previous  # the origin stream waits for the last stage


# cuTensorMapEncodeTiled's enumerations (cuda.h: CUtensorMapDataType, CUtensorMapInterleave, CUtensorMapSwizzle,
# CUtensorMapL2promotion, CUtensorMapFloatOOBfill) for the Wg kernels' maps: float32, no interleave, no swizzle
# (A's and B's: the loader reads the term tiles as they land) or the 128-byte one (C's staging boxes), 128-byte
# L2 promotion, zeros outside the tensor.
TENSOR_MAP_FLOAT32, TENSOR_MAP_INTERLEAVE_NONE = 7, 0
TENSOR_MAP_SWIZZLE = {0: 0, 128: 3}  # CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_128B
TENSOR_MAP_L2_PROMOTION_128B, TENSOR_MAP_OOB_FILL_NONE = 2, 0


@lru_cache(maxsize=None)
def driver_library():  # noqa: ANN201 - a ctypes library
    """The CUDA driver's C API (libcuda.so.1), for what CuPy does not wrap: cuTensorMapEncodeTiled."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        raise CudaError(f"the CUDA driver library libcuda.so.1 does not load: {err}") from None
    c64, c32 = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    lib.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, c64, c64,
                                           c32, c32, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    return lib


def encode_tensor_map(arg: TensorMapArg):  # noqa: ANN201 - a NumPy array
    """``arg`` encoded by the driver (cuTensorMapEncodeTiled: a 2-D float32 tiled map of the whole operand, rows
    its second dimension, in its swizzle): the 128 bytes of a CUtensorMap, 64-byte aligned as the driver asks, in a
    NumPy array the launch keeps alive; zeros for an unused map. CudaError names what the driver refused."""
    import ctypes

    out = map_bytes()
    if arg.array is None:
        return out
    x = arg.array
    rows, cols = x.shape
    dims, strides = (ctypes.c_uint64 * 2)(cols, rows), (ctypes.c_uint64 * 1)(x.strides[0])
    box, steps = (ctypes.c_uint32 * 2)(*arg.box), (ctypes.c_uint32 * 2)(1, 1)
    status = driver_library().cuTensorMapEncodeTiled(
        out.ctypes.data, TENSOR_MAP_FLOAT32, 2, int(x.data.ptr), dims, strides, box, steps, TENSOR_MAP_INTERLEAVE_NONE,
        TENSOR_MAP_SWIZZLE[arg.swizzle], TENSOR_MAP_L2_PROMOTION_128B, TENSOR_MAP_OOB_FILL_NONE)
    if status != 0:
        raise CudaError(f"cuTensorMapEncodeTiled refused a map of a {rows} x {cols} operand (row stride "
                        f"{x.strides[0]} bytes, box {arg.box[0]} x {arg.box[1]}): CUresult {status}")
    return out


class Prepared:
    """``program`` ready to enqueue again and again: its kernels resolved and checked against the device's
    launch limits, their arguments marshalled and the events that order its stages made once (timing
    disabled: they only order streams), its operands owned.

    A call enqueues the program on CuPy's current stream. A program of one stream is its launches in order on
    that stream. Otherwise stage by stage, stream s of a stage on CUDA stream s, every stream of a stage waiting
    for every stream of the stage before (events), as the paper's streaming scheme does; a stage of one stream
    runs on the current stream itself. A CUDA graph captured from a call holds the raw addresses of the
    operands: ``operands`` keeps the arrays alive as long as the call is. ``ops``: what one call enqueues."""

    def __init__(self, program: Program, build_dir: str = "build", operands: tuple = ()) -> None:
        cupy = _cupy()
        arch = device_arch()
        self.program, self.operands, self.ops = program, operands, program_ops(program)
        limits = _device_limits()
        self._maps: list = []  # the encoded tensor maps the arguments point to, alive as long as this
        self._stages = [
            [[(_checked(function(build_dir, arch, launch.kernel), launch, limits), _grid(launch, limits),
               launch.block, _kernel_args(launch.args, self._maps), launch.shared) for launch in lane]
             for lane in stage]
            for stage in program.stages]
        self._single = program.num_streams == 1
        self._pool = [] if self._single else _streams(program.num_streams)
        self._start = None if self._single else cupy.cuda.Event(disable_timing=True)
        self._done = [] if self._single else \
            [[cupy.cuda.Event(disable_timing=True) for _ in stage] for stage in program.stages]

    def __call__(self) -> None:
        origin = _cupy().cuda.get_current_stream()
        if self._single:
            for stage in self._stages:
                for kernel, grid, block, args, shared in stage[0]:
                    kernel(grid, block, args, shared_mem=shared, stream=origin)
            return
        self._start.record(origin)
        previous = [self._start]
        for stage, done in zip(self._stages, self._done):
            lanes = [origin] if len(stage) == 1 else self._pool[: len(stage)]
            for lane, stream, event in zip(stage, lanes, done):
                for before in previous:
                    stream.wait_event(before)
                for kernel, grid, block, args, shared in lane:
                    kernel(grid, block, args, shared_mem=shared, stream=stream)
                event.record(stream)
            previous = done
        for event in previous:
            origin.wait_event(event)


@lru_cache(maxsize=None)
def _device_limits() -> dict[str, int]:
    """The current device's per-block limits and SMs (cudaGetDeviceProperties): threads, static shared memory,
    shared memory a kernel may opt in to (sharedMemPerBlockOptin), multiprocessors."""
    props = _cupy().cuda.runtime.getDeviceProperties(_cupy().cuda.Device().id)
    return {"threads": int(props["maxThreadsPerBlock"]), "smem": int(props["sharedMemPerBlock"]),
            "smem_optin": int(props.get("sharedMemPerBlockOptin", props["sharedMemPerBlock"])),
            "sms": int(props["multiProcessorCount"])}


def _grid(launch, limits: dict[str, int]) -> tuple[int, int, int]:  # noqa: ANN001
    """The launch's grid; a persistent launch's (the Wg kernels': grid[0] is its tiles) on at most one block per
    SM, each block running every gridDim.x-th tile."""
    if not launch.persistent:
        return launch.grid
    return (min(launch.grid[0], limits["sms"]), *launch.grid[1:])


def _checked(kernel, launch, limits: dict[str, int]):  # noqa: ANN001, ANN202
    """``kernel`` once its launch fits the device: block threads within the kernel's maximum (its
    __launch_bounds__ and the device's) and static shared memory within a block's (CUDA Programming Guide,
    "Compute Capabilities": 1,024 threads and 48 KiB of static shared memory per block). A launch past them
    fails on the GPU with cudaErrorInvalidValue or a launch error: refused here, naming the kernel."""
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    most = min(limits["threads"], int(kernel.max_threads_per_block))
    if threads > most:
        raise CudaError(f"{launch.kernel}: a block of {threads} threads, above the {most} it can launch with")
    smem = int(kernel.shared_size_bytes)
    if smem > limits["smem"]:
        raise CudaError(f"{launch.kernel}: {smem} bytes of shared memory per block, above the device's "
                        f"{limits['smem']}")
    if launch.shared:  # dynamic shared memory past 48 KiB: allowed by the kernel's attribute, up to the opt-in
        if smem + launch.shared > limits["smem_optin"]:
            raise CudaError(f"{launch.kernel}: {smem + launch.shared} bytes of shared memory per block, above the "
                            f"{limits['smem_optin']} a block of this device may take")
        kernel.max_dynamic_shared_size_bytes = launch.shared
    return kernel


def run(program: Program, build_dir: str = "build") -> None:
    """Enqueue ``program`` once (Prepared)."""
    Prepared(program, build_dir)()


def _kernel_args(args: tuple, keep: list) -> tuple:
    """CuPy's launcher takes arrays and NumPy scalars (never Python numbers: an int would go as 8 bytes, a float
    as a double); sb::Products (a NumPy structured array) goes as a CPointer to its bytes, which the driver
    copies into the kernel's parameter space at the launch (the array lives as long as the Launch); a tensor map
    (TensorMapArg) is encoded by the driver and goes the same way, its bytes kept in ``keep``."""
    import numpy as np

    from cupy.cuda.function import CPointer

    out = []
    for a in args:
        if isinstance(a, TensorMapArg):
            keep.append(encode_tensor_map(a))
            out.append(CPointer(keep[-1].ctypes.data))
        else:
            out.append(CPointer(a.ctypes.data) if isinstance(a, np.ndarray) and a.dtype.names else a)
    return tuple(out)


@lru_cache(maxsize=None)
def _streams(count: int) -> list:
    cupy = _cupy()
    return [cupy.cuda.Stream(non_blocking=True) for _ in range(count)]


def clear_caches() -> None:
    """Forget loaded modules, resolved kernels and streams (another device, another build)."""
    for cached in (_read_index, _check_fresh, module, function, _streams, _device_limits):
        cached.cache_clear()
