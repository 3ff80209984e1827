"""wgmma on the emulator (kernels/platform.cuh: wgmma_desc, wgmma_fence, wgmma_tf32, wgmma_commit, wgmma_wait;
kernels/emu/cuda_emu.hpp), the tensor-core instruction of Hopper's own kernels: through the probe
tests/probes/wgmma_probe.cu, a warpgroup's m64nNk8 products from K-major tiles in the 128-byte swizzle are exact on
integers, read only the tf32 bits of their inputs, and the mistakes of a descriptor, a fence or a wait fail; nvcc
turns the probe into HGMMA for sm_90a."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_tensorcore import _emulator_library

from strassenbench.fused import emu
from strassenbench.fused.instances import kernels_dir
from strassenbench.fused.modules import disassemble, parse_ptxas
from strassenbench.fused.sass import parse_sass
from strassenbench.fused.toolchain import find_tool
from strassenbench.tensorcore import round_tf32

PROBE = Path(__file__).resolve().parents[1] / "probes" / "wgmma_probe.cu"
F32P = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    lib = _emulator_library(PROBE, tmp_path_factory.mktemp("wgmma"))
    lib.run_wgmma.argtypes = [F32P, F32P, F32P, ctypes.c_int, ctypes.c_int]
    assert emu._take(lib) is None
    return lib


def _run(probe: ctypes.CDLL, a: np.ndarray, b: np.ndarray, plant: int = 0) -> tuple[np.ndarray, str | None]:
    n = b.shape[0]
    out = np.full((64, n), np.nan, np.float32)
    probe.run_wgmma(np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32), out, n, plant)
    return out, emu._take(probe)


def _integers(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.integers(-8, 9, (64, 32)).astype(np.float32), rng.integers(-8, 9, (n, 32)).astype(np.float32))


@pytest.mark.parametrize(("n", "plant"), [(8, 0), (64, 0), (64, 8)], ids=["n8", "n64", "n64-no-swizzle"])
def test_a_warpgroups_product_is_exact_on_integers(probe: ctypes.CDLL, n: int, plant: int) -> None:
    """64 x 32 times (n x 32)^T in four k-steps from the swizzled tiles, or (plant 8) from the layout without
    swizzle (K-major 8 x 16-byte core matrices, LBO 128 bytes along k, SBO 1024 between groups of 8 rows): every
    accumulator element of every thread's fragment where the fragment layout puts it."""
    a, b = _integers(n)
    out, fault = _run(probe, a, b, plant)
    assert fault is None
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.T.astype(np.float64))


def test_the_tensor_cores_read_only_the_tf32_bits(probe: ctypes.CDLL) -> None:
    """Inputs with their 13 low bits set give the product of the inputs without them."""
    a, b = _integers(8, 1)
    noise = np.float32(1 + 2.0**-20)  # 1 + a bit below tf32's 10 explicit mantissa bits
    out, fault = _run(probe, a * noise, b * noise)
    assert fault is None and not np.array_equal(round_tf32(a * noise), a * noise)
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.T.astype(np.float64))


@pytest.mark.parametrize(("plant", "what"), [(1, "the descriptors without the swizzle"),
                                             (2, "a stride byte offset of 512"),
                                             (9, "a leading byte offset of 256 without the swizzle"),
                                             (4, "the accumulators read before the wait")])
def test_planted_mistakes_give_a_wrong_product(probe: ctypes.CDLL, plant: int, what: str) -> None:
    a, b = _integers(64, 2)
    out, _ = _run(probe, a, b, plant)
    assert not np.array_equal(out, a.astype(np.float64) @ b.T.astype(np.float64)), what


@pytest.mark.parametrize(("plant", "fault_says"), [(3, "without a fence.proxy.async"),
                                                   (5, "without a wgmma.fence"),
                                                   (6, "shared operands changed between its issue and its wait"),
                                                   (7, "accumulator was written between its issue and its wait"),
                                                   (10, "issued different numbers of wgmma"),
                                                   (11, "different descriptors, shape or scale-d")])
def test_planted_mistakes_are_faults(probe: ctypes.CDLL, plant: int, fault_says: str) -> None:
    a, b = _integers(8, 3)
    _, fault = _run(probe, a, b, plant)
    assert fault is not None and fault_says in fault


def test_the_probe_compiles_to_hgmma_for_sm90a(tmp_path: Path) -> None:
    """The PTX is the real assembler's to check: HGMMA (m64n8k8 and m64n64k8, tf32) and the warpgroup's
    arrive and wait, with no spill; and the accumulator's fencing is whole: ptxas neither injects a warpgroup
    arrive (C7519) nor serializes the wgmma (C7515) in them, as it does in the kernel planted without a
    wgmma.fence."""
    cubin = tmp_path / "wgmma.cubin"
    run = subprocess.run([find_tool("nvcc"), "-std=c++17", "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-I",
                          str(kernels_dir()), str(PROBE), "-o", str(cubin)], check=True, capture_output=True,
                         text=True)
    report = run.stdout + run.stderr
    props = parse_ptxas(report)
    code = parse_sass(disassemble(cubin, "sm_90"))
    for kernel in ("wgmma_probe_n8", "wgmma_probe_n64"):
        assert props[kernel].spill_stores == 0, kernel
        assert not [line for line in report.splitlines() if f"'{kernel}'" in line and "(C75" in line], report
        opcodes = {i.opcode for i in code[kernel]}
        assert any(op.startswith("HGMMA.64x") and "TF32" in op for op in opcodes), (kernel, sorted(opcodes))
        assert any(op.startswith("WARPGROUP") for op in opcodes), (kernel, sorted(opcodes))
    assert any("'wgmma_probe_unfenced'" in line and "(C7519)" in line for line in report.splitlines()), report


def test_setmaxnreg_compiles_to_the_register_reallocation_and_checks_its_count(tmp_path: Path) -> None:
    """The producer warpgroup gives registers back (to 40), the consumer takes them (to 232): USETMAXREG's
    dealloc and alloc on sm_90a. A count the ISA refuses (not a multiple of 8) stops the compile."""
    cubin = tmp_path / "wgmma.cubin"
    subprocess.run([find_tool("nvcc"), "-std=c++17", "-arch=sm_90a", "-cubin", "-I", str(kernels_dir()), str(PROBE),
                    "-o", str(cubin)], check=True, capture_output=True, text=True)
    sass = [f"{i.opcode} {i.operands}" for i in parse_sass(disassemble(cubin, "sm_90"))["setmaxnreg_probe"]]
    assert any(line.startswith("USETMAXREG.DEALLOC") and "0x28" in line for line in sass), sass
    assert any(line.startswith("USETMAXREG.TRY_ALLOC") and "0xe8" in line for line in sass), sass
    bad = tmp_path / "bad.cu"
    bad.write_text('#include "platform.cuh"\n__global__ void k() { sb::setmaxnreg_dec<36>(); }\n')
    run = subprocess.run([find_tool("nvcc"), "-std=c++17", "-arch=sm_90a", "-cubin", "-I", str(kernels_dir()),
                          str(bad), "-o", str(tmp_path / "bad.cubin")], capture_output=True, text=True)
    assert run.returncode != 0 and "a multiple of 8" in run.stdout + run.stderr
