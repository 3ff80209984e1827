"""What the reference needs from an array module, for NumPy (CPU) and CuPy/cuBLAS (GPU).

Every operation works on views with any leading dimension and writes in place; no operation allocates
device memory (the CPU one allocates a host temporary for an accumulating GEMM, which NumPy cannot do in
place; on the GPU cuBLAS gets one fixed workspace when the operations are first made, Cublas). Operand sums
are one fused elementwise kernel on the GPU (cupy.ElementwiseKernel), not chains of temporaries.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np

from strassenbench.gemm import axpy

__all__ = ["NumpyOps", "CupyOps", "Cublas", "cublas_library", "clear_caches", "ops_for"]


def _clip(out, term):  # noqa: ANN001, ANN202
    """The part of ``out`` that ``term`` covers (terms past an edge are zero-padded virtually)."""
    r, c = term.shape
    return out[:r, :c]


class NumpyOps:
    name = "numpy"
    xp = np

    def zeros(self, size: int, dtype: np.dtype):  # noqa: ANN201
        return np.zeros(size, dtype=dtype)

    def fill_zero(self, out) -> None:  # noqa: ANN001
        out.fill(0)

    def scale(self, out, s: float) -> None:  # noqa: ANN001
        if s == 0:
            out.fill(0)
        elif s != 1:
            out *= out.dtype.type(s)

    def axpy(self, out, x, a: float) -> None:  # noqa: ANN001
        """out[:r, :c] += a x for x of shape r x c."""
        axpy(_clip(out, x), x, a)

    def sum2(self, out, x, a: float, y, b: float) -> None:  # noqa: ANN001
        """out = a x + b y (zeros where neither covers); x, y do not alias out."""
        if x.shape == y.shape == out.shape and a == 1 and b in (1, -1):
            (np.add if b == 1 else np.subtract)(x, y, out=out)
            return
        out.fill(0)
        self.axpy(out, x, a)
        self.axpy(out, y, b)

    def gemm(self, out, a, b, alpha: float, beta: float, compute: str = "fp32") -> None:  # noqa: ANN001
        """out = alpha a b + beta out, shapes conforming. ``compute`` "tf32": the product as cuBLAS's
        CUBLAS_COMPUTE_32F_FAST_TF32 forms it (operands rounded to TF32 once, strassenbench.tensorcore)."""
        if compute == "tf32":
            from strassenbench.tensorcore import matmul

            product = matmul(a, b, "1xtf32")
            if beta == 0:
                out[...] = out.dtype.type(alpha) * product
                return
            self.scale(out, beta)
            self.axpy(out, product, alpha)
            return
        if beta == 0:
            np.matmul(a, b, out=out)
            if alpha != 1:
                out *= out.dtype.type(alpha)
            return
        product = a @ b  # host temporary: NumPy has no accumulating GEMM
        self.scale(out, beta)
        self.axpy(out, product, alpha)


class CupyOps(NumpyOps):
    """cuBLAS GEMM (its C API, which a CUDA graph can capture: Cublas) on strided views (row-major as
    C^T = B^T A^T in column-major) and fused elementwise sums."""

    name = "cupy"

    def __init__(self) -> None:
        import cupy

        self.xp = cupy
        self._axpy = cupy.ElementwiseKernel("T x, T a", "T y", "y += a * x", "sb_axpy")
        self._sum2 = cupy.ElementwiseKernel("T x, T y, T a, T b", "T z", "z = a * x + b * y", "sb_sum2")
        self._cublas = Cublas(cupy)

    def zeros(self, size: int, dtype: np.dtype):  # noqa: ANN201
        return self.xp.zeros(size, dtype=dtype)

    def axpy(self, out, x, a: float) -> None:  # noqa: ANN001
        self._axpy(x, out.dtype.type(a), _clip(out, x))

    def _stream(self) -> int:
        """The stream cuBLAS runs on: CuPy's current one."""
        return self.xp.cuda.get_current_stream().ptr

    def sum2(self, out, x, a: float, y, b: float) -> None:  # noqa: ANN001
        if x.shape == y.shape == out.shape:
            self._sum2(x, y, out.dtype.type(a), out.dtype.type(b), out)
            return
        self.fill_zero(out)
        self.axpy(out, x, a)
        self.axpy(out, y, b)

    def gemm(self, out, a, b, alpha: float, beta: float, compute: str = "fp32") -> None:  # noqa: ANN001
        m, k = a.shape
        n = b.shape[1]
        if m == 0 or n == 0:
            return
        if k == 0:
            self.scale(out, beta)
            return
        item = out.dtype.itemsize
        for name, x in (("A", a), ("B", b), ("C", out)):
            if x.strides[1] != item:
                raise ValueError(f"{name} must have unit column stride for cuBLAS")
        ld = lambda x: max(1, x.strides[0] // item)  # noqa: E731
        # Row-major C (m x n) = A B  <=>  column-major C^T (n x m) = B^T A^T.
        self._cublas.gemm(out.dtype, self._stream(), n, m, k, alpha, b.data.ptr, ld(b),
                          a.data.ptr, ld(a), beta, out.data.ptr, ld(out), compute)


class Cublas:
    """cuBLAS through its C API: ctypes on the libcublas that CuPy loaded, on CuPy's handle.

    CuPy's own wrappers refuse every call while a stream is capturing (its ``setStream`` raises, CuPy issue
    6290), so a CUDA graph could not hold a cuBLAS call made through them. The C API can be captured when the
    handle has a fixed workspace (cublasSetWorkspace_v2, allocated once here, outside any capture, and set again
    after every cublasSetStream, which resets it: cuBLAS then never allocates during a call). Scalars are host pointers (the default pointer mode), read when the call is made.

    The handle's math mode is set to CUBLAS_DEFAULT_MATH once (whatever CUPY_TF32 asked for): cublasSgemm then
    computes in FP32 on every GPU; compute "tf32" calls cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32."""

    WORKSPACE_BYTES = 32 << 20  # what cuBLAS asks for on Hopper (4 MiB suffices on older GPUs)
    # cublas_api.h and library_types.h: CUBLAS_DEFAULT_MATH, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32,
    # CUBLAS_GEMM_DEFAULT.
    DEFAULT_MATH, R_32F, COMPUTE_32F_FAST_TF32, GEMM_DEFAULT = 0, 0, 77, -1
    _INT, _PTR = ctypes.c_int, ctypes.c_void_p

    def __init__(self, xp) -> None:  # noqa: ANN001 - the cupy module
        self.handle = xp.cuda.device.get_cublas_handle()  # loads libcublas
        self.lib = cublas_library()
        self.workspace = xp.empty(self.WORKSPACE_BYTES, dtype=np.uint8)
        self.lib.cublasSetStream_v2.argtypes = [self._PTR, self._PTR]
        self.lib.cublasSetWorkspace_v2.argtypes = [self._PTR, self._PTR, ctypes.c_size_t]
        gemm = [self._PTR, self._INT, self._INT, self._INT, self._INT, self._INT, self._PTR, self._PTR, self._INT,
                self._PTR, self._INT, self._PTR, self._PTR, self._INT]
        for name in ("cublasSgemm_v2", "cublasDgemm_v2"):
            getattr(self.lib, name).argtypes = gemm
        self.lib.cublasSetMathMode.argtypes = [self._PTR, self._INT]
        self.lib.cublasGemmEx.argtypes = [self._PTR, self._INT, self._INT, self._INT, self._INT, self._INT, self._PTR,
                                          self._PTR, self._INT, self._INT, self._PTR, self._INT, self._INT, self._PTR,
                                          self._PTR, self._INT, self._INT, self._INT, self._INT]
        self._check("cublasSetWorkspace_v2", self.handle, self.workspace.data.ptr, self.WORKSPACE_BYTES)
        self._check("cublasSetMathMode", self.handle, self.DEFAULT_MATH)

    def _check(self, name: str, *args: object) -> None:
        status = getattr(self.lib, name)(*args)
        if status != 0:
            raise RuntimeError(f"{name} returned cuBLAS status {status}")

    def gemm(self, dtype: np.dtype, stream: int, m: int, n: int, k: int, alpha: float, a: int, lda: int, b: int,
             ldb: int, beta: float, c: int, ldc: int, compute: str = "fp32") -> None:
        """Column-major C (m x n) = alpha A B + beta C on ``stream`` (no transposes), float32 or float64;
        ``compute`` "tf32": float32 on the tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)."""
        scalars = np.array([alpha, beta], dtype=dtype)
        op = 0  # CUBLAS_OP_N
        self._check("cublasSetStream_v2", self.handle, stream)
        # cublasSetStream resets the handle's workspace to cuBLAS's own pool (cuBLAS documentation, as PyTorch
        # does after every setStream): set ours again, or a captured GEMM would allocate inside the graph.
        self._check("cublasSetWorkspace_v2", self.handle, self.workspace.data.ptr, self.WORKSPACE_BYTES)
        if compute == "tf32":
            if dtype != np.float32:
                raise ValueError(f"TF32 compute multiplies float32, not {dtype}")
            self._check("cublasGemmEx", self.handle, op, op, m, n, k, scalars.ctypes.data, a, self.R_32F, lda, b,
                        self.R_32F, ldb, scalars.ctypes.data + scalars.itemsize, c, self.R_32F, ldc,
                        self.COMPUTE_32F_FAST_TF32, self.GEMM_DEFAULT)
            return
        name = "cublasSgemm_v2" if dtype == np.float32 else "cublasDgemm_v2"
        self._check(name, self.handle, op, op, m, n, k, scalars.ctypes.data, a, lda, b, ldb,
                    scalars.ctypes.data + scalars.itemsize, c, ldc)


def cublas_library() -> ctypes.CDLL:
    """The libcublas CuPy loaded (found in this process's mappings: the same library and handle space)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/libcublas.so" in line}
    if not paths:
        raise RuntimeError("libcublas is not loaded: CuPy's cuBLAS (pip install -e '.[gpu]') is needed")
    return ctypes.CDLL(sorted(paths)[0])


@lru_cache(maxsize=None)
def _cupy_ops() -> CupyOps:
    return CupyOps()


def clear_caches() -> None:
    """Forget the CuPy operations (their cuBLAS handle and workspace): another device."""
    _cupy_ops.cache_clear()


def ops_for(array) -> NumpyOps:  # noqa: ANN001
    """NumPy operations for NumPy arrays, CuPy/cuBLAS for CuPy arrays."""
    return NumpyOps() if isinstance(array, np.ndarray) else _cupy_ops()
