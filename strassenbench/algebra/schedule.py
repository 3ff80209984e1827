"""Stages of products that may run concurrently on S streams (paper, Sec. s:task, figure tab:gpu_streaming).

Products only depend on each other through their writes to C (Sec. s:task: "the dependencies between the
kernels ... only occur for the concurrent writes to different submatrices of C"). A stage gives each stream
a sequence of products; streams of one stage never write a common block of C, and all streams synchronise
at the end of a stage. The stage count is not the cost: the cost of a schedule is its *makespan*, the sum
over stages of the longest stream. No block of C can be written by two products at once, so the largest
number of writers of one C block is a lower bound on the makespan.

Stages are built greedily: from the products still to run, each stage is the best of several candidate
packings (scored by products per unit of makespan, then by size). For one-level Strassen on two streams
this gives the paper's three stages exactly, which reach the lower bound of 4. At L >= 2 levels the
schedule is also composed from per-level schedules (outer products on S1 streams, inner on S2, with
S1 S2 <= S: two products in different outer streams never share a block of C), and the shorter wins;
composition reaches the lower bound of 16 for two-level Strassen on 4 streams.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from .levels import level_names
from .primitives import Primitive, primitives

__all__ = ["Stage", "Schedule", "schedule"]


@dataclass(frozen=True)
class Stage:
    """One synchronous stage: ``streams[s]`` is the ordered list of products run on stream s."""

    streams: tuple[tuple[Primitive, ...], ...]

    @property
    def makespan(self) -> int:
        return max(len(lane) for lane in self.streams)


@dataclass(frozen=True)
class Schedule:
    stages: tuple[Stage, ...]
    num_streams: int

    @property
    def makespan(self) -> int:
        """Sum over stages of the longest stream, in units of one product."""
        return sum(stage.makespan for stage in self.stages)

    def rows(self) -> list[dict[str, object]]:
        """One row per product, in launch order: stage, stream, position on the stream."""
        out = []
        for s, stage in enumerate(self.stages):
            for pos in range(stage.makespan):
                for stream, lane in enumerate(stage.streams):
                    if pos < len(lane):
                        out.append({"stage": s, "stream": stream, "position": pos, "product": lane[pos]})
        return out


def _pack(order: list[int], masks: list[int], streams: int, cap: int, expand: bool) -> list[list[int]]:
    """Place products (in ``order``) on streams, never letting two streams share a C block.

    A product joins the one stream it overlaps, or an empty stream if it overlaps none; with ``expand``
    it may also widen a stream's set of C blocks. No stream takes more than ``cap`` products.
    """
    lanes: list[list[int]] = [[] for _ in range(streams)]
    owned = [0] * streams
    for p in order:
        w = masks[p]
        hits = [s for s in range(streams) if owned[s] & w]
        if len(hits) > 1:
            continue
        if hits:
            s = hits[0]
            if not expand and w & ~owned[s]:
                continue
        else:
            empty = [s for s in range(streams) if not lanes[s]]
            if empty:
                s = empty[0]
            elif expand:
                s = min(range(streams), key=lambda i: len(lanes[i]))
            else:
                continue
        if len(lanes[s]) < cap:
            lanes[s].append(p)
            owned[s] |= w
    return lanes


# Products tried first in a stage's candidate packings: all of them for Strassen (49 at two levels), the first
# SEEDS for the hundreds of products of larger algorithms at two levels (the cost grows with the square).
SEEDS = 64


def _best_stage(remaining: list[int], masks: list[int], streams: int) -> list[list[int]]:
    best, best_score = None, (-1.0, -1)
    limit = math.ceil(len(remaining) / streams)
    caps = sorted({min(limit, 2**i) for i in range(limit.bit_length() + 1)} | {limit})
    for seed in remaining[:SEEDS]:
        rest = [p for p in remaining if p != seed]
        for expand in (False, True):
            for cap in caps:
                lanes = _pack([seed, *rest], masks, streams, cap, expand)
                placed = sum(map(len, lanes))
                score = (placed / max(map(len, lanes)), placed)
                if score > best_score:
                    best, best_score = lanes, score
    assert best is not None
    return best


def _compose(outer: Schedule, inner: Schedule, prims: tuple[Primitive, ...], inner_rank: int) -> Schedule:
    """Run each inner stage inside each outer stage: stream (o, i) runs outer lane o x inner lane i."""
    stages = []
    for ostage in outer.stages:
        for istage in inner.stages:
            lanes = tuple(
                tuple(prims[p.index * inner_rank + q.index] for p in olane for q in ilane)
                for olane in ostage.streams
                for ilane in istage.streams
            )
            stages.append(Stage(lanes))
    return Schedule(tuple(stages), outer.num_streams * inner.num_streams)


@lru_cache(maxsize=None)
def schedule(algorithm: str, levels: int, streams: int) -> Schedule:
    """Stages of the ``levels``-level algorithm's products on ``streams`` streams (shortest makespan found)."""
    if streams < 1:
        raise ValueError(f"streams must be >= 1, got {streams}")
    best = _greedy(algorithm, levels, streams)
    if levels >= 2:
        prims = primitives(algorithm, levels)
        names = level_names(algorithm, levels)
        outer, inner = names[0], names[1] if len(set(names[1:])) == 1 else "+".join(names[1:])
        inner_rank = len(primitives(inner, levels - 1))
        for s_outer in range(1, streams + 1):
            for s_inner in range(1, streams // s_outer + 1):
                composed = _compose(
                    schedule(outer, 1, s_outer), schedule(inner, levels - 1, s_inner), prims, inner_rank
                )
                if composed.makespan < best.makespan:
                    best = composed
    return Schedule(best.stages, streams)


def _greedy(algorithm: str, levels: int, streams: int) -> Schedule:
    prims = primitives(algorithm, levels)
    blocks = sorted({blk for p in prims for blk in p.writes})
    bit = {blk: 1 << i for i, blk in enumerate(blocks)}
    masks = [sum(bit[blk] for blk in p.writes) for p in prims]
    remaining = list(range(len(prims)))
    stages = []
    while remaining:
        lanes = _best_stage(remaining, masks, streams)
        stages.append(Stage(tuple(tuple(prims[p] for p in lane) for lane in lanes if lane)))
        placed = {p for lane in lanes for p in lane}
        remaining = [p for p in remaining if p not in placed]
    return Schedule(tuple(stages), streams)


def makespan_lower_bound(algorithm: str, levels: int) -> int:
    """The most products writing one block of C: no schedule can be shorter."""
    writers: dict[tuple[int, int], int] = {}
    for p in primitives(algorithm, levels):
        for blk in p.writes:
            writers[blk] = writers.get(blk, 0) + 1
    return max(writers.values())
