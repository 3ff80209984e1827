"""Products as the paper's Strassen primitive, and their grouping into variants.

Each product is an instance of the generalised primitive of Eq. (e:straprim1):

    M = (sum_i u_i X_i)(sum_j v_j V_j);   C_l += gamma_l M     for l = 1 .. W_C

with operand counts W_A, W_B, W_C. Products with equal (W_A, W_B, W_C) share one compiled kernel: a
*variant* (Sec. s:register, figure tab:perfeq_level2).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .algorithm import Algorithm
from .algorithm import get_algorithm
from .levels import level_names, multilevel

__all__ = ["Term", "Primitive", "Variant", "primitives", "variants", "variant_of", "variant_counts"]


@dataclass(frozen=True)
class Term:
    """One operand of a primitive: ``coeff`` (exact, e.g. 1/2) times block (row, col) of A, B or C."""

    operand: str
    row: int
    col: int
    coeff: Fraction
    name: str


@dataclass(frozen=True)
class Primitive:
    """One product of an algorithm, with its operand terms (X_i, V_j and the C blocks it updates)."""

    index: int
    name: str
    a: tuple[Term, ...]
    b: tuple[Term, ...]
    c: tuple[Term, ...]

    @property
    def counts(self) -> tuple[int, int, int]:
        """(W_A, W_B, W_C), the operand counts of figure tab:perfeq_level2."""
        return len(self.a), len(self.b), len(self.c)

    @property
    def writes(self) -> frozenset[tuple[int, int]]:
        """The blocks of C this product updates."""
        return frozenset((t.row, t.col) for t in self.c)

    def describe(self) -> str:
        """The primitive in the paper's notation, e.g. ``M1 = (A2 + A3) B0; C2 += M1; C3 -= M1``."""

        def scale(coeff: Fraction) -> str:
            return "" if abs(coeff) == 1 else f"{abs(coeff)} "

        def total(terms: tuple[Term, ...]) -> str:
            text = ""
            for t in terms:
                sign = "-" if t.coeff < 0 else "+"
                term = f"{scale(t.coeff)}{t.name}"
                text += f" {sign} {term}" if text else ("-" if t.coeff < 0 else "") + term
            return f"({text})" if len(terms) > 1 else text

        updates = "; ".join(f"{t.name} {'-' if t.coeff < 0 else '+'}= {scale(t.coeff)}{self.name}" for t in self.c)
        return f"{self.name} = {total(self.a)} {total(self.b)}; {updates}"


def _terms(alg: Algorithm, operand: str, r: int, ncols: int) -> tuple[Term, ...]:
    which = "UVW"["ABC".index(operand)]
    row = alg.numerators(which)[r]
    return tuple(
        Term(operand, int(idx) // ncols, int(idx) % ncols, alg.coefficient(which, r, int(idx)),
             alg.block_name(operand, int(idx) // ncols, int(idx) % ncols))
        for idx in np.flatnonzero(row)
    )


@lru_cache(maxsize=None)
def primitives(algorithm: str, levels: int) -> tuple[Primitive, ...]:
    """The R^L primitives of the ``levels``-level ``algorithm`` (a name or a mixed spec), in product order."""
    alg = multilevel(algorithm, levels)
    _, kt, nt = alg.dims
    return tuple(
        Primitive(
            index=r,
            name=alg.product_names[r],
            a=_terms(alg, "A", r, kt),
            b=_terms(alg, "B", r, nt),
            c=_terms(alg, "C", r, nt),
        )
        for r in range(alg.rank)
    )


@dataclass(frozen=True)
class Variant:
    """Var#: the products that share operand counts (W_A, W_B, W_C), hence one kernel instantiation."""

    number: int
    W_A: int
    W_B: int
    W_C: int
    products: tuple[Primitive, ...]

    @property
    def count(self) -> int:
        """Cnt#: how many products belong to the variant."""
        return len(self.products)


def _paper_order(levels: int, count: int, counts: tuple[int, int, int]) -> tuple[int, ...]:
    """Sort key that reproduces the Var# labels of figure tab:perfeq_level2.

    The paper numbers variants by instance count, then by operand counts; its one-level table lists the
    W_C-reduced variant (gamma_1 = 0, Var#1) before the W_A- and W_B-reduced ones (Var#2, Var#3), so at
    one level W_C is compared first. The labels are a convention; the grouping and counts are computed.
    """
    w_a, w_b, w_c = counts
    return (count, w_c, w_a, w_b) if levels == 1 else (count, w_a, w_b, w_c)


@lru_cache(maxsize=None)
def variants(algorithm: str, levels: int) -> tuple[Variant, ...]:
    """The variants of the ``levels``-level algorithm, numbered as in the paper."""
    groups: dict[tuple[int, int, int], list[Primitive]] = defaultdict(list)
    for prim in primitives(algorithm, levels):
        groups[prim.counts].append(prim)
    ordered = sorted(groups.items(), key=lambda item: _paper_order(levels, len(item[1]), item[0]))
    return tuple(Variant(n, *counts, tuple(prims)) for n, (counts, prims) in enumerate(ordered))


def variant_of(algorithm: str, levels: int) -> dict[str, int]:
    """Product name -> Var# number."""
    return {p.name: v.number for v in variants(algorithm, levels) for p in v.products}


@lru_cache(maxsize=None)
def variant_counts(algorithm: str, levels: int, ordered: bool = False) -> dict[tuple[int, int, int], int]:
    """(W_A, W_B, W_C) -> how many products of the ``levels``-level algorithm have these operand counts, what
    ``variants`` groups, without forming the products: a product of several levels is the Kronecker product of
    one product per level (Sec. s:multilevel), so its terms on each side are the product of theirs. Sorted by
    the counts, or with ``ordered`` by each variant's first product (the order the atomic scheme launches them,
    strassenbench.fused.launch)."""
    counts = np.ones((1, 3), dtype=np.int64)
    for name in level_names(algorithm, levels):
        alg = get_algorithm(name)
        rows = np.stack([np.count_nonzero(M, axis=1) for M in (alg.U, alg.V, alg.W)], axis=1)
        counts = (counts[:, None, :] * rows[None, :, :]).reshape(-1, 3)
    found, first, times = np.unique(counts, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable") if ordered else range(len(found))
    return {(int(found[i][0]), int(found[i][1]), int(found[i][2])): int(times[i]) for i in order}
