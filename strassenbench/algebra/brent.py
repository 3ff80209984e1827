"""The Brent equations of an algorithm, exactly: the matrix multiplication tensor, the residual of an
algorithm's coefficients against it, and the diagnosis of a wrong coefficient.

sum_r U[r,a] V[r,b] W[r,c] = T[a,b,c], T the tensor of C_ij = sum_p A_ip B_pj, in integer numerators scaled by
the product of the denominators. Every partial sum is bounded by bound = R max|U| max|V| max|W| +
prod(denominators): below 2^53 the sums are made by a float64 GEMM, exact whatever its order (BLAS), below 2^63
in int64, and above in Python's integers (object arrays), so no sum wraps around (a scheme whose residue is 2^64
passes an int64 check).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["matmul_tensor", "residual", "diagnose"]


def matmul_tensor(mt: int, kt: int, nt: int) -> np.ndarray:
    """T[(i,p), (p',j), (i',j')] = [p = p'][i = i'][j = j']: C_ij = sum_p A_ip B_pj."""
    T = np.zeros((mt * kt, kt * nt, mt * nt), dtype=np.int64)
    for i, p, j in itertools.product(range(mt), range(kt), range(nt)):
        T[i * kt + p, p * nt + j, i * nt + j] = 1
    return T


def residual(alg: Any) -> np.ndarray:  # an algebra.algorithm.Algorithm (it imports this module)
    """The scaled Brent residual of ``alg`` (module docstring): int64 where its entries fit, else Python ints."""
    mt, kt, nt = alg.dims
    scale = math.prod(alg.denominators)
    bound = alg.rank * math.prod(int(abs(M).max(initial=0)) for M in (alg.U, alg.V, alg.W)) + scale
    dtype = np.float64 if bound < 2**53 else np.int64 if bound < 2**63 else object
    U, V, W = (M.astype(dtype) for M in (alg.U, alg.V, alg.W))
    pairs = (U[:, :, None] * V[:, None, :]).reshape(alg.rank, -1)  # (r, ab): each |entry| <= bound
    sums = (pairs.T @ W).reshape(mt * kt, kt * nt, mt * nt)
    if dtype is np.float64:
        sums = sums.astype(np.int64)  # exact integers, each below 2^53
    return sums - matmul_tensor(*alg.dims).astype(sums.dtype) * scale


def _format(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def diagnose(alg: Any, residual: np.ndarray) -> str:  # an Algorithm, as residual's
    """Name the coefficients whose change alone would satisfy every Brent equation.

    A wrong U[r, a] (by e, in numerator units) adds e V_r (x) W_r to plane a of the scaled residual and
    nothing elsewhere, and likewise for V and W; so the entry is found from the residual's support. When
    several single entries explain it (a residual of one entry), each is named."""
    mt, kt, nt = alg.dims
    labels = {
        "U": [alg.block_name("A", a // kt, a % kt) for a in range(mt * kt)],
        "V": [alg.block_name("B", b // nt, b % nt) for b in range(kt * nt)],
        "W": [alg.block_name("C", c // nt, c % nt) for c in range(mt * nt)],
    }
    fixes = []
    for axis, which in enumerate("UVW"):
        planes = np.flatnonzero(np.moveaxis(residual, axis, 0).reshape(residual.shape[axis], -1).any(axis=1))
        if planes.size != 1:
            continue
        idx = int(planes[0])
        plane = np.moveaxis(residual, axis, 0)[idx].reshape(-1).astype(object)
        others = [alg.numerators(w).astype(object) for w in "UVW" if w != which]  # exact: Python ints
        for r in range(alg.rank):
            outer = np.outer(others[0][r], others[1][r]).reshape(-1)
            nonzero = np.flatnonzero(outer)
            if not nonzero.size:
                continue
            i0 = int(nonzero[0])
            if not np.array_equal(plane * int(outer[i0]), outer * int(plane[i0])):
                continue
            # The plane is e_num (v_r (x) w_r) for a numerator wrong by e_num: the coefficient by e_num / d.
            error = Fraction(int(plane[i0]), int(outer[i0]) * alg.denominators[axis])
            have = alg.coefficient(which, r, idx)
            where = ""
            if alg.source:
                line = alg.lines[axis][idx] if alg.lines else None
                where = f"{alg.source}" + (f" line {line}" if line else "") + f", column {r + 1}: "
            fixes.append(f"{where}product {alg.product_names[r]} has coefficient {_format(have)} on "
                         f"{labels[which][idx]}, expected {_format(have - error)}")
    if fixes:
        shown = "; or ".join(fixes[:4]) + (f" (or {len(fixes) - 4} more single entries)" if len(fixes) > 4 else "")
        return f"algorithm '{alg.name}' fails the Brent equations: {shown}"
    a, b, c = (int(x[0]) for x in np.nonzero(residual))
    involved = [alg.product_names[r] for r in range(alg.rank) if alg.U[r, a] and alg.V[r, b] and alg.W[r, c]]
    where = f" ({alg.source})" if alg.source else ""
    return (
        f"algorithm '{alg.name}'{where} fails the Brent equations at ({labels['U'][a]}, {labels['V'][b]}, "
        f"{labels['W'][c]}); products involved: {', '.join(involved) or 'none'}"
    )
