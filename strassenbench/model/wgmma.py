"""The model of the Wg kernels (kernels/wgmma_primitive.cuh, sm_90a; beyond the paper): the paper's three terms
(Sec. s:analysis) with wgmma's TF32 rate, the loader warpgroup's issue slots, the TMA ring's latency, and waves of
persistent tiles.

Per m_S x n_S tile of a WgStrategy and a variant (W_A, W_B, W_C), k rounded up to k_S = 32, P = 1 (1xTF32) or 2
(3xTF32) TF32 parts, R products per product (1 or 3) and c consumer warpgroups:

    N_flop = 2 m_S n_S k            at tau_tensor: the dense TF32 peak (wgmma's rate), a third of it for 3xTF32
    N_gmop = W_A m_S k + W_B n_S k + W_C m_S n_S        as Eq. (eqn:n_gmop): TMA brings every term's whole box
    N_smop = 2 (W_A m_S + W_B n_S) k                    the raw tiles TMA lands and the loader reads
             + 2 ((W_A - 1) m_S + (W_B - 1) n_S) k      each later term's read-modify-write of the FP32 sum
             + P (m_S + n_S) k                          the operands' stores
             + R (m_S + c n_S) k                        wgmma's reads: each consumer its A rows and all of B
             + 2 W_C m_S n_S  (atomic)                  the tile reductions' staging boxes, written and read by TMA
    T_issue = waves tiles 4 slices I / (4 #SM clock)    I: the loader warps' instructions per slice (counted, on
                                                        an interior tile: no masks);
                                                        the consumers' few (their wgmma run asynchronously)
    T_latency = waves slices max(lambda / (S_raw - 1), I) / clock: TMA's boxes issued S_raw - 1 raw stages ahead
                                                        (S_raw: the kernel's, fewer beside the staging boxes)
    waves = ceil(tiles / #SM)                           one persistent block per SM runs every #SM-th tile

Every number is a prediction: no Wg kernel has run on a GPU here.
"""

from __future__ import annotations

import math

import pandas as pd

from ..families import MODES
from ..occupancy import blocks_per_sm
from ..strategies import WgStrategy
from .gpus import GPUSpec
from .issue import BLOCK_SLICES, SUB_PARTITIONS
from .latency import load_latency_clocks, slice_chain_clocks
from .memory import global_times
from .schemes import Load

__all__ = ["wg_slice_instructions", "wg_active_blocks", "wg_figures", "wg_load"]

LOADER_WARPS = 4  # the loader warpgroup: every warp of it transforms


def wg_slice_instructions(s: WgStrategy, w: tuple[int, int, int], mode: str) -> float:
    """The loader's instructions per warp and k_S slice on an interior tile (each term's extent holds the whole
    tile and slice: no masks; most tiles of a large problem), counted from wgmma_primitive.cuh's loader: per raw
    stage (one term of A and one of B; max(W_A, W_B) a slice) its wait, fence and arrival; per A chunk of 4
    (m_S k_S / 512 a thread) a shared load and the sum's store, per B chunk (k_S / 4) 4 shared loads and the
    store; a later term's chunk also reads the sum back and adds 4 weighted elements (FFMA); the last term's
    rounding (2 instructions an element) or split (4) and, for 3xTF32, the second part's store; the slice's
    fence, arrival and loop. Address arithmetic and the tile's own work are not counted: the machine code's loop
    nest has some 40% more."""
    parts = MODES[mode].parts
    a_chunks, b_chunks = s.m_S * s.k_S // 512, s.k_S // 4
    stages = max(w[0], w[1])
    per_term = {0: a_chunks * 2, 1: b_chunks * 5}  # a term of A, of B
    loads = sum(per_term[side] * w[side] + (w[side] - 1) * 5 * (a_chunks if side == 0 else b_chunks)
                for side in (0, 1))
    finish = (a_chunks + b_chunks) * (4 * (2 if parts == 1 else 4) + (parts - 1))
    return loads + finish + 8 * stages + 8


def wg_active_blocks(spec: GPUSpec, s: WgStrategy, mode: str) -> tuple[int, str]:
    """(active blocks per SM, where from): what the block's registers (__launch_bounds__(threads, 1): its share of
    the SM's, which setmaxnreg moves between warpgroups) and its dynamic shared memory (WgStrategy.smem_bytes) allow:
    one on sm_90. The build's blocks_per_sm counts static shared memory only, none here."""
    registers = 65536 // s.threads // 8 * 8
    return blocks_per_sm(spec.limits, s.threads, registers, s.smem_bytes(parts=MODES[mode].parts)), "registers and " \
        "dynamic shared memory"


def wg_figures(spec: GPUSpec, s: WgStrategy, w: tuple[int, int, int], mode: str,
               resources: pd.DataFrame | None = None) -> tuple[int, float, float]:
    """(active blocks per SM, the loader's instructions per warp and slice, its load-use distance) as tensor_load
    takes them: wg_active_blocks, the counted instructions (wg_slice_instructions; the build's main-loop figures
    are the consumers', which issue little), and a slice's worth of distance (TMA's boxes land in the raw ring
    ahead of the loader)."""
    per_slice = wg_slice_instructions(s, w, mode)
    return wg_active_blocks(spec, s, mode)[0], per_slice, per_slice


def wg_load(spec: GPUSpec, s: WgStrategy, w: tuple[int, int, int], m: int, k: int, n: int, mode: str, active: int,
            per_slice: float, load_use: float, atomic: bool = False) -> Load | None:
    """One Wg launch (one product of variant ``w``) on an m x k x n problem as the schemes' model takes it (None
    where the GPU has no wgmma or the block does not fit); ``atomic``: the atomic kernel, whose output updates are
    tile reductions (the TMA kernel's; the model takes every operand TMA-able)."""
    if active < 1 or spec.tau_tensor(mode) <= 0:
        return None
    run = MODES[mode]
    kk = math.ceil(k / s.k_S) * s.k_S
    tiles = math.ceil(m / s.m_S) * math.ceil(n / s.n_S)
    blocks = spec.sm_count * active
    n_flop = 2 * s.m_S * s.n_S * kk
    n_gmop = w[0] * s.m_S * kk + w[1] * s.n_S * kk + w[2] * s.m_S * s.n_S
    n_smop = (2 * (w[0] * s.m_S + w[1] * s.n_S) * kk + 2 * ((w[0] - 1) * s.m_S + (w[1] - 1) * s.n_S) * kk
              + run.parts * (s.m_S + s.n_S) * kk + run.products * (s.m_S + s.consumers * s.n_S) * kk
              + (2 * w[2] * s.m_S * s.n_S if atomic else 0))
    t_gmop, t_dram, t_l2 = global_times(spec, m, n, s.m_S, s.n_S, kk, w, n_gmop, blocks, 4)
    raw = s.raw_stages(run.parts, reduce=atomic)
    chain = slice_chain_clocks(load_latency_clocks(spec) / max(raw - 1, 1), LOADER_WARPS / SUB_PARTITIONS,
                               per_slice, load_use)
    slices = kk // s.k_S + BLOCK_SLICES
    return Load(tiles, blocks, (n_flop, 4 * n_smop, LOADER_WARPS * slices * per_slice),
                (spec.tau_tensor(mode), spec.tau_smop, SUB_PARTITIONS * spec.sm_count * spec.boost_clock_hz),
                (t_gmop, t_dram, t_l2), slices * chain / spec.boost_clock_hz)
