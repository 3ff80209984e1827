"""The CPU device behind CuPy (tests.support.cudasim): cuBLAS: CuPy's wrapper and the C API."""

from __future__ import annotations

import ctypes

import numpy as np

from .core import CUBLAS_EXECUTION_FAILED, CUBLAS_NOT_SUPPORTED, FLOP_RATE, LAUNCH_S, _Op, device
from .runtime import _Runtime


def _column_major(ptr: int, rows: int, cols: int, ld: int, dtype: np.dtype) -> np.ndarray:
    """The rows x cols column-major matrix at ``ptr`` with leading dimension ``ld``, as a writable view."""
    count = ld * (cols - 1) + rows if rows and cols else 0
    flat = np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(ptr), dtype, count) if count \
        else np.empty(0, dtype)
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (dtype.itemsize, ld * dtype.itemsize))


def _gemm_op(dtype: np.dtype, transa: int, transb: int, m: int, n: int, k: int, alpha: float, a: int, lda: int,
             b: int, ldb: int, beta: float, c: int, ldc: int, tf32: bool = False) -> _Op:
    def run() -> None:
        from strassenbench.tensorcore import matmul

        A = _column_major(a, *((m, k) if transa == 0 else (k, m)), lda, dtype)
        B = _column_major(b, *((k, n) if transb == 0 else (n, k)), ldb, dtype)
        C = _column_major(c, m, n, ldc, dtype)
        A, B = (A if transa == 0 else A.T), (B if transb == 0 else B.T)
        product = dtype.type(alpha) * (matmul(A, B, "1xtf32") if tf32 else A @ B)
        C[...] = product if beta == 0 else product + dtype.type(beta) * C

    label = "cublas gemmex tf32" if tf32 else f"cublas {'s' if dtype == np.float32 else 'd'}gemm"
    return _Op(run, LAUNCH_S + 2.0 * m * n * k / FLOP_RATE, label)


class CublasWrapper:
    """cupy_backends.cuda.libs.cublas: CuPy's Cython wrapper. Every call first sets the handle's stream, and
    ``setStream`` refuses a capturing stream, as CuPy 14 does."""

    CUBLAS_OP_N, CUBLAS_OP_T = 0, 1

    @staticmethod
    def getVersion(handle: int) -> int:
        return 130100

    @staticmethod
    def setStream(handle: int, stream: int) -> None:
        if _Runtime.streamIsCapturing(stream):
            raise NotImplementedError("calling cuBLAS API during stream capture is currently unsupported")
        device().cublas_stream[handle] = stream
        device().cublas_workspace.pop(handle, None)  # cublasSetStream resets the workspace to cuBLAS's pool

    @classmethod
    def _gemm(cls, dtype: np.dtype, handle: int, transa: int, transb: int, m: int, n: int, k: int, alpha: int,
              A: int, lda: int, B: int, ldb: int, beta: int, C: int, ldc: int) -> None:
        device().alive()
        cls.setStream(handle, device().current[-1].ptr)
        ctype = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        op = _gemm_op(dtype, transa, transb, m, n, k, ctype.from_address(alpha).value, A, lda, B, ldb,
                      ctype.from_address(beta).value, C, ldc)
        dev = device()
        dev.enqueue(dev.streams.get(dev.cublas_stream[handle], dev.null), op)

    @classmethod
    def sgemm(cls, handle: int, *args: int) -> None:
        cls._gemm(np.dtype(np.float32), handle, *args)

    @classmethod
    def dgemm(cls, handle: int, *args: int) -> None:
        cls._gemm(np.dtype(np.float64), handle, *args)


class _CFunction:
    """A C entry point as ctypes shows it: argtypes/restype to set, arguments converted by them."""

    def __init__(self, name: str, impl) -> None:  # noqa: ANN001
        self.__name__, self._impl = name, impl
        self.argtypes: list | None = None
        self.restype = ctypes.c_int

    def __call__(self, *args: object) -> int:
        if self.argtypes is None or len(args) != len(self.argtypes):
            raise TypeError(f"{self.__name__}: declare its argtypes ({len(args)} arguments given)")
        values = []
        for arg, ctype in zip(args, self.argtypes):
            converted = arg if isinstance(arg, ctype) else ctype(arg)
            values.append(converted.value)
        return self._impl(*values)


class CublasLibrary:
    """libcublas's C API (what reference.array_ops loads with ctypes): v2 entry points on CuPy's handle. The
    stream set by cublasSetStream_v2 may be capturing: the GEMM is then captured like any kernel."""

    def __init__(self) -> None:
        for name in ("cublasSetStream_v2", "cublasSetWorkspace_v2", "cublasSgemm_v2", "cublasDgemm_v2",
                     "cublasSetMathMode", "cublasGemmEx"):
            setattr(self, name, _CFunction(name, getattr(self, "_" + name)))

    @staticmethod
    def _cublasSetStream_v2(handle: int, stream: int | None) -> int:
        dev = device()
        if dev.sticky is not None:
            return CUBLAS_EXECUTION_FAILED
        if (stream or 0) not in dev.streams:
            return 7  # CUBLAS_STATUS_INVALID_VALUE
        dev.cublas_stream[handle] = stream or 0
        dev.cublas_workspace.pop(handle, None)  # "resets the workspace to the default workspace pool"
        return 0

    @staticmethod
    def _cublasSetWorkspace_v2(handle: int, workspace: int | None, size: int) -> int:
        if device().sticky is not None:
            return CUBLAS_EXECUTION_FAILED
        device().cublas_workspace[handle] = (workspace or 0, size)
        return 0

    @staticmethod
    def _refused(handle: int) -> int:
        """The status a GEMM gets before it is enqueued: not initialised, a poisoned context, or a capture
        without a user workspace (which would allocate from cuBLAS's pool inside the graph); 0 when it runs."""
        dev = device()
        if handle != dev.cublas_handle:
            return 1  # CUBLAS_STATUS_NOT_INITIALIZED
        if dev.sticky is not None:
            return CUBLAS_EXECUTION_FAILED
        stream = dev.streams[dev.cublas_stream.get(handle, 0)]
        if stream.capture is not None and handle not in dev.cublas_workspace:
            return CUBLAS_NOT_SUPPORTED
        return 0

    @staticmethod
    def _gemm(dtype: np.dtype, ctype: type, handle: int, transa: int, transb: int, m: int, n: int, k: int,
              alpha: int, A: int, lda: int, B: int, ldb: int, beta: int, C: int, ldc: int) -> int:
        dev = device()
        refused = CublasLibrary._refused(handle)
        if refused:
            return refused
        op = _gemm_op(dtype, transa, transb, m, n, k, ctype.from_address(alpha).value, A, lda, B, ldb,
                      ctype.from_address(beta).value, C, ldc)
        dev.enqueue(dev.streams[dev.cublas_stream.get(handle, 0)], op)
        return 0

    @staticmethod
    def _cublasSetMathMode(handle: int, mode: int) -> int:
        if device().sticky is not None:
            return CUBLAS_EXECUTION_FAILED
        device().cublas_math[handle] = mode
        return 0

    @staticmethod
    def _cublasGemmEx(handle: int, transa: int, transb: int, m: int, n: int, k: int, alpha: int, A: int, atype: int,
                      lda: int, B: int, btype: int, ldb: int, beta: int, C: int, ctype: int, ldc: int, compute: int,
                      algo: int) -> int:
        """Float32 operands (CUDA_R_32F) with CUBLAS_COMPUTE_32F_FAST_TF32 only: the TF32 product of
        strassenbench.tensorcore."""
        dev = device()
        refused = CublasLibrary._refused(handle)
        if refused:
            return refused
        if (atype, btype, ctype, compute) != (0, 0, 0, 77):
            return 15  # CUBLAS_STATUS_NOT_SUPPORTED
        f32 = np.dtype(np.float32)
        op = _gemm_op(f32, transa, transb, m, n, k, ctypes.c_float.from_address(alpha).value, A, lda, B, ldb,
                      ctypes.c_float.from_address(beta).value, C, ldc, tf32=True)
        dev.enqueue(dev.streams[dev.cublas_stream.get(handle, 0)], op)
        return 0

    def _cublasSgemm_v2(self, *args: int) -> int:
        return self._gemm(np.dtype(np.float32), ctypes.c_float, *args)

    def _cublasDgemm_v2(self, *args: int) -> int:
        return self._gemm(np.dtype(np.float64), ctypes.c_double, *args)
