"""Multi-level algorithms by Kronecker products (Huang et al., SC16, Sec. 3; the paper's Sec. s:2level).

L levels of a <m~, k~, n~; R> algorithm form a <m~^L, k~^L, n~^L; R^L> algorithm on the flattened nested
block grid: nested block indices (i_1, ..., i_L) map to the flattened row i = sum_l i_l m~^(L-l), so the
two-level block ``A1.2`` is block 2 of the one-level block A1. Levels may also mix algorithms (Benson and
Ballard's hybrid recursion): the *spec* ``grey322-11-50+strassen`` is <3,2,2;11> at the top level and
Strassen inside each of its blocks, a <6,4,4;77> algorithm. Nothing multi-level is written by hand.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..limits import check_products
from .algorithm import Algorithm, AlgorithmError, get_algorithm

__all__ = ["CHECK_ENTRIES", "check_levels", "grid_dims", "multilevel", "plan_products", "identity_algorithm", "level_names", "spec_levels", "split_spec"]

# Multi-level results are checked again, so an indexing mistake cannot pass silently: by the full Brent
# tensor while it has at most this many entries, by exact random products beyond.
CHECK_ENTRIES = 1 << 24


def split_spec(spec: str) -> tuple[str, ...]:
    """The algorithm names of a spec, top level first: ``a+b`` is (a, b); a plain name is (name,)."""
    parts = tuple(part.strip() for part in spec.split("+"))
    if not all(parts):
        raise AlgorithmError(f"algorithm spec '{spec}' has an empty part (write NAME or NAME+NAME+...)")
    return parts


def spec_levels(spec: str) -> int | None:
    """The levels a mixed spec fixes (its number of parts), None for a plain name (any number of levels)."""
    parts = split_spec(spec)
    return len(parts) if len(parts) > 1 else None


def level_names(spec: str, levels: int) -> tuple[str, ...]:
    """The algorithm of each of ``levels`` levels: a plain name repeated, or the first parts of a mixed spec."""
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 0:
        raise AlgorithmError(f"levels must be a non-negative integer, got {levels!r}")
    parts = split_spec(spec)
    if len(parts) == 1:
        return parts * levels
    if levels > len(parts):
        raise AlgorithmError(f"algorithm spec '{spec}' has {len(parts)} levels, not {levels}")
    return parts[:levels]


def plan_products(spec: str, levels: int) -> int:
    """The products of ``levels`` levels of ``spec``: the ranks of its levels multiplied (7^L for Strassen),
    known without building the Kronecker product (strassenbench.limits bounds it before any work)."""
    return math.prod(get_algorithm(name).rank for name in level_names(spec, levels))


def grid_dims(spec: str, levels: int) -> tuple[int, int, int]:
    """The block grid (m~, k~, n~) of ``levels`` levels of ``spec``: its levels' grids multiplied, known without
    building the Kronecker product; (1, 1, 1) at 0 levels."""
    dims = [get_algorithm(name).dims for name in level_names(spec, levels)]
    return tuple(math.prod(side) for side in zip(*dims)) if dims else (1, 1, 1)  # type: ignore[return-value]


def check_levels(spec: str, levels: int) -> None:
    """``levels`` levels of ``spec`` make a plan within bounds: a mixed spec names every level (as many parts
    as levels), and the plan's products are within strassenbench.limits.MAX_PRODUCTS. AlgorithmError or
    LimitError, before any work."""
    fixed = spec_levels(spec)
    if fixed is not None and fixed != levels:
        raise AlgorithmError(f"algorithm spec '{spec}' has {fixed} levels, not {levels} (give {fixed} levels, or as "
                             "many parts as levels)")
    check_products(plan_products(spec, levels), f"{levels} levels of {spec}")


def identity_algorithm(name: str) -> Algorithm:
    """The 0-level algorithm <1,1,1;1>: a plain GEMM, C += A B."""
    one = np.ones((1, 1), dtype=np.int64)
    return Algorithm(name=name, dims=(1, 1, 1), U=one, V=one.copy(), W=one.copy(), levels=0)


def _kron_grid(x: np.ndarray, y: np.ndarray, xgrid: tuple[int, int], ygrid: tuple[int, int]) -> np.ndarray:
    """Kronecker product of coefficient rows, with columns re-indexed to the flattened nested grid."""
    (xr, xc), (yr, yc) = xgrid, ygrid
    prod = np.einsum("sij,tpq->stipjq", x.reshape(-1, xr, xc), y.reshape(-1, yr, yc))
    return prod.reshape(x.shape[0] * y.shape[0], xr * yr * xc * yc)


def kron(outer: Algorithm, inner: Algorithm, name: str | None = None) -> Algorithm:
    """Apply ``outer`` at the top and ``inner`` inside each of its blocks."""
    (om, ok, on), (im, ik, in_) = outer.dims, inner.dims
    # Nested product names: M1.5 is product 5 of the inner algorithm inside outer product M1.
    names = tuple(f"{a}.{b.removeprefix('M')}" for a in outer.product_names for b in inner.product_names)
    return Algorithm(
        name=name or outer.name,
        dims=(om * im, ok * ik, on * in_),
        U=_kron_grid(outer.U, inner.U, (om, ok), (im, ik)),
        V=_kron_grid(outer.V, inner.V, (ok, on), (ik, in_)),
        W=_kron_grid(outer.W, inner.W, (om, on), (im, in_)),
        levels=outer.levels + inner.levels,
        level_dims=outer.level_dims + inner.level_dims,
        product_names=names,
        denominators=tuple(a * b for a, b in zip(outer.denominators, inner.denominators)),  # type: ignore[arg-type]
    )


@lru_cache(maxsize=None)
def multilevel(spec: str, levels: int) -> Algorithm:
    """The ``levels``-level algorithm of ``spec`` (a name, or mixed levels ``a+b``; see ``level_names``).

    The result is checked again: by the Brent equations while their tensor's entries times the rank are at most
    CHECK_ENTRIES (the einsum's work), else by exact random products (Algorithm.check_random).
    """
    names = level_names(spec, levels)
    if not names:
        return identity_algorithm(spec)
    bases = [get_algorithm(name) for name in names]
    if len(bases) == 1:
        return bases[0]
    result = bases[-1]
    for base in reversed(bases[:-1]):
        result = kron(base, result, name=spec)
    mt, kt, nt = result.dims
    return result.check() if (mt * kt) * (kt * nt) * (mt * nt) * result.rank <= CHECK_ENTRIES \
        else result.check_random()
