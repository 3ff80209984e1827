"""GEMM semantics as cuBLAS users expect: C <- alpha A B + beta C (paper, Eq. eqn:prime).

Operands are row-major 2-D arrays of one dtype (float32 or float64) with any leading dimension, i.e. any
strided view. beta is applied exactly once; with beta = 0, C is not read (NaN in C does not propagate).
"""

from __future__ import annotations

import numpy as np

__all__ = ["GemmError", "DTYPES", "parse_dtype", "check_operands", "axpy"]

DTYPES = ("float32", "float64")


class GemmError(ValueError):
    """Operands that do not form a valid GEMM."""


def parse_dtype(name: str) -> np.dtype:
    """The NumPy dtype for a supported name; anything else is a clear error."""
    if name not in DTYPES:
        raise GemmError(f"unsupported dtype '{name}' (choose from {', '.join(DTYPES)})")
    return np.dtype(name)


def check_operands(A, B, C) -> tuple[int, int, int]:  # noqa: ANN001 - NumPy or CuPy arrays
    """Validate shapes and dtypes; return (m, k, n)."""
    for name, x in (("A", A), ("B", B), ("C", C)):
        if getattr(x, "ndim", None) != 2:
            raise GemmError(f"{name} must be a 2-D array, got {getattr(x, 'ndim', type(x).__name__)} dimensions")
        if str(x.dtype) not in DTYPES:
            raise GemmError(f"{name} has unsupported dtype {x.dtype} (choose from {', '.join(DTYPES)})")
    if not (A.dtype == B.dtype == C.dtype):
        raise GemmError(f"operands must share one dtype, got A {A.dtype}, B {B.dtype}, C {C.dtype}")
    (m, k), (k2, n), (m2, n2) = A.shape, B.shape, C.shape
    if k != k2 or m != m2 or n != n2:
        raise GemmError(f"shapes do not multiply: A {m}x{k}, B {k2}x{n}, C {m2}x{n2}")
    if min(m, k, n) < 1:
        raise GemmError(f"every dimension must be >= 1, got m={m}, k={k}, n={n}")
    if isinstance(C, np.ndarray):
        if not C.flags.writeable:
            raise GemmError("C must be writeable")
        if np.shares_memory(C, A) or np.shares_memory(C, B):
            raise GemmError("C must not overlap A or B")
    return m, k, n


def axpy(target, source, coeff) -> None:  # noqa: ANN001 - NumPy or CuPy arrays; a float or a Fraction
    """target += coeff source in place, without a temporary for coeff = +-1 (any other coefficient, an exact
    one such as 1/2 included, is rounded to target's dtype once)."""
    if coeff == 1:
        target += source
    elif coeff == -1:
        target -= source
    else:
        target += target.dtype.type(coeff) * source
