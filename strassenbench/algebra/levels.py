"""Multi-level algorithms by Kronecker products (Huang et al., SC16, Sec. 3; the paper's Sec. s:2level).

L levels of a <m~, k~, n~; R> algorithm form a <m~^L, k~^L, n~^L; R^L> algorithm on the flattened nested
block grid: nested block indices (i_1, ..., i_L) map to the flattened row i = sum_l i_l m~^(L-l), so the
two-level block ``A1.2`` is block 2 of the one-level block A1. Nothing multi-level is written by hand.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .algorithm import Algorithm, AlgorithmError, get_algorithm

__all__ = ["CHECK_LEVELS", "multilevel", "identity_algorithm"]

CHECK_LEVELS = 3


def identity_algorithm(name: str, base_dims: tuple[int, int, int]) -> Algorithm:
    """The 0-level algorithm <1,1,1;1>: a plain GEMM, C += A B."""
    one = np.ones((1, 1), dtype=np.int64)
    return Algorithm(name=name, dims=(1, 1, 1), U=one, V=one.copy(), W=one.copy(), levels=0, base_dims=base_dims)


def _kron_grid(x: np.ndarray, y: np.ndarray, xgrid: tuple[int, int], ygrid: tuple[int, int]) -> np.ndarray:
    """Kronecker product of coefficient rows, with columns re-indexed to the flattened nested grid."""
    (xr, xc), (yr, yc) = xgrid, ygrid
    prod = np.einsum("sij,tpq->stipjq", x.reshape(-1, xr, xc), y.reshape(-1, yr, yc))
    return prod.reshape(x.shape[0] * y.shape[0], xr * yr * xc * yc)


def kron(outer: Algorithm, inner: Algorithm) -> Algorithm:
    """Apply ``outer`` at the top and ``inner`` inside each of its blocks."""
    (om, ok, on), (im, ik, in_) = outer.dims, inner.dims
    # Nested product names: M1.5 is product 5 of the inner algorithm inside outer product M1.
    names = tuple(f"{a}.{b.removeprefix('M')}" for a in outer.product_names for b in inner.product_names)
    return Algorithm(
        name=outer.name,
        dims=(om * im, ok * ik, on * in_),
        U=_kron_grid(outer.U, inner.U, (om, ok), (im, ik)),
        V=_kron_grid(outer.V, inner.V, (ok, on), (ik, in_)),
        W=_kron_grid(outer.W, inner.W, (om, on), (im, in_)),
        levels=outer.levels + inner.levels,
        base_dims=outer.base_dims,
        product_names=names,
    )


@lru_cache(maxsize=None)
def multilevel(name: str, levels: int) -> Algorithm:
    """The ``levels``-level algorithm derived from the shipped one-level algorithm ``name``.

    Results up to ``CHECK_LEVELS`` levels are checked by the Brent equations again, so an indexing mistake
    cannot pass silently; deeper ones reuse the same (checked) index mapping, and their Brent tensor
    ((m~k~)^L x (k~n~)^L x (m~n~)^L entries) would not fit in memory.
    """
    if levels < 0:
        raise AlgorithmError(f"levels must be >= 0, got {levels}")
    base = get_algorithm(name)
    result = identity_algorithm(name, base.dims)
    for _ in range(levels):
        result = kron(base, result) if result.levels else base
    return result.check() if levels <= CHECK_LEVELS else result
