"""The real CUDA kernel sources, compiled by g++ against the emulation layer and run on the CPU.

Integer-valued inputs make every product exact in floating point, so the kernels must agree with the NumPy
engine bit for bit; random inputs are checked against float64 within the error bound (verify()).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

from strassenbench.options import PAPER_SCHEMES  # splitk: tests/fused/test_splitk.py
from strassenbench.algebra.primitives import variants
from strassenbench.engines import ENGINES
from strassenbench.fused.build import FLIGHTS
from strassenbench.fused.instances import Instance, operand_counts
from strassenbench.fused.launch import FusedError, normalised, param_bytes, plan_launches
from strassenbench.plan import make_plan
from strassenbench.strategies import STRATEGIES
from strassenbench.verify import verify

emu = ENGINES["emu"]
reference = ENGINES["numpy"]

# Shapes that do not divide into any strategy's tiles; every value of 1, 17, 33, 130, 257 in each dimension.
FRINGE = [(1, 2, 1), (17, 33, 130), (33, 130, 257), (130, 257, 1), (257, 1, 17), (33, 17, 33)]
SMALL_FRINGE = [(1, 2, 1), (17, 33, 130), (33, 17, 33), (130, 1, 17), (1, 130, 33)]


def integer_operands(m: int, k: int, n: int, dtype: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-2, 3, shape).astype(dtype) for shape in ((m, k), (k, n), (m, n)))


def run_both(levels, shape, dtype, alpha, beta, **options):  # noqa: ANN001, ANN201
    m, k, n = shape
    A, B, C = integer_operands(m, k, n, dtype)
    plan = make_plan("strassen", levels, m, k, n)
    expected, got = C.copy(), C.copy()
    reference(plan, A, B, expected, alpha, beta)
    emu(plan, A, B, got, alpha, beta, **options)
    return expected, got


@pytest.mark.parametrize("slices", range(1, 7))
def test_every_count_of_interior_slices_is_exact(slices: int) -> None:
    """The interior path runs its slices in pairs, counted down, then the one left of an odd count, and the
    predicated path the rest (mainloop.cuh, gemm_iters): a 1-level Huge float32 product whose term blocks are
    one tile and `slices` k_S slices deep, exact with every count of pairs, odd and even, in both write modes."""
    huge = STRATEGIES["Huge"]
    shape = (2 * huge.m_S, 2 * huge.k_S * slices, 2 * huge.n_S)
    for scheme in ("sequential", "atomic"):
        expected, got = run_both(1, shape, "float32", 1.0, 1.0, strategy="Huge", scheme=scheme)
        np.testing.assert_array_equal(got, expected, err_msg=f"{slices} slices, {scheme}")


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("scheme", ["sequential", "atomic"])
def test_one_level_every_strategy_and_write_mode_exact(strategy: str, scheme: str) -> None:
    """All four 1-level variants (the plan uses every one), plain (sequential) and atomicAdd (atomic)
    write-back, fringe shapes, alpha and beta, both dtypes."""
    shapes = FRINGE if strategy in ("Small", "Medium") else SMALL_FRINGE
    for shape, dtype in itertools.product(shapes, ("float32", "float64")):
        expected, got = run_both(1, shape, dtype, 0.5, -1.5, strategy=strategy, scheme=scheme)
        np.testing.assert_array_equal(got, expected, err_msg=f"{strategy} {scheme} {shape} {dtype}")


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_gemm_every_strategy_exact(strategy: str) -> None:
    """The plain GEMM (W = 1, 1, 1; the paper's CUTLASS line) with beta folded into the kernel."""
    for shape, dtype in itertools.product([(1, 1, 1), *SMALL_FRINGE], ("float32", "float64")):
        expected, got = run_both(0, shape, dtype, 2.0, 0.25, strategy=strategy)
        np.testing.assert_array_equal(got, expected, err_msg=f"{strategy} {shape} {dtype}")


@pytest.mark.parametrize("scheme", PAPER_SCHEMES)
def test_two_level_every_variant_small_exact(scheme: str) -> None:
    """Direct 2-level: 49 products in the ten variants of figure tab:perfeq_level2, Small strategy."""
    for shape, dtype in itertools.product([(33, 17, 130), (17, 33, 33), (1, 4, 1)], ("float32", "float64")):
        expected, got = run_both(2, shape, dtype, -1.0, 2.0, strategy="Small", scheme=scheme)
        np.testing.assert_array_equal(got, expected, err_msg=f"{scheme} {shape} {dtype}")


@pytest.mark.parametrize("scheme", PAPER_SCHEMES)
def test_one_level_schemes_exact(scheme: str) -> None:
    for shape in [(33, 17, 130), (130, 33, 1)]:
        expected, got = run_both(1, shape, "float32", 1.0, 0.0, strategy="Medium", scheme=scheme)
        np.testing.assert_array_equal(got, expected, err_msg=f"{scheme} {shape}")


@pytest.mark.parametrize("levels", [1, 2])
def test_plans_launch_every_variant(levels: int) -> None:
    plan = make_plan("strassen", levels, 64, 64, 64)
    A, B, C = integer_operands(64, 64, 64, "float32")
    launched = {launch.kernel for launch in plan_launches(plan, A, B, C, 1.0, 1.0, strategy=STRATEGIES["Small"]).launches}
    for v in variants("strassen", levels):
        assert Instance(STRATEGIES["Small"], "float32", (v.W_A, v.W_B, v.W_C), "plain").name in launched
        assert (v.W_A, v.W_B, v.W_C) in operand_counts()


@pytest.mark.parametrize("levels", [1, 2])
def test_schemes_structure(levels: int) -> None:
    """sequential: one stream, a launch per product; streams: the schedule's stages, concurrent streams
    write disjoint C blocks; atomic: one batched atomicAdd launch per variant on four streams."""
    plan = make_plan("strassen", levels, 64, 64, 64)
    A, B, C = integer_operands(64, 64, 64, "float32")
    strategy = STRATEGIES["Small"]
    names = sorted(s.primitive.name for s in plan.steps)
    seq = plan_launches(plan, A, B, C, 1.0, 1.0, strategy=strategy)
    assert seq.num_streams == 1 and sorted(p for l in seq.launches for p in l.products) == names
    streams = plan_launches(plan, A, B, C, 1.0, 1.0, strategy=strategy, scheme="streams", streams=2 * levels)
    writes = {s.primitive.name: s.primitive.writes for s in plan.steps}
    for stage in streams.stages:
        lane_writes = [set().union(*(writes[p] for l in lane for p in l.products)) for lane in stage]
        for i, j in itertools.combinations(range(len(lane_writes)), 2):
            assert not lane_writes[i] & lane_writes[j]
    assert sorted(p for l in streams.launches for p in l.products) == names
    atomic = plan_launches(plan, A, B, C, 1.0, 1.0, strategy=strategy, scheme="atomic")
    assert len(atomic.stages) == 1 and atomic.num_streams == min(4, len(variants("strassen", levels)))
    assert len(atomic.launches) == len(variants("strassen", levels))
    assert all(l.kernel.endswith("_atomic") and l.grid[2] == len(l.products) for l in atomic.launches)
    assert sorted(p for l in atomic.launches for p in l.products) == names


def test_products_parameter_holds_every_term_and_no_device_memory() -> None:
    """Each launch carries its products' terms in sb::Products: the block addresses, extents and coefficients
    of the plan, nothing allocated on the device; a batch beyond the kernel's Z takes several launches."""
    plan = make_plan("strassen", 2, 64, 64, 64)
    A, B, C = integer_operands(64, 64, 64, "float32")
    program = plan_launches(plan, A, B, C, 1.0, 1.0, strategy=STRATEGIES["Small"], scheme="atomic")
    steps = {s.primitive.name: s for s in plan.steps}
    seen = 0
    for launch in program.launches:
        products = launch.args[-1]
        assert products.dtype.names == ("address", "rows", "cols", "coeff")
        assert len(launch.products) <= products["address"].shape[0] and launch.grid[2] == len(launch.products)
        for z, name in enumerate(launch.products):
            step, t = steps[name], 0
            for side, (views, X) in enumerate(((step.a, A), (step.b, B), (step.c, C))):
                coeffs = [c for _, c in views]
                if side < 2:  # the operand sums' coefficients normalised: u_0, then u_t / u_0
                    assert normalised(coeffs) == [coeffs[0], *(c / coeffs[0] for c in coeffs[1:])]
                    coeffs = normalised(coeffs)
                for (view, _), coeff in zip(views, coeffs):
                    expected = X.ctypes.data + (0 if view.empty else (view.row * X.shape[1] + view.col) * 4)
                    assert products["address"][z, t] == expected
                    assert (products["rows"][z, t], products["cols"][z, t]) == (view.rows, view.cols)
                    assert products["coeff"][z, t] == coeff
                    t += 1
            seen += 1
    assert seen == len(plan.steps)
    assert param_bytes(plan, "float32") == 0


def test_batches_beyond_the_parameter_space_split(monkeypatch) -> None:  # noqa: ANN001
    """A variant with more products than the kernel's Z runs as several launches (each within Z)."""
    plan = make_plan("strassen", 2, 32, 32, 32)
    A, B, C = integer_operands(32, 32, 32, "float32")
    whole = plan_launches(plan, A, B, C, 1.0, 0.0, strategy=STRATEGIES["Small"], scheme="atomic")
    monkeypatch.setattr(Instance, "batch", property(lambda self: 2))
    split = plan_launches(plan, A, B, C, 1.0, 0.0, strategy=STRATEGIES["Small"], scheme="atomic")
    assert max(len(l.products) for l in whole.launches) > 2
    assert all(len(l.products) <= 2 and l.grid[2] == len(l.products) for l in split.launches if l.products)
    assert sorted(p for l in split.launches for p in l.products) == sorted(p for l in whole.launches for p in l.products)


def test_beta_applied_once_and_c_not_read_when_beta_zero() -> None:
    for levels, mode in itertools.product((0, 1, 2), PAPER_SCHEMES):
        m, k, n = 33, 17, 20
        A, B, _ = integer_operands(m, k, n, "float32")
        C = np.full((m, n), np.nan, dtype=np.float32)
        emu(make_plan("strassen", levels, m, k, n), A, B, C, 1.0, 0.0, strategy="Small", scheme=mode)
        np.testing.assert_array_equal(C, A @ B)
        C2 = np.ones((m, n), dtype=np.float32)
        emu(make_plan("strassen", levels, m, k, n), A, B, C2, 1.0, 3.0, strategy="Small", scheme=mode)
        np.testing.assert_array_equal(C2, A @ B + 3.0)
        C3 = np.ones((m, n), dtype=np.float32)
        emu(make_plan("strassen", levels, m, k, n), A, B, C3, 0.0, 2.0, strategy="Small", scheme=mode)
        np.testing.assert_array_equal(C3, np.full((m, n), 2.0, dtype=np.float32))


def test_gemm_folds_beta_strassen_scales_first() -> None:
    A, B, C = integer_operands(20, 20, 20, "float32")
    gemm = plan_launches(make_plan("strassen", 0, 20, 20, 20), A, B, C, 1.0, 0.5, strategy=STRATEGIES["Huge"]).launches
    assert [launch.kernel for launch in gemm] == ["strassen_f32_huge_w1x1x1_plain"]
    one = plan_launches(make_plan("strassen", 1, 20, 20, 20), A, B, C, 1.0, 0.5, strategy=STRATEGIES["Huge"]).launches
    assert one[0].kernel == "scale_f32" and all(launch.args[5] == 1 for launch in one[1:])


def test_any_leading_dimension_and_unaligned_views() -> None:
    """Operands as views into larger arrays: leading dimension > columns, pointers not 16-byte aligned."""
    rng = np.random.default_rng(3)
    bigA = rng.integers(-2, 3, (40, 50)).astype(np.float32)
    bigB = rng.integers(-2, 3, (50, 61)).astype(np.float32)
    bigC = rng.integers(-2, 3, (45, 70)).astype(np.float32)
    A, B = bigA[1:34, 3:40], bigB[2:39, 1:30]
    for levels, strategy in itertools.product((0, 1, 2), ("Small", "Wide", "Huge")):
        C = bigC.copy()
        view = C[5:38, 7:36]
        outside = C.copy()
        expected = view.copy()
        reference(make_plan("strassen", levels, 33, 37, 29), A, B, expected, 1.0, 1.0)
        emu(make_plan("strassen", levels, 33, 37, 29), A, B, view, 1.0, 1.0, strategy=strategy)
        np.testing.assert_array_equal(view, expected)
        view[...] = outside[5:38, 7:36]
        np.testing.assert_array_equal(C, outside)  # nothing outside the view was touched


@pytest.mark.parametrize(("dtype", "levels"), [
    (dtype, levels) if (dtype, levels) != ("float64", 2) else pytest.param(dtype, levels, marks=pytest.mark.slow)
    for levels in (0, 1, 2) for dtype in ("float32", "float64")])
def test_random_inputs_within_error_bound(dtype: str, levels: int) -> None:
    for seed, strategy in enumerate(("Small", "Large", "Huge")):
        result = verify(engine="emu", algorithm="strassen", levels=levels, m=130, n=33, k=257, dtype=dtype,
                        alpha=0.75, beta=-0.5, seed=seed, options={"strategy": strategy})
        assert result["status"] == "ok", result


def test_column_major_operand_is_a_clear_error() -> None:
    A, B, C = integer_operands(8, 8, 8, "float32")
    with pytest.raises(FusedError, match="row-major"):
        emu(make_plan("strassen", 1, 8, 8, 8), A.T, B, C, strategy="Small")


def test_terms_beyond_the_kernel_parameters_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A product whose terms would not fit the 4 KiB of kernel parameters is one clear error, before launch."""
    import strassenbench.fused.launch as launch

    A, B, C = integer_operands(8, 8, 8, "float32")
    monkeypatch.setattr(launch, "max_batch", lambda dtype, terms: 0 if terms > 3 else 1)
    with pytest.raises(FusedError, match="exceed the 4 KiB"):
        emu(make_plan("winograd", 1, 8, 8, 8), A, B, C, strategy="Small")


def test_sanitizer_subset(tmp_path) -> None:  # noqa: ANN001
    """AddressSanitizer + UBSan over fringe shapes, and interior tiles with an odd count of interior slices (the
    unpredicated loads of the slice in flight stop at the terms' k extent): any read or write past an operand is
    an error."""
    libasan = subprocess.run(["g++", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libasan):
        pytest.fail("g++ has no AddressSanitizer runtime (libasan)")
    env = dict(os.environ, LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
               STRASSENBENCH_CACHE=str(tmp_path),
               # -O0 (after the emulator's -O1): the three instrumented libraries compile in two thirds of the time
               STRASSENBENCH_EMU_FLAGS="-O0 -fsanitize=address,undefined -fno-sanitize-recover=all "
                                       "-fno-omit-frame-pointer")
    cases = [
        ("0", "1", "1", "1", "Small", "sequential", "float32"),
        ("1", "17", "33", "1", "Small", "sequential", "float32"),
        ("1", "33", "1", "17", "Small", "atomic", "float64"),
        ("2", "9", "33", "17", "Small", "streams", "float64"),
        ("2", "17", "33", "33", "Small", "sequential", "float32"),
        ("1", "130", "17", "33", "Huge", "sequential", "float32"),
        ("1", "256", "256", "32", "Huge", "sequential", "float32"),  # 1 interior slice, then the last
        ("1", "256", "256", "64", "Huge", "atomic", "float32"),  # a pair and 1 interior slice, then the last
    ]
    for levels, m, n, k, strategy, scheme, dtype in cases:
        result = subprocess.run(
            [sys.executable, "-m", "strassenbench", "verify", "--engine", "emu", "--levels", levels, "--m", m,
             "--n", n, "--k", k, "--strategy", strategy, "--scheme", scheme, "--dtype", dtype, "--beta", "0.5"],
            capture_output=True, text=True, env=env, timeout=600,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert "status=ok" in result.stdout
        assert "Sanitizer" not in result.stderr and "runtime error" not in result.stderr


_COMPILE_ONE = """
from strassenbench.fused.emu import library
from strassenbench.fused.instances import parse_instance
library("float32", "Small", (), (parse_instance("strassen_f32_small_w1x1x1_plain"),))
"""


def test_processes_that_need_one_library_compile_it_once(tmp_path) -> None:  # noqa: ANN001
    """Two processes (workflow jobs, test workers) that ask for the same emulator library at once: one compiles
    it, under a lock beside it in the cache, the other waits and loads what it wrote."""
    log = tmp_path / "compiles.log"
    wrapper = tmp_path / "cxx.sh"
    wrapper.write_text(f'#!/bin/sh\necho "$$" >> "{log}"\nsleep 1\nexec g++ "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "CXX": str(wrapper), "STRASSENBENCH_CACHE": str(tmp_path / "cache")}
    runs = [subprocess.Popen([sys.executable, "-c", _COMPILE_ONE], env=env, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    errors = [run.communicate(timeout=300)[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], errors
    assert len(log.read_text().split()) == 1  # one compile for both
    assert len(list((tmp_path / "cache").glob("*.so"))) == 1


# The sources the build may compile instead of a kernel's default, and where they are exercised: REREAD (the last
# remedy for a vector kernel that spills, strassenbench.fused.build._reread_spilling) on Small in both dtypes, and
# each FLIGHTS value (the tuned Huge float32 kernels' registers of raw loads in flight) on Huge at 1 and 2 levels.
# Each shape has interior tiles, so the pipelined path the variant changes runs.
BUILD_VARIANTS = {
    "reread": ({"reread": True}, -2, "true",
               [(1, (128, 96, 128), "float32", "Small"), (1, (128, 96, 128), "float64", "Small")]),
    **{f"flight{f}": ({"flight": f}, -1, str(f),
                      [(1, (256, 64, 256), "float32", "Huge"), (2, (512, 64, 512), "float32", "Huge")])
       for f in FLIGHTS},
}


@pytest.mark.parametrize("variant", list(BUILD_VARIANTS))
def test_build_variants_compute_the_same(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same sources with a build variant's instance fields (BUILD_VARIANTS) are exact, one product per launch
    (sequential) and batched (atomic); the library the emulator ran was rendered with them."""
    from dataclasses import replace

    from strassenbench.fused import emu as emu_module

    fields, position, value, cases = BUILD_VARIANTS[variant]
    real_render = emu_module.render
    rendered: list[str] = []

    def render_variant(selected):  # noqa: ANN001, ANN202
        text = real_render(tuple(i if i.tensor else replace(i, **fields) for i in selected))
        rendered.append(text)
        return text

    monkeypatch.setattr(emu_module, "render", render_variant)
    emu_module.library.cache_clear()
    try:
        for (levels, shape, dtype, strategy), scheme in itertools.product(cases, ("sequential", "atomic")):
            expected, got = run_both(levels, shape, dtype, 1.0, 1.0, strategy=strategy, scheme=scheme)
            np.testing.assert_array_equal(got, expected, err_msg=f"{variant} {levels} {shape} {dtype} {scheme}")
    finally:
        emu_module.library.cache_clear()
    lines = [line for text in rendered for line in text.splitlines() if line.startswith("SB_STRASSEN_INSTANCE")]
    assert lines and all(line.removesuffix(")").split(", ")[position] == value for line in lines)
