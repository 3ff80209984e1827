"""Fast matrix multiplication algorithms as exact rational coefficient matrices.

An algorithm <m~, k~, n~; R> partitions A (m x k) into an m~ x k~ grid of blocks, B into k~ x n~ and
C into m~ x n~, and computes R products

    M_r = (sum_a U[r, a] A_a) (sum_b V[r, b] B_b);    C_c += W[r, c] M_r

Blocks are numbered row-major inside their grid, as in the paper's Eq. (eqn:strassenpart):
A_0 A_1 / A_2 A_3. Strassen's and Winograd's algorithms are written once, in the paper's own notation
(Eq. eqn:gpu_allops), and parsed; any other comes from a coefficient file (``algorithms/``, the format of
Benson and Ballard's catalogue, see ``load_algorithm``). Multi-level algorithms are derived from these by
Kronecker products (see ``levels.py``).

Coefficients are rational (the catalogue has 1/2): U, V and W hold integer numerators over one common
denominator per matrix, so every check is exact integer arithmetic.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from .. import env
from ..readers import check_name, read_text

__all__ = [
    "Algorithm",
    "AlgorithmError",
    "parse_algorithm",
    "load_algorithm",
    "ALGORITHMS",
    "algorithms_dir",
    "algorithm_names",
    "get_algorithm",
    "catalogue_rows",
    "fraction_matrix",
    "parse_entry",
]


class AlgorithmError(ValueError):
    """An algorithm's coefficients are malformed or fail the Brent equations."""


@dataclass(frozen=True, eq=False)
class Algorithm:
    """A bilinear matrix multiplication algorithm <m~, k~, n~; R>.

    ``U`` is R x (m~ k~), ``V`` is R x (k~ n~), ``W`` is R x (m~ n~): integer numerators, the coefficients
    being ``U / denominators[0]`` and so on. At ``levels`` > 1 the grids are the flattened nested grids (see
    ``levels.py``) and ``level_dims`` the grid of each level, top first, so a block's nested name can be
    recovered. ``source`` and ``lines`` (the file line of each row of U, V and W) name where a loaded
    algorithm's coefficients were written.
    """

    name: str
    dims: tuple[int, int, int]
    U: np.ndarray
    V: np.ndarray
    W: np.ndarray
    levels: int = 1
    level_dims: tuple[tuple[int, int, int], ...] = ()
    product_names: tuple[str, ...] = field(default=())
    denominators: tuple[int, int, int] = (1, 1, 1)
    source: str = ""
    lines: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        mt, kt, nt = self.dims
        R = self.U.shape[0]
        if self.U.shape != (R, mt * kt) or self.V.shape != (R, kt * nt) or self.W.shape != (R, mt * nt):
            raise AlgorithmError(
                f"algorithm '{self.name}': coefficient shapes {self.U.shape}, {self.V.shape}, {self.W.shape} "
                f"do not match <{mt},{kt},{nt};{R}>"
            )
        if not self.level_dims and self.levels == 1:
            object.__setattr__(self, "level_dims", (self.dims,))
        if not self.product_names:
            object.__setattr__(self, "product_names", tuple(f"M{r}" for r in range(R)))
        for arr in (self.U, self.V, self.W):
            arr.setflags(write=False)

    @property
    def rank(self) -> int:
        """R, the number of products."""
        return self.U.shape[0]

    @property
    def label(self) -> str:
        """<m~,k~,n~;R> as the literature writes it."""
        return "<{},{},{};{}>".format(*self.dims, self.rank)

    def numerators(self, which: str) -> np.ndarray:
        """U, V or W (``which``) as integer numerators over that matrix's denominator."""
        return {"U": self.U, "V": self.V, "W": self.W}[which]

    def coefficient(self, which: str, r: int, idx: int) -> Fraction:
        """The exact coefficient U[r, idx] (``which`` = "U"), V[r, idx] or W[r, idx]."""
        return Fraction(int(self.numerators(which)[r, idx]), self.denominators["UVW".index(which)])

    def block_name(self, operand: str, row: int, col: int) -> str:
        """Nested name of the block at (row, col) of the flattened grid, e.g. ``A1.2`` at two levels.

        Level l's index is the row-major position inside that level's grid, so one level gives the paper's
        names A0..A3.
        """
        pick = {"A": (0, 1), "B": (1, 2), "C": (0, 2)}[operand]
        grids = [(d[pick[0]], d[pick[1]]) for d in self.level_dims]
        digits = []
        for level, (rbase, cbase) in enumerate(grids):
            rinner = math.prod(g[0] for g in grids[level + 1:])
            cinner = math.prod(g[1] for g in grids[level + 1:])
            r, c = (row // rinner) % rbase, (col // cinner) % cbase
            digits.append(str(r * cbase + c))
        return operand + ".".join(digits) if digits else operand

    @property
    def additions(self) -> int:
        """Additions counted naively: each product's operand sums (terms - 1 on each side) and each block of
        C's sum of products (terms - 1), with no sum shared between products (18 for Strassen)."""
        operands = sum(int(max(np.count_nonzero(row) - 1, 0)) for M in (self.U, self.V) for row in M)
        return operands + sum(int(max(np.count_nonzero(col) - 1, 0)) for col in self.W.T)

    @property
    def omega(self) -> float:
        """The exponent the algorithm reaches used recursively: 3 log R / log(m~ k~ n~); 3 for the one-block
        product <1,1,1;1> (the GEMM, 0 levels), which saves nothing at any depth."""
        blocks = math.prod(self.dims)
        return 3.0 if blocks == 1 else 3 * math.log(self.rank) / math.log(blocks)

    @cached_property
    def stability_factor(self) -> Fraction:
        """Per-level error growth e = max_c sum_r |W[r,c]| ||U_r||_1 ||V_r||_1.

        This is the stability factor of Bini and Lotti (Ballard et al., 2016). It gives Higham's constants:
        12 for Strassen (Higham, Thm 23.2) and 18 for Winograd's variant (Thm 23.3). In Python's integers:
        exact for any numerators the files may hold.
        """
        U, V, W = (np.abs(M).astype(object) for M in (self.U, self.V, self.W))
        weights = U.sum(axis=1) * V.sum(axis=1)
        scaled = int((W * weights[:, None]).sum(axis=0).max())
        return Fraction(scaled, math.prod(self.denominators))

    def brent_residual(self) -> np.ndarray:
        """sum_r U[r,a] V[r,b] W[r,c] minus the matrix multiplication tensor, both scaled by the product of
        the denominators, exactly: zero iff correct (strassenbench.algebra.brent)."""
        from .brent import residual

        return residual(self)

    def check(self) -> "Algorithm":
        """Verify the Brent equations in exact arithmetic; raise naming the faulty product and entry."""
        residual = self.brent_residual()
        if not residual.any():
            return self
        from .brent import diagnose

        raise AlgorithmError(diagnose(self, residual))

    def check_random(self, trials: int = 4, seed: int = 0) -> "Algorithm":
        """Check the algorithm on random integer blocks (1 x 1), exactly: what ``check`` proves, with a
        probability of a false pass below (2 / 2001)^trials by the Schwartz-Zippel lemma (the computed C is
        a polynomial of degree 2 in the entries). For grids whose Brent tensor is too large to form."""
        rng = np.random.default_rng(seed)
        mt, kt, nt = self.dims
        scale = math.prod(self.denominators)
        for _ in range(trials):
            a = rng.integers(-1000, 1001, (mt, kt)).astype(object)
            b = rng.integers(-1000, 1001, (kt, nt)).astype(object)
            products = (self.U.astype(object) @ a.reshape(-1)) * (self.V.astype(object) @ b.reshape(-1))
            if not np.array_equal(self.W.astype(object).T @ products, scale * (a @ b).reshape(-1)):
                raise AlgorithmError(f"algorithm '{self.name}' ({self.label}, {self.levels} levels) does not "
                                     "multiply matrices: its coefficients fail a random exact test")
        return self


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


def _grid_from_sizes(path: str, sizes: tuple[int, int, int]) -> tuple[int, int, int]:
    """m~, k~, n~ from the row counts m~k~, k~n~, m~n~ of U, V and W."""
    a, b, c = sizes
    for mt in range(1, a + 1):
        if a % mt == 0 and c % mt == 0:
            kt, nt = a // mt, c // mt
            if kt * nt == b:
                return mt, kt, nt
    raise AlgorithmError(f"{path}: blocks of {a}, {b} and {c} rows are not m~k~, k~n~ and m~n~ of any grid")


def load_algorithm(path: str | Path, name: str | None = None) -> Algorithm:
    """Read a coefficient file (format in algorithms/README.md) and check it; errors name the file's line."""
    from ..limits import MAX_ALGORITHM_BYTES, MAX_RANK

    # a regular file of at most MAX_ALGORITHM_BYTES, its name one the system takes (never a FIFO or /dev/zero)
    text = read_text(path, limit=MAX_ALGORITHM_BYTES, what="an algorithm file (a coefficient file, "
                     "algorithms/README.md)", error=AlgorithmError)
    path = Path(path)
    name = name or path.stem
    blocks: list[list[tuple[int, list[str]]]] = [[]]
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            if blocks[-1]:
                blocks.append([])
            continue
        if line.strip():
            blocks[-1].append((lineno, line.split()))
    blocks = [b for b in blocks if b]
    if len(blocks) != 3:
        raise AlgorithmError(f"{path}: expected 3 blocks of rows (U, V, W) separated by '#' lines, found {len(blocks)}")
    rank = len(blocks[0][0][1])
    if rank > MAX_RANK:
        raise AlgorithmError(f"{path}: {rank:,} products, above the limit of {MAX_RANK:,} per level")
    matrices, denominators = [], []
    for block in blocks:
        rows = []
        for lineno, tokens in block:
            if len(tokens) != rank:
                raise AlgorithmError(f"{path} line {lineno}: {len(tokens)} entries, expected {rank} (one per product)")
            rows.append([parse_entry(tok, f"{path} line {lineno}") for tok in tokens])
        matrix, denominator = fraction_matrix([list(col) for col in zip(*rows)], f"{path} line {block[0][0]}")
        matrices.append(matrix)
        denominators.append(denominator)
    dims = _grid_from_sizes(str(path), tuple(m.shape[1] for m in matrices))  # type: ignore[arg-type]
    return Algorithm(
        name=name, dims=dims, U=matrices[0], V=matrices[1], W=matrices[2], denominators=tuple(denominators),
        source=path.name if path.parent == algorithms_dir() else str(path),
        lines=tuple(tuple(lineno for lineno, _ in block) for block in blocks),
    ).check()


def parse_entry(token: str, where: str) -> int | Fraction:
    """A coefficient written as an integer or a fraction 'p/q', numerator and denominator at most MAX_ENTRY;
    checked before any Fraction is made ('1e999999999' would take forever). Errors name ``where``."""
    from ..limits import MAX_ENTRY

    digits = token[1:] if token[:1] in ("+", "-") else token
    if digits.isascii() and digits.isdigit() and len(digits) <= 7 and int(digits) <= MAX_ENTRY:
        return int(token)  # the common case, without the pattern: an int has numerator and denominator too
    entry = re.fullmatch(r"[+-]?([0-9]+)(?:/([0-9]+))?", token)
    if entry is None or (entry[2] is not None and int(entry[2]) == 0):
        raise AlgorithmError(f"{where}: entry '{token[:40]}' is not an integer or a fraction")
    if len(entry[1]) > 7 or int(entry[1]) > MAX_ENTRY or (entry[2] and int(entry[2]) > MAX_ENTRY):
        raise AlgorithmError(f"{where}: entry '{token[:40]}' is larger than {MAX_ENTRY:,} in numerator or denominator")
    return Fraction(token)


def fraction_matrix(rows: list[list[int | Fraction]], where: str = "the coefficients") -> tuple[np.ndarray, int]:
    """Exact rational rows as integer numerators (int64) over their least common denominator; AlgorithmError
    naming ``where`` when that denominator is above MAX_COMMON_DENOMINATOR (the numerators would not fit the
    integers the kernels' coefficients and the checks are made from)."""
    from ..limits import MAX_COMMON_DENOMINATOR

    denominator = 1
    for d in {x.denominator for row in rows for x in row}:
        denominator = math.lcm(denominator, d)
        if denominator > MAX_COMMON_DENOMINATOR:
            raise AlgorithmError(f"{where}: the fractions' common denominator is above {MAX_COMMON_DENOMINATOR:,} "
                                 "(2^31): coefficients over that many distinct denominators are not carried")
    return np.array([[int(x * denominator) for x in row] for row in rows], dtype=np.int64).reshape(
        len(rows), -1), denominator


def algorithms_dir() -> Path:
    """The coefficient files: $STRASSENBENCH_ALGORITHMS (a folder; empty means unset, strassenbench.env), else
    algorithms/ beside the package."""
    default = Path(__file__).resolve().parents[2] / "algorithms"
    return env.source_folder("STRASSENBENCH_ALGORITHMS", "the coefficient files") or default


def algorithm_names() -> list[str]:
    """The built-in algorithms, then those of algorithms/ by name."""
    folder = algorithms_dir()
    files = sorted(p.stem for p in folder.glob("*.txt")) if folder.is_dir() else []
    return [*ALGORITHMS, *(name for name in files if name not in ALGORITHMS)]


@lru_cache(maxsize=None)
def get_algorithm(name: str) -> Algorithm:
    """A one-level algorithm by name (built in, or a file of algorithms/), or by a coefficient file's path."""
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    check_name(f"{name}.txt", "algorithm", AlgorithmError)  # a name the file system takes, before it is asked
    shipped = algorithms_dir() / f"{name}.txt"
    if "/" not in name and shipped.is_file():
        return load_algorithm(shipped, name)
    if name.endswith(".txt") or "/" in name or os.sep in name:
        return load_algorithm(name)
    raise AlgorithmError(
        f"unknown algorithm '{name}' (choose from {', '.join(algorithm_names())}, or give a coefficient file's path)"
    )


def catalogue_rows() -> list[dict[str, object]]:
    """The catalogue of `strassenbench algorithms`: per algorithm its shape, rank, classical products, speed-up,
    nonzeros of U, V and W, additions (counted naively), stability factor, exponent omega and source."""
    rows = []
    for name in algorithm_names():
        alg = get_algorithm(name)
        mt, kt, nt = alg.dims
        rows.append({
            "algorithm": name, "shape": f"{mt}x{kt}x{nt}", "rank": alg.rank, "classical": mt * kt * nt,
            "speedup": round(mt * kt * nt / alg.rank, 4),
            "nonzeros": int(np.count_nonzero(alg.U) + np.count_nonzero(alg.V) + np.count_nonzero(alg.W)),
            "additions": alg.additions, "stability_factor": str(alg.stability_factor),
            "omega": round(alg.omega, 4), "source": alg.source or "built in",
        })
    return rows
