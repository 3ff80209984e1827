"""The NumPy engine against a float64 reference: random shapes, both dtypes, alpha, beta, strided views."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strassenbench.accuracy import error_bound, reference_gemm, relative_error
from strassenbench.engines.numpy_engine import gemm, multiply
from strassenbench.gemm import GemmError
from strassenbench.plan import make_plan, max_levels
from strassenbench.verify import random_operands

PRIMES = [2, 3, 5, 7, 11, 13, 17, 31, 37, 61, 67]
dims = st.one_of(st.integers(1, 70), st.sampled_from(PRIMES), st.just(1))


@st.composite
def problems(draw):
    m, k, n = draw(dims), draw(dims), draw(dims)
    if draw(st.booleans()):  # very skinny: one dimension far larger than another
        setattr_dim = draw(st.sampled_from("mkn"))
        big = draw(st.integers(100, 300))
        m, k, n = (big if setattr_dim == "m" else m, big if setattr_dim == "k" else k, big if setattr_dim == "n" else n)
    levels = draw(st.integers(0, min(3, max_levels("strassen", m, k, n))))
    return {
        "m": m,
        "k": k,
        "n": n,
        "levels": levels,
        "algorithm": draw(st.sampled_from(["strassen", "strassen", "winograd", "classical"])),
        "dtype": draw(st.sampled_from(["float32", "float64"])),
        "alpha": draw(st.sampled_from([1.0, -1.0, 0.5, 2.25])),
        "beta": draw(st.sampled_from([0.0, 1.0, -0.75])),
        "seed": draw(st.integers(0, 2**16)),
    }


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_matches_float64_reference_within_bound(p):
    dtype = np.dtype(p["dtype"])
    A, B, C0 = random_operands(p["m"], p["n"], p["k"], dtype, p["seed"])
    C = C0.copy()
    multiply(A, B, C, p["alpha"], p["beta"], algorithm=p["algorithm"], levels=p["levels"])
    reference = reference_gemm(A, B, C0, p["alpha"], p["beta"])
    err = relative_error(C, reference)
    bound = error_bound(dtype, p["algorithm"], p["levels"], A, B, C0, p["alpha"], p["beta"], reference)
    assert C.dtype == dtype
    assert err <= bound, f"{p}: error {err:.3e} > bound {bound:.3e}"


EXACT_CASES = [
    (algorithm, levels, shape)
    for algorithm in ("strassen", "winograd", "classical")
    for shape in ((1, 1, 1), (8, 8, 8), (13, 29, 7), (64, 3, 65), (1, 97, 1))
    for levels in range(min(3, max_levels(algorithm, *shape)) + 1)
]


@pytest.mark.parametrize("algorithm, levels, shape", EXACT_CASES)
def test_small_integer_inputs_are_exact(algorithm, levels, shape):
    """Integer sums and products stay exact in float32 below 2^24, so Strassen must equal the reference."""
    m, k, n = shape
    rng = np.random.default_rng(7)
    A = rng.integers(-4, 5, (m, k)).astype(np.float32)
    B = rng.integers(-4, 5, (k, n)).astype(np.float32)
    C0 = rng.integers(-4, 5, (m, n)).astype(np.float32)
    C = C0.copy()
    multiply(A, B, C, 2.0, -1.0, algorithm=algorithm, levels=levels)
    expected = 2 * (A.astype(np.int64) @ B.astype(np.int64)) - C0.astype(np.int64)
    assert np.array_equal(C.astype(np.int64), expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_strided_views_with_leading_dimensions(dtype):
    """Row-major operands with leading dimensions larger than their width (sub-matrix views)."""
    rng = np.random.default_rng(3)
    m, k, n = 37, 23, 41
    big_a = rng.uniform(-1, 1, (m + 5, k + 9)).astype(dtype)
    big_b = rng.uniform(-1, 1, (k + 2, n + 11)).astype(dtype)
    big_c = rng.uniform(-1, 1, (m + 3, n + 7)).astype(dtype)
    before = big_c.copy()
    A, B, C = big_a[2 : 2 + m, 3 : 3 + k], big_b[1 : 1 + k, 5 : 5 + n], big_c[1 : 1 + m, 4 : 4 + n]
    C0 = C.copy()
    multiply(A, B, C, 1.0, 0.5, levels=2)
    reference = reference_gemm(A, B, C0, 1.0, 0.5)
    assert relative_error(C, reference) <= error_bound(dtype, "strassen", 2, A, B, C0, 1.0, 0.5, reference)
    outside = np.ones(big_c.shape, bool)
    outside[1 : 1 + m, 4 : 4 + n] = False
    assert np.array_equal(big_c[outside], before[outside]), "writes past C's edge must be dropped"


def test_transposed_view_operand():
    rng = np.random.default_rng(4)
    At = rng.uniform(-1, 1, (20, 30))
    B = rng.uniform(-1, 1, (20, 10))
    C = np.zeros((30, 10))
    multiply(At.T, B, C, levels=1)
    np.testing.assert_allclose(C, At.T @ B, rtol=1e-12, atol=1e-12)


def test_beta_zero_does_not_read_c():
    A = np.ones((4, 4), np.float32)
    B = np.ones((4, 4), np.float32)
    C = np.full((4, 4), np.nan, np.float32)
    multiply(A, B, C, 1.0, 0.0, levels=1)
    assert np.array_equal(C, np.full((4, 4), 4.0, np.float32))


def test_beta_applied_once_and_alpha_zero():
    C0 = np.arange(16, dtype=np.float64).reshape(4, 4)
    C = C0.copy()
    multiply(np.ones((4, 4)), np.ones((4, 4)), C, 0.0, 3.0, levels=2)
    assert np.array_equal(C, 3 * C0)


def test_error_growth_per_level_is_bounded():
    """Measured error grows with the number of levels, but by less than e = 12 per level (Higham Thm 23.2)."""
    n = 128
    errors = []
    for levels in range(4):
        per_seed = []
        for seed in range(3):
            A, B, C0 = random_operands(n, n, n, np.dtype("float32"), seed)
            C = C0.copy()
            multiply(A, B, C, levels=levels)
            reference = reference_gemm(A, B, C0, 1.0, 0.0)
            per_seed.append(relative_error(C, reference))
            assert per_seed[-1] <= error_bound("float32", "strassen", levels, A, B, C0, 1.0, 0.0, reference)
        errors.append(max(per_seed))
    assert errors[3] > errors[0], f"Strassen levels should cost accuracy: {errors}"
    for lower, higher in zip(errors, errors[1:]):
        assert higher / lower < 12, f"growth per level above Strassen's stability factor: {errors}"
    assert errors[3] < 1e-5


@pytest.mark.parametrize(
    "shapes, dtypes, message",
    [
        (((4, 5), (5, 6), (4, 6)), ("float32", "float64", "float32"), "share one dtype"),
        (((4, 5), (6, 6), (4, 6)), ("float32",) * 3, "do not multiply"),
        (((4, 5), (5, 6), (4, 6)), ("float16",) * 3, "unsupported dtype"),
        (((4, 5, 1), (5, 6), (4, 6)), ("float32",) * 3, "2-D"),
    ],
)
def test_bad_operands(shapes, dtypes, message):
    A, B, C = (np.zeros(s, d) for s, d in zip(shapes, dtypes))
    with pytest.raises(GemmError, match=message):
        multiply(A, B, C)


def test_overlapping_output_rejected():
    X = np.zeros((4, 4))
    with pytest.raises(GemmError, match="overlap"):
        multiply(X, np.zeros((4, 4)), X)


def test_plan_shape_mismatch_rejected():
    with pytest.raises(ValueError, match="plan is for"):
        gemm(make_plan("strassen", 1, 4, 4, 4), np.zeros((4, 5)), np.zeros((5, 4)), np.zeros((4, 4)))
