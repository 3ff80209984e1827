"""Task parallelism in the model: the time of the paper's three schemes (Sec. s:task), which its model leaves out
(Sec. s:analysis: "We also do not consider the impacts of the task parallelism"). This project's extension.

A launch is a Load: its blocks, how many of them run at once (#SM x active blocks per SM), each wave-rounded
term's cost of one block (N_flop / tau_flop, sizeof N_smop / tau_smop, its warps' issue clocks over the GPU's
issue rate) and the launch's global traffic (T_gmop, T_dram, T_l2). Alone, a launch takes the paper's terms:
ceil(blocks / resident) waves of ``resident`` blocks (Eqs. eqn:t_flop, eqn:t_smop). Launches on concurrent
streams share the SMs: together their blocks fill U = sum_i blocks_i / resident_i of a wave, rounded up to whole
waves, and each stage takes

    T_X      = ceil(U) / U  sum_i blocks_i c_X,i       X = flop, smop, issue (c: one block's cost)
    T_Y      = sum_i T_Y,i                             Y = gmop, dram, l2 (concurrent products read their own panels)
    T_stream = the longest stream: its launches one after another, each as if alone

and its time is the largest of its model's terms and T_stream (a stream runs its launches in order, none faster
than alone), or its launches one after another where that is less. Stages run one after another. The
schemes' stages, as strassenbench.fused.launch runs them:

    sequential  one launch per product, each a stage of its own: the paper's model, unchanged
    streams     the stages and streams of strassenbench.algebra.schedule, one launch per product
    atomic      one stage; one launch per variant (blockIdx.z the product, at most Z products in a launch, more
                take several on its stream), the variants dealt to the streams in product order
    splitk      beyond the paper: atomic with each product's k in S parts, each part a product of the batch over
                k / S (impl_time's kernels; S times the blocks, and S times the write-back's words)
    presum      beyond the paper (opt-in, its own implementations): the operand sums formed once, a pass over
                DRAM (each sum's terms read, the sum written: ``presum_words``), then one launch per product
                as in sequential, each on one term of A and of B, (1, 1, W_C)

The atomic scheme's kernels are the atomicAdd write-back ones, with their own registers, blocks per SM and main
loop where the build's resources.csv has them (strassenbench.model.issue.write_mode_table). T_stream sums over the
stages of several launches (0 for a launch alone).

Assumed: every product writes something (a fringe's empty products are launched as full ones); concurrent
launches overlap perfectly within the stage (no launch gaps, no tail of one launch left idle); the atomic
write-back's atomicAdd costs what a store costs (its W_C m_S n_S words, as N_gmop counts them); beta = 1 (the
sweeps' value: no scale launch). Every number is a prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from fractions import Fraction

from ..algebra.primitives import variant_counts
from ..algebra.schedule import schedule
from ..fused.instances import kernel_counts, max_batch
from ..limits import MAX_SCHEDULE_PRODUCTS
from ..options import ATOMIC_SCHEMES, PRESUM, SCHEMES, check_scheme
from .files import ModelError
from .terms import INFINITE, ZERO, Timing, bounded, sum_of

__all__ = ["Load", "alone", "stage_time", "scheme_launches", "scheme_time", "presum_words", "SCHEMES"]


@dataclass(frozen=True)
class Load:
    """One launch: ``blocks`` thread blocks, ``resident`` at once on the GPU; for each wave-rounded term (flop,
    smop, issue) one block's work and the rate it runs at GPU-wide (T = waves resident work / rate, as the paper
    writes Eq. eqn:t_flop); and the launch's global traffic terms (gmop, dram, l2) in seconds."""

    blocks: int
    resident: int
    work: tuple[float, float, float]
    rates: tuple[float, float, float]
    traffic: tuple[float, float, float]
    latency: float = 0.0  # seconds one block's slices take one after another at least (model.latency's chain)

    def batched(self, products: int) -> "Load":
        """The launch of ``products`` products of this one in a batch (blockIdx.z): their blocks and traffic."""
        return replace(self, blocks=self.blocks * products, traffic=tuple(t * products for t in self.traffic))


def alone(model: str, load: Load | None) -> Timing:
    """The time of one launch with the GPU to itself: ceil(blocks / resident) full waves (INFINITE for None, a
    kernel that cannot run)."""
    if load is None:
        return INFINITE
    waves = math.ceil(load.blocks / load.resident)
    t_flop, t_smop, t_issue = (waves * load.resident * w / r for w, r in zip(load.work, load.rates))
    t_gmop, t_dram, t_l2 = load.traffic
    return bounded(model, t_flop, t_gmop, t_smop, t_issue, t_dram, t_l2, t_latency=waves * load.latency)


def stage_time(model: str, lanes: list[list[Load | None]]) -> Timing:
    """One stage: ``lanes`` (streams) of launches, the streams concurrent, the launches of a stream in order. A
    stage repeats its launches (a Load object per variant and batch, scheme_time): each distinct one is costed
    once and counted."""
    loads = [load for lane in lanes for load in lane if load is not None]
    if len(loads) < sum(map(len, lanes)):
        return INFINITE
    if len(loads) == 1:
        return alone(model, loads[0])
    distinct: dict[int, list] = {}  # id -> [load, count, its time alone]
    for load in loads:
        distinct.setdefault(id(load), [load, 0, None])[1] += 1
    for entry in distinct.values():
        entry[2] = alone(model, entry[0])
    groups = [(load, count) for load, count, _ in distinct.values()]
    waves = sum((Fraction(load.blocks * count, load.resident) for load, count in groups), Fraction(0))
    fill = math.ceil(waves) / waves
    t_flop, t_smop, t_issue = (fill * sum(count * load.blocks * load.work[i] / load.rates[i] for load, count in groups)
                               for i in range(3))
    t_gmop, t_dram, t_l2 = (sum(count * load.traffic[i] for load, count in groups) for i in range(3))
    t_latency = fill * sum(count * load.blocks / load.resident * load.latency for load, count in groups)
    t_stream = max(sum(distinct[id(load)][2].seconds for load in lane) for lane in lanes)
    shared = bounded(model, t_flop, t_gmop, t_smop, t_issue, t_dram, t_l2, t_stream, t_latency)
    # Never slower than the launches one after another: the rounding to whole waves charges a stage's idle tail
    # at its blocks' average cost, which a few costly blocks beside many cheap ones can make exceed that.
    serial = sum_of((timing, count) for _, count, timing in distinct.values())
    return shared if shared.seconds <= serial.seconds else serial


Launches = list[list[list[tuple[tuple[int, int, int], int]]]]  # stages -> streams -> (variant w, products)


@lru_cache(maxsize=4096)
def scheme_launches(algorithm: str, levels: int, scheme: str, streams: int | None, dtype: str,
                    split: int = 1) -> Launches:
    """How ``scheme`` on ``streams`` streams (None: its default) launches the ``levels``-level ``algorithm``'s
    products, as strassenbench.fused.launch does: stages -> streams -> launches, each launch (the variant w =
    (W_A, W_B, W_C) of its products, how many it computes); ``dtype`` the kernels' (their batch Z); ``split``
    the parts of each product in the splitk scheme (each a product of the batch). The sequential scheme's
    launches come by variant, not in product order (its time does not depend on it). Cached (every prediction of
    a scheme asks): the lists are not to be changed."""
    streams = check_scheme(scheme, streams)
    counts = variant_counts(algorithm, levels)
    if scheme == "sequential":
        return [[[(w, 1)]] for w, count in counts.items() for _ in range(count)]
    if scheme == PRESUM:  # the sums' pass is not a fused launch (presum_words)
        return [[[((1, 1, w[2]), 1)]] for w, count in counts.items() for _ in range(count)]
    if scheme in ATOMIC_SCHEMES:  # one launch per variant (Z products at most), dealt to the streams in order
        lanes: list[list[tuple[tuple[int, int, int], int]]] = [[] for _ in range(min(streams, len(counts)))]
        for i, w in enumerate(variant_counts(algorithm, levels, ordered=True)):
            batch = max(max_batch(dtype, sum(kernel_counts(w))), 1)
            parts = counts[w] * split
            lanes[i % len(lanes)] += [(w, min(batch, parts - first)) for first in range(0, parts, batch)]
        return [lanes]
    products = sum(counts.values())
    if products > MAX_SCHEDULE_PRODUCTS:  # the schedule's search grows with the square of the products
        raise ModelError(f"the streams scheme of {products:,} products: its schedule takes above "
                         f"{MAX_SCHEDULE_PRODUCTS} products too long to build (use atomic or sequential)")
    return [[[(p.counts, 1) for p in lane] for lane in stage.streams]
            for stage in schedule(algorithm, levels, streams).stages]


def scheme_time(model: str, algorithm: str, levels: int, scheme: str, streams: int | None, dtype: str,
                load_of, split: int = 1) -> Timing:  # noqa: ANN001 - (W_A, W_B, W_C) -> Load | None
    """The time of the ``levels``-level ``algorithm``'s products run by ``scheme`` on ``streams`` streams (None:
    the scheme's default), ``load_of(w)`` giving one product's launch of variant w = (W_A, W_B, W_C) (in the
    splitk scheme one part's, of ``split``)."""
    if check_scheme(scheme, streams) and scheme == "sequential":  # each product alone, one after another
        return sum_of((alone(model, load_of(w)), count) for w, count in variant_counts(algorithm, levels).items())
    if scheme == PRESUM:  # each product alone on one term of A and of B, after the sums' pass (impl_time's)
        return sum_of((alone(model, load_of((1, 1, w[2]))), count)
                      for w, count in variant_counts(algorithm, levels).items())
    total = ZERO
    made: dict[tuple, Load | None] = {}  # one Load per (variant, batch): the launches repeat them

    def launch(w: tuple[int, int, int], z: int) -> Load | None:
        if (w, z) not in made:
            one = load_of(w)
            made[(w, z)] = None if one is None else one.batched(z)
        return made[(w, z)]

    for stage in scheme_launches(algorithm, levels, scheme, streams, dtype, split):
        lanes = [[launch(w, z) for w, z in lane] for lane in stage]
        total = total + stage_time(model, lanes)
    return total


@lru_cache(maxsize=None)
def presum_words(algorithm: str, levels: int) -> tuple[int, int]:
    """The presum scheme's DRAM words, in blocks of A (m~ k~ of them make A) and of B: each distinct sum's
    terms read and the sum written once (strassenbench.fused.launch.presum_sums)."""
    from ..fused.launch import presum_sums

    sums_a, sums_b = presum_sums(algorithm, levels)
    return sum(len(terms) + 1 for terms in sums_a), sum(len(terms) + 1 for terms in sums_b)
