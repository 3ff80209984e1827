"""The TF32 building blocks of the tensor-core kernels (kernels/tensorcore.cuh): rounding, the 3xTF32 split
and one warp's mma.m16n8k8, on the emulator against strassenbench.tensorcore bit for bit, and in the machine
code nvcc makes of them."""

from __future__ import annotations

import ctypes
import itertools
import subprocess
from pathlib import Path

import numpy as np
import pytest

from strassenbench.fused.emu import CXX_FLAGS, _compiler
from strassenbench.fused.launch import normalised
from strassenbench.fused.instances import kernels_dir
from strassenbench.fused.modules import disassemble, parse_ptxas
from strassenbench.fused.sass import parse_sass
from strassenbench.fused.smem import RECORD, count
from strassenbench.fused.toolchain import find_tool
from strassenbench.tensorcore import fragments, matmul, mma_m16n8k8, round_tf32, split_3xtf32

PROBE = Path(__file__).resolve().parents[1] / "probes" / "tensorcore_probe.cu"
F32P = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")


def _emulator_library(source: Path, folder: Path) -> ctypes.CDLL:
    """A probe source compiled for the emulator, with the emulator's own compiler and flags."""
    target = folder / "probe.so"
    subprocess.run([_compiler(), *CXX_FLAGS, "-x", "c++", "-I", str(kernels_dir()), str(source), "-o", str(target)],
                   check=True, capture_output=True)
    return ctypes.CDLL(str(target))


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """The probe kernels compiled for the emulator."""
    lib = _emulator_library(PROBE, tmp_path_factory.mktemp("probe"))
    lib.run_tf32_round.argtypes = [F32P, F32P, F32P, ctypes.c_int]
    lib.run_tf32_fast.argtypes = [F32P, F32P, F32P, ctypes.c_int]
    lib.run_mma_tile.argtypes = [F32P, F32P, F32P, F32P, ctypes.c_uint]
    return lib


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def _f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


# (input bits, cvt.rna.tf32.f32 bits), worked out from the definition: keep 10 mantissa bits, round to nearest,
# ties away from zero
ROUNDING = [
    (0x3F800000, 0x3F800000),  # 1: already TF32
    (0x3F800FFF, 0x3F800000),  # below half a unit: down
    (0x3F801000, 0x3F802000),  # 1 + 2^-11, a tie: away from zero (up)
    (0x3F803000, 0x3F804000),  # a tie above an odd last bit: away (ties-to-even would agree here)
    (0x3F805000, 0x3F806000),  # a tie above an even... odd-free last bit: away (ties-to-even would go down)
    (0xBF801000, 0xBF802000),  # -(1 + 2^-11): away from zero (down)
    (0x3FFFF000, 0x40000000),  # carries into the exponent: 2
    (0x7F7FFFFF, 0x7F800000),  # the largest float32 rounds to infinity
    (0x7F7FEFFF, 0x7F7FE000),  # just below the tie: the largest TF32
    (0x00000001, 0x00000000),  # the smallest subnormal: zero
    (0x00001000, 0x00002000),  # a subnormal tie: away from zero
    (0x80000000, 0x80000000),  # -0
    (0x7F800000, 0x7F800000),  # infinity
    (0xFF800000, 0xFF800000),  # -infinity
]


def test_round_tf32_is_cvt_rna() -> None:
    x = _f32([i for i, _ in ROUNDING])
    assert _bits(round_tf32(x)).tolist() == [o for _, o in ROUNDING]
    assert np.isnan(round_tf32(np.float32(np.nan)))
    # the error of a finite rounding is at most half a unit of TF32's last place
    rng = np.random.default_rng(0)
    y = rng.standard_normal(10_000).astype(np.float32)
    _, exponent = np.frexp(y)
    assert (np.abs(round_tf32(y).astype(np.float64) - y) <= np.ldexp(1.0, exponent - 12)).all()


def test_split_3xtf32_keeps_what_tf32_drops() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 10_000).astype(np.float32)
    big, small = split_3xtf32(x)
    assert (_bits(big) & 0x1FFF == 0).all() and (_bits(small) & 0x1FFF == 0).all()
    # big + small carries 22 of float32's 24 significand bits: the rest is below 2^-21 of x
    assert (np.abs(big.astype(np.float64) + small - x) <= np.abs(x) * 2.0**-21).all()


def _rounding_inputs(seed: int) -> np.ndarray:
    """ROUNDING's cases, random bit patterns (NaN and infinities among them) and normal values."""
    rng = np.random.default_rng(seed)
    return np.concatenate([_f32([i for i, _ in ROUNDING]),
                           rng.integers(0, 2**32, 4000, dtype=np.uint32).view(np.float32),
                           rng.standard_normal(1000).astype(np.float32)])


def test_emulator_rounding_is_numpy_bit_for_bit(probe: ctypes.CDLL) -> None:
    x = _rounding_inputs(2)
    big, small = np.empty_like(x), np.empty_like(x)
    probe.run_tf32_round(x, big, small, x.size)
    want_big, want_small = split_3xtf32(x)
    finite = np.isfinite(x)
    assert (_bits(big)[finite] == _bits(round_tf32(x))[finite]).all()
    inf, nan = np.isinf(x), np.isnan(x)
    assert inf.any() and nan.any() and (_bits(big)[inf] == _bits(x)[inf]).all() and np.isnan(big[nan]).all()
    assert (_bits(small)[finite] == _bits(want_small)[finite]).all()


def test_fast_rounding_is_cvt_rna_on_finite_values(probe: ctypes.CDLL) -> None:
    """round_tf32 and split_3xtf32_fast (the multistage pipeline's, two integer instructions where sm_90's
    cvt.rna.tf32.f32 takes four) agree with cvt.rna bit for bit on every finite value, ties and the overflow to
    infinity included; infinities stay; a NaN stays a NaN unless its payload lies only in the 13 low bits."""
    x = _rounding_inputs(5)
    big, small = np.empty_like(x), np.empty_like(x)
    probe.run_tf32_fast(x, big, small, x.size)
    want_big, want_small = split_3xtf32(x)
    finite, inf = np.isfinite(x), np.isinf(x)
    assert (_bits(big)[finite] == _bits(want_big)[finite]).all()
    assert (_bits(small)[finite] == _bits(want_small)[finite]).all()
    assert inf.any() and (_bits(big)[inf] == _bits(x)[inf]).all()
    nans = _f32([0x7FC00000, 0xFFC00001, 0x7F800001])
    out_big, out_small = np.empty_like(nans), np.empty_like(nans)
    probe.run_tf32_fast(nans, out_big, out_small, nans.size)
    assert np.isnan(out_big[:2]).all() and _bits(out_big[2:]).tolist() == [0x7F800000]
    assert np.isnan(out_small).all()  # x - big: the NaN reaches the product through the small part


def test_fragments_cover_each_matrix_once() -> None:
    for key, shape in (("a", (16, 8)), ("b", (8, 8)), ("c", (16, 8))):
        cells = [cell for lane in range(32) for cell in fragments(lane)[key]]
        assert sorted(cells) == [(i, j) for i in range(shape[0]) for j in range(shape[1])], key


def _run_mma(probe: ctypes.CDLL, a: np.ndarray, b: np.ndarray, c: np.ndarray, threads: int = 32) -> np.ndarray:
    d = np.full((16, 8), np.nan, np.float32)
    probe.run_mma_tile(np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32),
                       np.ascontiguousarray(c, np.float32), d, threads)
    return d


def test_emulated_mma_small_integers_exact(probe: ctypes.CDLL) -> None:
    """Integers below 2^10 are exact in TF32 and their sums here in float32: D = A B + C exactly, whatever
    the order the tensor core adds in. A wrong fragment layout would move or mix entries."""
    rng = np.random.default_rng(3)
    a, b = rng.integers(-1023, 1024, (16, 8)), rng.integers(-1023, 1024, (8, 8))
    c = rng.integers(-2**20, 2**20, (16, 8))
    d = _run_mma(probe, a, b, c)
    assert (d.astype(np.int64) == a @ b + c).all()
    # each output from its own row of A and column of B: a one-hot A picks rows of B
    one_hot = np.zeros((16, 8))
    one_hot[np.arange(16), np.arange(16) % 8] = 1
    assert (_run_mma(probe, one_hot, b, np.zeros((16, 8))) == b[np.arange(16) % 8]).all()


def test_emulated_mma_is_the_numpy_model_bit_for_bit(probe: ctypes.CDLL) -> None:
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (16, 8)).astype(np.float32)  # not TF32: the mma reads their upper 19 bits
    b = round_tf32(rng.uniform(-1, 1, (8, 8)).astype(np.float32))
    c = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
    assert (_bits(_run_mma(probe, a, b, c)) == _bits(mma_m16n8k8(a, b, c))).all()


def test_emulated_mma_runs_in_every_warp_of_a_block(probe: ctypes.CDLL) -> None:
    """Two warps each compute the same tile (their own warp barrier and slots); both write it identically."""
    rng = np.random.default_rng(5)
    a, b, c = (rng.integers(-8, 8, s).astype(np.float32) for s in ((16, 8), (8, 8), (16, 8)))
    assert (_run_mma(probe, a, b, c, threads=64) == a @ b + c).all()


def test_3xtf32_is_as_accurate_as_float32_and_1xtf32_is_not() -> None:
    """The method the tensor-core kernels implement: on uniform [-1, 1] operands 3xTF32's relative error
    against float64 is within 4x of float32 BLAS's, 1xTF32's hundreds of times larger (10-bit mantissa)."""
    rng = np.random.default_rng(6)
    a, b = (rng.uniform(-1, 1, (256, 256)).astype(np.float32) for _ in range(2))
    exact = a.astype(np.float64) @ b.astype(np.float64)

    def error(c: np.ndarray) -> float:
        return float(np.linalg.norm(c - exact) / np.linalg.norm(exact))

    fp32 = error(a @ b)
    assert error(matmul(a, b, "3xtf32")) <= 4 * fp32
    assert error(matmul(a, b, "1xtf32")) >= 100 * fp32
    with pytest.raises(ValueError, match="choose from 1xtf32, 3xtf32"):
        matmul(a, b, "2xtf32")


def test_the_model_loses_the_h200s_bias_without_staged_accumulation() -> None:
    """The mma arithmetic (sums truncated toward zero) reproduces what an NVIDIA H200 measured
    (data/nvidia-h200/3xtf32_bias.txt and 3xtf32_bias_staged.txt, random [0, 1) operands, m = n = 512):
    3xTF32 chained into the accumulator loses a bias growing with k (H200: -4.3e-8 at k = 8, -4.3e-5 at 4,096),
    staged it stays at the dropped small products' (H200: -4.2e-8 at 4,096), within 4x of float32 BLAS."""
    rng = np.random.default_rng(0)

    def bias_and_error(k: int, staged: bool) -> tuple[float, float]:
        a, b = rng.random((128, k), dtype=np.float32), rng.random((k, 128), dtype=np.float32)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        c = matmul(a, b, "3xtf32", staged=staged)
        fp32 = np.linalg.norm(a @ b - exact) / np.linalg.norm(exact)
        return float(np.mean(c - exact) / np.mean(exact)), float(np.linalg.norm(c - exact) / np.linalg.norm(exact) / fp32)

    short, long = bias_and_error(8, False)[0], bias_and_error(2048, False)[0]
    assert -1e-7 < short < 0 and long < -1e-5 and long < 100 * short  # grows with k, as on the H200
    staged, ratio = bias_and_error(2048, True)
    assert -1e-7 < staged < 0 and ratio <= 4


def test_tensorcore_shared_memory_without_bank_conflicts(kernel_probe: ctypes.CDLL) -> None:
    """Counted on the emulator from every warp's addresses (strassenbench.fused.smem): the padded tiles take
    each fragment load (8 rows x 4 columns of A, 4 rows x 8 columns of B) and each 128-bit store of the sums in
    the fewest wavefronts, with no bank conflict."""
    for which in (1, 3, 4):
        kernel_probe.emu_trace_clear()
        kernel_probe.emu_trace_enable(1)
        try:
            _primitive(kernel_probe, which, TC_PROBES[which][:2] + (32,), _coeffs(which), np.random.default_rng(0))
        finally:
            kernel_probe.emu_trace_enable(0)
        kernel_probe.emu_trace_size.restype = ctypes.c_ulonglong
        records = np.empty(kernel_probe.emu_trace_size(), dtype=RECORD)
        kernel_probe.emu_trace_copy(ctypes.c_void_p(records.ctypes.data))
        kernel_probe.emu_trace_clear()
        totals = count(records)
        assert len(records) and totals.load_conflicts == 0 and totals.store_conflicts == 0, (which, totals)


def _gpu_build(source: Path, arch: str, folder: Path) -> tuple[str, str]:
    """A probe source compiled by nvcc for arch: (ptxas's report, the cubin's SASS)."""
    cubin = folder / "probe.cubin"
    run = subprocess.run([find_tool("nvcc"), "-std=c++17", f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-I",
                          str(kernels_dir()), str(source), "-o", str(cubin)], check=True, capture_output=True, text=True)
    return run.stdout + run.stderr, disassemble(cubin, arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tensorcore_probe_builds_without_spills(arch: str, tmp_path: Path) -> None:
    """Every probe kernel compiles for the GPU with no spill and no stack; its main loop has one HMMA per mma
    tile, part product and k = 8 step per k_S slice: (m_W / 16)(n_W / 8) x (1 or 3) x k_S / 8, and the
    vector kernels read A's fragments with LDSM (ldmatrix)."""
    from strassenbench.fused.sass import mainloop_metrics

    report, sass = _gpu_build(KERNEL_PROBE, arch, tmp_path)
    props, code = parse_ptxas(report), parse_sass(sass)
    for which, (m_s, n_s, k_s, warps, _, _, _, parts) in enumerate(TC_PROBES):
        name = f"tc{which}"
        assert props[name].spill_stores == 0 and props[name].stack_bytes == 0, name
        warps_m = 2
        tiles = (m_s // warps_m // 16) * (n_s // (warps // warps_m) // 8)
        assert mainloop_metrics(code[name])["loop_hmma"] == tiles * (1 if parts == 1 else 3) * k_s // 8, name
        assert any(i.base == "LDSM" for i in code[name]), name


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_compiles_to_one_hmma(arch: str, tmp_path: Path) -> None:
    """nvcc turns the probe's mma into the TF32 tensor-core instruction, once (PTX syntax and operand
    types checked by the real assembler)."""
    _, sass = _gpu_build(PROBE, arch, tmp_path)
    assert sass.count("HMMA.1688.F32.TF32") == 1


KERNEL_PROBE = Path(__file__).resolve().parents[1] / "probes" / "tensorcore_kernel_probe.cu"
# the probe's instantiations tc0 .. tc4: (m_S, n_S, k_S, warps, W_A, W_B, W_C, parts)
TC_PROBES = [(64, 64, 8, 4, 1, 1, 1, 1), (64, 64, 8, 4, 1, 1, 1, 2), (64, 64, 8, 4, 2, 2, 2, 2),
             (128, 128, 8, 8, 2, 2, 2, 2), (128, 128, 16, 8, 1, 1, 1, 1)]


@pytest.fixture(scope="module")
def kernel_probe(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    lib = _emulator_library(KERNEL_PROBE, tmp_path_factory.mktemp("tcprobe"))
    lib.run_tc.argtypes = [ctypes.c_int, ctypes.c_int, F32P, F32P, F32P, *[ctypes.c_int] * 6,
                           np.ctypeslib.ndpointer(np.int32, flags="C_CONTIGUOUS"), F32P, ctypes.c_float,
                           ctypes.c_float]
    return lib


def _primitive(lib: ctypes.CDLL, which: int, shape: tuple[int, int, int], coeffs: tuple[list, list, list],
               rng: np.random.Generator, alpha: float = 1.0, beta: float = 1.0, integers: bool = True):
    """Run probe ``which`` for one product on blocks of bm x bk (A), bk x bn (B), bm x bn (C): A, B and C are
    2 x 2 grids of blocks and term t of each operand is the grid's diagonal block t. Returns C after the
    kernel, C from the definition in float64, and the two operand sums in float64."""
    bm, bn, bk = shape
    draw = (lambda s: rng.integers(-8, 8, s)) if integers else (lambda s: rng.uniform(-1, 1, s))
    A, B = draw((2 * bm, 2 * bk)).astype(np.float32), draw((2 * bk, 2 * bn)).astype(np.float32)
    C = draw((2 * bm, 2 * bn)).astype(np.float32)

    def block(X: np.ndarray, t: int, r: int, c: int) -> np.ndarray:
        return X[t * r:(t + 1) * r, t * c:(t + 1) * c].astype(np.float64)

    sa = sum(u * block(A, t, bm, bk) for t, u in enumerate(coeffs[0]))
    sb = sum(v * block(B, t, bk, bn) for t, v in enumerate(coeffs[1]))
    want = C.astype(np.float64)
    for t, g in enumerate(coeffs[2]):
        want[t * bm:(t + 1) * bm, t * bn:(t + 1) * bn] = beta * block(C, t, bm, bn) + alpha * g * (sa @ sb)
    offsets = [v for (r, c), cs in zip(((bm, bk), (bk, bn), (bm, bn)), coeffs) for t in range(len(cs))
               for v in (t * r, t * c)]
    coeff = [float(c) for c in (*normalised(coeffs[0]), *normalised(coeffs[1]), *coeffs[2])]
    out = C.copy()
    assert lib.run_tc(which, len(offsets) // 2, A, B, out, A.shape[1], B.shape[1], C.shape[1], bm, bn, bk,
                      np.array(offsets, np.int32), np.array(coeff, np.float32), alpha, beta) == 0
    return out, want, sa, sb


def _coeffs(which: int) -> tuple[list, list, list]:
    """Coefficients of one product for probe ``which``'s operand counts (a difference, a sum, -2 in C)."""
    _, _, _, _, w_a, w_b, w_c, _ = TC_PROBES[which]
    return [1, -1][:w_a], [1, 1][:w_b], [1, -2][:w_c]


@pytest.mark.parametrize("which", range(len(TC_PROBES)))
def test_tensorcore_primitive_exact_on_small_integers(kernel_probe: ctypes.CDLL, which: int) -> None:
    """Integers are exact in TF32 and their sums here exact in float32: every instantiation (tile shapes,
    1 and 2 terms per operand, vector and scalar loads, 1xTF32 and 3xTF32) gives the exact product on odd
    block shapes (edge tiles, a last partial slice) and whole ones, through the same loader and write-back as
    the SIMT kernels."""
    m_s, n_s = TC_PROBES[which][:2]
    coeffs = _coeffs(which)
    rng = np.random.default_rng(which)
    vector = which != 2
    shapes = [(m_s, n_s, 32), (m_s + 16, 2 * n_s, 48)] + ([] if vector else [(37, 45, 29)])
    for shape in shapes:
        out, want, _, _ = _primitive(kernel_probe, which, shape, coeffs, rng, alpha=1.0, beta=1.0)
        assert (out.astype(np.float64) == want).all(), shape


def test_tensorcore_3xtf32_is_as_accurate_as_float32(kernel_probe: ctypes.CDLL) -> None:
    """On uniform [-1, 1] inputs the 3xTF32 kernel's relative error against float64 is within 4x of float32
    BLAS's on the same operands; the 1xTF32 kernel's is far larger (10-bit mantissa)."""
    errors = {}
    for which in (0, 1):  # 1xTF32, 3xTF32: the same operands (the same seed)
        out, want, sa, sb = _primitive(kernel_probe, which, (64, 64, 256), ([1], [1], [1]), np.random.default_rng(7),
                                       beta=0.0, integers=False)
        errors[which] = np.linalg.norm(out[:64, :64] - want[:64, :64]) / np.linalg.norm(want[:64, :64])
    fp32 = np.linalg.norm(sa.astype(np.float32) @ sb.astype(np.float32) - sa @ sb) / np.linalg.norm(sa @ sb)
    assert errors[1] <= 4 * fp32
    assert errors[0] >= 100 * fp32


# ------------------------------------------------------------------ the tensor-core family in the harness
from strassenbench.algebra.primitives import variants  # noqa: E402
from strassenbench.engines import ENGINES  # noqa: E402
from strassenbench.fused.launch import plan_launches  # noqa: E402
from strassenbench.plan import make_plan  # noqa: E402
from strassenbench.strategies import TENSOR_STRATEGIES  # noqa: E402
from strassenbench.verify import verify  # noqa: E402

TC_MODES = ("1xtf32", "3xtf32")


def _tc_operands(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Integers in [-100, 100]: exact in TF32 (11 significant bits), and so are the 2-level operand sums (at most
    4 terms: |sum| < 2^10); the shapes below keep every product and sum below 2^24, exact in float32."""
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-100, 101, s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))


@pytest.mark.parametrize("mode", TC_MODES)
@pytest.mark.parametrize("scheme", ["sequential", "atomic"])
@pytest.mark.parametrize("levels", [0, 1, 2])
def test_every_tensor_core_variant_exact_on_odd_shapes(mode: str, scheme: str, levels: int) -> None:
    """Every variant of 0, 1 and 2 levels of Strassen on the tensor-core kernels (TcSmall: W_A x W_B x W_C up to
    4 x 4 x 4), plain and atomicAdd write-back, odd shapes that pad at every level (scalar loads) and shapes whose
    blocks are aligned to 128-bit loads (vector loads; 128 x 64 x 128 has interior tiles at every level, the
    pipelined loop), alpha and beta: exact."""
    loads = set()
    for m, k, n in [(33, 17, 45), (17, 33, 9), (1, 4, 1), (45, 9, 33), (64, 32, 48), (128, 64, 128)]:
        A, B, C = _tc_operands(m, k, n, seed=m + n)
        plan = make_plan("strassen", min(levels, 2), m, k, n)
        program = plan_launches(plan, A, B, C, 2.0, -1.0, strategy=TENSOR_STRATEGIES["TcSmall"],
                                scheme=scheme if levels else "sequential", mode=mode)
        counts = {launch.instance.counts for launch in program.launches if launch.instance}
        if min(m, k, n) > 1:  # every variant of the plan runs on its own kernel
            assert counts == {(v.W_A, v.W_B, v.W_C) for v in variants("strassen", levels)} if levels else {(1, 1, 1)}
        assert all(launch.kernel.startswith(f"strassen_{mode}_tcsmall_") for launch in program.launches
                   if launch.instance)
        loads |= {launch.instance.loads for launch in program.launches if launch.instance}
        got = C.copy()
        ENGINES["emu"](plan, A, B, got, 2.0, -1.0, strategy="TcSmall", scheme=scheme if levels else "sequential",
                       mode=mode)
        want = 2.0 * (A.astype(np.float64) @ B) - C
        np.testing.assert_array_equal(got, want, err_msg=f"{mode} {scheme} {levels} {(m, k, n)}")
    assert loads == {"vector", "scalar"}


@pytest.mark.parametrize("strategy", [pytest.param("TcLarge", marks=pytest.mark.slow), "TcTall", "TcHuge"])
def test_larger_tensor_core_strategies_exact(strategy: str) -> None:
    """The larger tiles (several warps along m and n, scalar and vector loads, interior tiles on the pipelined
    loop) at 1 level in both modes."""
    for mode, (m, k, n) in itertools.product(TC_MODES, [(70, 24, 66), (129, 9, 131), (256, 32, 256)]):
        A, B, C = _tc_operands(m, k, n)
        got = C.copy()
        ENGINES["emu"](make_plan("strassen", 1, m, k, n), A, B, got, 1.0, 1.0, strategy=strategy, mode=mode)
        np.testing.assert_array_equal(got, A.astype(np.float64) @ B + C, err_msg=f"{strategy} {mode} {(m, k, n)}")


@pytest.mark.parametrize("levels", [1, 2])
def test_3xtf32_strassen_within_4x_of_the_simt_strassen_error(levels: int) -> None:
    """Uniform [-1, 1] inputs: 3xTF32 Strassen's relative error within 4x of the SIMT FP32 Strassen's on the
    same inputs, and within its bound; 1xTF32's is some 1000x larger (TF32's 2^-11 against FP32's 2^-24) and
    within its own bound (strassenbench.accuracy.unit_roundoff)."""
    size = 128
    options = {"m": size, "n": size, "k": size, "engine": "emu", "seed": 3}
    simt = verify(impl=f"strassen{levels}" if levels == 1 else "strassen2-direct", options={"strategy": "Small"},
                  **options)
    three = verify(impl=f"strassen{levels}-3xtf32", options={"strategy": "TcSmall"}, **options)
    one = verify(impl=f"strassen{levels}-tf32", options={"strategy": "TcSmall"}, **options)
    assert simt["status"] == three["status"] == one["status"] == "ok"
    err_simt, err_three, err_one = (float(r["rel_error"]) for r in (simt, three, one))
    assert err_three <= 4 * err_simt, (err_three, err_simt)
    assert err_one > 100 * err_three


def test_tensor_core_kernels_refuse_what_they_cannot_run() -> None:
    """float64, or a SIMT strategy with a tensor-core mode: a clear error, no launch."""
    from strassenbench.fused.launch import FusedError
    from strassenbench.strategies import STRATEGIES

    A, B, C = (np.zeros((8, 8), np.float64) for _ in range(3))
    plan = make_plan("strassen", 1, 8, 8, 8)
    with pytest.raises(FusedError, match="compute float32, not float64"):
        plan_launches(plan, A, B, C, 1.0, 0.0, strategy=TENSOR_STRATEGIES["TcSmall"], mode="3xtf32")
    with pytest.raises(FusedError, match="strategy Huge has no 3xtf32 kernels"):
        plan_launches(plan, A, B, C, 1.0, 0.0, strategy=STRATEGIES["Huge"], mode="3xtf32")


def test_accuracy_table_report_figure_and_kernel_table(tmp_path: Path, sim_build: str) -> None:
    """`strassenbench accuracy` and a numpy sweep with tensor-core lines make the report's accuracy table
    (3xTF32 within 4x of SIMT FP32 at 0 and 1 level on both input distributions, 1xTF32 far off), its figure of SIMT
    and tensor-core lines, and its table of the tensor-core kernels' machine code (the sm_90 TcSmall build)."""
    from strassenbench.cli import main
    from strassenbench.report.page import build_report

    data = tmp_path / "data"
    impls = "gemm,strassen1,gemm-3xtf32,strassen1-3xtf32,strassen1-tf32"
    assert main(["accuracy", "--engine", "emu", "--impl", impls, "--sizes", "64", "--no-progress",
                 "--out", str(data / "accuracy.csv")]) == 0
    assert main(["bench", "--engine", "numpy", "--impl", "cublas,gemm,cublas-tf32,gemm-3xtf32", "--sizes", "32,48",
                 "--min-time", "0", "--min-samples", "2", "--precision", "1", "--warmup-time", "0", "--no-progress",
                 "--out", str(data / "square.csv")]) == 0
    build_report(data, tmp_path / "report", Path(sim_build) / "resources.csv")
    accuracy = (tmp_path / "report" / "tables" / "tensorcore_accuracy.md").read_text()
    header = [cell.strip() for cell in accuracy.splitlines()[0].split("|")[1:-1]]
    rows = [dict(zip(header, (cell.strip() for cell in line.split("|")[1:-1]))) for line in accuracy.splitlines()[2:]]
    assert {r["dtype"] for r in rows} == {"float32"}
    ratio = {(r["inputs"], r["impl"]): float(r["vs_simt"].replace(",", "")) for r in rows}
    assert {inputs for inputs, _ in ratio} == {"uniform", "wide"}
    for inputs in ("uniform", "wide"):
        for impl in ("gemm-3xtf32", "strassen1-3xtf32"):
            assert ratio[inputs, impl] <= 4, (inputs, impl, ratio[inputs, impl])
        assert ratio[inputs, "strassen1-tf32"] > 100
    kernels = (tmp_path / "report" / "tables" / "tensorcore_kernels.md").read_text()
    assert "TcSmall" in kernels and "3xtf32" in kernels and "1xtf32" in kernels
    page = (tmp_path / "report" / "index.html").read_text()
    assert "GEMM 3xTF32 (ours)" in page and "cuBLAS TF32" in page  # the figure's caption lists its lines


def test_accuracy_refuses_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from strassenbench.cli import main

    out = tmp_path / "accuracy.csv"
    assert main(["accuracy", "--impl", "gemm", "--inputs", "normal", "--out", str(out)]) == 2
    assert main(["accuracy", "--impl", "gemm-5xtf32", "--out", str(out)]) == 2
    assert main(["accuracy", "--impl", "gemm,cutlass", "--engine", "emu", "--sizes", "8", "--out", str(out)]) == 2
    out.write_text("keep\n")
    assert main(["accuracy", "--impl", "gemm", "--sizes", "8", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown inputs 'normal'" in err and "cutlass runs on cuda only, not emu" in err
    assert "is not an accuracy results file" in err and out.read_text() == "keep\n"


def test_model_puts_the_tensor_cores_beside_the_simt_kernels(sim_build: str) -> None:
    """Predictions: on an H100 at n = 8192 the 3xTF32 GEMM, one block per SM with staged accumulation (its latency
    term), is modeled near the SIMT GEMM's rate (0.6x to 1.2x; measured 47.6 against 47.4 TFLOPS), far under
    the tensor cores' peak; a V100 has no TF32 tensor cores (infinite time); 1xTF32 is never slower than 3xTF32;
    the tensor cores' rate is mma.sync's (half the dense peak on Hopper)."""
    from strassenbench.model.gpus import SPECS
    from strassenbench.model.perf import effective_tflops, impl_time, load_resources
    from strassenbench.strategies import STRATEGIES

    resources = load_resources(Path(sim_build) / "resources.csv")
    n, huge = 8192, STRATEGIES["Huge"]
    rate = {impl: effective_tflops(n, n, n, impl_time(SPECS["H100"], impl, huge, n, n, n, "float32", resources).seconds)
            for impl in ("gemm", "gemm-tf32", "gemm-3xtf32", "strassen1-3xtf32")}
    assert 0.6 * rate["gemm"] < rate["gemm-3xtf32"] < 1.2 * rate["gemm"] and rate["gemm-tf32"] >= rate["gemm-3xtf32"]
    assert impl_time(SPECS["V100"], "gemm-3xtf32", huge, n, n, n, "float32").seconds == float("inf")
    # mma.sync at half the dense TF32 peak on Hopper (MMA_SYNC_TF32_SHARE), at all of it on the A100
    assert SPECS["H100"].tau_tensor("3xtf32") == SPECS["H100"].tf32_mma_sync_flops / 3 == SPECS["H100"].tf32_flops / 6
    assert SPECS["A100"].tau_tensor("3xtf32") == SPECS["A100"].tf32_flops / 3


@pytest.mark.parametrize("mode", TC_MODES)
@pytest.mark.parametrize("counts", [(1, 1, 1), (2, 2, 2)])
def test_tchuge_shared_memory_at_the_ideal(mode: str, counts: tuple[int, int, int]) -> None:
    """TcHuge's steady-state main loop, counted on the emulator: its shared-memory wavefronts per warp and slice
    are the ideal (every access at 128 bytes per wavefront: A's fragments by ldmatrix, 4 per 16 x 8 tile and
    part; B's, 1 per LDS; the sums' 128-bit stores) and no access has a bank conflict."""
    from support.smem_steady import steady_totals

    from strassenbench.fused.instances import Instance

    s = TENSOR_STRATEGIES["TcHuge"]
    inst = Instance(s, "float32", counts, "plain", "vector", mode=mode)
    steady, deeper = steady_totals(inst, "float32")
    parts, k_steps = (1 if mode == "1xtf32" else 2), s.k_S // 8
    per_warp_stores = 32 * (s.m_S + s.n_S) * s.k_S // s.threads * 4 // 128  # the sums' bytes per warp / 128
    ideal = parts * (k_steps * (4 * s.m_W // 16 + 2 * s.n_W // 8) + per_warp_stores)
    assert steady.wavefronts / (s.threads // 32 * 2) == ideal, (steady, ideal)
    assert deeper.load_conflicts == 0 and deeper.store_conflicts == 0, deeper
