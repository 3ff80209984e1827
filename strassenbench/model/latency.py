"""T_latency: the load latency a tensor-core kernel's main loop leaves uncovered (this project's term; the paper's
model, Sec. s:analysis, has rates only and takes every latency as hidden).

The tensor-core kernels' main loop is a 2-stage pipeline through registers (kernels/mma_mainloop.cuh, as
CUTLASS's MmaPipelined): each k_S slice issues the next slice's global loads, runs its own mma, then sums,
rounds and stores the loaded words to the other shared-memory stage and waits at the barrier. One slice of one
block cannot end before its loads arrive, lambda after they were issued (d instructions before their first
use: the build's load_use_distance), and the block's w warps per sub-partition have then issued the rest of
the slice (I - d instructions each):

    chain     = max(lambda, w d) + w (I - d)        clocks, per slice and block
    T_latency = waves slices chain / clock rate      (waves and slices as in Eq. eqn:t_flop)

Blocks resident beside it run their own slices meanwhile, so the bound is per wave: a second block per SM hides
the latency behind its work (half the waves, half the T_latency), and where the SM's warps have more to issue
than the chain lasts, T_issue (strassenbench.model.issue) is the larger. With one block per SM nothing hides
it: the staged 3xTF32 kernels (about 212 registers for 256 threads on sm_90, resources.csv's blocks_per_sm 1;
else the register count, strassenbench.model.tensor) are bound by it at every size.

lambda = LOAD_LATENCY_S, one figure in seconds for every GPU (DRAM latency is the memory's, not the SM
clock's), converted at the boost clock as every term is. It is this project's assumption: NVIDIA publishes no
load latency. The H100's own 1xTF32 GEMM shows it where nothing else bounds a slice (data/nvidia-h100-80gb-hbm3,
n = 1,024: 64 blocks, one to an SM, 128 slices in 93 us, 0.73 us a slice, of which the instructions after the
loads' use take 37 ns and the launch and write-back part of the rest). Sensitivity on that H100's square sweep
(gemm-3xtf32, median predicted / measured): 0.74 at 450 ns, 0.93 at 600 ns, 1.06 at 700 ns.

I and d are the build's (resources.csv, read from the machine code) where it read them, else counted by the
caller. The SIMT kernels are not charged: their float32 Huge kernels, the ones measured, issue more per wave
than the chain lasts; for the smaller strategies the chain would bind, and no measured point checks it.
Every number is a prediction.
"""

from __future__ import annotations

from .gpus import GPUSpec

__all__ = ["LOAD_LATENCY_S", "load_latency_clocks", "slice_chain_clocks"]

LOAD_LATENCY_S = 600e-9  # lambda: a global load's latency, through the L2 to DRAM and back


def load_latency_clocks(spec: GPUSpec) -> float:
    """lambda in clocks of ``spec``'s boost clock (the clock every other term of the model runs at)."""
    return LOAD_LATENCY_S * spec.boost_clock_hz


def slice_chain_clocks(latency: float, warps: float, instructions: float, load_use: float) -> float:
    """One slice of one block: max(lambda, w d) + w (I - d) clocks, for ``warps`` (w) of the block per
    sub-partition, ``instructions`` (I) per warp and slice, loads used ``load_use`` (d, at most I) instructions
    after they were issued."""
    d = min(max(load_use, 0.0), instructions)
    return max(latency, warps * d) + warps * (instructions - d)
