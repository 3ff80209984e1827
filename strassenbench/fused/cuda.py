"""Run launches on the GPU: CuPy loads the fatbin built by `strassenbench build` (cupy.RawModule).

This is the only GPU-facing code of the fused path; its tests are marked ``gpu``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from .launch import Program

__all__ = ["CudaError", "BUILD_FOR_MAJOR", "build_arch", "device_arch", "driver_mismatch", "runtime_mismatch",
           "function", "module", "on_device", "run"]


class CudaError(RuntimeError):
    """No usable GPU, CuPy, or module."""


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


# The builds a GPU runs, by compute-capability major: machine code is compatible within a major for equal or
# higher minors (sm_86 and sm_89 run sm_80 code, sm_75 runs sm_70 code). A newer major (sm_100, sm_120) runs
# the newest build's PTX, which the driver compiles when the module loads (every fatbin carries it).
BUILD_FOR_MAJOR = {7: "sm_70", 8: "sm_80", 9: "sm_90"}


def build_arch(compute_capability: str) -> str:
    """The build a GPU of ``compute_capability`` ("86", "90", "100", as CuPy reports it) runs: its major's
    machine code, or for a major newer than every build the newest build's PTX."""
    try:
        major = int(compute_capability[:-1])
    except ValueError:
        raise CudaError(f"unrecognised compute capability {compute_capability!r}") from None
    if major < min(BUILD_FOR_MAJOR):
        raise CudaError(f"compute capability {compute_capability[:-1]}.{compute_capability[-1]} is older than "
                        f"every build (the oldest is {BUILD_FOR_MAJOR[min(BUILD_FOR_MAJOR)]}, V100)")
    return BUILD_FOR_MAJOR.get(major, BUILD_FOR_MAJOR[max(BUILD_FOR_MAJOR)])


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


@lru_cache(maxsize=None)
def _index(build_dir: str, arch: str) -> dict[str, str]:
    path = Path(build_dir) / f"strassen_{arch}.json"
    if not path.is_file():
        raise CudaError(f"{path} not found: run `strassenbench build --arch {arch} --out {build_dir}`")
    return json.loads(path.read_text())


@lru_cache(maxsize=None)
def _check_fresh(build_dir: str, arch: str, module_file: str) -> None:
    """A module built from other kernel sources, or by another toolchain than the one this machine's driver
    needs (its stamp; strassenbench.fused.build.toolchain_for), is refused, naming the fix."""
    from .build import built_by, toolchain_for, unit_fresh
    from .toolchain import ToolchainError

    unit = module_file.removesuffix(".fatbin").removesuffix("_uncapped")
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
                        f"--out {build_dir}` with its dtype, strategy and counts")
    _check_fresh(build_dir, arch, module_file)
    return module(build_dir, module_file).get_function(kernel)


def run(program: Program, build_dir: str = "build") -> None:
    """Enqueue ``program``: stage by stage, stream s of a stage on CUDA stream s, every stream of a stage
    waiting for every stream of the stage before (events), as the paper's streaming scheme does."""
    cupy = _cupy()
    arch = device_arch()
    origin = cupy.cuda.get_current_stream()
    pool = _streams(program.num_streams)
    previous = [origin.record()]
    for stage in program.stages:
        lanes = [origin] if len(stage) == 1 else pool[: len(stage)]
        for lane, stream in zip(stage, lanes):
            for event in previous:
                stream.wait_event(event)
            with stream:  # RawKernel launches on the current stream
                for launch in lane:
                    function(build_dir, arch, launch.kernel)(launch.grid, launch.block, _kernel_args(launch.args))
        previous = [stream.record() for stream in lanes]
    for event in previous:
        origin.wait_event(event)


def _kernel_args(args: tuple) -> tuple:
    """CuPy's launcher takes arrays and NumPy scalars; sb::Products (a NumPy structured array) goes as a
    CPointer to its bytes, which the driver copies into the kernel's parameter space at the launch."""
    import numpy as np

    from cupy.cuda.function import CPointer

    return tuple(CPointer(a.ctypes.data) if isinstance(a, np.ndarray) and a.dtype.names else a for a in args)


@lru_cache(maxsize=None)
def _streams(count: int) -> list:
    cupy = _cupy()
    return [cupy.cuda.Stream(non_blocking=True) for _ in range(count)]
