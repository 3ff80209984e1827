"""Execution plans: an L-level algorithm applied to a concrete m x k x n problem.

Blocks of odd or prime dimensions (paper, Sec. s:fringe): a dimension d split into g = t_1 t_2 ... t_L
blocks (t_l the grid of level l's algorithm along it: 2 at every level of Strassen) is padded *virtually*
to g b with b = ceil(d / g). Block i covers [i b, (i+1) b) clipped to [0, d); reads past the edge are
zeros and writes past it are dropped. This equals recursive splitting with zero padding at every level
(ceil(ceil(d/t_1)/t_2) = ceil(d/(t_1 t_2))). A plan holds only these bounds; no padded copy is ever made.

Beyond the paper, a plan's steps split along k (the splitk scheme, strassenbench.fused.launch): each product in
parts of ``split_chunk`` columns of A's terms and rows of B's (``split_steps``), each part a product of its own over
its share of k, the parts' results added into C.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from .algebra.algorithm import AlgorithmError, get_algorithm
from .algebra.levels import multilevel, spec_levels, split_spec
from .algebra.primitives import Primitive, primitives, variant_of

__all__ = ["PlanError", "BlockView", "Step", "Plan", "make_plan", "max_levels", "split_chunk", "split_steps"]


class PlanError(ValueError):
    """A problem shape or level count that no plan can be made for."""


@dataclass(frozen=True)
class BlockView:
    """Rows [row, row + rows) and columns [col, col + cols) of an operand; rows or cols may be 0."""

    row: int
    col: int
    rows: int
    cols: int

    @property
    def empty(self) -> bool:
        return self.rows == 0 or self.cols == 0

    def of(self, array):  # noqa: ANN001, ANN201 - any 2-D array module (NumPy, CuPy)
        """The view of ``array`` this block covers."""
        return array[self.row : self.row + self.rows, self.col : self.col + self.cols]


@dataclass(frozen=True)
class Step:
    """One primitive bound to concrete block views: (view, exact coefficient) per operand term."""

    primitive: Primitive
    variant: int
    a: tuple[tuple[BlockView, Fraction], ...]
    b: tuple[tuple[BlockView, Fraction], ...]
    c: tuple[tuple[BlockView, Fraction], ...]


@dataclass(frozen=True)
class Plan:
    algorithm: str
    levels: int
    m: int
    k: int
    n: int
    block: tuple[int, int, int]
    steps: tuple[Step, ...]

    @property
    def block_shape_a(self) -> tuple[int, int]:
        return self.block[0], self.block[1]

    @property
    def block_shape_b(self) -> tuple[int, int]:
        return self.block[1], self.block[2]

    @property
    def block_shape_c(self) -> tuple[int, int]:
        return self.block[0], self.block[2]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _extent(dim: int, size: int, index: int) -> tuple[int, int]:
    start = min(index * size, dim)
    return start, min(size, dim - start)


def max_levels(algorithm: str, m: int, k: int, n: int) -> int:
    """The most levels the shape allows: some dimension split by an algorithm must hold one element per block.

    With more levels every dimension would be split finer than one element and all but one product
    would multiply only padding. A mixed spec (``a+b``) allows at most its number of parts.
    """
    parts, cap = split_spec(algorithm), spec_levels(algorithm)
    levels, grid = 0, (1, 1, 1)
    while cap is None or levels < cap:
        dims = get_algorithm(parts[levels] if cap else parts[0]).dims
        finer = tuple(g * t for g, t in zip(grid, dims))
        if not any(d >= g and t > 1 for d, g, t in zip((m, k, n), finer, dims)):
            break
        grid, levels = finer, levels + 1
    return levels


def _check_dim(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{name} must be an integer, got {value!r}")
    if value < 1:
        raise PlanError(f"{name} must be >= 1, got {value}")
    return value


@lru_cache(maxsize=256)
def make_plan(algorithm: str, levels: int, m: int, k: int, n: int) -> Plan:
    """Bind the ``levels``-level ``algorithm`` to an m x k x n problem."""
    m, k, n = (_check_dim(name, v) for name, v in (("m", m), ("k", k), ("n", n)))
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 0:
        raise PlanError(f"levels must be a non-negative integer, got {levels!r}")
    try:
        limit = max_levels(algorithm, m, k, n)
    except AlgorithmError as err:
        raise PlanError(str(err)) from None
    if levels > limit:
        trivial = [name for name in split_spec(algorithm) if get_algorithm(name).dims == (1, 1, 1)]
        if trivial:
            raise PlanError(f"algorithm {trivial[0]} is 1x1x1: it splits no dimension, so no level of it applies "
                            "(it is the plain product; use --levels 0)")
        raise PlanError(f"{levels} levels is more than the shape {m}x{k}x{n} allows (at most {limit})")
    alg = multilevel(algorithm, levels)
    gm, gk, gn = alg.dims
    bm, bk, bn = _ceil_div(m, gm), _ceil_div(k, gk), _ceil_div(n, gn)
    sizes = {"A": ((m, bm), (k, bk)), "B": ((k, bk), (n, bn)), "C": ((m, bm), (n, bn))}

    def view(operand: str, row: int, col: int) -> BlockView:
        (rdim, rsize), (cdim, csize) = sizes[operand]
        r0, rows = _extent(rdim, rsize, row)
        c0, cols = _extent(cdim, csize, col)
        return BlockView(r0, c0, rows, cols)

    numbers = variant_of(algorithm, levels)
    steps = tuple(
        Step(
            primitive=p,
            variant=numbers[p.name],
            a=tuple((view("A", t.row, t.col), t.coeff) for t in p.a),
            b=tuple((view("B", t.row, t.col), t.coeff) for t in p.b),
            c=tuple((view("C", t.row, t.col), t.coeff) for t in p.c),
        )
        for p in primitives(algorithm, levels)
    )
    return Plan(algorithm, levels, m, k, n, (bm, bk, bn), steps)


def split_chunk(bk: int, split: int, k_S: int) -> int:
    """The columns of A (rows of B) in each of ``split`` parts of a product's k = ``bk``: bk / split rounded up to
    whole k_S slices, so that every part but the last is whole slices and starts as aligned as the term does."""
    return max(1, _ceil_div(_ceil_div(bk, split), k_S)) * k_S


def _part(view: BlockView, first: int, chunk: int, along_cols: bool) -> BlockView:
    """``chunk`` of a term's k from ``first`` on: columns of an A term, rows of a B term (none past its extent)."""
    extent = view.cols if along_cols else view.rows
    size = max(0, min(extent - first, chunk))
    if along_cols:
        return BlockView(view.row, view.col + first, view.rows, size)
    return BlockView(view.row + first, view.col, size, view.cols)


def split_steps(steps: tuple[Step, ...], bk: int, chunk: int) -> tuple[Step, ...]:
    """Each step as the parts of its k (``chunk`` at a time, split_chunk): the same C terms and coefficients, A's
    terms cut along their columns and B's along their rows. A part past every term's k (a fringe's shorter
    block) computes nothing and is left out; the first part always stays."""
    parts = []
    for step in steps:
        for first in range(0, bk, chunk):
            a = tuple((_part(v, first, chunk, True), c) for v, c in step.a)
            b = tuple((_part(v, first, chunk, False), c) for v, c in step.b)
            if first and (all(v.empty for v, _ in a) or all(v.empty for v, _ in b)):
                continue
            parts.append(Step(step.primitive, step.variant, a, b, step.c))
    return tuple(parts)
