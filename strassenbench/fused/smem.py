"""Shared-memory wavefronts, counted from the emulator's address traces rather than argued.

The emulator (kernels/emu/cuda_emu.hpp) records every shared-memory access of every thread; the n-th access
of the 32 lanes of a warp is one warp-level instruction (all lanes run the same sequence). Each instruction
is served in wavefronts, by the hardware rule for 32 banks of 4 bytes (NVIDIA, CUDA C++ Programming Guide,
"Shared Memory" of compute capability 5.x and later; and, for 64- and 128-bit accesses, the pairing rule
NVIDIA engineers describe for Volta and later: 128 bytes are returned per cycle, and a 128-bit access whose
lanes n and n^1, or n and n^2, read the same address is returned in half the cycles):

- the warp is split into phases of 128 / width lanes (32 lanes for 32-bit accesses, 16 for 64-bit, 8 for
  128-bit), twice as many lanes when the pairing rule holds;
- a phase takes as many wavefronts as the largest number of distinct 4-byte words it touches in one bank
  (lanes reading the same word share it);
- an instruction's wavefronts are the sum over its phases, its bank conflicts the excess over one per phase.

The main loop's figure per warp and k_S slice is the difference between two runs of one thread block whose
depths differ by some slices, divided by those slices and the warps: its steady state, in which the
prologue's extra tile store and fragment load cancel out (tests/fused/test_smem.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RECORD", "Access", "wavefronts", "warp_accesses", "Totals", "count", "trace"]

BANKS, BANK_BYTES, RETURN_BYTES = 32, 4, 128

# kernels/emu/cuda_emu.hpp, SmemRecord
RECORD = np.dtype([("address", "<u8"), ("block", "<u4"), ("thread", "<u4"), ("seq", "<u4"), ("bytes", "<u2"),
                   ("store", "<u2")])


@dataclass(frozen=True)
class Access:
    """One warp-level shared-memory instruction: the address of each lane (None for an inactive lane)."""

    addresses: tuple[int | None, ...]
    width: int  # bytes per lane: 4, 8 or 16
    store: bool


def _paired(addresses: tuple[int | None, ...], stride: int) -> bool:
    pairs = [(addresses[n], addresses[n ^ stride]) for n in range(len(addresses)) if n ^ stride < len(addresses)]
    return all(a == b for a, b in pairs if a is not None and b is not None)


def wavefronts(access: Access) -> tuple[int, int]:
    """(wavefronts, bank conflicts) of one warp-level access (see the module docstring)."""
    lanes = RETURN_BYTES // access.width
    if access.width >= 8 and (_paired(access.addresses, 1) or _paired(access.addresses, 2)):
        lanes *= 2
    total = conflicts = 0
    for first in range(0, len(access.addresses), lanes):
        words = {address // BANK_BYTES + w
                 for address in access.addresses[first: first + lanes] if address is not None
                 for w in range(access.width // BANK_BYTES)}
        if not words:
            continue
        per_bank = np.bincount(np.fromiter((w % BANKS for w in words), dtype=np.int64), minlength=BANKS)
        total += int(per_bank.max())
        conflicts += int(per_bank.max()) - 1
    return total, conflicts


def warp_accesses(records: np.ndarray) -> list[Access]:
    """Group a trace into warp-level accesses: the seq-th access of the lanes of one warp of one block."""
    out = []
    if len(records) == 0:
        return out
    warp = records["thread"] // 32
    order = np.lexsort((records["thread"] % 32, records["seq"], warp, records["block"]))
    r, w = records[order], warp[order]
    keys = np.stack([r["block"], w, r["seq"]], axis=1)
    starts = np.flatnonzero(np.any(np.diff(keys, axis=0) != 0, axis=1)) + 1
    for group in np.split(np.arange(len(r)), starts):
        widths, stores = set(r["bytes"][group]), set(r["store"][group])
        if len(widths) != 1 or len(stores) != 1:
            raise ValueError("lanes of a warp disagree on a shared-memory access (divergent control flow)")
        lanes: list[int | None] = [None] * 32
        for i in group:
            lanes[int(r["thread"][i]) % 32] = int(r["address"][i])
        out.append(Access(tuple(lanes), int(widths.pop()), bool(stores.pop())))
    return out


@dataclass(frozen=True)
class Totals:
    load_wavefronts: int
    store_wavefronts: int
    load_conflicts: int
    store_conflicts: int

    @property
    def wavefronts(self) -> int:
        return self.load_wavefronts + self.store_wavefronts

    def __sub__(self, other: "Totals") -> "Totals":
        return Totals(*(a - b for a, b in zip(self.astuple(), other.astuple())))

    def astuple(self) -> tuple[int, int, int, int]:
        return self.load_wavefronts, self.store_wavefronts, self.load_conflicts, self.store_conflicts


def count(records: np.ndarray) -> Totals:
    """Wavefronts and bank conflicts of every warp-level access of a trace, loads and stores apart."""
    totals = [0, 0, 0, 0]
    for access in warp_accesses(records):
        waves, conflicts = wavefronts(access)
        totals[1 if access.store else 0] += waves
        totals[3 if access.store else 2] += conflicts
    return Totals(*totals)


def trace(run) -> np.ndarray:  # noqa: ANN001 - callable(): runs launches on the emulator
    """The shared-memory accesses of everything ``run()`` launches on the emulator."""
    import ctypes

    from . import emu

    libraries = emu.loaded_libraries
    for lib in libraries():
        lib.emu_trace_clear()
    emu.tracing(True)
    try:
        run()
    finally:
        emu.tracing(False)
    parts = []
    for lib in libraries():
        lib.emu_trace_size.restype = ctypes.c_ulonglong
        size = lib.emu_trace_size()
        buf = np.empty(size, dtype=RECORD)
        if size:
            lib.emu_trace_copy(ctypes.c_void_p(buf.ctypes.data))
        lib.emu_trace_clear()
        parts.append(buf)
    return np.concatenate(parts) if parts else np.empty(0, dtype=RECORD)
