"""Where a benchmark runs: ``numpy`` (host arrays, perf_counter, tracemalloc) or ``cuda`` (CuPy arrays, CUDA
events, a counting allocator). Everything device-specific the runner needs is here."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np

from .telemetry import Device, cuda_pci_bus_id, cuda_versions
from .timers import GPU_TIMING, TIMERS, HostTimer, Timer, gpu_timer

__all__ = ["Backend", "NumpyBackend", "CudaBackend", "make_backend", "OOM_ERRORS", "REF64_LIMIT", "is_oom",
           "STICKY_ERRORS", "sticky_error"]

REF64_LIMIT = 8192**3  # m n k up to this: the check's reference is float64; above: the working dtype


class Backend:
    engine = "numpy"
    xp = np
    timing = "host"  # how its samples are timed (strassenbench.bench.timers): one mode for a whole sweep

    def operands(self, m: int, n: int, k: int, dtype: str, seed: int):  # noqa: ANN201
        """A, B, C uniform in [-1, 1) from ``seed`` (never zeros)."""
        rng = np.random.default_rng(seed)
        return tuple(rng.uniform(-1.0, 1.0, s).astype(dtype) for s in ((m, k), (k, n), (m, n)))

    def reference(self, A, B, C0, alpha: float, beta: float):  # noqa: ANN001, ANN201
        """alpha A B + beta C0 by BLAS (cuBLAS for CuPy arrays), in float64 (DGEMM) when the problem is small
        enough; (result, unit roundoff)."""
        m, k = A.shape
        n = B.shape[1]
        if m * n * k <= REF64_LIMIT:
            ref = alpha * (A.astype(np.float64) @ B.astype(np.float64)) + beta * C0.astype(np.float64)
            return ref, 2.0**-53
        return alpha * (A @ B) + beta * C0, float(np.finfo(A.dtype).eps) / 2

    def max_abs(self, x) -> float:  # noqa: ANN001
        return float(abs(x).max())

    def norm(self, x) -> float:  # noqa: ANN001
        """Frobenius norm, accumulated in float64."""
        return float(self.xp.linalg.norm(x.astype(self.xp.float64).ravel()))

    def rel_error(self, C, ref) -> tuple[float, float]:  # noqa: ANN001
        """(||C - ref||_F / ||ref||_F, ||ref||_F); the absolute error when ref is zero."""
        diff = self.norm(C.astype(self.xp.float64) - ref.astype(self.xp.float64))
        norm = self.norm(ref)
        return (diff / norm if norm > 0 else diff), norm

    def timer(self, build_dir: str = "build") -> HostTimer:
        return HostTimer()

    def check_timing(self, build_dir: str = "build") -> None:
        """Whether this backend can time as it says (the GPU's blocking kernel is in the build); before a sweep."""

    def measure_extra(self, fn: Callable[[], object]) -> int:
        """Peak bytes allocated during ``fn`` beyond what existed before (tracemalloc)."""
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            fn()
            return max(0, tracemalloc.get_traced_memory()[1] - base)
        finally:
            tracemalloc.stop()

    def synchronize(self) -> None:
        pass

    def free(self) -> None:
        pass

    def sticky_error(self) -> str | None:
        """The name of the sticky error that poisoned this process's device context, or None."""
        return None

    def inject_fault(self, build_dir: str = "build") -> None:
        """Poison the device context (the test hook's ``fault``); only a GPU backend has one."""
        raise ValueError("a fault poisons a CUDA context: inject it on the cuda engine")

    def device(self) -> Device | None:
        return None

    def tags(self) -> dict[str, object]:
        return {"gpu": "cpu", "driver": "", "cuda": "", "cublas": ""}


class NumpyBackend(Backend):
    pass


class CudaBackend(Backend):  # GPU; runs in CI on the CPU device of tests/support/cudasim/
    engine = "cuda"

    def __init__(self, device_index: int = 0, timing: str = "blocking") -> None:
        import cupy

        self.timing = timing  # checked by make_backend, and by gpu_timer
        self.cupy = self.xp = cupy
        self._device = Device(pci_bus_id=cuda_pci_bus_id(device_index))  # the GPU CUDA runs on, not NVML's 0
        props = cupy.cuda.runtime.getDeviceProperties(device_index)
        self.l2_bytes = int(props["l2CacheSize"])
        name = props["name"]
        self.name = name.decode() if isinstance(name, bytes) else str(name)  # CUDA's, where NVML has none

    def operands(self, m: int, n: int, k: int, dtype: str, seed: int):  # noqa: ANN201
        rng = self.cupy.random.default_rng(seed)
        return tuple((rng.random(s, dtype=np.float64) * 2 - 1).astype(dtype) for s in ((m, k), (k, n), (m, n)))

    def timer(self, build_dir: str = "build") -> Timer:
        return gpu_timer(self.timing, self.l2_bytes, self._block_kernel(build_dir))

    def _block_kernel(self, build_dir: str):  # noqa: ANN202
        from ..fused.cuda import device_arch, function
        from ..fused.instances import BLOCK_KERNEL

        return function(build_dir, device_arch(), BLOCK_KERNEL)

    def check_timing(self, build_dir: str = "build") -> None:
        self._block_kernel(build_dir)  # CudaError naming the build to run when it is not there

    def measure_extra(self, fn: Callable[[], object]) -> int:
        """Peak device bytes requested during ``fn`` through CuPy (a counting allocator over cudaMalloc)."""
        cupy = self.cupy
        sizes: dict[int, int] = {}
        state = {"current": 0, "peak": 0}

        def malloc(size: int, device_id: int) -> int:
            ptr = cupy.cuda.runtime.malloc(size)
            sizes[ptr] = size
            state["current"] += size
            state["peak"] = max(state["peak"], state["current"])
            return ptr

        def free(ptr: int, device_id: int) -> None:
            cupy.cuda.runtime.free(ptr)
            state["current"] -= sizes.pop(ptr, 0)

        allocator = cupy.cuda.memory.PythonFunctionAllocator(malloc, free)
        self.synchronize()
        with cupy.cuda.using_allocator(allocator.malloc):
            fn()
            self.synchronize()
        return state["peak"]

    def synchronize(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()

    def mem_free(self) -> int:
        """Free device memory now (cudaMemGetInfo), CuPy's pool emptied first."""
        self.cupy.get_default_memory_pool().free_all_blocks()
        return int(self.cupy.cuda.runtime.memGetInfo()[0])

    def hold(self, nbytes: int):  # noqa: ANN201
        """An allocation of ``nbytes`` that stays until dropped (memlimit's ballast)."""
        return self.cupy.empty(nbytes, dtype=self.cupy.uint8)

    def free(self) -> None:
        self.synchronize()
        self.cupy.get_default_memory_pool().free_all_blocks()

    def sticky_error(self) -> str | None:
        """A sticky error fails every later call of the process, so waiting for the whole device says whether
        there is one."""
        try:
            self.cupy.cuda.runtime.deviceSynchronize()
        except Exception as err:  # noqa: BLE001 - only a sticky one is an answer
            return sticky_error(err)
        return None

    def inject_fault(self, build_dir: str = "build") -> None:
        """An illegal address for real: the blocking kernel launched with a null flag pointer, which it reads
        (cudaErrorIllegalAddress, 700, at the next synchronisation)."""
        kernel = self._block_kernel(build_dir)
        kernel((1,), (32,), (np.uint64(0), np.uint64(0), np.uint64(10**9)))
        self.cupy.cuda.runtime.deviceSynchronize()

    def device(self) -> Device:
        return self._device

    def tags(self) -> dict[str, object]:
        d = self._device.describe()
        v = cuda_versions()
        return {"gpu": d.get("gpu") or self.name, "driver": d.get("driver", ""), "cuda": v.get("cuda_runtime", ""),
                "cublas": v.get("cublas", "")}


def _oom_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [MemoryError]
    try:
        import cupy

        errors.append(cupy.cuda.memory.OutOfMemoryError)
    except ImportError:
        pass
    return tuple(errors)


OOM_ERRORS = _oom_errors()
# Errors that are an out-of-memory when their status says so: the CUDA runtime's cudaErrorMemoryAllocation (2),
# the driver's CUDA_ERROR_OUT_OF_MEMORY (2), cuBLAS's CUBLAS_STATUS_ALLOC_FAILED (3). By class name, so that the
# rule holds (and is tested) without CuPy.
_OOM_STATUS = {"CUDARuntimeError": 2, "CUDADriverError": 2, "CUBLASError": 3}


def is_oom(err: BaseException) -> bool:
    """Whether ``err`` means the device (or host) ran out of memory: MemoryError, CuPy's OutOfMemoryError, or a
    CUDA runtime, driver or cuBLAS error whose status is an allocation failure."""
    if isinstance(err, OOM_ERRORS) or type(err).__name__ == "OutOfMemoryError":
        return True
    code = _OOM_STATUS.get(type(err).__name__)
    return code is not None and getattr(err, "status", None) == code


# CUDA errors after which the process's context is unusable: every later call fails with them (cudaError_t;
# the CUDA runtime API's error types: "the process must be terminated and relaunched"). ECC uncorrectable,
# illegal address, launch timeout, assert, hardware stack error, illegal instruction (a trap), misaligned
# address, invalid address space, invalid PC, launch failure.
STICKY_ERRORS = {214: "cudaErrorECCUncorrectable", 700: "cudaErrorIllegalAddress", 702: "cudaErrorLaunchTimeout",
                 710: "cudaErrorAssert", 714: "cudaErrorHardwareStackError", 715: "cudaErrorIllegalInstruction",
                 716: "cudaErrorMisalignedAddress", 717: "cudaErrorInvalidAddressSpace", 718: "cudaErrorInvalidPc",
                 719: "cudaErrorLaunchFailure"}


def sticky_error(err: BaseException) -> str | None:
    """The name of a sticky CUDA error (STICKY_ERRORS) that ``err`` is, from the CUDA runtime or the driver
    (the same numbers), or None. By class name, so that the rule holds (and is tested) without CuPy."""
    if type(err).__name__ in ("CUDARuntimeError", "CUDADriverError"):
        return STICKY_ERRORS.get(getattr(err, "status", None))
    return None


def make_backend(engine: str, timing: str | None = None) -> Backend:
    """The backend of ``engine``, timing by ``timing`` (default: host on numpy, blocking on cuda)."""
    if engine == "numpy":
        if timing not in (None, *(method for method, cls in TIMERS.items() if not cls.gpu)):
            raise ValueError(f"the numpy engine times by the host's clock, not --timing {timing}")
        return NumpyBackend()
    if engine == "cuda":
        if timing not in (None, *GPU_TIMING):
            raise ValueError(f"the cuda engine times by {' or '.join(GPU_TIMING)}, not --timing {timing}")
        try:
            return CudaBackend(timing=timing or "blocking")
        except ImportError:
            raise ValueError("the cuda engine needs CuPy (pip install -e '.[gpu]')") from None
        except Exception as err:  # noqa: BLE001 - no device / driver
            from ..fused.cuda import driver_mismatch

            mismatch = driver_mismatch()  # a driver older than CuPy's CUDA is not "no GPU": say what to install
            if mismatch:
                raise ValueError(mismatch) from None
            raise ValueError(f"the cuda engine needs a visible NVIDIA GPU ({type(err).__name__}: {err})") from None
    raise ValueError(f"bench runs on numpy or cuda, not {engine} (the emulator is for correctness, not timing)")
