"""The model of the tensor-core kernels (beyond the paper): the paper's three terms (Sec. s:analysis) with the
tensor cores' rate, issue slots as for the SIMT kernels (strassenbench.model.issue), and the load latency that
one block per SM leaves uncovered (strassenbench.model.latency).

Per thread block of a tensor-core strategy (m_S x n_S x k_S, warps_m x warps_n warps of m_W x n_W) and a
variant (W_A, W_B, W_C), for k rounded up to k_S, with P = 1 (1xTF32) or 2 (3xTF32) TF32 parts per operand:

    N_flop = 2 m_S n_S k            at tau_tensor: mma.sync's TF32 rate (the dense TF32 peak; half of it on
                                    Hopper, strassenbench.model.gpus), a third of it for 3xTF32
    N_gmop = W_A m_S k + W_B n_S k + W_C m_S n_S                           as Eq. (eqn:n_gmop)
    N_smop = P (warps_n m_S + warps_m n_S) k + P (m_S + n_S) k             each warp's fragment loads, the stores
                                                  (P = 1 on the multistage pipeline: FP32 tiles, split on fragments)
    T_issue = waves #blocks warps slices I / (4 #SM clock rate)
    T_latency = waves slices (max(lambda, w d) + w (I - d)) / clock rate   (strassenbench.model.latency)
    T_dram, T_l2: global traffic through the L2 (strassenbench.model.memory), for T_gmop in model "l2"

where I is the main loop's instructions per warp and k_S slice and d its loads' load-use distance: the build's
(resources.csv, its machine code) where it read them, else counted from what the loop does; w the block's warps
per sub-partition. #blocks = #SM x active blocks per SM: the build's blocks_per_sm, else a register count
(the 3xTF32 kernels' staged accumulation takes the largest TF32 tile to one block per SM, which T_latency charges). The DMMA
kernels (float64 on the FP64 tensor cores, a DmmaStrategy) take the same terms with P = 1, 8-byte elements and
tau_tensor the dense FP64 tensor peak. A multistage strategy (WarpGrid.stages >= 3: cp.async copies issued
stages - 1 slices ahead) whose product has one term per operand spreads lambda over those slices; a sum of terms
still goes through the registers, one slice ahead, and is charged as on two stages.
Every number is a prediction.
"""

from __future__ import annotations

import math

import pandas as pd

from ..occupancy import blocks_per_sm
from ..families import MODES, family_of
from ..strategies import DmmaStrategy, TensorStrategy, WgStrategy
from .gpus import GPUSpec
from .issue import BLOCK_SLICES, SUB_PARTITIONS, table_cache, per_table
from .latency import load_latency_clocks, slice_chain_clocks
from .memory import global_times
from .schemes import Load, alone
from .terms import DEFAULT_MODEL, Timing

__all__ = ["tensor_slice_instructions", "dmma_slice_instructions", "tensor_active_blocks",
           "tensor_figures", "tensor_kernel_load", "tensor_kernel_time", "tensor_load"]



def _itemsize(mode: str) -> int:
    return family_of(mode).itemsize


def _dmma(mode: str) -> bool:
    """The FP64 tensor-core family's counts (the others here are the TF32 family's)."""
    return not MODES[mode].tf32


def dmma_slice_instructions(s: DmmaStrategy, w: tuple[int, int, int], arch: str = "sm_80") -> float:
    """Instructions per warp and k_S slice of a DMMA kernel, counted: a DMMA per 8 x 8 tile and k-step of 4
    (sm_80; on sm_90 one per 16 x 8 tile and 16, or 8, of k: kernels/dmma_primitive.cuh), a 64-bit fragment load
    per 8 x 8 tile side and k-step, and per thread the loader's work (a global load and an address add per term
    and 2-double chunk, a DFMA per element and extra term, a store per chunk); the barrier and the loop's count,
    compare and branch."""
    a_elems, b_elems = s.m_S * s.k_S // s.threads, s.k_S * s.n_S // s.threads
    chunks = math.ceil(a_elems / 2) + math.ceil(b_elems / 2)
    loads = 2 * (w[0] * math.ceil(a_elems / 2) + w[1] * math.ceil(b_elems / 2))
    sums = (w[0] - 1) * a_elems + (w[1] - 1) * b_elems
    return _dmma_phase(s, arch) + loads + sums + chunks + 4


def _dmma_phase(s: DmmaStrategy, arch: str) -> float:
    """A DMMA kernel's mma phase per warp and slice: its DMMA and 64-bit fragment loads (dmma_slice_instructions)."""
    k_steps, m_tiles, n_tiles = s.k_S // 4, s.m_W // 8, s.n_W // 8
    wide = int(arch.removeprefix("sm_").rstrip("a")) >= 90 and m_tiles % 2 == 0
    k_per_dmma = (16 if s.k_S % 16 == 0 else 8) if wide else 4
    dmma = (m_tiles // (2 if wide else 1)) * n_tiles * (s.k_S // k_per_dmma)
    return dmma + k_steps * (m_tiles + n_tiles)


def _rows(resources: pd.DataFrame | None, arch: str, s: TensorStrategy, w: tuple[int, int, int],
          mode: str) -> pd.DataFrame:
    if resources is None or "mode" not in resources:
        return pd.DataFrame()
    cache = table_cache(resources)
    if ("_tensor_index",) not in cache:  # the rows by kernel, made once per table (a prediction asks thousands)
        r = resources
        rows = r[(r["loads"] == "vector") & (r["write_mode"] == "plain")]
        cache[("_tensor_index",)] = ({key: part for key, part in rows.groupby(_TENSOR_KEY, sort=False)},
                                     rows.iloc[0:0])
    groups, empty = cache[("_tensor_index",)]
    return groups.get((arch, s.name, mode, w[0], w[1], w[2]), empty)


_TENSOR_KEY = ["arch", "strategy", "mode", "W_A", "W_B", "W_C"]


def tensor_slice_instructions(s: TensorStrategy, w: tuple[int, int, int], mode: str) -> float:
    """Instructions per warp and k_S slice, counted: the HMMA, the fragment loads (4 per 16 x 8 A tile, 2 per
    8 x 8 B tile and part), for 3xTF32 the staged accumulation's 4 FADD per 16 x 8 tile and k-step (its three
    products summed apart, then added to the accumulator: kernels/tensorcore_primitive.cuh), and per thread the
    loader's work: a global load and an address add per term and 4-element chunk, an FFMA per element and extra
    term, a TF32 rounding (and subtraction) per element and part, a store per chunk and part; the barrier and the
    loop's count, compare and branch."""
    parts = MODES[mode].parts
    a_elems, b_elems = s.m_S * s.k_S // s.threads, s.k_S * s.n_S // s.threads
    a_chunks, b_chunks = math.ceil(a_elems / 4), math.ceil(b_elems / 4)
    sums = (w[0] - 1) * a_elems + (w[1] - 1) * b_elems
    if s.multistage:  # one-term operands by cp.async (one and its address a chunk), the split on the fragments
        loader = sum(2 * chunks if terms == 1 else 2 * terms * chunks + chunks
                     for terms, chunks in ((w[0], a_chunks), (w[1], b_chunks)))
        k_steps, m_tiles, n_tiles = s.k_S // 8, s.m_W // 16, s.n_W // 8
        split = (2 * parts - 1) * k_steps * (4 * m_tiles + 2 * n_tiles)
        staged = 4 * _mma_tiles(s) if parts == 2 else 0  # once per slice
        return _mma_phase(s, mode, "") + staged + loader + sums + split + 4
    loads = 2 * (w[0] * a_chunks + w[1] * b_chunks)
    split = (2 * parts - 1) * (a_elems + b_elems)
    staged = 4 * _mma_tiles(s) * (s.k_S // 8) if parts == 2 else 0
    return _mma_phase(s, mode, "") + staged + loads + sums + split + parts * (a_chunks + b_chunks) + 4


def _mma_tiles(s: TensorStrategy) -> int:
    """A warp's 16 x 8 mma tiles."""
    return (s.m_W // 16) * (s.n_W // 8)


def _mma_phase(s: TensorStrategy | DmmaStrategy, mode: str, arch: str) -> float:
    """A slice's mma phase per warp, counted: its fragment loads and mma (HMMA, or DMMA: _dmma_phase), the
    instructions between the slice's global loads and their first use (kernels/mma_mainloop.cuh issues the
    loads before the mma)."""
    if _dmma(mode):
        return _dmma_phase(s, arch)
    k_steps, m_tiles, n_tiles = s.k_S // 8, s.m_W // 16, s.n_W // 8
    # mma.m16n8k8 per 16 x 8 x 8 tile and k-step: Mode.products (3 for 3xTF32); the stored parts' fragments
    return (_mma_tiles(s) * k_steps * MODES[mode].products
            + s.stored_parts(MODES[mode].parts) * k_steps * (4 * m_tiles + 2 * n_tiles))


@per_table
def _slice_loop(arch: str, s: TensorStrategy, w: tuple[int, int, int], mode: str,
                resources: pd.DataFrame | None) -> tuple[float, float]:
    """(instructions per warp and slice, the loads' load-use distance): the build's machine code (resources.csv)
    where it was read, else counted."""
    rows = _rows(resources, arch, s, w, mode)
    counted = dmma_slice_instructions(s, w, arch) if _dmma(mode) else tensor_slice_instructions(s, w, mode)
    instructions, load_use = counted, _mma_phase(s, mode, arch)
    if len(rows) and pd.notna(rows["loop_instructions"].iloc[0]):
        instructions = float(rows["loop_instructions"].iloc[0])
        if "load_use_distance" in rows and pd.notna(rows["load_use_distance"].iloc[0]):
            load_use = float(rows["load_use_distance"].iloc[0])
    return instructions, load_use


@per_table
def tensor_active_blocks(spec: GPUSpec, s: TensorStrategy, w: tuple[int, int, int], mode: str,
                         resources: pd.DataFrame | None = None) -> tuple[int, str]:
    """(active blocks per SM, where from): the compiled kernel's (resources.csv), else registers counted from its
    accumulator and fragments (and for 3xTF32 the staged accumulation's 4-register sum per mma tile: about 210
    for the 256 threads of the TF32 family's largest tile, one block per SM) and the tiles' shared memory."""
    if isinstance(s, WgStrategy):
        from .wgmma import wg_active_blocks

        return wg_active_blocks(spec, s, mode)
    rows = _rows(resources, spec.arch, s, w, mode)
    if len(rows):
        return int(rows["blocks_per_sm"].iloc[0]), "resources.csv"
    if _dmma(mode):  # two registers a double: the accumulator and a fragment per tile side
        registers = 2 * (s.m_W * s.n_W // 32 + s.m_W // 8 + s.n_W // 8) + 32
        return blocks_per_sm(spec.limits, s.threads, min(registers, 255), s.smem_bytes()), "register count"
    parts = MODES[mode].parts
    staged = 4 * _mma_tiles(s) if parts == 2 else 0
    registers = s.m_W * s.n_W // 32 + parts * (4 * s.m_W // 16 + 2 * s.n_W // 8) + staged + 32
    return blocks_per_sm(spec.limits, s.threads, min(registers, 255), s.smem_bytes(4, parts)), "register count"


def tensor_kernel_load(spec: GPUSpec, s: TensorStrategy | DmmaStrategy, w: tuple[int, int, int], m: int, k: int,
                       n: int, mode: str, resources: pd.DataFrame | None = None) -> Load | None:
    """One tensor-core kernel's launch (one product of variant ``w``) on an m x k x n problem, as the schemes'
    model takes it (strassenbench.model.schemes.Load; None when no block fits or the GPU has no such unit):
    TF32 (a TensorStrategy) or DMMA (a DmmaStrategy, float64: 8-byte elements)."""
    return tensor_load(spec, s, w, m, k, n, mode, *tensor_figures(spec, s, w, mode, resources))


def tensor_figures(spec: GPUSpec, s: TensorStrategy | DmmaStrategy, w: tuple[int, int, int], mode: str,
                   resources: pd.DataFrame | None = None) -> tuple[int, float, float]:
    """What tensor_load reads of the kernel: (active blocks per SM, instructions per warp and slice, the loads'
    load-use distance); a Wg kernel's from strassenbench.model.wgmma."""
    if isinstance(s, WgStrategy):
        from .wgmma import wg_figures

        return wg_figures(spec, s, w, mode, resources)
    active, _ = tensor_active_blocks(spec, s, w, mode, resources)
    return (active, *_slice_loop(spec.arch, s, w, mode, resources))


def tensor_load(spec: GPUSpec, s: TensorStrategy | DmmaStrategy, w: tuple[int, int, int], m: int, k: int, n: int,
                mode: str, active: int, per_slice: float, load_use: float, atomic: bool = False) -> Load | None:
    """tensor_kernel_load with the kernel's figures given (tensor_figures); a Wg kernel's by
    strassenbench.model.wgmma (``atomic``: its atomic write-back, the tile reductions)."""
    if isinstance(s, WgStrategy):
        from .wgmma import wg_load

        return wg_load(spec, s, w, m, k, n, mode, active, per_slice, load_use, atomic)
    if active < 1 or spec.tau_tensor(mode) <= 0:
        return None
    parts, kk, itemsize = MODES[mode].parts, math.ceil(k / s.k_S) * s.k_S, _itemsize(mode)
    tiles = math.ceil(m / s.m_S) * math.ceil(n / s.n_S)
    blocks = spec.sm_count * active
    n_flop = 2 * s.m_S * s.n_S * kk
    n_gmop = w[0] * s.m_S * kk + w[1] * s.n_S * kk + w[2] * s.m_S * s.n_S
    stored = s.stored_parts(parts)
    n_smop = stored * (s.warps_n * s.m_S + s.warps_m * s.n_S) * kk + stored * (s.m_S + s.n_S) * kk
    t_gmop, t_dram, t_l2 = global_times(spec, m, n, s.m_S, s.n_S, kk, w, n_gmop, blocks, itemsize)
    warps = s.threads // 32
    latency = load_latency_clocks(spec)
    if s.multistage and w[0] == w[1] == 1:
        # every load a cp.async issued stages - 1 slices ahead: lambda spread over them, no register wait
        chain = slice_chain_clocks(latency / (s.stages - 1), warps / SUB_PARTITIONS, per_slice, per_slice)
    else:  # a sum of terms goes through the registers: used one slice after it was issued, as on 2 stages
        chain = slice_chain_clocks(latency, warps / SUB_PARTITIONS, per_slice, load_use)
    slices = kk // s.k_S + BLOCK_SLICES  # and what a block issues beyond its main loop (issue.BLOCK_SLICES)
    return Load(tiles, blocks, (n_flop, itemsize * n_smop, warps * slices * per_slice),
                (spec.tau_tensor(mode), spec.tau_smop, SUB_PARTITIONS * spec.sm_count * spec.boost_clock_hz),
                (t_gmop, t_dram, t_l2), slices * chain / spec.boost_clock_hz)


def tensor_kernel_time(spec: GPUSpec, s: TensorStrategy | DmmaStrategy, w: tuple[int, int, int], m: int, k: int,
                       n: int, mode: str, resources: pd.DataFrame | None = None,
                       model: str = DEFAULT_MODEL) -> Timing:
    """Modeled time of one tensor-core kernel alone (one product of variant ``w``) on an m x k x n problem."""
    return alone(model, tensor_kernel_load(spec, s, w, m, k, n, mode, resources))
