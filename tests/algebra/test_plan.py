"""Plans: blocks as views with bounds (virtual zero padding, paper Sec. s:fringe)."""

import numpy as np
import pytest

from strassenbench.plan import PlanError, make_plan, max_levels


def _coverage(plan, operand, shape):
    """How often each element of an operand is covered by the distinct blocks the plan names."""
    seen = {}
    for step in plan.steps:
        terms = {"A": step.a, "B": step.b, "C": step.c}[operand]
        for view, _ in terms:
            seen[(view.row, view.col, view.rows, view.cols)] = view
    cover = np.zeros(shape, dtype=int)
    for view in seen.values():
        cover[view.row : view.row + view.rows, view.col : view.col + view.cols] += 1
    return cover


TILING_CASES = [
    (levels, shape)
    for shape in ((5, 7, 3), (17, 33, 130), (2, 2, 2), (1, 9, 1), (64, 64, 64))
    for levels in range(1, min(2, max_levels("strassen", *shape)) + 1)
]


@pytest.mark.parametrize("levels, shape", TILING_CASES)
def test_blocks_tile_every_operand_exactly_once(levels, shape):
    m, k, n = shape
    plan = make_plan("strassen", levels, m, k, n)
    for operand, dims in (("A", (m, k)), ("B", (k, n)), ("C", (m, n))):
        assert (_coverage(plan, operand, dims) == 1).all()


def test_block_size_is_ceiling_and_edges_are_clipped():
    plan = make_plan("strassen", 1, 5, 7, 3)
    assert plan.block == (3, 4, 2)
    a3 = next(view for step in plan.steps for view, _ in step.a if (view.row, view.col) == (3, 4))
    assert (a3.rows, a3.cols) == (2, 3)


def test_empty_blocks_for_tiny_dimensions():
    plan = make_plan("strassen", 1, 1, 8, 8)
    rows = {view.rows for step in plan.steps for view, _ in step.a}
    assert rows == {0, 1}


def test_plan_records_variants():
    plan = make_plan("strassen", 1, 8, 8, 8)
    assert [s.variant for s in plan.steps] == [0, 3, 2, 2, 3, 1, 1]


@pytest.mark.parametrize(
    "shape, expected", [((1, 1, 1), 0), ((2, 1, 1), 1), ((1, 1, 7), 2), ((8, 8, 8), 3), ((1, 1000, 1), 9)]
)
def test_max_levels(shape, expected):
    assert max_levels("strassen", *shape) == expected


@pytest.mark.parametrize(
    "args, message",
    [
        (("strassen", 1, 0, 4, 4), "m must be >= 1"),
        (("strassen", 1, 4, -3, 4), "k must be >= 1"),
        (("strassen", 1, 4, 4, 2.5), "n must be an integer"),
        (("strassen", -1, 4, 4, 4), "levels must be a non-negative integer"),
        (("strassen", 4, 8, 8, 8), "more than the shape 8x8x8 allows"),
        (("nope", 1, 4, 4, 4), "unknown algorithm"),
    ],
)
def test_bad_plans(args, message):
    with pytest.raises(PlanError, match=message):
        make_plan(*args)
