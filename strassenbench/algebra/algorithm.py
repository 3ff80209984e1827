"""Fast matrix multiplication algorithms as integer coefficient matrices.

An algorithm <m~, k~, n~; R> partitions A (m x k) into an m~ x k~ grid of blocks, B into k~ x n~ and
C into m~ x n~, and computes R products

    M_r = (sum_a U[r, a] A_a) (sum_b V[r, b] B_b);    C_c += W[r, c] M_r

Blocks are numbered row-major inside their grid, as in the paper's Eq. (eqn:strassenpart):
A_0 A_1 / A_2 A_3. Each algorithm is written once, in the paper's own notation (Eq. eqn:gpu_allops),
and parsed; multi-level algorithms are derived from these by Kronecker products (see ``levels.py``).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

__all__ = ["Algorithm", "AlgorithmError", "parse_algorithm", "ALGORITHMS", "get_algorithm"]


class AlgorithmError(ValueError):
    """An algorithm's coefficients are malformed or fail the Brent equations."""


@dataclass(frozen=True, eq=False)
class Algorithm:
    """A bilinear matrix multiplication algorithm <m~, k~, n~; R>.

    ``U`` is R x (m~ k~), ``V`` is R x (k~ n~), ``W`` is R x (m~ n~), all integer. At ``levels`` > 1 the
    grids are the flattened nested grids (see ``levels.py``); ``base_dims`` are the one-level grid sizes,
    so a block's nested name can be recovered.
    """

    name: str
    dims: tuple[int, int, int]
    U: np.ndarray
    V: np.ndarray
    W: np.ndarray
    levels: int = 1
    base_dims: tuple[int, int, int] | None = None
    product_names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        mt, kt, nt = self.dims
        R = self.U.shape[0]
        if self.U.shape != (R, mt * kt) or self.V.shape != (R, kt * nt) or self.W.shape != (R, mt * nt):
            raise AlgorithmError(
                f"algorithm '{self.name}': coefficient shapes {self.U.shape}, {self.V.shape}, {self.W.shape} "
                f"do not match <{mt},{kt},{nt};{R}>"
            )
        if self.base_dims is None:
            object.__setattr__(self, "base_dims", self.dims)
        if not self.product_names:
            object.__setattr__(self, "product_names", tuple(f"M{r}" for r in range(R)))
        for arr in (self.U, self.V, self.W):
            arr.setflags(write=False)

    @property
    def rank(self) -> int:
        """R, the number of products."""
        return self.U.shape[0]

    def block_name(self, operand: str, row: int, col: int) -> str:
        """Nested name of the block at (row, col) of the flattened grid, e.g. ``A1.2`` at two levels.

        Level l's index is the row-major position inside that level's base grid, so one level gives the
        paper's names A0..A3.
        """
        bm, bk, bn = self.base_dims  # type: ignore[misc]
        rbase, cbase = {"A": (bm, bk), "B": (bk, bn), "C": (bm, bn)}[operand]
        digits = []
        for level in range(self.levels):
            shift = self.levels - 1 - level
            r = (row // rbase**shift) % rbase
            c = (col // cbase**shift) % cbase
            digits.append(str(r * cbase + c))
        return operand + ".".join(digits) if digits else operand

    @cached_property
    def stability_factor(self) -> int:
        """Per-level error growth e = max_c sum_r |W[r,c]| ||U_r||_1 ||V_r||_1.

        This is the stability factor of Bini and Lotti (Ballard et al., 2016). It gives Higham's constants:
        12 for Strassen (Higham, Thm 23.2) and 18 for Winograd's variant (Thm 23.3).
        """
        weights = np.abs(self.U).sum(axis=1) * np.abs(self.V).sum(axis=1)
        return int((np.abs(self.W) * weights[:, None]).sum(axis=0).max())

    def brent_residual(self) -> np.ndarray:
        """sum_r U[r,a] V[r,b] W[r,c] minus the matrix multiplication tensor (zero iff correct)."""
        return np.einsum("ra,rb,rc->abc", self.U, self.V, self.W) - matmul_tensor(*self.dims)

    def check(self) -> "Algorithm":
        """Verify the Brent equations in exact integer arithmetic; raise naming the faulty product."""
        residual = self.brent_residual()
        if not residual.any():
            return self
        raise AlgorithmError(_diagnose(self, residual))


def matmul_tensor(mt: int, kt: int, nt: int) -> np.ndarray:
    """T[(i,p), (p',j), (i',j')] = [p = p'][i = i'][j = j']: C_ij = sum_p A_ip B_pj."""
    T = np.zeros((mt * kt, kt * nt, mt * nt), dtype=np.int64)
    for i, p, j in itertools.product(range(mt), range(kt), range(nt)):
        T[i * kt + p, p * nt + j, i * nt + j] = 1
    return T


def _diagnose(alg: Algorithm, residual: np.ndarray) -> str:
    """Name the product whose single wrong coefficient explains every failing Brent equation."""
    mt, kt, nt = alg.dims
    labels = {
        "U": [alg.block_name("A", a // kt, a % kt) for a in range(mt * kt)],
        "V": [alg.block_name("B", b // nt, b % nt) for b in range(kt * nt)],
        "W": [alg.block_name("C", c // nt, c % nt) for c in range(mt * nt)],
    }
    target = matmul_tensor(mt, kt, nt)
    for r in range(alg.rank):
        for which in ("U", "V", "W"):
            coeffs = {"U": alg.U, "V": alg.V, "W": alg.W}
            row = coeffs[which][r]
            for idx in range(row.size):
                for candidate in (-1, 0, 1):
                    if candidate == row[idx]:
                        continue
                    fixed = {key: value.copy() for key, value in coeffs.items()}
                    fixed[which][r, idx] = candidate
                    if np.array_equal(np.einsum("ra,rb,rc->abc", fixed["U"], fixed["V"], fixed["W"]), target):
                        return (
                            f"algorithm '{alg.name}' fails the Brent equations: product {alg.product_names[r]} "
                            f"has coefficient {int(row[idx])} on {labels[which][idx]}, expected {candidate}"
                        )
    a, b, c = (int(x[0]) for x in np.nonzero(residual))
    involved = [alg.product_names[r] for r in range(alg.rank) if alg.U[r, a] and alg.V[r, b] and alg.W[r, c]]
    return (
        f"algorithm '{alg.name}' fails the Brent equations at ({labels['U'][a]}, {labels['V'][b]}, "
        f"{labels['W'][c]}): off by {int(residual[a, b, c])}; products involved: {', '.join(involved) or 'none'}"
    )


_PRODUCT = re.compile(r"^\s*(M\d+)\s*=\s*(.+)$")
_TERM = re.compile(r"([+-]?)\s*(\d*)\s*([AB])(\d+)")
_UPDATE = re.compile(r"^\s*C(\d+)\s*([+-])=\s*(\d*)\s*(M\d+)\s*$")


def parse_algorithm(name: str, dims: tuple[int, int, int], text: str) -> Algorithm:
    """Parse lines ``M0 = (A0 + A3)(B0 + B3); C0 += M0; C3 += M0`` into an algorithm and check it."""
    mt, kt, nt = dims
    rows_u, rows_v, rows_w, names = [], [], [], []
    for line in filter(str.strip, text.strip().splitlines()):
        product, *updates = (part for part in line.split(";") if part.strip())
        match = _PRODUCT.match(product)
        if not match:
            raise AlgorithmError(f"algorithm '{name}': cannot parse product '{product.strip()}'")
        mname, expr = match.groups()
        u = np.zeros(mt * kt, dtype=np.int64)
        v = np.zeros(kt * nt, dtype=np.int64)
        for sign, scale, operand, index in _TERM.findall(expr):
            coeff = (-1 if sign == "-" else 1) * int(scale or 1)
            target = u if operand == "A" else v
            if int(index) >= target.size:
                raise AlgorithmError(f"algorithm '{name}': product {mname} uses {operand}{index}, outside the grid")
            target[int(index)] += coeff
        w = np.zeros(mt * nt, dtype=np.int64)
        for update in updates:
            umatch = _UPDATE.match(update)
            if not umatch or umatch.group(4) != mname:
                raise AlgorithmError(f"algorithm '{name}': cannot parse update '{update.strip()}' of {mname}")
            cidx, sign, scale, _ = umatch.groups()
            if int(cidx) >= w.size:
                raise AlgorithmError(f"algorithm '{name}': product {mname} updates C{cidx}, outside the grid")
            w[int(cidx)] += (-1 if sign == "-" else 1) * int(scale or 1)
        rows_u.append(u), rows_v.append(v), rows_w.append(w), names.append(mname)
    return Algorithm(
        name=name, dims=dims, U=np.array(rows_u), V=np.array(rows_v), W=np.array(rows_w), product_names=tuple(names)
    ).check()


# Strassen's algorithm exactly as the paper's Eq. (eqn:gpu_allops): products M0..M6 in its order.
STRASSEN = """
M0 = (A0 + A3)(B0 + B3); C0 += M0; C3 += M0
M1 = (A2 + A3) B0;       C2 += M1; C3 -= M1
M2 = A0 (B1 - B3);       C1 += M2; C3 += M2
M3 = A3 (B2 - B0);       C0 += M3; C2 += M3
M4 = (A0 + A1) B3;       C1 += M4; C0 -= M4
M5 = (A2 - A0)(B0 + B1); C3 += M5
M6 = (A1 - A3)(B2 + B3); C0 += M6
"""

# Winograd's variant (Higham, "Accuracy and Stability of Numerical Algorithms", Sec. 23.2.2), with its
# shared sums S_i, T_i and partial results U_i expanded, so every product is one primitive (Eq. e:straprim1).
WINOGRAD = """
M0 = A0 B0;                       C0 += M0; C1 += M0; C2 += M0; C3 += M0
M1 = A1 B2;                       C0 += M1
M2 = (A0 + A1 - A2 - A3) B3;      C1 += M2
M3 = A3 (B0 - B1 - B2 + B3);      C2 -= M3
M4 = (A2 + A3)(B1 - B0);          C1 += M4; C3 += M4
M5 = (A2 + A3 - A0)(B0 - B1 + B3); C1 += M5; C2 += M5; C3 += M5
M6 = (A0 - A2)(B3 - B1);          C2 += M6; C3 += M6
"""


def _classical_text() -> str:
    """The 8-product block algorithm: C_ij += A_ip B_pj, products ordered by (i, j, p)."""
    lines = []
    for r, (i, j, p) in enumerate(itertools.product(range(2), repeat=3)):
        lines.append(f"M{r} = A{2 * i + p} B{2 * p + j}; C{2 * i + j} += M{r}")
    return "\n".join(lines)


ALGORITHMS: dict[str, Algorithm] = {
    "strassen": parse_algorithm("strassen", (2, 2, 2), STRASSEN),
    "winograd": parse_algorithm("winograd", (2, 2, 2), WINOGRAD),
    "classical": parse_algorithm("classical", (2, 2, 2), _classical_text()),
}


def get_algorithm(name: str) -> Algorithm:
    """Look up a shipped one-level algorithm by name."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise AlgorithmError(f"unknown algorithm '{name}' (choose from {', '.join(ALGORITHMS)})") from None
