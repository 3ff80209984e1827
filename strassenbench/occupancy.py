"""Active thread blocks per SM, computed as cudaOccupancyMaxActiveBlocksPerMultiprocessor does.

The limits per architecture are from the CUDA C++ Programming Guide, "Compute Capabilities" (technical
specifications table) and the CUDA Occupancy Calculator: registers are allocated per warp in units of 256,
shared memory in units of 128 B (sm_70) or 128 B plus 1 KiB reserved per block (sm_80, sm_90).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ArchLimits", "ARCHS", "blocks_per_sm"]


@dataclass(frozen=True)
class ArchLimits:
    arch: str
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_unit: int = 256  # registers are allocated per warp in units of this many
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    max_smem_per_sm: int = 96 * 1024
    smem_unit: int = 128
    smem_reserved_per_block: int = 0


ARCHS: dict[str, ArchLimits] = {
    "sm_70": ArchLimits("sm_70", max_smem_per_sm=96 * 1024, smem_unit=256),
    "sm_80": ArchLimits("sm_80", max_smem_per_sm=164 * 1024, smem_reserved_per_block=1024),
    "sm_90": ArchLimits("sm_90", max_smem_per_sm=228 * 1024, smem_reserved_per_block=1024),
}


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def blocks_per_sm(limits: ArchLimits, threads: int, registers: int, smem_bytes: int) -> int:
    """The most blocks of ``threads`` threads, ``registers`` per thread and ``smem_bytes`` that fit on one SM.

    0 means the kernel cannot launch (too many registers, threads or shared memory).
    """
    if registers > limits.max_registers_per_thread or threads > 1024 or threads < 1:
        return 0
    warps = -(-threads // 32)
    by_threads = limits.max_threads_per_sm // (warps * 32)
    regs_per_warp = _round_up(max(registers, 1) * 32, limits.register_unit)
    by_registers = (limits.registers_per_sm // regs_per_warp) // warps
    smem = _round_up(smem_bytes, limits.smem_unit) + limits.smem_reserved_per_block
    by_smem = limits.max_smem_per_sm // smem if smem else limits.max_blocks_per_sm
    return max(0, min(limits.max_blocks_per_sm, by_threads, by_registers, by_smem))
