"""The TF32 building blocks of the tensor-core kernels (kernels/tensorcore.cuh): rounding, the 3xTF32 split
and one warp's mma.m16n8k8, on the emulator against strassenbench.tensorcore bit for bit, and in the machine
code nvcc makes of them."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

from strassenbench.fused.emu import CXX_FLAGS, _compiler
from strassenbench.fused.instances import kernels_dir
from strassenbench.fused.modules import disassemble
from strassenbench.fused.toolchain import find_tool
from strassenbench.tensorcore import fragments, matmul, mma_m16n8k8, round_tf32, split_3xtf32

PROBE = Path(__file__).parent / "probes" / "tensorcore_probe.cu"
F32P = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """The probe kernels compiled for the emulator."""
    target = tmp_path_factory.mktemp("probe") / "probe.so"
    subprocess.run([_compiler(), *CXX_FLAGS, "-x", "c++", "-I", str(kernels_dir()), str(PROBE), "-o", str(target)],
                   check=True, capture_output=True)
    lib = ctypes.CDLL(str(target))
    lib.run_tf32_round.argtypes = [F32P, F32P, F32P, ctypes.c_int]
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


def test_emulator_rounding_is_numpy_bit_for_bit(probe: ctypes.CDLL) -> None:
    rng = np.random.default_rng(2)
    x = np.concatenate([_f32([i for i, _ in ROUNDING]), rng.integers(0, 2**32, 4000, dtype=np.uint32).view(np.float32),
                        rng.standard_normal(1000).astype(np.float32)])
    big, small = np.empty_like(x), np.empty_like(x)
    probe.run_tf32_round(x, big, small, x.size)
    want_big, want_small = split_3xtf32(x)
    finite = np.isfinite(x)
    assert (_bits(big)[finite] == _bits(round_tf32(x))[finite]).all()
    inf, nan = np.isinf(x), np.isnan(x)
    assert inf.any() and nan.any() and (_bits(big)[inf] == _bits(x)[inf]).all() and np.isnan(big[nan]).all()
    assert (_bits(small)[finite] == _bits(want_small)[finite]).all()


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


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_compiles_to_one_hmma(arch: str, tmp_path: Path) -> None:
    """nvcc turns the probe's mma into the TF32 tensor-core instruction, once (PTX syntax and operand
    types checked by the real assembler)."""
    cubin = tmp_path / "probe.cubin"
    subprocess.run([find_tool("nvcc"), "-std=c++17", f"-arch={arch}", "-cubin", "-I", str(kernels_dir()), str(PROBE),
                    "-o", str(cubin)], check=True, capture_output=True)
    sass = disassemble(cubin, arch)
    assert sass.count("HMMA.1688.F32.TF32") == 1
