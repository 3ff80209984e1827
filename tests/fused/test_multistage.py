"""The multistage tensor-core pipeline (kernels/mma_mainloop.cuh: mma_multistage; the TcTallAsync strategy): the
emulator's cp.async (kernels/emu/cuda_emu.hpp: a copy lands at the wait that lets its group complete, not
before), the kernels exact at 0, 1 and 2 levels on the emulator, their shared-memory accesses without bank
conflicts, 3xTF32's accuracy with one staged sum per 16 of k, and planted mistakes in the pipeline that the
emulator catches."""

from __future__ import annotations

import ctypes
import itertools
from pathlib import Path

import numpy as np
import pytest
from support.plants import assert_plant_fails
from test_tensorcore import _emulator_library

from strassenbench.engines import ENGINES
from strassenbench.fused import emu
from strassenbench.fused.launch import plan_launches
from strassenbench.fused.smem import count, trace
from strassenbench.plan import make_plan
from strassenbench.strategies import TENSOR_STRATEGIES
from strassenbench.tensorcore import matmul

PROBE = Path(__file__).resolve().parents[1] / "probes" / "cp_async_probe.cu"
ASYNC = "TcTallAsync"
TC_MODES = ("1xtf32", "3xtf32")


# ------------------------------------------------------------------ the emulator's cp.async
@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    lib = _emulator_library(PROBE, tmp_path_factory.mktemp("cp_async"))
    lib.run_async_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 4
    assert emu._take(lib) is None
    return lib


def _copy(probe: ctypes.CDLL, valid: int, newest: int, commit: int = 1, misalign: int = 0):  # noqa: ANN202
    """(source, the probe's tile after the barrier as 32 chunks of 4, the fault): see cp_async_probe.cu."""
    raw = np.arange(1, 133, dtype=np.float32)
    src = raw[(-raw.ctypes.data % 16) // 4:][:128]  # 16-byte aligned
    out = np.zeros(128, np.float32)
    probe.run_async_copy(src.ctypes.data, out.ctypes.data, valid, newest, commit, misalign)
    return src.reshape(32, 4), out.reshape(32, 4), emu._take(probe)


def test_a_copy_lands_when_its_group_is_waited_for(probe: ctypes.CDLL) -> None:
    """Even lanes copy in the first group, odd lanes in the second: wait_group 0 lands both, wait_group 1 only
    the first (the newest is still in flight at the barrier), no wait neither: the tile is as it was."""
    src, out, fault = _copy(probe, 32, 0)
    assert fault is None
    np.testing.assert_array_equal(out, src)
    src, out, fault = _copy(probe, 32, 1)
    assert fault is None
    np.testing.assert_array_equal(out[0::2], src[0::2])
    assert (out[1::2] == -1).all()
    _, out, fault = _copy(probe, 32, 2)
    assert fault is None and (out == -1).all()


def test_a_guarded_copy_writes_zeros(probe: ctypes.CDLL) -> None:
    """src-size 0 (guard false): the 16 bytes are zeros, and the source is not read."""
    src, out, fault = _copy(probe, 20, 0)
    assert fault is None
    np.testing.assert_array_equal(out[:20], src[:20])
    assert (out[20:] == 0).all()


def test_a_copy_left_pending_at_the_end_of_a_block_is_a_fault(probe: ctypes.CDLL) -> None:
    """A copy never committed never lands, and the block ends with it pending: a fault naming the kernel."""
    _, out, fault = _copy(probe, 32, 0, commit=0)
    assert (out[1::2] == -1).all()
    assert fault is not None and fault.startswith("cp.async copies pending at the end of block (0,0,0) in async_copy")


def test_a_misaligned_copy_is_a_fault(probe: ctypes.CDLL) -> None:
    _, _, fault = _copy(probe, 32, 0, misalign=1)
    assert fault is not None and fault.startswith("misaligned 16-byte cp.async shared destination at ")
    assert fault.endswith("in async_copy (block (0,0,0), thread 0)")


# ------------------------------------------------------------------ the TcTallAsync kernels
def _operands(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Integers in [-100, 100]: exact in TF32, and so are the 2-level operand sums; every product and sum of the
    shapes below stays below 2^24, exact in float32."""
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-100, 101, s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))


# (m, k, n) per level: odd shapes (scalar loads, edge tiles), and aligned ones whose blocks are interior at
# that level (a 128 x 64 tile inside every term, whole slices of 16: the unpredicated register sums).
SHAPES = {0: [(70, 24, 66), (256, 64, 128)], 1: [(129, 33, 131), (256, 64, 128)], 2: [(45, 40, 97), (512, 128, 256)]}


def test_the_strategy_is_the_multistage_one() -> None:
    s = TENSOR_STRATEGIES[ASYNC]
    assert (s.m_S, s.n_S, s.k_S, s.threads, s.stages, s.multistage) == (128, 64, 16, 128, 3, True)
    assert s.smem_bytes(4, 2) == s.smem_bytes(4, 1) == 3 * 4 * (128 * 16 + 16 * 72) <= 48 * 1024
    assert not TENSOR_STRATEGIES["TcTall"].multistage


# Two levels (the longest emulator runs here) in the default tier for 3xTF32 sequential, the rest in the slow tier
MULTISTAGE_CASES = [pytest.param(mode, scheme, levels, marks=[pytest.mark.slow] if levels == 2 and (
    mode, scheme) != ("3xtf32", "sequential") else []) for levels in (0, 1, 2) for scheme in ("sequential", "atomic")
    for mode in TC_MODES]


@pytest.mark.parametrize(("mode", "scheme", "levels"), MULTISTAGE_CASES)
def test_multistage_kernels_exact(mode: str, scheme: str, levels: int) -> None:
    """Every variant of 0, 1 and 2 levels on TcTallAsync, plain and atomic write-back, scalar and vector loads,
    interior and edge tiles, alpha and beta: exact."""
    loads = set()
    for m, k, n in SHAPES[levels]:
        A, B, C = _operands(m, k, n, seed=m + n)
        plan = make_plan("strassen", levels, m, k, n)
        program = plan_launches(plan, A, B, C, 2.0, -1.0, strategy=TENSOR_STRATEGIES[ASYNC],
                                scheme=scheme if levels else "sequential", mode=mode)
        loads |= {launch.instance.loads for launch in program.launches if launch.instance}
        got = C.copy()
        ENGINES["emu"](plan, A, B, got, 2.0, -1.0, strategy=ASYNC, scheme=scheme if levels else "sequential",
                       mode=mode)
        np.testing.assert_array_equal(got, 2.0 * (A.astype(np.float64) @ B) - C,
                                      err_msg=f"{mode} {scheme} {levels} {(m, k, n)}")
    assert loads == {"vector", "scalar"}


def test_multistage_splitk_exact() -> None:
    """The splitk scheme cuts k in whole slices of 16: each part's pipeline starts and ends on its own."""
    A, B, C = _operands(128, 200, 128, seed=9)
    got = C.copy()
    ENGINES["emu"](make_plan("strassen", 1, 128, 200, 128), A, B, got, 1.0, 1.0, strategy=ASYNC, scheme="splitk",
                   mode="3xtf32", split_k=3)
    np.testing.assert_array_equal(got, A.astype(np.float64) @ B + C)


def test_multistage_shared_memory_without_bank_conflicts() -> None:
    """Counted on the emulator from every warp's addresses (strassenbench.fused.smem): the cp.async copies, the
    register sums' stores and the fragment loads of the FP32 tiles (A swizzled, B padded) take the fewest
    wavefronts, with no bank conflict, at 0 and 1 level (one-term operands, and sums of two)."""
    for levels, mode in itertools.product((0, 1), TC_MODES):
        A, B, C = _operands(256, 64, 128, seed=levels)
        plan = make_plan("strassen", levels, 256, 64, 128)

        def run() -> None:
            ENGINES["emu"](plan, A, B, C.copy(), 1.0, 0.0, strategy=ASYNC, mode=mode)

        run()  # the libraries are loaded before the trace
        totals = count(trace(run))
        assert totals.load_wavefronts > 0 and totals.store_wavefronts > 0
        assert (totals.load_conflicts, totals.store_conflicts) == (0, 0), (levels, mode, totals)


def test_multistage_3xtf32_is_as_accurate_as_float32() -> None:
    """Uniform [-1, 1] operands, k = 1,024: the TcTallAsync 3xTF32 GEMM's relative error within 4x of float32
    BLAS's and within 2x of the NumPy model of its arithmetic (strassenbench.tensorcore.matmul, one staged sum
    per 16 of k); its bias at k = 4,096 stays below what CUTLASS's 3xTF32 lost on an H200."""
    rng = np.random.default_rng(11)
    m, k, n = 64, 1024, 64
    A, B = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((m, k), (k, n)))
    got = np.zeros((m, n), np.float32)
    ENGINES["emu"](make_plan("strassen", 0, m, k, n), A, B, got, 1.0, 0.0, strategy=ASYNC, mode="3xtf32")
    exact = A.astype(np.float64) @ B
    err = np.linalg.norm(got - exact) / np.linalg.norm(exact)
    fp32 = np.linalg.norm(A @ B - exact) / np.linalg.norm(exact)
    model = np.linalg.norm(matmul(A, B, "3xtf32", stage_k=16) - exact) / np.linalg.norm(exact)
    assert err <= 4 * fp32 and err <= 2 * model, (err, fp32, model)
    positive = rng.random((128, 4096), dtype=np.float32), rng.random((4096, 128), dtype=np.float32)
    exact = positive[0].astype(np.float64) @ positive[1]
    bias = float(np.mean(matmul(*positive, "3xtf32", stage_k=16) - exact) / np.mean(exact))
    # six truncated sums a stage, not three: more than stage_k = 8's -4e-8, less than the -2.3e-7 CUTLASS's
    # 3xTF32 lost on an H200 (data/nvidia-h200/3xtf32_bias_staged.txt, k = 4,096, "both")
    staged_8 = float(np.mean(matmul(*positive, "3xtf32") - exact) / np.mean(exact))
    assert staged_8 < 0 and -2.3e-7 < bias < staged_8, (bias, staged_8)


def test_matmul_refuses_a_stage_that_is_not_whole_k_steps() -> None:
    with pytest.raises(ValueError, match="stage_k is a multiple of the mma's k = 8, not 12"):
        matmul(np.zeros((8, 8), np.float32), np.zeros((8, 8), np.float32), "3xtf32", stage_k=12)


# ------------------------------------------------------------------ planted mistakes
_LOOP_WAIT = "    cp_async_wait<STAGES - 2>();\n    __syncthreads();\n    stage ="
_LOOP_COMMIT = "    cp_async_commit();\n    cp_async_wait<STAGES - 2>();\n"
_INTERIOR = "InteriorCursor<T, M_S, N_S, K_S, W_A, W_B, LoaderA, LoaderB, kAhead>"
PLANTS = {  # the mistake (the text, what replaces it) and the levels of the product it spoils
    "the loop waits one group too few": (_LOOP_WAIT, _LOOP_WAIT.replace("STAGES - 2", "STAGES - 1"), 0),
    "the loop commits no group": (_LOOP_COMMIT, "    cp_async_wait<STAGES - 2>();\n", 0),
    "the prologue waits for nothing": ("  cp_async_wait<STAGES - 2>();\n  __syncthreads();\n  int s = 0",
                                       "  __syncthreads();\n  int s = 0", 0),
    # 1-level sums of terms: the main iterations' loads one slice behind the stage they fill
    "the interior loads trail by a slice": (_INTERIOR, _INTERIOR.replace("kAhead>", "kAhead - 1>"), 1),
}

_PLANT_RUN = """
import sys
import numpy as np
from strassenbench.engines import ENGINES
from strassenbench.fused.emu import EmuFault
from strassenbench.plan import make_plan
levels = int(sys.argv[1])
rng = np.random.default_rng(0)
m, k, n = (256, 64, 128) if levels == 0 else (256, 256, 128)  # 1 level: whole interior tiles, 8 slices of k
A, B = (rng.integers(-100, 101, s).astype(np.float32) for s in ((m, k), (k, n)))
got = np.zeros((m, n), np.float32)
try:
    ENGINES["emu"](make_plan("strassen", levels, m, k, n), A, B, got, 1.0, 0.0, strategy="TcTallAsync",
                   mode="3xtf32")
except EmuFault as fault:
    print("fault:", fault)
print("exact" if np.array_equal(got, A.astype(np.float64) @ B) else "wrong")
"""


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_planted_pipeline_mistakes_fail_on_the_emulator(plant: str, tmp_path: Path) -> None:
    """The kernel sources with one mistake in the pipeline's waits or commits, or in its main iterations' offsets
    ($STRASSENBENCH_KERNELS): the GEMM computes on a stage its copies have not reached, or a 1-level product sums
    the wrong slice, so its result is wrong (or a copy is left pending, a fault). The unplanted sources, run the
    same way, are exact."""
    old, new, levels = PLANTS[plant]
    assert_plant_fails(tmp_path, "mma_mainloop.cuh", old, new, _PLANT_RUN, str(levels))
