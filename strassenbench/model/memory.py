"""Global-memory traffic through the L2 cache (model "l2"): this project's extension of the paper's T_gmop.

The paper's T_gmop (Eq. eqn:t_gmop) moves every block's N_gmop words between DRAM and the SM: no block finds
what another block read in a cache. The paper itself finds its Small strategy measured faster than that
predicts and names the cause, L1/L2 cache effects its model does not capture (Sec. s:perf_discuss, "Cache
effects"). On an H100 the term is beaten outright: the measured strassen1-tf32 at n = 4,096 and 8,192
(data/nvidia-h100-80gb-hbm3, fastest sample) took 10% and 15% less time than its T_gmop allows. The blocks
resident at once read the same operand panels at about the same k, and the L2 serves all but the first read:

    T_l2   = tiles sizeof N_gmop / tau_l2                      every block's words, through the L2
    T_dram = sizeof D / tau_gmop                               the words a wave reads first, from DRAM
    D      = sum over waves (rows_w W_A m_S + cols_w W_B n_S) k  +  tiles W_C m_S n_S

A wave is #SM x active blocks consecutive blocks in launch order (blockIdx.x over the n_S-wide block columns,
then blockIdx.y over the m_S-tall block rows, as kernels/strassen.cuh numbers them); rows_w and cols_w are the
block rows and block columns it touches, each of whose W_A (W_B) operand panels it reads once. DRAM keeps the
paper's tau_gmop (its bandwidth with the read-only cache's 20%), so that D <= the paper's count makes
T_dram <= T_gmop. Assumed: a wave's blocks move through k together, so a slice read by one is still in the L2
when the others read it.

Model "l2" is the optimistic side of the L2, not a strict floor: blocks drift apart in k, and an L2 holds only so
many slices of a wave's panels. It also leaves out reuse it could have (nothing stays in the L2 from one wave or
launch to the next, even a B that would fit) and, as the paper, counts C once though an accumulating write-back
reads and writes it. The H100's measured 2-level direct Strassen (W up to 4) took only 6 to 7% more than the
paper's T_gmop (square n = 10,240; panel n = 12,288 and 16,384), 2.7x model l2's global traffic time: there the
reuse did not happen. So the default model keeps the paper's T_gmop, and model "l2" (T_dram and T_l2 in its
place) shows what reuse in the L2 can buy. The references' passes over DRAM (operand sums, distributing
products) read each element once, with nothing to reuse, and stay at DRAM bandwidth in every model.

tau_l2 is the L2's read bandwidth: bytes per clock (gpus.L2_BYTES_PER_CLOCK) x the boost clock: 10.1 TB/s on an
H100 SXM at 1,980 MHz, by the A100's 5,120 B/clk, an assumption for Hopper. Every number here is a prediction.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .gpus import GPUSpec

__all__ = ["wave_panels", "dram_words", "global_times"]


@lru_cache(maxsize=4096)
def wave_panels(tiles_m: int, tiles_n: int, resident: int) -> tuple[int, int]:
    """(block rows, block columns) summed over the waves of a tiles_m x tiles_n grid launched in order, with
    ``resident`` blocks at once: what each wave touches."""
    total = tiles_m * tiles_n
    if total < 1 or resident < 1:
        return 0, 0
    starts = np.arange(0, total, resident, dtype=np.int64)
    ends = np.minimum(starts + resident, total)
    rows = (ends - 1) // tiles_n - starts // tiles_n + 1
    cols = np.minimum(ends - starts, tiles_n)  # fewer than tiles_n consecutive blocks never repeat a column
    return int(rows.sum()), int(cols.sum())


def dram_words(tiles_m: int, tiles_n: int, resident: int, w: tuple[int, int, int], m_S: int, n_S: int,
               k: int) -> float:
    """D: the words a launch reads from DRAM (each wave's operand panels once) and writes (W_C per element of
    each block of C), for a product of variant ``w`` over an inner dimension k (already rounded up to k_S)."""
    rows, cols = wave_panels(tiles_m, tiles_n, resident)
    return float((rows * w[0] * m_S + cols * w[1] * n_S) * k + tiles_m * tiles_n * w[2] * m_S * n_S)


def global_times(spec: GPUSpec, m: int, n: int, m_S: int, n_S: int, kk: int, w: tuple[int, int, int],
                 n_gmop: float, resident: int, itemsize: int) -> tuple[float, float, float]:
    """(T_gmop, T_dram, T_l2) of one launch of m x n in m_S x n_S blocks, N_gmop words per block: the paper's
    Eq. (eqn:t_gmop) and this module's two terms."""
    tiles_m, tiles_n = -(-m // m_S), -(-n // n_S)
    loaded = tiles_m * tiles_n * itemsize * n_gmop
    dram = itemsize * dram_words(tiles_m, tiles_n, resident, w, m_S, n_S, kk)
    return loaded / spec.tau_gmop, dram / spec.tau_gmop, loaded / spec.tau_l2
