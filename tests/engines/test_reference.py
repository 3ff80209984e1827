"""The workspace-based reference (reference/strassen_ref.py): exact on integers, workspace = formula."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strassenbench.reference.array_ops import NumpyOps
from strassenbench.reference.strassen_ref import (
    SCHEDULES,
    Workspace,
    level_blocks,
    multiply,
    workspace_bytes,
    workspace_elements,
)

SHAPES = [(1, 1, 1), (1, 2, 1), (17, 33, 130), (33, 17, 33), (130, 1, 17), (64, 64, 64), (5, 3, 2), (257, 33, 17)]


def operands(m: int, k: int, n: int, dtype: str, seed: int = 0):  # noqa: ANN201
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-2, 3, s).astype(dtype) for s in ((m, k), (k, n), (m, n)))


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("levels", [1, 2, 3])
def test_exact_on_integers_with_fringes(schedule: str, levels: int) -> None:
    for (m, k, n), dtype in itertools.product(SHAPES, ("float32", "float64")):
        A, B, C = operands(m, k, n, dtype)
        expected = 0.5 * (A.astype(np.float64) @ B) - 1.5 * C
        multiply(A, B, C, 0.5, -1.5, levels=levels, schedule=schedule)
        np.testing.assert_array_equal(C, expected, err_msg=f"{schedule} L={levels} {(m, k, n)} {dtype}")


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 70), k=st.integers(1, 70), n=st.integers(1, 70), levels=st.integers(1, 3),
       schedule=st.sampled_from(SCHEDULES), beta=st.sampled_from([0.0, 1.0, -2.0]))
def test_any_shape_any_level(m: int, k: int, n: int, levels: int, schedule: str, beta: float) -> None:
    A, B, C = operands(m, k, n, "float64", seed=m * 10000 + k * 100 + n)
    expected = A @ B + beta * C
    multiply(A, B, C, 1.0, beta, levels=levels, schedule=schedule)
    np.testing.assert_array_equal(C, expected)


def test_beta_zero_does_not_read_c() -> None:
    A, B, _ = operands(33, 17, 20, "float32")
    C = np.full((33, 20), np.nan, dtype=np.float32)
    multiply(A, B, C, 1.0, 0.0, levels=2)
    np.testing.assert_array_equal(C, A @ B)


@pytest.mark.parametrize(("m", "k", "n", "levels"), [(1024, 1024, 1024, 1), (4096, 2048, 1000, 2), (37, 5, 91, 3)])
def test_workspace_is_the_formula(m: int, k: int, n: int, levels: int) -> None:
    """X, Y, Z per level: sum_l m_l k_l + k_l n_l + m_l n_l with d_l = ceil(d / 2^l), allocated once."""
    ws = Workspace(m, k, n, levels, "float32")
    assert ws.nbytes == workspace_bytes(m, k, n, levels, "float32") == 4 * workspace_elements(m, k, n, levels)
    expected = 0
    for level in range(1, levels + 1):
        d = [-(-x // 2**level) for x in (m, k, n)]
        expected += d[0] * d[1] + d[1] * d[2] + d[0] * d[2]
    assert workspace_elements(m, k, n, levels) == expected
    if (m, k, n, levels) == (1024, 1024, 1024, 1):
        assert ws.nbytes == 4 * 3 * 512 * 512  # the paper's O(mk/4 + kn/4 + mn/4), exactly


def test_workspace_reused_and_never_grown() -> None:
    """A workspace allocated once per benchmark serves every call that fits, and no call allocates another."""
    ws = Workspace(130, 130, 130, 2, "float64")
    buffer = ws.buffer
    for m, k, n in [(130, 130, 130), (64, 100, 7), (3, 3, 3)]:
        A, B, C = operands(m, k, n, "float64")
        expected = A @ B
        assert multiply(A, B, C, levels=2, workspace=ws) is ws
        np.testing.assert_array_equal(C, expected)
    assert ws.buffer is buffer
    A, B, C = operands(200, 10, 10, "float64")
    with pytest.raises(ValueError, match="does not fit"):
        multiply(A, B, C, levels=2, workspace=ws)


def test_winograd_schedule_makes_seven_products_per_level() -> None:
    calls = []

    def leaf(out, a, b, alpha, beta):  # noqa: ANN001, ANN202
        calls.append(a.shape)
        NumpyOps().gemm(out, a, b, alpha, beta)

    for levels in (1, 2):
        calls.clear()
        A, B, C = operands(64, 64, 64, "float32")
        multiply(A, B, C, levels=levels, leaf=leaf)
        assert len(calls) == 7**levels and all(s == (64 // 2**levels,) * 2 for s in calls)
        np.testing.assert_array_equal(C, A @ B)


def test_unknown_schedule() -> None:
    A, B, C = operands(4, 4, 4, "float32")
    with pytest.raises(ValueError, match="unknown reference schedule"):
        multiply(A, B, C, schedule="peeling")


def test_level_blocks_halve_with_ceiling() -> None:
    assert level_blocks(5, 9, 1, 3) == [(3, 5, 1), (2, 3, 1), (1, 2, 1)]
