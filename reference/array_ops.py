"""What the reference needs from an array module, for NumPy (CPU) and CuPy/cuBLAS (GPU).

Every operation works on views with any leading dimension and writes in place; no operation allocates
device memory (the CPU one allocates a host temporary for an accumulating GEMM, which NumPy cannot do in
place). Operand sums are one fused elementwise kernel on the GPU (cupy.ElementwiseKernel), not chains of
temporaries.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["NumpyOps", "CupyOps", "ops_for"]


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
        target = _clip(out, x)
        if a == 1:
            target += x
        elif a == -1:
            target -= x
        else:
            target += out.dtype.type(a) * x

    def sum2(self, out, x, a: float, y, b: float) -> None:  # noqa: ANN001
        """out = a x + b y (zeros where neither covers); x, y do not alias out."""
        if x.shape == y.shape == out.shape and a == 1 and b in (1, -1):
            (np.add if b == 1 else np.subtract)(x, y, out=out)
            return
        out.fill(0)
        self.axpy(out, x, a)
        self.axpy(out, y, b)

    def gemm(self, out, a, b, alpha: float, beta: float) -> None:  # noqa: ANN001
        """out = alpha a b + beta out, shapes conforming."""
        if beta == 0:
            np.matmul(a, b, out=out)
            if alpha != 1:
                out *= out.dtype.type(alpha)
            return
        product = a @ b  # host temporary: NumPy has no accumulating GEMM
        self.scale(out, beta)
        self.axpy(out, product, alpha)


class CupyOps(NumpyOps):
    """cuBLAS GEMM on strided views (row-major as C^T = B^T A^T in column-major) and fused elementwise sums."""

    name = "cupy"

    def __init__(self) -> None:
        import cupy

        self.xp = cupy
        self._axpy = cupy.ElementwiseKernel("T x, T a", "T y", "y += a * x", "sb_axpy")
        self._sum2 = cupy.ElementwiseKernel("T x, T y, T a, T b", "T z", "z = a * x + b * y", "sb_sum2")

    def zeros(self, size: int, dtype: np.dtype):  # noqa: ANN201
        return self.xp.zeros(size, dtype=dtype)

    def axpy(self, out, x, a: float) -> None:  # noqa: ANN001
        self._axpy(x, out.dtype.type(a), _clip(out, x))

    def sum2(self, out, x, a: float, y, b: float) -> None:  # noqa: ANN001
        if x.shape == y.shape == out.shape:
            self._sum2(x, y, out.dtype.type(a), out.dtype.type(b), out)
            return
        out.fill(0)
        self.axpy(out, x, a)
        self.axpy(out, y, b)

    def gemm(self, out, a, b, alpha: float, beta: float) -> None:  # noqa: ANN001
        from cupy_backends.cuda.libs import cublas

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
        scalars = np.array([alpha, beta], dtype=out.dtype)
        fn = cublas.sgemm if out.dtype == np.float32 else cublas.dgemm
        handle = self.xp.cuda.device.get_cublas_handle()
        cublas.setStream(handle, self.xp.cuda.get_current_stream().ptr)
        # Row-major C (m x n) = A B  <=>  column-major C^T (n x m) = B^T A^T.
        fn(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k, scalars.ctypes.data, b.data.ptr, ld(b),
           a.data.ptr, ld(a), scalars.ctypes.data + item, out.data.ptr, ld(out))


@lru_cache(maxsize=None)
def _cupy_ops() -> CupyOps:
    return CupyOps()


def ops_for(array) -> NumpyOps:  # noqa: ANN001
    """NumPy operations for NumPy arrays, CuPy/cuBLAS for CuPy arrays."""
    return NumpyOps() if isinstance(array, np.ndarray) else _cupy_ops()
