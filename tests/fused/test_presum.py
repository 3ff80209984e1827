"""The presum scheme (strassenbench.fused.launch, kernels/presum.cuh): every operand sum of several terms formed
once into a workspace, then the products one after another, each loading one term per operand. Exact on
integers on the NumPy engine and through the real kernels on the emulator, at 1 and 2 levels, for the
catalogue's algorithms; its workspace is what the implementations declare and what memlimit counts."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from strassenbench.algebra.algorithm import algorithm_names
from strassenbench.algebra.levels import grid_dims
from strassenbench.bench.memlimit import needed_bytes
from strassenbench.cli import main
from strassenbench.engines import numpy_engine
from strassenbench.families import get_strategy
from strassenbench.fused import launch
from strassenbench.fused.instances import presum_counts
from strassenbench.fused.launch import FusedError, plan_launches, presum_bytes, presum_layout
from strassenbench.impls import ImplError, get_impl
from strassenbench.options import OptionsError, RunOptions
from strassenbench.plan import make_plan

ALPHA, BETA = -1.5, 0.5
# Emulated in the default suite: Strassen at 1 and 2 levels (and on the tensor cores in 3xTF32), rectangular
# catalogue algorithms (grey422-14-84's sums of B shared by two products each), the rank-48 rational 4x4 one
# (coefficients of 1/2) and a mixed spec.
EMULATED = [("strassen1-presum", "float32", (37, 29, 41)), ("strassenx1-3xtf32-presum", "float32", (37, 29, 41)),
            ("strassen2-presum", "float32", (37, 41, 29)), ("strassen2-presum", "float64", (64, 64, 64)),
            ("grey322-11-50x1-presum", "float32", (20, 13, 11)), ("grey422-14-84x1-presum", "float32", (13, 7, 5)),
            ("plinopt-4x4x4-48-rationalx1-presum", "float64", (18, 17, 19)),
            ("grey322-11-50+strassen-presum", "float32", (26, 19, 23))]


def _operands(m: int, k: int, n: int, dtype: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-2, 3, shape).astype(dtype) for shape in ((m, k), (k, n), (m, n)))


def _expected(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    return (ALPHA * (A.astype(np.float64) @ B) + BETA * C).astype(C.dtype)


@pytest.mark.parametrize(("name", "dtype", "shape"), EMULATED)
def test_presum_is_exact_on_the_emulator_and_numpy(name: str, dtype: str, shape: tuple[int, int, int]) -> None:
    impl = get_impl(name)
    for engine in ("numpy", "emu"):
        A, B, C = _operands(*shape, dtype)
        expected = _expected(A, B, C)
        impl(A, B, C, ALPHA, BETA, engine=engine)
        np.testing.assert_array_equal(C, expected, err_msg=f"{name} {engine} {dtype} {shape}")


@pytest.mark.parametrize("spec", algorithm_names())
def test_every_algorithm_is_exact_in_the_presum_order_on_numpy(spec: str) -> None:
    """One level of every algorithm of the catalogue, its sums formed first in the kernels' workspace layout."""
    m, k, n = (g + g // 2 + 1 if g > 1 else 3 for g in grid_dims(spec, 1))  # no dimension a multiple of the grid
    A, B, C = _operands(m, k, n, "float64")
    expected = _expected(A, B, C)
    numpy_engine.gemm(make_plan(spec, 1, m, k, n), A, B, C, ALPHA, BETA, presum=True)
    np.testing.assert_array_equal(C, expected, err_msg=spec)


def test_the_products_load_one_term_per_operand_after_the_sums() -> None:
    """Strassen at 1 level: the 5 sums of A and the 5 of B in a first stage (one stream each), then the 7
    products on one stream, in order, on kernels of W_A = W_B = 1 (presum_counts) with plain write-back."""
    m = k = n = 64
    A, B, C = _operands(m, k, n, "float32")
    plan = make_plan("strassen", 1, m, k, n)
    program = plan_launches(plan, A, B, C, 1.0, 1.0, strategy=get_strategy("Small"), scheme="presum")
    sums, products = program.stages
    assert [len(lane) for lane in sums] == [1, 1] and all(l.kernel == "presum_f32" for lane in sums for l in lane)
    assert [launch.grid[2] for lane in sums for launch in lane] == [5, 5]
    assert len(products) == 1 and [l.products[0] for l in products[0]] == [s.primitive.name for s in plan.steps]
    counts = {l.instance.counts for l in products[0]}
    assert counts == set(presum_counts("strassen", 1)) and {l.instance.write_mode for l in products[0]} == {"plain"}
    assert [w.shape for w in program.workspace] == [(5 * 32, 32), (5 * 32, 32)]


def test_a_sum_and_its_multiples_share_one_block() -> None:
    """Each distinct sum is formed once: a product whose sum is another's times a power of two takes that block
    with its own first coefficient (normalised): grey422-14-84's 10 sums of B are 5 blocks. Strassen's 45 sums
    of each operand at 2 levels are all distinct."""
    plan = make_plan("grey422-14-84", 1, 16, 8, 8)
    assert (len(presum_layout(plan).sums[1]), sum(len(s.b) > 1 for s in plan.steps)) == (5, 10)
    plan = make_plan("strassen", 2, 64, 64, 64)
    layout = presum_layout(plan)
    for side in (0, 1):
        sides = {tuple(t) for s in plan.steps for t in [(s.a, s.b)[side]] if len(t) > 1}
        assert len(layout.sums[side]) == len(sides) == 45
        assert all(terms[0][1] == 1 for terms in layout.sums[side])  # normalised: the first coefficient is 1
    for step, new in zip(plan.steps, layout.steps):
        for old_terms, (view, coeff) in ((step.a, new.a[0]), (step.b, new.b[0])):
            if len(old_terms) > 1:
                assert coeff == old_terms[0][1] and view.row % 16 == 0 and view.col == 0


def test_the_workspace_is_what_the_implementations_declare_and_memlimit_counts() -> None:
    """5/4 (mk + kn) at 1 level of Strassen, 45/16 (mk + kn) at 2 (no sum is another's multiple there); the
    implementations' extra bytes and memlimit's need are the same count."""
    n = 4096
    for name, fraction in (("strassen1-presum", Fraction(5, 4)), ("strassen2-presum", Fraction(45, 16))):
        impl = get_impl(name)
        workspace = int(fraction * 2 * n * n * 4)
        assert impl.extra_bytes(n, n, n, "float32") == workspace == presum_bytes(make_plan("strassen", impl.levels,
                                                                                          n, n, n), "float32")
        assert needed_bytes(name, n, "float32") == needed_bytes("cublas", n, "float32") + workspace
    assert get_impl("strassen1-presum").formula == "5mk/4 + 5kn/4"
    assert get_impl("grey322-11-50x1-presum").extra_bytes(60, 60, 60, "float64") > 0


def test_presum_is_an_implementation_of_its_own_never_a_scheme_option() -> None:
    """The workspace-free implementations keep a declared memory of none: --scheme presum is no choice of
    theirs, and a presum implementation takes no --scheme; presum runs on one stream."""
    assert main(["verify", "--impl", "strassen1", "--scheme", "presum", "--sizes", "8"]) == 2
    with pytest.raises(ImplError, match="takes no --scheme"):
        get_impl("strassen1-presum").run_options("emu", scheme="atomic")
    with pytest.raises(OptionsError, match="presum scheme runs on one stream"):
        RunOptions(scheme="presum", streams=2)
    assert get_impl("strassen1-presum").run_options("emu").scheme_name == "presum"


def test_a_sum_past_the_kernels_terms_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "PRESUM_TERMS", 1)
    with pytest.raises(FusedError, match="sums 2 terms; the presum kernel takes at most 1"):
        presum_layout(make_plan("strassen", 1, 8, 8, 8))


def test_build_presum_adds_the_kernels_it_runs(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    """`build --presum` asks for the presum scheme's kernels of Strassen and of every --plan beside the default
    ones (the compile is not run here: test_kernels_build compiles)."""
    import pandas as pd

    from strassenbench.fused import build as build_module
    from strassenbench.fused.instances import operand_counts

    asked = {}

    def fake_build(archs, out, **kwargs):  # noqa: ANN001, ANN202
        asked.update(kwargs)
        return pd.DataFrame({"spill_stores": [], "spill_loads": []})

    monkeypatch.setattr(build_module, "build", fake_build)
    assert main(["build", "--arch", "sm_90", "--presum", "--plan", "grey322-11-50:1", "--out", str(tmp_path)]) == 0
    assert {(1, 1, 2), (1, 1, 4)} <= set(asked["counts"]) and set(operand_counts()) <= set(asked["counts"])
    assert set(presum_counts("grey322-11-50", 1)) <= set(asked["counts"])


@pytest.mark.slow
@pytest.mark.parametrize("spec", algorithm_names())
def test_every_algorithm_is_exact_in_presum_on_the_emulator(spec: str) -> None:
    """One level of every algorithm of the catalogue through the presum and product kernels (minutes)."""
    m, k, n = (g + g // 2 + 1 if g > 1 else 3 for g in grid_dims(spec, 1))
    A, B, C = _operands(m, k, n, "float64")
    expected = _expected(A, B, C)
    get_impl(f"{spec}x1-presum")(A, B, C, ALPHA, BETA, engine="emu")
    np.testing.assert_array_equal(C, expected, err_msg=spec)
