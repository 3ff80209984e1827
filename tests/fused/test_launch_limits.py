"""Launches within CUDA's grid limits (strassenbench.fused.launch.MAX_GRID): a launch of more block rows than a
grid's y holds (65,535) runs as several, each over a band of rows of every A and C term.

The emulator runs one OS thread per CUDA thread, far too slow for the 2^21 rows that pass the real limit: the
split is run exactly on small problems with a small injected limit (``max_grid``), and the real limit is
checked on the launches of a tall problem that is planned, never run.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from strassenbench.options import PAPER_SCHEMES  # splitk: tests/fused/test_splitk.py
from strassenbench.fused import emu
from strassenbench.fused.launch import MAX_GRID, plan_launches
from strassenbench.plan import make_plan
from strassenbench.strategies import STRATEGIES, TENSOR_STRATEGIES

# Two block rows per launch. m = 129 pads at every level: its blocks have 65 and 64 rows at 1 level, 33 and 32
# at 2, so the band from row 2 m_S on leaves some terms no rows (a term emptied by the split, beside live ones).
SMALL_GRID = (MAX_GRID[0], 2, MAX_GRID[2])
M = 129


def _operands(m: int, k: int, n: int, dtype: str) -> tuple[np.ndarray, ...]:
    """Integers in [-4, 4]: every product and sum exact in float32, float64 and TF32."""
    rng = np.random.default_rng(m + k + n)
    return tuple(rng.integers(-4, 5, shape).astype(dtype) for shape in ((m, k), (k, n), (m, n)))


def _fits(grid: tuple[int, int, int], max_grid: tuple[int, int, int]) -> bool:
    return all(1 <= g <= most for g, most in zip(grid, max_grid))


def _emptied_terms(program) -> bool:  # noqa: ANN001
    """Some term of a launch has columns but no rows: a term the split left no rows in its band."""
    return any(((p["rows"] == 0) & (p["cols"] > 0)).any() for p in (launch.args[-1] for launch in program.launches)
               if p.dtype.names)


def _run_split(levels: int, shape: tuple[int, int, int], dtype: str, strategy, **options) -> tuple:  # noqa: ANN001
    """Run the plan with SMALL_GRID on the emulator; the program and whether C is exact."""
    m, k, n = shape
    A, B, C = _operands(m, k, n, dtype)
    plan = make_plan("strassen", levels, m, k, n)
    got = C.copy()
    split = plan_launches(plan, A, B, got, 1.0, 0.5, strategy=strategy, max_grid=SMALL_GRID, **options)
    whole = plan_launches(plan, A, B, got, 1.0, 0.5, strategy=strategy, **options)
    assert all(_fits(launch.grid, SMALL_GRID) for launch in split.launches)
    assert len(split.launches) > len(whole.launches)
    emu.run(split, operands=(A, B, got))
    np.testing.assert_array_equal(got, A.astype(np.float64) @ B + 0.5 * C, err_msg=f"{levels} {shape} {dtype}")
    return split


@pytest.mark.parametrize("scheme", PAPER_SCHEMES)
@pytest.mark.parametrize("levels", [0, 1, 2])
def test_split_launches_exact(levels: int, scheme: str) -> None:
    """0, 1 and 2 levels, plain (sequential, streams) and atomicAdd (atomic) write-back, both dtypes, scalar
    loads (k, n odd) and vector loads (aligned blocks: k, n multiples of 4 at every level)."""
    for dtype, (k, n, loads) in itertools.product(("float32", "float64"), ((37, 41, "scalar"), (64, 64, "vector"))):
        program = _run_split(levels, (M, k, n), dtype, STRATEGIES["Small"], scheme=scheme)
        assert {launch.instance.loads for launch in program.launches if launch.instance} == {loads}
        assert _emptied_terms(program) == (levels > 0)


def test_split_tensor_core_launches_exact() -> None:
    """The tensor-core kernels take the same sb::Products: 1 level of 1xTF32 on TcSmall (m_S = 32)."""
    program = _run_split(1, (M, 64, 64), "float32", TENSOR_STRATEGIES["TcSmall"], mode="1xtf32")
    assert _emptied_terms(program)


@pytest.mark.parametrize("levels", [0, 1])
def test_tall_problem_within_the_real_grid(levels: int) -> None:
    """m = 2^21, n = k = 64, float32 Small (m_S = 16): 131,072 block rows for the GEMM, 65,536 per product at
    1 level, past a grid's 65,535 in y. Planned only: A and C are views of a small buffer with their real
    strides (plan_launches reads shapes, strides and addresses; these launches must never run, and the
    assertions below name only numbers: pytest's report of a view would read past the buffer)."""
    m, k, n = 2**21, 64, 64
    buffer = np.zeros(k * n, np.float32)
    A, C = (np.lib.stride_tricks.as_strided(buffer, (m, cols), (cols * 4, 4)) for cols in (k, n))
    bases = [A.ctypes.data, buffer.ctypes.data, C.ctypes.data]
    plan = make_plan("strassen", levels, m, k, n)
    launches = plan_launches(plan, A, buffer.reshape(k, n), C, 1.0, 0.0, strategy=STRATEGIES["Small"]).launches
    grids = [launch.grid for launch in launches]
    assert all(_fits(grid, MAX_GRID) for grid in grids)
    block_rows = -(-plan.block[0] // 16)
    for name in {p for launch in launches for p in launch.products}:
        bands = [launch.grid[1] for launch in launches if name in launch.products]
        assert sum(bands) == block_rows and len(bands) == -(-block_rows // MAX_GRID[1])
    if levels == 0:  # each band's A and C term: from its first row rows0 = r0 m_S on
        assert [grid[1] for grid in grids] == [65535, 65535, 2]
        for launch, r0 in zip(launches, (0, 65535, 2 * 65535)):
            terms = launch.args[-1]
            assert [int(a) - base for a, base in zip(terms["address"][0], bases)] == [r0 * 16 * k * 4, 0,
                                                                                     r0 * 16 * n * 4]
            assert list(terms["rows"][0]) == [m - r0 * 16, k, m - r0 * 16]
