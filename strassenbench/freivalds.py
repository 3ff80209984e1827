"""The bench's correctness check: C along random directions, against A (B x) in double-double.

Freivalds's check (R. Freivalds, "Probabilistic machines can use less running time", IFIP 1977) with the
numbers of a floating-point product: for a few random sign vectors x (a k x r block X of +-1, r = DIRECTIONS),

    E X = C X - (alpha A (B X) + beta C0 X)

is computed in O((mk + kn + mn) r) work, never with a GEMM of the operands, so the reference shares nothing with
any implementation under test (cuBLAS, CUTLASS, the fused kernels, the references). Each product of a matrix
and a block of vectors is *exact*: the matrix is cut into slices whose entries in a row are multiples of one
power of two (``slices``; Ozaki, Ogita, Oishi and Rump, Numer. Algorithms 59 (2012), Alg. 3), the vectors
likewise, and a slice of each has so few bits that every dot product of the two is exact in float64 whatever
the order of its sum. The exact partial products are then summed with TwoSum into a double-double (hi, lo), so
the reference is good to about 2^-100 relative at every size: far beyond float64, so it checks float64
implementations (SIMT FP64, DMMA) as well as float32 ones.

For Rademacher directions E[||E x||^2] = ||E||_F^2 and E[||C x||^2] = ||C||_F^2, so

    ||E X||_F / ||alpha A B X + beta C0 X||_F

estimates the relative Frobenius error ||C_hat - C||_F / ||C||_F that the paper's bound speaks of; with r = 8
directions over m rows the estimate's spread is a few per cent at the sizes of the sweeps. A wrong result
(a dropped product: an O(1) error on a block) is caught with probability 1 - 2^-r or better.

The arithmetic takes an array module ``xp`` (NumPy, or CuPy on the GPU) and works in row panels of at most
PANEL_ELEMENTS float64 elements, so its extra memory is bounded whatever the size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DIRECTIONS", "REFERENCE", "Freivalds", "Reference", "freivalds", "directions", "exact_product", "slices"]

DIRECTIONS = 8  # r: random sign vectors per check
REFERENCE = f"freivalds{DIRECTIONS}-dd"  # the ``reference`` column's name for this check
PANEL_ELEMENTS = 1 << 25  # float64 elements of one row panel (256 MiB), times the few slices alive at once
TARGET_BITS = 80  # bits below a row's largest entry that the slices capture; the rest is under 2^-80 of it


@dataclass(frozen=True)
class Freivalds:
    """What one check measured: the relative error estimate, and ||alpha A B X + beta C0 X||_F / sqrt(r), an
    estimate of ||C||_F (the paper's bound is relative to it)."""

    rel_error: float
    ref_norm: float


def directions(k: int, seed: int, count: int = DIRECTIONS) -> np.ndarray:
    """k x count random signs (+-1 in float64) from ``seed``."""
    rng = np.random.default_rng([seed, 0x46524549])  # its own stream: never the operands' numbers
    return rng.integers(0, 2, size=(k, count)).astype(np.float64) * 2 - 1


def _bits(inner: int, other_bits: int) -> int:
    """Bits a slice may hold so that a dot product of ``inner`` terms with a slice of ``other_bits`` bits is
    exact in float64 (53 bits): every partial sum a multiple of one power of two below 2^53."""
    return max(1, 53 - other_bits - max(1, math.ceil(math.log2(max(inner, 2)))) - 1)


def _to_host(x, xp):  # noqa: ANN001, ANN202
    return x if xp is np else xp.asnumpy(x)


def slices(X, axis: int, bits: int, xp, count: int | None = None) -> list:  # noqa: ANN001
    """X (float64) as a sum of slices: the entries of each slice along ``axis`` (1: a row, 0: a column) are
    multiples of 2^(e - bits) with 2^e above that row's (column's) largest magnitude; ``count`` slices (enough
    for TARGET_BITS by default). Each head is exact, and so is the rest: their sum is X exactly, up to the part
    below the last slice. The powers of two are made on the host from the row maxima (a vector)."""
    count = count or math.ceil(TARGET_BITS / bits) + 1
    out, rest = [], X
    for _ in range(count):
        top = _to_host(abs(rest).max(axis=axis, keepdims=True), xp)
        sigma = xp.asarray(np.ldexp(1.0, np.frexp(top)[1] + (53 - bits)))  # frexp(0) is 0: a finite sigma
        head = (rest + sigma) - sigma  # rest rounded to multiples of 2^(e - bits)
        out.append(head)
        rest = rest - head
    return out


def _two_sum(a, b):  # noqa: ANN001, ANN202
    """s + e = a + b exactly, s = fl(a + b) (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _accumulate(terms: list, xp):  # noqa: ANN001, ANN202
    """The sum of ``terms`` (float64 arrays of one shape) as a double-double (hi, lo), smallest first."""
    terms = sorted(terms, key=lambda t: float(abs(t).max()) if t.size else 0.0)
    hi = xp.zeros(terms[0].shape, dtype=xp.float64)
    lo = xp.zeros(terms[0].shape, dtype=xp.float64)
    for term in terms:
        hi, err = _two_sum(hi, term)
        lo = lo + err
    return _two_sum(hi, lo)


def exact_product(M, parts: list, xp, signs: bool = False) -> tuple:  # noqa: ANN001
    """M (m x k, any float dtype) times the k x r block sum(parts) (float64 arrays whose magnitudes fall part by
    part, as a double-double's do), as a double-double (hi, lo). ``signs``: one part of +-1 (one bit, not
    sliced). Every slice product is exact; row panel by row panel, one GEMM per slice of the panel."""
    k, r = M.shape[1], parts[0].shape[1]
    if signs:
        vectors, vector_bits = [parts[0]], 1
    else:
        vector_bits = _bits(k, 0) // 2  # the vector's and the matrix's slices share the 53 bits evenly
        counts = [None] + [math.ceil((TARGET_BITS - 50) / vector_bits) + 1] * (len(parts) - 1)
        vectors = [s for part, c in zip(parts, counts) for s in slices(part, 0, vector_bits, xp, c)]
    block = vectors[0] if len(vectors) == 1 else xp.concatenate(vectors, axis=1)
    bits = _bits(k, vector_bits)
    rows = max(1, PANEL_ELEMENTS // max(k, 1))
    his, los = [], []
    for start in range(0, M.shape[0], rows):
        panel = M[start:start + rows].astype(xp.float64)
        products = [s @ block for s in slices(panel, 1, bits, xp)]
        hi, lo = _accumulate([p[:, j * r:(j + 1) * r] for p in products for j in range(len(vectors))], xp)
        his.append(hi)
        los.append(lo)
    return (his[0], los[0]) if len(his) == 1 else (xp.concatenate(his), xp.concatenate(los))


def _scaled(pair: tuple, factor: float) -> list:
    """factor (hi + lo) as two float64 terms: exact where factor is a power of two (alpha = beta = 1 in every
    benchmark), else one rounding of each, far below what is checked."""
    return [pair[0] * factor, pair[1] * factor]


class Reference:
    """alpha A B X + beta C0 X for the directions X, made once per point (every strategy of it is checked
    against the same); ``check(C)`` measures a result."""

    def __init__(self, A, B, C0, alpha: float, beta: float, xp=np, seed: int = 0,  # noqa: ANN001
                 count: int = DIRECTIONS) -> None:
        self.xp, self.count = xp, count
        self.X = xp.asarray(directions(B.shape[1], seed, count))
        ab = exact_product(A, list(exact_product(B, [self.X], xp, signs=True)), xp)  # A (B X): m x r
        self.terms = _scaled(ab, alpha)
        if beta != 0:
            self.terms += _scaled(exact_product(C0, [self.X], xp, signs=True), beta)
        hi, _ = _accumulate(self.terms, xp)
        self.norm = float(xp.linalg.norm(hi.ravel())) / math.sqrt(count)  # estimates ||alpha A B + beta C0||_F

    def check(self, C) -> Freivalds:  # noqa: ANN001
        """The relative error estimate of C (module docstring)."""
        cx = exact_product(C, [self.X], self.xp, signs=True)
        hi, lo = _accumulate([*cx, *(-t for t in self.terms)], self.xp)
        diff = float(self.xp.linalg.norm((hi + lo).ravel())) / math.sqrt(self.count)
        return Freivalds(diff / self.norm if self.norm > 0 else diff, self.norm)


def freivalds(A, B, C0, C, alpha: float, beta: float, xp=np, seed: int = 0,  # noqa: ANN001
              count: int = DIRECTIONS) -> Freivalds:
    """The check of C = alpha A B + beta C0 (module docstring): C0 is the C before the call."""
    return Reference(A, B, C0, alpha, beta, xp, seed, count).check(C)
