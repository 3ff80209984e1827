"""The six forms of one algorithm: a scheme for <m, k, n> gives schemes for every order of the three sides.

The matrix multiplication tensor is invariant under transposition and cyclic rotation (Hopcroft and Musinski,
1973), so with C = A B:

- transposition, <m,k,n> -> <n,k,m>: C^T = B^T A^T, each product M_r becoming M_r^T; U' takes V's coefficients
  on the transposed blocks of B, V' takes U's on those of A, W' W's on those of C;
- rotation, <m,k,n> -> <k,n,m>: U' = V (the blocks of B, as the blocks of the new A), V' = W on C's blocks
  transposed, W' = U on A's blocks transposed (Brent: sum_r V[p,j] W[i,j'] U[i',p'] holds the same deltas).

Rotating once or twice and transposing reach all six orders; each form named by its sides in the original's
letters, e.g. ``knm`` for the rotation of <m,k,n>. Every derived scheme is Brent-checked as any other.
"""

from __future__ import annotations

import numpy as np

from .algorithm import Algorithm, AlgorithmError

__all__ = ["FORMS", "form", "transposed", "rotated"]

FORMS = ("mkn", "knm", "nmk", "nkm", "mnk", "kmn")


def _transpose_blocks(matrix: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Columns of ``matrix`` indexed by the row-major blocks of a rows x cols grid, reordered to the blocks of
    its transpose (cols x rows, row-major)."""
    return matrix.reshape(matrix.shape[0], rows, cols).transpose(0, 2, 1).reshape(matrix.shape[0], rows * cols)


def transposed(alg: Algorithm, name: str | None = None) -> Algorithm:
    m, k, n = alg.dims
    U = _transpose_blocks(alg.V, k, n)  # A' = B^T: n x k
    V = _transpose_blocks(alg.U, m, k)  # B' = A^T: k x m
    W = _transpose_blocks(alg.W, m, n)  # C' = C^T: n x m
    du, dv, dw = alg.denominators
    return Algorithm(name=name or f"{alg.name}-T", dims=(n, k, m), U=U.copy(), V=V.copy(), W=W.copy(),
                     denominators=(dv, du, dw), source=alg.source).check()


def rotated(alg: Algorithm, name: str | None = None) -> Algorithm:
    m, k, n = alg.dims
    U = alg.V.copy()  # A' = B: k x n
    V = _transpose_blocks(alg.W, m, n)  # B' = C^T: n x m
    W = _transpose_blocks(alg.U, m, k)  # C' = A^T: k x m
    du, dv, dw = alg.denominators
    return Algorithm(name=name or f"{alg.name}-R", dims=(k, n, m), U=U, V=V.copy(), W=W.copy(),
                     denominators=(dv, dw, du), source=alg.source).check()


def form(alg: Algorithm, order: str, name: str | None = None) -> Algorithm:
    """The scheme for the sides in ``order`` (FORMS: letters of the original <m,k,n>), Brent-checked."""
    steps = {"mkn": (0, False), "knm": (1, False), "nmk": (2, False),
             "nkm": (0, True), "mnk": (1, True), "kmn": (2, True)}
    if order not in steps:
        raise AlgorithmError(f"form {order!r} is not one of {', '.join(FORMS)} (the sides of <m,k,n> in order)")
    turns, transpose = steps[order]
    out = alg
    for _ in range(turns):
        out = rotated(out)
    if transpose:
        out = transposed(out)
    return Algorithm(name=name or alg.name, dims=out.dims, U=out.U.copy(), V=out.V.copy(), W=out.W.copy(),
                     denominators=out.denominators, source=alg.source)
