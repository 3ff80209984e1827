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


# ------------------------------------------------------------------ TMA tensor copies
TMA_PROBE = Path(__file__).resolve().parents[1] / "probes" / "tma_probe.cu"


def _with_encoder(lib: ctypes.CDLL) -> ctypes.CDLL:
    """A probe library with its emu_tensor_map_encode's argument types (kernels/instances.cuh)."""
    emu.tensor_map_encoder(lib)
    return lib


@pytest.fixture(scope="module")
def tma(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    lib = _with_encoder(_emulator_library(TMA_PROBE, tmp_path_factory.mktemp("tma")))
    lib.run_tma.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 5
    assert emu._take(lib) is None
    return lib


def _encode(tma: ctypes.CDLL, tensor: np.ndarray, box: tuple[int, int], swizzle: int) -> tuple[np.ndarray, str]:
    """(the 128-byte map, why the encoder refused it or ''): tensor is 2-D float32 (rows along dim 1)."""
    cmap = np.zeros(128 + 64, np.uint8)
    cmap = cmap[(-cmap.ctypes.data % 64):][:128]
    why = ctypes.create_string_buffer(200)
    rc = tma.emu_tensor_map_encode(cmap.ctypes.data, tensor.ctypes.data, 4, tensor.shape[1], tensor.shape[0],
                                   tensor.strides[0], box[0], box[1], swizzle, why, 200)
    return cmap, (why.value.decode() if rc else "")


def _tensor(rows: int, cols: int, ld: int) -> np.ndarray:
    raw = np.arange(1, rows * ld + 5, dtype=np.float32)
    return raw[(-raw.ctypes.data % 16) // 4:][:rows * ld].reshape(rows, ld)[:, :cols]


def _shared_layout(tensor: np.ndarray, c0: int, c1: int, box: tuple[int, int], swizzle: int) -> np.ndarray:
    """The tile a TMA copy leaves in shared memory, from the CUDA programming guide's statement of the 128-byte
    swizzle: in each 128-byte row r of a 1024-byte aligned tile, 16-byte chunk j holds the box row's chunk
    j ^ (r % 8); rows box[0] floats apart; zeros outside the tensor."""
    padded = np.zeros((box[1], box[0]), np.float32)
    rows, cols = tensor.shape
    for y in range(box[1]):
        for x in range(box[0]):
            if 0 <= c1 + y < rows and 0 <= c0 + x < cols:
                padded[y, x] = tensor[c1 + y, c0 + x]
    if swizzle == 0:
        return padded.reshape(-1)
    chunks = padded.reshape(box[1], 8, 4)  # 128-byte rows (box[0] = 32 floats) of 8 chunks of 4 floats
    return np.stack([chunks[r][np.arange(8) ^ (r % 8)] for r in range(box[1])]).reshape(-1)


@pytest.mark.parametrize(("box", "swizzle", "at"), [
    ((32, 8), 128, (0, 0)), ((32, 16), 128, (32, 8)), ((64, 16), 0, (16, 4)),
    ((32, 8), 128, (40, 60)),  # past the tensor's last column and row: zeros there
    ((32, 8), 128, (-8, -3)),  # before its first: zeros
])
def test_a_tensor_copy_lands_its_box_in_the_maps_swizzle(tma: ctypes.CDLL, box: tuple[int, int], swizzle: int,
                                                         at: tuple[int, int]) -> None:
    tensor = _tensor(64, 72, 76)  # rows 304 bytes apart: a view, as an operand's term block is
    cmap, why = _encode(tma, tensor, box, swizzle)
    assert why == ""
    n = box[0] * box[1]
    out = np.zeros(n, np.float32)
    tma.run_tma(cmap.ctypes.data, out.ctypes.data, at[0], at[1], n, 4 * n, 0)
    assert emu._take(tma) is None
    np.testing.assert_array_equal(out, _shared_layout(tensor, *at, box, swizzle))


def test_the_128_byte_swizzle_spreads_a_column_of_chunks_over_every_bank(tma: ctypes.CDLL) -> None:
    """What the swizzle is for: the 16-byte chunk of the same box column in 8 consecutive rows (a K-major
    fragment's reads) lies in 8 different groups of 4 banks, all 32 banks once."""
    tensor = _tensor(8, 32, 32)
    cmap, _ = _encode(tma, tensor, (32, 8), 128)
    out = np.zeros(256, np.float32)
    tma.run_tma(cmap.ctypes.data, out.ctypes.data, 0, 0, 256, 1024, 0)
    for chunk in range(8):
        words = [int(np.flatnonzero(out == tensor[r, 4 * chunk])[0]) for r in range(8)]
        banks = sorted(b for w in words for b in range(w % 32, w % 32 + 4))
        assert banks == list(range(32)), (chunk, words)


@pytest.mark.parametrize(("box", "swizzle", "base", "problem"), [
    ((16, 8), 128, 0, "128-byte box rows"),
    ((32, 8), 64, 0, "swizzle"),
    ((3, 8), 0, 0, "multiple of 16 bytes"),
    ((32, 300), 0, 0, "outside 1 to 256"),
    ((32, 8), 0, 1, "not 16-byte aligned"),
])
def test_the_encoder_refuses_what_the_driver_would(tma: ctypes.CDLL, box: tuple[int, int], swizzle: int, base: int,
                                                   problem: str) -> None:
    tensor = _tensor(64, 72, 76)[:, base:]
    _, why = _encode(tma, tensor, box, swizzle)
    assert problem in why


def test_tensor_copy_faults(tma: ctypes.CDLL) -> None:
    """A tile that is not 1024-byte aligned under the 128-byte swizzle, a map that was never encoded, and a
    phase that expects fewer bytes than the box brings: each a fault."""
    tensor = _tensor(64, 72, 76)
    cmap, _ = _encode(tma, tensor, (32, 8), 128)
    out = np.zeros(256, np.float32)
    tma.run_tma(cmap.ctypes.data, out.ctypes.data, 0, 0, 256, 1024, 32)  # 128 bytes into the tile
    fault = emu._take(tma)
    assert fault is not None and "misaligned" in fault and "cp.async.bulk.tensor" in fault
    blank = np.zeros(128, np.uint8)
    tma.run_tma(blank.ctypes.data, out.ctypes.data, 0, 0, 256, 1024, 0)
    fault = emu._take(tma)
    assert fault is not None and "not encoded" in fault
    tma.run_tma(cmap.ctypes.data, out.ctypes.data, 0, 0, 256, 1024 - 16, 0)
    fault = emu._take(tma)
    assert fault is not None and "more bytes" in fault


def test_the_tma_probe_compiles_to_a_tensor_copy(tmp_path: Path) -> None:
    """cp.async.bulk.tensor.2d with the map a __grid_constant__ parameter becomes UTMALDG on sm_90a."""
    cubin = tmp_path / "tma.cubin"
    run = subprocess.run([find_tool("nvcc"), "-std=c++17", "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-I",
                          str(kernels_dir()), str(TMA_PROBE), "-o", str(cubin)], check=True, capture_output=True,
                         text=True)
    assert parse_ptxas(run.stdout + run.stderr)["tma_probe"].spill_stores == 0
    opcodes = {i.opcode for i in parse_sass(disassemble(cubin, "sm_90"))["tma_probe"]}
    assert any(op.startswith("UTMALDG") for op in opcodes), sorted(opcodes)


# ------------------------------------------------------------------ TMA tensor stores and reductions
TMA_STORE_PROBE = Path(__file__).resolve().parents[1] / "probes" / "tma_store_probe.cu"


@pytest.fixture(scope="module")
def tma_store(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    lib = _with_encoder(_emulator_library(TMA_STORE_PROBE, tmp_path_factory.mktemp("tma_store")))
    lib.run_tma_store.argtypes = [ctypes.c_void_p] + [ctypes.c_int] * 9
    assert emu._take(lib) is None
    return lib


def _store(lib: ctypes.CDLL, box: tuple[int, int], swizzle: int, at: tuple[int, int], add: int = 0, fence: int = 1,
           wait: int = 1, overwrite: int = 0, times: int = 1):  # noqa: ANN202
    """(the 40 x 72 destination before, after, the fault): see tma_store_probe.cu."""
    dest = _tensor(40, 72, 76)
    dest[...] = 0.5
    before = dest.copy()
    cmap, why = _encode(lib, dest, box, 128 if swizzle else 0)
    assert why == ""
    for _ in range(times):
        lib.run_tma_store(cmap.ctypes.data, box[0], box[1], swizzle, at[0], at[1], add, fence, wait, overwrite)
    return before, dest, emu._take(lib)


def _tile(box: tuple[int, int]) -> np.ndarray:
    y, x = np.mgrid[0:box[1], 0:box[0]]
    return (1000 * y + x + 1).astype(np.float32)


@pytest.mark.parametrize(("box", "swizzle", "at"), [((32, 8), 1, (8, 4)), ((64, 16), 0, (0, 0)),
                                                    ((32, 8), 1, (56, 36))])  # the last past both edges: dropped
def test_a_tensor_store_writes_its_box_and_nothing_else(tma_store: ctypes.CDLL, box: tuple[int, int], swizzle: int,
                                                        at: tuple[int, int]) -> None:
    before, after, fault = _store(tma_store, box, swizzle, at)
    assert fault is None
    want = before.copy()
    region = want[at[1]:at[1] + box[1], at[0]:at[0] + box[0]]
    region[...] = _tile(box)[:region.shape[0], :region.shape[1]]
    np.testing.assert_array_equal(after, want)


def test_a_tensor_reduction_adds_its_box(tma_store: ctypes.CDLL) -> None:
    """Two launches of the reduction (the 128-byte swizzle): the box holds 0.5 plus twice the tile."""
    box, at = (32, 8), (16, 24)
    before, after, fault = _store(tma_store, box, 1, at, add=1, times=2)
    assert fault is None
    want = before.copy()
    want[at[1]:at[1] + box[1], at[0]:at[0] + box[0]] += 2 * _tile(box)
    np.testing.assert_array_equal(after, want)


def test_a_tensor_store_faults(tma_store: ctypes.CDLL) -> None:
    """The tile's stores not fenced for the async proxy, and a store never waited for (still reading shared
    memory when the block ends): each a fault."""
    _, _, fault = _store(tma_store, (32, 8), 1, (0, 0), fence=0)
    assert fault is not None and "without a fence.proxy.async" in fault
    _, _, fault = _store(tma_store, (32, 8), 1, (0, 0), wait=0)
    assert fault is not None and "still reading shared memory" in fault


def test_a_tile_written_before_the_read_wait_is_what_lands(tma_store: ctypes.CDLL) -> None:
    """The emulator reads a store's tile at the wait, the latest the PTX ISA allows: a kernel that writes the
    tile again before bulk_wait_read stores what it wrote then (-7 here), so the race shows."""
    _, after, fault = _store(tma_store, (32, 8), 1, (0, 0), overwrite=1)
    assert fault is None and (after[:8, :32] == -7).all()


def test_the_tma_store_probe_compiles_to_tensor_stores_and_reductions(tmp_path: Path) -> None:
    """nvcc for sm_90a: UTMASTG and UTMAREDG, and the proxy fence."""
    cubin = tmp_path / "tma_store.cubin"
    subprocess.run([find_tool("nvcc"), "-std=c++17", "-arch=sm_90a", "-cubin", "-I", str(kernels_dir()),
                    str(TMA_STORE_PROBE), "-o", str(cubin)], check=True, capture_output=True, text=True)
    opcodes = {i.opcode for i in parse_sass(disassemble(cubin, "sm_90"))["tma_store_probe"]}
    for wanted in ("UTMASTG", "UTMAREDG", "FENCE.VIEW.ASYNC.S"):
        assert any(op.startswith(wanted) for op in opcodes), (wanted, sorted(opcodes))


def test_a_wait_on_the_phase_before_completes_nothing(probe: ctypes.CDLL) -> None:
    """Waiting on the other parity asks about the phase before the current one, which is complete: it must not
    complete the current phase (its copies stay in flight, and the block ends with them pending: a fault)."""
    src, out, fault = _copy(probe, wait=2)
    assert (out[0] == -1).all() and fault is not None


def test_a_barrier_initialised_twice_or_expecting_too_many_bytes_is_a_fault(probe: ctypes.CDLL) -> None:
    """mbarrier.init on a live barrier, and a phase's transaction count past the ISA's 2^20 - 1: undefined on a
    GPU, faults here."""
    _, _, fault = _copy(probe, init=2)
    assert fault is not None and "already initialised" in fault
    _, _, fault = _copy(probe, expect=1 << 20, limit_s=0.2)
    assert fault is not None and "2^20" in fault
