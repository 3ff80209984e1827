"""The six block-size strategies of figure tab:gpu_block_size (CUTLASS's SIMT SGEMM configurations), and the
tensor-core families' (beyond the paper). Each family's record (strassenbench.families) holds its table.

Thread block m_S x n_S x k_S, thread m_R x n_R, warp (m_W / m_R) x (n_W / n_R) threads. Every other size is
derived: a thread block has (m_S / m_R)(n_S / n_R) threads (Sec. s:cutlass).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Strategy", "STRATEGIES", "WarpGrid", "TensorStrategy", "TENSOR_STRATEGIES", "DmmaStrategy",
           "DMMA_STRATEGIES", "WgStrategy", "WG_STRATEGIES", "WG_SHARED_BYTES"]


@dataclass(frozen=True)
class Strategy:
    name: str
    m_S: int
    n_S: int
    k_S: int
    m_R: int
    n_R: int
    warp_m: int  # m_W / m_R
    warp_n: int  # n_W / n_R

    def __post_init__(self) -> None:
        if self.warp_m * self.warp_n != 32:
            raise ValueError(f"strategy {self.name}: a warp has 32 threads, not {self.warp_m} x {self.warp_n}")
        if self.m_S % self.m_W or self.n_S % self.n_W:
            raise ValueError(f"strategy {self.name}: the warp tile must divide the thread block tile")

    @property
    def m_W(self) -> int:
        return self.warp_m * self.m_R

    @property
    def n_W(self) -> int:
        return self.warp_n * self.n_R

    @property
    def threads(self) -> int:
        """t_x t_y = (m_S n_S) / (m_R n_R), figure tab:notation."""
        return (self.m_S // self.m_R) * (self.n_S // self.n_R)

    def smem_bytes(self, itemsize: int) -> int:
        """The A and B tiles in shared memory: sizeof(T)(m_S k_S + n_S k_S), Eq. (constrain_sha_size)."""
        return itemsize * (self.m_S + self.n_S) * self.k_S


_TABLE = """
Small   16  16 16 2 2 4 8
Medium  32  32  8 4 4 4 8
Large   64  64  8 8 8 4 8
Tall   128  32  8 8 4 8 4
Wide    32 128  8 4 8 4 8
Huge   128 128  8 8 8 4 8
"""  # figure tab:gpu_block_size: Strategy, m_S, n_S, k_S, m_R, n_R, m_W/m_R, n_W/n_R

STRATEGIES: dict[str, Strategy] = {
    fields[0]: Strategy(fields[0], *map(int, fields[1:]))
    for fields in (line.split() for line in _TABLE.strip().splitlines())
}


@dataclass(frozen=True)
class WarpGrid:
    """A tile shape of the tensor-core kernels: thread block m_S x n_S x k_S of warps_m x warps_n warps, each
    warp's m_W x n_W tile a grid of mma tiles (TensorStrategy, DmmaStrategy), and the main loop's shared-memory
    stages: 2, the register pipeline (kernels/mma_mainloop.cuh, mma_mainloop); 3 or more, the multistage
    cp.async pipeline (mma_multistage; the TF32 family's only)."""

    name: str
    m_S: int
    n_S: int
    k_S: int
    warps_m: int
    warps_n: int
    stages: int = 2

    @property
    def multistage(self) -> bool:
        """The cp.async pipeline: FP32 tiles, split on the fragments (TensorStrategy)."""
        return self.stages > 2

    def stored_parts(self, parts: int) -> int:
        """The TF32 parts of an operand in shared memory: all of them (2 for 3xTF32) on the register pipeline,
        one FP32 tile on the multistage one."""
        return 1 if self.multistage else parts

    @property
    def m_W(self) -> int:
        return self.m_S // self.warps_m

    @property
    def n_W(self) -> int:
        return self.n_S // self.warps_n

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n


@dataclass(frozen=True)
class TensorStrategy(WarpGrid):
    """A tile shape of the TF32 tensor-core kernels (kernels/tensorcore_primitive.cuh): each warp's tile a grid of
    16 x 8 tiles of mma.m16n8k8; its stages (WarpGrid) 2, the operands stored as their TF32 parts, or 3 or more,
    stored as FP32 and split into TF32 parts on the fragments."""

    def __post_init__(self) -> None:
        if self.m_S % (16 * self.warps_m) or self.n_S % (8 * self.warps_n) or self.k_S % 8:
            raise ValueError(f"strategy {self.name}: a warp's tile is a grid of 16 x 8 x 8 mma tiles")
        if self.stages < 2:
            raise ValueError(f"strategy {self.name}: at least 2 shared-memory stages")

    def smem_bytes(self, itemsize: int = 4, parts: int = 2) -> int:
        """Every stage of the A and B tiles, each of the stored parts (stored_parts; ``parts``: 2 for 3xTF32), B
        padded by 8 columns (MmaTiles)."""
        return (self.stages * self.stored_parts(parts) * itemsize
                * (self.m_S * self.k_S + self.k_S * (self.n_S + 8)))


# The tensor-core family's strategies: Huge's 128 x 128 x 8 block on 8 warps of 64 x 32 (CUTLASS's 3xTF32
# example runs 128 x 128 on 4 warps of 64 x 64; 8 warps keep 1xTF32 within 128 registers, 2 blocks per SM; 3xTF32's
# staged accumulation takes about 212, one block per SM: strassenbench.model.latency); Tall, CUTLASS's 3xTF32
# SGEMM shape on sm_80 and later, 128 x 64 on 4 warps of the same 64 x 32: its 128 threads hold two blocks per SM
# at up to 255 registers, so that one block's loads and barriers overlap the other's mma; TallAsync, the same
# tile with CUTLASS's whole main loop (k_S = 16, 3 cp.async stages, the big/small split on the fragments, one
# staged sum per 16 of k); and smaller blocks for small problems and the emulator.
_TENSOR_TABLE = """
TcSmall      32  32  8 2 1 2
TcLarge      64  64  8 2 2 2
TcTall      128  64  8 2 2 2
TcTallAsync 128  64 16 2 2 3
TcHuge      128 128  8 2 4 2
"""  # Strategy, m_S, n_S, k_S, warps along m, warps along n, shared-memory stages

TENSOR_STRATEGIES: dict[str, TensorStrategy] = {
    fields[0]: TensorStrategy(fields[0], *map(int, fields[1:]))
    for fields in (line.split() for line in _TENSOR_TABLE.strip().splitlines())
}


@dataclass(frozen=True)
class DmmaStrategy(WarpGrid):
    """A tile shape of the FP64 tensor-core kernels (kernels/dmma_primitive.cuh): each warp's tile a grid of 8 x 8
    tiles of mma.m8n8k4.f64 (sm_80), paired into 16 x 8 tiles of mma.m16n8k16.f64 on sm_90."""

    def __post_init__(self) -> None:
        if self.m_S % (8 * self.warps_m) or self.n_S % (8 * self.warps_n) or self.k_S % 8 or self.n_S % 8:
            raise ValueError(f"strategy {self.name}: a warp's tile is a grid of 8 x 8 mma tiles, k_S a multiple of 8")
        if self.stages != 2:
            raise ValueError(f"strategy {self.name}: the DMMA kernels have the register pipeline only (2 stages)")

    def smem_bytes(self, itemsize: int = 8) -> int:
        """Both stages of the A and B tiles, rows padded by 4 doubles (DmmaTiles)."""
        return 2 * itemsize * (self.m_S * (self.k_S + 4) + self.k_S * (self.n_S + 4))


# The FP64 tensor-core family's strategies: a small block for small problems and the emulator, a large one
# whose warps each hold a 32 x 32 tile (16 mma tiles, 32 doubles of accumulator), and CUTLASS's default
# 128 x 128 block on 8 warps of 32 x 64 (32 mma tiles, 64 doubles), whose traffic per flop is half the large
# one's, with k_S = 8 so that both stages stay within 48 KiB of static shared memory (40.5 KiB).
_DMMA_TABLE = """
DmmaSmall  32  32 16 2 2
DmmaLarge  64  64 16 2 2
DmmaHuge  128 128  8 4 2
"""  # Strategy, m_S, n_S, k_S, warps along m, warps along n

DMMA_STRATEGIES: dict[str, DmmaStrategy] = {
    fields[0]: DmmaStrategy(fields[0], *map(int, fields[1:]))
    for fields in (line.split() for line in _DMMA_TABLE.strip().splitlines())
}


# The most shared memory a block of sm_90 may take (CUDA C++ Programming Guide, "Compute Capabilities": 227 KiB
# of dynamic shared memory per block, opted in through the kernel's attribute).
WG_SHARED_BYTES = 227 * 1024


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


@dataclass(frozen=True)
class WgStrategy:
    """A tile shape of the Wg kernels (kernels/wgmma_primitive.cuh, sm_90a): an m_S x n_S tile per loader
    warpgroup and m_S / 64 consumer warpgroups (128 threads each; a consumer's 64 rows are one m64n{n_S}k8
    wgmma per k-step), k_S = 32 (one 128-byte row of the 128-byte swizzle), ``op_stages`` operand stages and as
    many raw stages (TMA's term tiles) as the rest of the 227 KiB holds, at most ``raw_max`` (raw_stages). The
    atomic TMA kernels (``reduce``) also hold the staging boxes of their tile reductions (out_bytes)."""

    name: str
    m_S: int
    n_S: int
    k_S: int
    op_stages: int = 2
    raw_max: int = 4
    # A staging box of the tile reductions: (columns, rows) of C, 128-byte rows (the 128-byte swizzle's)
    OUT_BOX = (32, 16)

    def __post_init__(self) -> None:
        if self.m_S % 64 or self.n_S != 128 or self.k_S != 32:
            raise ValueError(f"strategy {self.name}: m_S a multiple of 64, n_S = 128 and k_S = 32 (wgmma_primitive.cuh)")
        if min(self.raw_stages(2), self.raw_stages(2, reduce=True)) < 2:
            raise ValueError(f"strategy {self.name}: fewer than 2 raw stages fit in {WG_SHARED_BYTES} bytes")

    @property
    def consumers(self) -> int:
        return self.m_S // 64

    @property
    def threads(self) -> int:
        """A loader warpgroup and the consumers."""
        return 128 * (1 + self.consumers)

    def _operand_bytes(self, parts: int) -> int:
        return _align(4 * parts * (self.m_S + self.n_S) * self.k_S, 1024)

    def _raw_bytes(self) -> int:
        return _align(4 * (self.m_S + self.n_S) * self.k_S, 1024)

    def out_bytes(self, reduce: bool) -> int:
        """The tile reductions' staging boxes (sb::WgOutBoxes; ``reduce``: an atomic TMA kernel, else none): two
        boxes (OUT_BOX) a consumer warp."""
        return 2 * 4 * self.consumers * self.OUT_BOX[0] * self.OUT_BOX[1] * 4 if reduce else 0

    def raw_stages(self, parts: int, reduce: bool = False) -> int:
        """Raw stages (one term tile of A and one of B each) beside the operand stages of ``parts`` TF32 parts
        (2 for 3xTF32) and the staging boxes (out_bytes), within the block's shared memory with 1 KiB for the
        barriers, at most raw_max."""
        room = WG_SHARED_BYTES - 1024 - self.op_stages * self._operand_bytes(parts) - self.out_bytes(reduce)
        return min(self.raw_max, room // self._raw_bytes())

    def smem_bytes(self, itemsize: int = 4, parts: int = 1, reduce: bool = False) -> int:
        """sizeof(sb::WgShared): the staging boxes, the operand and raw stages, then the barriers (8 bytes each),
        padded to the structure's 1,024-byte alignment (the instance macro checks it against the kernel's)."""
        raw = self.raw_stages(parts, reduce)
        barriers = 8 * 2 * (raw + self.op_stages)
        return _align(self.out_bytes(reduce) + self.op_stages * self._operand_bytes(parts) + raw * self._raw_bytes()
                      + barriers, 1024)


# The Wg family's strategies (beyond the paper, sm_90a): CUTLASS's sm_90 warp-specialized tile, 128 x 128 x 32 on
# two consumer warpgroups.
_WG_TABLE = """
WgLarge 128 128 32
"""  # Strategy, m_S, n_S, k_S

WG_STRATEGIES: dict[str, WgStrategy] = {
    fields[0]: WgStrategy(fields[0], *map(int, fields[1:]))
    for fields in (line.split() for line in _WG_TABLE.strip().splitlines())
}
