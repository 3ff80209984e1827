"""Hopper's asynchronous transactions (kernels/platform.cuh: mbarrier_*, bulk_copy), the first layer of a TMA
pipeline: on the emulator, through the probe tests/probes/bulk_copy_probe.cu, a bulk copy lands only when the
phase of its mbarrier completes, the phases alternate their parity, and every misuse the PTX ISA leaves undefined
is a fault; nvcc turns the probe into Hopper's barrier and bulk-copy instructions."""

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

PROBE = Path(__file__).resolve().parents[1] / "probes" / "bulk_copy_probe.cu"
N = 64  # floats a phase: 256 bytes


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    lib = _emulator_library(PROBE, tmp_path_factory.mktemp("bulk_copy"))
    lib.run_bulk_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 6 + [ctypes.c_double]
    assert emu._take(lib) is None
    return lib


def _copy(probe: ctypes.CDLL, piece: int = 16, expect: int = 4 * N, wait: int = 1, init: int = 1,
          offset: int = 4, limit_s: float = 20.0):  # noqa: ANN202
    """(source, what the probe's threads read in each phase, the fault): see bulk_copy_probe.cu."""
    raw = np.arange(1, 2 * N + 5, dtype=np.float32)
    src = raw[(-raw.ctypes.data % 16) // 4:][:2 * N]  # 16-byte aligned
    out = np.zeros(2 * N, np.float32)
    probe.run_bulk_copy(src.ctypes.data, out.ctypes.data, N, piece, expect, wait, init, offset, limit_s)
    return src.reshape(2, N), out.reshape(2, N), emu._take(probe)


@pytest.mark.parametrize("piece", [4, 16, N])
def test_bulk_copies_land_when_their_phase_completes(probe: ctypes.CDLL, piece: int) -> None:
    """Two phases of one barrier, each one arrival that expects the phase's 256 bytes and the bulk copies that
    bring them (of 16, 64 or 256 bytes): the waiters of parity 0, then 1, read each phase's data."""
    src, out, fault = _copy(probe, piece=piece)
    assert fault is None
    np.testing.assert_array_equal(out, src)


def test_a_read_without_the_wait_sees_the_old_tile(probe: ctypes.CDLL) -> None:
    """No wait: the copies have not landed when the threads read (the tile's -1), and thread 0's arrival on
    the next phase, its barrier's arrivals all in and its copies not waited for, is a fault."""
    _, out, fault = _copy(probe, wait=0)
    assert (out[0] == -1).all()
    assert fault is not None and "arrivals are all in" in fault


def test_more_bytes_than_the_phase_expects_is_a_fault(probe: ctypes.CDLL) -> None:
    _, _, fault = _copy(probe, expect=4 * N - 16)
    assert fault is not None and "more bytes than their mbarrier phase expected" in fault


def test_a_phase_that_waits_for_bytes_no_copy_brings_never_completes(probe: ctypes.CDLL) -> None:
    """16 bytes more expected than copied: the wait gives up (after 0.2 s here) with a fault."""
    _, _, fault = _copy(probe, expect=4 * N + 16, limit_s=0.2)
    assert fault is not None and "never completes" in fault


def test_a_barrier_used_before_its_initialisation_is_a_fault(probe: ctypes.CDLL) -> None:
    _, _, fault = _copy(probe, init=0)
    assert fault is not None and "not initialised" in fault


def test_a_misaligned_bulk_copy_is_a_fault(probe: ctypes.CDLL) -> None:
    _, _, fault = _copy(probe, offset=1)
    assert fault is not None and "misaligned" in fault and "cp.async.bulk" in fault


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_the_probe_compiles_to_hoppers_barrier_and_bulk_copy_instructions(arch: str, tmp_path: Path) -> None:
    """The PTX is the real assembler's to check: mbarrier.init, arrive.expect_tx, try_wait.parity and
    cp.async.bulk become SYNCS.EXCH, SYNCS.ARRIVE.TRANS64, SYNCS.PHASECHK and UBLKCP on sm_90, with no spill
    and no stack."""
    cubin = tmp_path / "probe.cubin"
    run = subprocess.run([find_tool("nvcc"), "-std=c++17", f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-I",
                          str(kernels_dir()), str(PROBE), "-o", str(cubin)], check=True, capture_output=True,
                         text=True)
    props = parse_ptxas(run.stdout + run.stderr)["bulk_copy_probe"]
    assert props.spill_stores == 0 and props.stack_bytes == 0
    opcodes = {i.opcode for i in parse_sass(disassemble(cubin, arch.rstrip("a")))["bulk_copy_probe"]}
    for wanted in ("SYNCS.EXCH.64", "SYNCS.ARRIVE.TRANS64", "UBLKCP.S.G"):
        assert any(op.startswith(wanted) for op in opcodes), (wanted, sorted(opcodes))
    assert any(op.startswith("SYNCS.PHASECHK") for op in opcodes), sorted(opcodes)
