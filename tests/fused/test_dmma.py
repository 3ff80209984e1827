"""The fused Strassen kernels on the FP64 tensor cores (kernels/dmma_primitive.cuh, mode ``dmma``): the real
sources on the CPU emulator, with the PTX ISA's fragment layout of mma.m8n8k4.f64, and their machine code.

The emulator's mma sums a fragment's four products into C with a chain of fused multiply-adds in k order,
each rounded to nearest. The PTX ISA gives the f64 mma's rounding (.rn) but not that order, so results are
compared exactly only on small integers, where no order can change them, and otherwise within the error
bound and against the SIMT kernels' error.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from strassenbench.algebra.primitives import variants
from strassenbench.engines import ENGINES
from strassenbench.fused.launch import FusedError, plan_launches
from strassenbench.plan import make_plan
from strassenbench.families import DMMA as DMMA_MODE
from strassenbench.strategies import DMMA_STRATEGIES, STRATEGIES, TENSOR_STRATEGIES

emu, reference = ENGINES["emu"], ENGINES["numpy"]


def _operands(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-100, 101, s).astype(np.float64) for s in ((m, k), (k, n), (m, n)))


@pytest.mark.parametrize("scheme", ["sequential", "atomic"])
@pytest.mark.parametrize("levels", [0, 1, 2])
def test_every_dmma_variant_exact_on_odd_shapes(scheme: str, levels: int) -> None:
    """Every variant of 0, 1 and 2 levels of Strassen on the DMMA kernels (DmmaSmall: W_A x W_B x W_C up to
    4 x 4 x 4), plain and atomicAdd write-back, odd shapes that pad at every level (scalar loads) and shapes
    whose blocks are aligned to 128-bit loads (vector loads; 128 x 128 x 128 has interior tiles at every level,
    the pipelined loop), alpha and beta: exact."""
    loads = set()
    for m, k, n in [(33, 17, 45), (17, 33, 9), (1, 4, 1), (45, 9, 33), (64, 32, 64), (128, 128, 128)]:
        A, B, C = _operands(m, k, n, seed=m + n)
        plan = make_plan("strassen", levels, m, k, n)
        program = plan_launches(plan, A, B, C, 2.0, -1.0, strategy=DMMA_STRATEGIES["DmmaSmall"],
                                scheme=scheme if levels else "sequential", mode=DMMA_MODE)
        counts = {launch.instance.counts for launch in program.launches if launch.instance}
        if min(m, k, n) > 1:  # every variant of the plan runs on its own kernel
            assert counts == {(v.W_A, v.W_B, v.W_C) for v in variants("strassen", levels)} if levels else {(1, 1, 1)}
        assert all(launch.kernel.startswith("strassen_dmma_dmmasmall_") for launch in program.launches
                   if launch.instance)
        loads |= {launch.instance.loads for launch in program.launches if launch.instance}
        got = C.copy()
        emu(plan, A, B, got, 2.0, -1.0, strategy="DmmaSmall", scheme=scheme if levels else "sequential",
            mode=DMMA_MODE)
        np.testing.assert_array_equal(got, 2.0 * (A @ B) - C, err_msg=f"{scheme} {levels} {(m, k, n)}")
    assert loads == {"vector", "scalar"}


def test_dmma_large_and_another_algorithm_exact() -> None:
    """DmmaLarge (four warps of 32 x 32) and DmmaHuge (eight of 32 x 64, k_S = 8) at 1 level, with interior
    tiles on the pipelined loop, and one level of a catalogue algorithm other than Strassen (Grey's 3x2x2:11,
    products of 1 to 3 terms) on DmmaSmall."""
    for strategy, algorithm, (m, k, n) in [("DmmaLarge", "strassen", (129, 9, 131)),
                                           ("DmmaLarge", "strassen", (256, 64, 256)),
                                           ("DmmaHuge", "strassen", (256, 32, 256)),
                                           ("DmmaSmall", "grey322-11-50", (97, 66, 70))]:
        A, B, C = _operands(m, k, n)
        got = C.copy()
        emu(make_plan(algorithm, 1, m, k, n), A, B, got, 1.0, 1.0, strategy=strategy, mode=DMMA_MODE)
        np.testing.assert_array_equal(got, A @ B + C, err_msg=f"{strategy} {algorithm} {(m, k, n)}")


@pytest.mark.parametrize("strategy", ["DmmaSmall", pytest.param("DmmaHuge", marks=pytest.mark.slow)])
def test_sm90_shapes_exact_and_the_same_as_sm80s(strategy: str) -> None:
    """The sm_90 code path (mma.m16n8k16, and m16n8k8 where k_S is 8: DmmaHuge), run on the emulator built with
    -DSB_EMU_SM90: every 1- and 2-level variant exact on small integers with interior tiles and fringes, and on
    uniform inputs bit for bit what the sm_80 path (mma.m8n8k4) gives, since the emulator sums both in k order.
    A fragment put in the wrong place of the PTX ISA's layout changes the product."""
    from strassenbench.fused import emu as emu_library

    s = DMMA_STRATEGIES[strategy]
    for levels, (m, k, n) in [(1, (2 * s.m_S + 3, 4 * s.k_S + 2, 2 * s.n_S + 1)), (2, (4 * s.m_S, 8 * s.k_S, 4 * s.n_S))]:
        if strategy == "DmmaHuge" and levels == 2:
            continue  # 2 levels of 128 x 128 tiles: shapes the emulator takes minutes over
        plan = make_plan("strassen", levels, m, k, n)
        A, B, C = _operands(m, k, n, seed=levels)
        got = C.copy()
        emu_library.run(plan_launches(plan, A, B, got, 1.0, 1.0, strategy=s, scheme="atomic", mode=DMMA_MODE),
                        extra_flags=("-DSB_EMU_SM90",))
        np.testing.assert_array_equal(got, A @ B + C, err_msg=f"{strategy} {levels} {(m, k, n)}")
        rng = np.random.default_rng(levels)
        A, B = rng.random((m, k)), rng.random((k, n))
        wide, narrow = np.zeros((m, n)), np.zeros((m, n))
        emu_library.run(plan_launches(plan, A, B, wide, 1.0, 0.0, strategy=s, scheme="atomic", mode=DMMA_MODE),
                        extra_flags=("-DSB_EMU_SM90",))
        emu_library.run(plan_launches(plan, A, B, narrow, 1.0, 0.0, strategy=s, scheme="atomic", mode=DMMA_MODE))
        np.testing.assert_array_equal(wide, narrow, err_msg=f"{strategy} {levels} {(m, k, n)}")


@pytest.mark.parametrize("levels", [1, 2])
def test_dmma_strassen_within_4x_of_the_simt_strassen_error(levels: int) -> None:
    """Uniform [0, 1) inputs: the DMMA kernels' relative error against an exact product is within 4x of the
    float64 SIMT kernels' on the same inputs and plan (both Strassen's error, at float64's unit roundoff)."""
    size = 96
    rng = np.random.default_rng(5)
    A, B = rng.random((size, size)), rng.random((size, size))
    exact = A.astype(np.longdouble) @ B.astype(np.longdouble)
    plan = make_plan("strassen", levels, size, size, size)
    errors = {}
    for mode, strategy in (("simt", "Small"), (DMMA_MODE, "DmmaSmall")):
        C = np.zeros((size, size))
        emu(plan, A, B, C, 1.0, 0.0, strategy=strategy, mode=mode)
        errors[mode] = float(np.abs(C - exact).max() / np.abs(exact).max())
    assert 0 < errors[DMMA_MODE] <= 4 * errors["simt"], errors
    assert errors[DMMA_MODE] < 1e-14, errors


def test_accuracy_table_in_float64_against_an_exact_product(tmp_path, capsys) -> None:  # noqa: ANN001
    """`strassenbench accuracy --dtype float64`: SIMT FP64 and DMMA at 0, 1 and 2 levels, on both input
    distributions, measured against an exact product (a float64 reference's own error would be as large as what
    is measured); each DMMA row within 4x of the SIMT FP64 row of its levels and inputs, the report's table gives
    that ratio. A DMMA implementation alone in float32 (the default) is refused in one line, no file written."""
    import pandas as pd

    from strassenbench.cli import main
    from strassenbench.report.page_tables import tensorcore_accuracy

    out = tmp_path / "accuracy.csv"
    impls = "gemm,strassen1,strassen2-direct,gemm-dmma,strassen1-dmma,strassen2-dmma"
    assert main(["accuracy", "--engine", "emu", "--impl", impls, "--sizes", "48", "--dtype", "float64",
                 "--no-progress", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert set(table["dtype"]) == {"float64"} and len(table) == 12 and (table["status"] == "ok").all()
    assert (table["rel_error"] > 0).all() and (table["rel_error"] < 1e-14).all()
    ratios = tensorcore_accuracy(table).set_index(["inputs", "impl"])["vs_simt"]
    for inputs in ("uniform", "wide"):
        for impl in ("gemm-dmma", "strassen1-dmma", "strassen2-dmma"):
            assert 0 < ratios[inputs, impl] <= 4, (inputs, impl, ratios[inputs, impl])
    capsys.readouterr()
    assert main(["accuracy", "--impl", "strassen1-dmma", "--sizes", "8", "--out", str(tmp_path / "no.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "strassen1-dmma computes float64 only, not float32" in err
    assert not (tmp_path / "no.csv").exists()


def test_the_exact_reference_is_exact_to_far_below_float64() -> None:
    """accuracy.exact_reference (the float64 accuracy table's reference): hi + lo is alpha A B + beta C0 to a
    relative 1e-30 per entry, checked in rational arithmetic, on uniform and wide-range inputs; a float64 product
    is off by about 1e-16."""
    from fractions import Fraction

    from strassenbench.accuracy import exact_reference

    rng = np.random.default_rng(3)
    for wide in (False, True):
        A, B, C0 = rng.uniform(-1, 1, (6, 40)), rng.uniform(-1, 1, (40, 5)), rng.uniform(-1, 1, (6, 5))
        if wide:
            A, B = np.ldexp(A, rng.integers(-12, 13, A.shape)), np.ldexp(B, rng.integers(-12, 13, B.shape))
        for alpha, beta in ((1.0, 0.0), (0.3, -1.7)):
            hi, lo = exact_reference(A, B, C0, alpha, beta)
            for i, j in np.ndindex(hi.shape):
                exact = Fraction(alpha) * sum(Fraction(A[i, t]) * Fraction(B[t, j]) for t in range(40)) \
                    + Fraction(beta) * Fraction(C0[i, j])
                assert abs((Fraction(hi[i, j]) + Fraction(lo[i, j]) - exact) / exact) < 1e-30, (wide, alpha, i, j)
            plain = alpha * (A @ B) + beta * C0
            assert np.abs(plain - hi).max() > 0  # float64's own error, which the exact reference is free of


def test_dmma_kernels_refuse_what_they_cannot_run() -> None:
    """float32 operands, or a strategy of another family with the DMMA mode, or a DMMA strategy with a SIMT or
    TF32 mode: a clear error, no launch."""
    A, B, C = (np.zeros((8, 8), np.float32) for _ in range(3))
    plan = make_plan("strassen", 1, 8, 8, 8)
    with pytest.raises(FusedError, match="compute float64, not float32"):
        plan_launches(plan, A, B, C, 1.0, 0.0, strategy=DMMA_STRATEGIES["DmmaSmall"], mode=DMMA_MODE)
    A, B, C = (x.astype(np.float64) for x in (A, B, C))
    for strategy in (STRATEGIES["Huge"], TENSOR_STRATEGIES["TcSmall"]):
        with pytest.raises(FusedError, match=f"strategy {strategy.name} has no dmma kernels"):
            plan_launches(plan, A, B, C, 1.0, 0.0, strategy=strategy, mode=DMMA_MODE)
    with pytest.raises(FusedError, match="strategy DmmaSmall has no simt kernels"):
        plan_launches(plan, A, B, C, 1.0, 0.0, strategy=DMMA_STRATEGIES["DmmaSmall"])


@pytest.mark.parametrize(("counts", "flags"), [((1, 1, 1), ()), ((2, 2, 1), ()), ((2, 2, 1), ("-DSB_EMU_SM90",))],
                         ids=["w1x1x1", "w2x2x1", "w2x2x1-sm90"])
def test_dmma_large_shared_memory_at_the_ideal(counts: tuple[int, int, int], flags: tuple[str, ...]) -> None:
    """DmmaLarge's steady-state main loop, counted on the emulator: its shared-memory wavefronts per warp and
    slice are the ideal (every access at 128 bytes per wavefront: each 8 x 8 tile side's 64-bit fragment load of
    a warp in 2, the sums' 128-bit stores in 4 per warp-wide store) and no access has a bank conflict; on the
    sm_90 path too (-DSB_EMU_SM90: m16n8k16 takes the same fragment loads, four k-steps to an instruction)."""
    from support.smem_steady import steady_totals

    from strassenbench.fused.instances import Instance

    s = DMMA_STRATEGIES["DmmaLarge"]
    steady, deeper = steady_totals(Instance(s, "float64", counts, "plain", "vector", mode=DMMA_MODE), "float64",
                                   extra_flags=flags)
    warps, k_steps = s.threads // 32, s.k_S // 4
    fragments = k_steps * (s.m_W // 8 + s.n_W // 8) * 2  # a warp's 32 x 8 bytes in two 128-byte wavefronts
    stores = (s.m_S + s.n_S) * s.k_S * 8 // warps // 128  # the sums' bytes per warp, 128 a wavefront
    assert steady.wavefronts / (warps * 2) == fragments + stores, (steady, fragments + stores)
    assert deeper.load_conflicts == 0 and deeper.store_conflicts == 0, deeper


def test_dmma_instances_are_float64_and_named_back() -> None:
    """The build's DMMA instantiations: float64 only, every default variant, plain and atomic, vector and scalar,
    and each name read back to its instantiation."""
    from strassenbench.fused.instances import instances, operand_counts, parse_instance

    chosen = [i for i in instances(strategies=tuple(DMMA_STRATEGIES)) if i.mode == DMMA_MODE]
    assert set(DMMA_STRATEGIES) == {"DmmaSmall", "DmmaLarge", "DmmaHuge"}
    assert len(chosen) == len(DMMA_STRATEGIES) * len(operand_counts()) * 4
    assert all(i.dtype == "float64" and i.tensor for i in chosen)
    assert all(parse_instance(i.name) == i for i in chosen)
    assert not instances(dtypes=("float32",), strategies=tuple(DMMA_STRATEGIES))
    assert {i.source_line().split("(")[0] for i in chosen} == {"SB_DMMA_INSTANCE"}
    for a, b in itertools.combinations(chosen, 2):
        assert a.name != b.name


def test_the_model_and_pick_put_dmma_beside_cublas_dgemm() -> None:
    """The FP64 tensor peak of each GPU model (A100 19.5, H100 66.9 TFLOPS, none on the V100); pick ranks the
    DMMA implementations in float64 on the A100 and H100 only, and predicts cuBLAS's DGEMM there as the DMMA
    GEMM (cuBLAS runs DGEMM on the FP64 tensor cores), labelled as the model's."""
    from strassenbench.device import hardware_figures
    from strassenbench.model.gpus import SPECS
    from strassenbench.model.pick import candidates, rank

    assert SPECS["A100"].tau_tensor(DMMA_MODE) == 19.5e12 and SPECS["H100"].tau_tensor(DMMA_MODE) == 66.9e12
    assert SPECS["V100"].tau_tensor(DMMA_MODE) == 0
    a100 = hardware_figures({"name": "A100", "cc_major": 8, "cc_minor": 0, "sm_count": 108, "bus_width_bits": 5120,
                             "max_sm_clock_mhz": 1410, "max_mem_clock_mhz": 1593})
    assert abs(a100["fp64_tensor_flops"] / 19.5e12 - 1) < 0.01
    assert not any(c.endswith("-dmma") for c in candidates("float64", "sm_70"))
    assert not any(c.endswith("-dmma") for c in candidates("float32", "sm_90"))
    for key in ("A100", "H100"):
        ranked = rank(SPECS[key], 8192, 8192, 8192, "float64")
        times = {c.impl: c for c in ranked}
        assert {"gemm-dmma", "strassen1-dmma", "strassen2-dmma"} <= set(times)
        assert times["cublas"].seconds == times["gemm-dmma"].seconds
        # the tensor cores have 2x FP64 SIMT's peak; one DMMA block per SM (the latency term) keeps it under that
        assert times["cublas"].seconds < times["gemm"].seconds / 1.5
        assert {c.source for c in ranked} == {"model"}
