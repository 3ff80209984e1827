"""Reference results and the documented error bound per dtype and level.

Bound (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., Thms 23.2-23.3, in the max norm
||X||_M = max |x_ij|, with the stability factor e of the algorithm in place of Higham's 12 or 18):

    ||C_hat - C||_M <= u ( |alpha| (e^L (k0^2 + q k0) + k) ||A||_M ||B||_M + 2 |beta| ||C0||_M )

where u is the unit roundoff of the dtype, L the number of levels, k0 = ceil(k / k~^L) the inner dimension
of a leaf product (k / (k~_1 ... k~_L) for mixed levels), q the most additions feeding one leaf result
(max W_A + max W_B + the most products updating one block of C), and the last terms cover the scaling by alpha and beta. The float64 reference
carries its own classical bound (L = 0, u = 2^-53), which is added. The relative Frobenius error
||C_hat - C||_F / ||C||_F that ``verify`` prints is compared against sqrt(mn) times that bound divided by
||C||_F. The bound is a worst case: measured errors are orders of magnitude below it, but a wrong
coefficient (an O(1) error) always exceeds it.

The bound is the paper's; a check that a result is right uses the *expected* error instead (``tolerance``): the
bound is so far above what a correct product makes (1 or more for every TF32 product and above n = 4,096) that
a result of zeros would pass it. ``expected_error`` is the probabilistic counterpart of the bound (Higham and
Mary, "A new approach to probabilistic rounding error analysis", SIAM J. Sci. Comput. 41 (2019): rounding errors
as independent random variables, whose sums grow as sqrt(n) rather than n), for operands of independent entries
of mean zero (the bench's uniform [-1, 1)). A rounding to u has a relative error of mean square u^2 / 6 (for a
value whose significand is uniform in [1, 2)); a dot product of k terms summed one after another then has a
relative error of (u^2 k / 12)^(1/2), and rounding both inputs of each product to u_in (TF32) adds
(u_in^2 / 3)^(1/2). One level of a bilinear algorithm multiplies these by its *mean square growth*

    G = mean over the blocks c of C of  sum_r W[r,c]^2 ||U_r||_2^2 ||V_r||_2^2      (8 for Strassen)

(the 2-norm counterpart of the stability factor e = max_c sum_r |W[r,c]| ||U_r||_1 ||V_r||_1, 12 for Strassen):
the accumulation's part by G / k~^2, the inputs' by G / k~; levels multiply. On the H100's and H200's sweeps
this predicts the measured error within 4% for our SIMT GEMM, CUTLASS, cuBLAS, 1- and 2-level fused Strassen and
each catalogue algorithm, and within 8% for 1xTF32 (docs/benchmarks.md, "The check").

This module is the arithmetic alone (it imports only the algebra); strassenbench.verify runs multiplications
against it, one (``verify``) or the accuracy table (``accuracy_rows``).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .algebra.algorithm import get_algorithm
from .algebra.levels import level_names, multilevel
from .algebra.primitives import primitives
from .algebra.schedule import makespan_lower_bound
from .families import MODES, SIMT

__all__ = ["reference_gemm", "exact_reference", "relative_error", "error_bound", "bound_from_norms", "growth_constants",
           "unit_roundoff", "mean_square_growth", "expected_error", "tolerance", "TOLERANCE_FACTOR"]

def unit_roundoff(dtype: np.dtype | str, mode: str = SIMT) -> float:
    """u of the bound: the dtype's (SIMT, DMMA), or the tensor-core mode's (strassenbench.families.Mode)."""
    if mode in MODES and MODES[mode].unit_roundoff is not None:
        return MODES[mode].unit_roundoff
    return float(np.finfo(np.dtype(dtype)).eps) / 2


def reference_gemm(A: np.ndarray, B: np.ndarray, C0: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """alpha A B + beta C0 computed classically in float64."""
    out = alpha * (A.astype(np.float64) @ B.astype(np.float64))
    if beta != 0:
        out += beta * C0.astype(np.float64)
    return out


def _slices(X: np.ndarray, axis: int, bits: int) -> list[np.ndarray]:
    """X (float64) as a sum of slices, exactly: each slice's entries in a row (axis 1) or column (axis 0) are
    multiples of 2^(e - bits), with 2^e above the row's largest magnitude, and at most 2^e (Ozaki, Ogita, Oishi
    and Rump, "Error-free transformations of matrix multiplication by using fast routines of matrix
    multiplication and its applications", Numer. Algorithms 59 (2012), Alg. 3): a slice of A times a slice of B
    is then exact in float64 whatever the order of its k-sum."""
    out, rest = [], X.astype(np.float64)
    while np.any(rest) and len(out) < 40:
        top = np.max(np.abs(rest), axis=axis, keepdims=True)
        sigma = np.ldexp(1.0, np.frexp(top)[1] + 53 - bits).astype(np.float64) * (top > 0)
        head = (rest + sigma) - sigma
        out.append(head)
        rest = rest - head  # exact
    return out


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s + e = a + b exactly, s = fl(a + b) (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_product(a: float, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p + e = a b exactly, p = fl(a b) (Dekker's TwoProduct, with Veltkamp's split into 26-bit halves)."""
    def split(x):  # noqa: ANN001, ANN202
        c = 134217729.0 * x  # 2^27 + 1
        high = c - (c - x)
        return high, x - high

    p = a * b
    (ah, al), (bh, bl) = split(np.float64(a)), split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def exact_reference(A: np.ndarray, B: np.ndarray, C0: np.ndarray, alpha: float, beta: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """alpha A B + beta C0 as an unevaluated sum hi + lo of float64 matrices, accurate far beyond float64: the
    reference of the float64 accuracy table, where a float64 product's own error would be as large as what it
    measures. A B is a sum of exact float64 products of slices (_slices: s_A s_B GEMMs, 9 for uniform inputs),
    each scaling is split exactly (_two_product), and the terms are summed from the smallest with TwoSum."""
    k = A.shape[1]
    bits = (53 - max(1, int(np.ceil(np.log2(max(k, 2)))))) // 2  # k products of two slices: exact in 53 bits
    terms = []
    for a in _slices(A, 1, bits):
        for b in _slices(B, 0, bits):
            product = a @ b
            terms += [product] if alpha == 1 else list(_two_product(alpha, product))
    if beta != 0:
        terms += list(_two_product(beta, C0.astype(np.float64)))
    hi, lo = np.zeros((A.shape[0], B.shape[1])), np.zeros((A.shape[0], B.shape[1]))
    for term in sorted(terms, key=lambda t: float(np.max(np.abs(t), initial=0.0))):
        hi, err = _two_sum(hi, term)
        lo += err
    return _two_sum(hi, lo)


def relative_error(C: np.ndarray, reference: np.ndarray | tuple[np.ndarray, np.ndarray]) -> float:
    """||C - C_ref||_F / ||C_ref||_F; the absolute error when C_ref is exactly zero. ``reference`` is a float64
    matrix, or an exact_reference pair (hi, lo), whose difference from C is taken as (C - hi) - lo."""
    hi, lo = reference if isinstance(reference, tuple) else (reference, None)
    diff_matrix = C.astype(np.float64) - hi
    if lo is not None:
        diff_matrix = diff_matrix - lo
    diff = float(np.linalg.norm(diff_matrix))
    scale = float(np.linalg.norm(hi))
    return diff / scale if scale > 0 else diff


@lru_cache(maxsize=None)
def growth_constants(algorithm: str, levels: int) -> tuple[float, int]:
    """(e^L, q): the growth over the levels (the product of each level's stability factor) and the additions
    per leaf q of the bound above. ``algorithm`` is a name or a mixed spec (``a+b``)."""
    if levels == 0:
        return 1, 3
    names = level_names(algorithm, levels)
    base = [p for name in dict.fromkeys(names) for p in primitives(name, 1)]
    q = max(len(p.a) for p in base) + max(len(p.b) for p in base) + makespan_lower_bound(algorithm, levels)
    return float(math.prod(get_algorithm(name).stability_factor for name in names)), q


def _abs_bound(u: float, algorithm: str, levels: int, k: int, norms: tuple[float, float, float], alpha: float,
               beta: float) -> float:
    growth, q = growth_constants(algorithm, levels)
    k0 = math.ceil(k / multilevel(algorithm, levels).dims[1])
    norm_a, norm_b, norm_c0 = norms
    return u * (abs(alpha) * (growth * (k0 * k0 + q * k0) + k) * norm_a * norm_b + 2 * abs(beta) * norm_c0)


def error_bound(
    dtype: np.dtype | str,
    algorithm: str,
    levels: int,
    A: np.ndarray,
    B: np.ndarray,
    C0: np.ndarray,
    alpha: float,
    beta: float,
    reference: np.ndarray,
    mode: str = SIMT,
) -> float:
    """The bound on the relative Frobenius error of one multiplication (module docstring); ``mode`` a
    tensor-core mode takes its unit roundoff (unit_roundoff)."""
    m, k = A.shape
    n = B.shape[1]
    norms = (float(np.max(np.abs(A))), float(np.max(np.abs(B))), float(np.max(np.abs(C0))) if beta else 0.0)
    return bound_from_norms(dtype, algorithm, levels, (m, n, k), norms, alpha, beta, float(np.linalg.norm(reference)),
                            mode=mode)


def bound_from_norms(
    dtype: np.dtype | str, algorithm: str, levels: int, shape: tuple[int, int, int],
    norms: tuple[float, float, float], alpha: float, beta: float, reference_norm: float,
    reference_unit: float = 2.0**-53,
    mode: str = SIMT,
) -> float:
    """The bound from max norms of A, B, C0 and ||C_ref||_F (for arrays on a device). ``reference_unit`` is
    the unit roundoff of the reference (float64 by default; the working dtype's when the reference is a
    same-precision cuBLAS product)."""
    m, n, k = shape
    u = unit_roundoff(dtype, mode)
    absolute = _abs_bound(u, algorithm, levels, k, norms, alpha, beta)
    absolute += _abs_bound(reference_unit, algorithm, 0, k, norms, alpha, beta)
    return math.sqrt(m * n) * absolute / reference_norm if reference_norm > 0 else math.sqrt(m * n) * absolute



# How far above the expected error a correct result may land before the check fails: the estimate is within a
# few per cent of the measured error at the sweeps' sizes (module docstring), and its spread at the smallest
# shapes (a few hundred outputs) is a factor below 2.
TOLERANCE_FACTOR = 4.0


@lru_cache(maxsize=None)
def mean_square_growth(algorithm: str) -> tuple[float, int]:
    """(G, k~) of one level of ``algorithm`` (a name): G = mean_c sum_r W[r,c]^2 ||U_r||_2^2 ||V_r||_2^2 with
    the exact coefficients (module docstring), k~ its grid along k."""
    alg = get_algorithm(algorithm)
    du, dv, dw = alg.denominators
    u = (alg.U.astype(np.float64) ** 2).sum(axis=1) / du**2
    v = (alg.V.astype(np.float64) ** 2).sum(axis=1) / dv**2
    w = (alg.W.astype(np.float64) / dw) ** 2
    return float((w * (u * v)[:, None]).sum(axis=0).mean()), alg.dims[1]


def expected_error(dtype: np.dtype | str, algorithm: str, levels: int, k: int, mode: str = SIMT) -> float:
    """The expected relative Frobenius error of alpha A B + beta C0 for operands of independent uniform [-1, 1)
    entries (module docstring): ``levels`` levels of ``algorithm`` over a GEMM that sums k / k~^L products one
    after another in the working precision, its inputs rounded to the tensor-core mode's (``mode``), plus the
    roundings of the operand and output sums and of the scaling."""
    growth, grid = 1.0, 1
    for name in level_names(algorithm, levels) if levels else ():
        g, kt = mean_square_growth(name)
        growth, grid = growth * g, grid * kt
    u = float(np.finfo(np.dtype(dtype)).eps) / 2
    u_in = (MODES[mode].unit_roundoff if mode in MODES else None) or 0.0
    accumulate = u * u * (k + 1) / 12 * growth / grid**2
    inputs = u_in * u_in / 3 * growth / grid
    sums = u * u / 3 * growth / grid + u * u / 6 * (growth_constants(algorithm, levels)[1] + 1) if levels \
        else u * u / 3  # the operand sums rounded as inputs are; each output sum, the scaling and beta C0
    return math.sqrt(accumulate + inputs + sums)


def tolerance(dtype: np.dtype | str, algorithm: str, levels: int, k: int, mode: str = SIMT) -> float:
    """The check's limit on the relative error: TOLERANCE_FACTOR times the expected error (never the worst-case
    bound, which no wrong result need exceed)."""
    return TOLERANCE_FACTOR * expected_error(dtype, algorithm, levels, k, mode)
