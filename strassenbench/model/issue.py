"""Issue slots: the instruction-issue limit of the main loop (this project's extension of the paper's model).

Each SM has four sub-partitions; each issues one warp instruction per clock. A sub-partition's FP32 pipe has
``lanes`` = FP32 cores per SM / 4 lanes: 16 on sm_70 and GA100 (an FFMA holds it for 32 / 16 = 2 clocks, so
one other instruction per FFMA issues in its shadow for free), 32 on sm_86, sm_89 and sm_90 (an FFMA takes one
clock, and every other instruction takes an FFMA's issue slot). A warp's k_S slice of the main loop then holds
its sub-partition for

    clocks = max(r F, I),   r = 32 / lanes,

where I is the slice's instructions and F those that use the FP32 pipe (the products' FFMA and the operand
sums'). The fraction of the FP32 peak the loop can reach is r M / clocks, with M = m_R n_R k_S math FFMA per
thread and slice; and over a kernel (as T_flop, Eq. eqn:t_flop, shares the peak among the active blocks)

    T_issue = waves #blocks warps slices clocks / (4 #SM clock rate).
"""

from __future__ import annotations

import functools
import inspect
import math
import weakref

import numpy as np

import pandas as pd

from ..fused.instances import load_widths, vec_width
from ..strategies import STRATEGIES, Strategy

__all__ = ["SUB_PARTITIONS", "BLOCK_SLICES", "ISSUE_FAMILIES", "lanes", "slice_clocks", "block_clocks", "peak_fraction",
           "issue_fractions", "default_slice_counts", "kernel_rows", "slice_counts", "write_mode_table"]

SUB_PARTITIONS = 4  # per SM, each issuing one warp instruction per clock (Volta to Hopper)
# What a thread block issues beyond its k slices, in slices' worth of instructions: the prologue's fill of the first
# slice (its loads not overlapped), the set-up, the last slice's predicated loads, and the write-back. An estimate
# read from the machine code: the sm_90 float32 Huge w2x2x2 atomic kernel has 3,280 instructions, 1,153 of them its
# main loop (two slices of 576.5); of the other 2,127, about 1,200 are copies of a slice that count among the k
# slices (the odd slice after the unrolled loop, the predicated last one), and the rest, about 1.5 slices, run once
# per block. It is what a block costs beyond its k, and what splitting k into parts (the splitk scheme) pays once
# per part.
BLOCK_SLICES = 1.5
# The two families of sub-partitions by their FP32 lanes: 16 (sm_70, GA100) and 32 (sm_86, sm_89, sm_90).
ISSUE_FAMILIES = {"issue_fraction_fp32x16": 16, "issue_fraction_fp32x32": 32}


def lanes(cores_per_sm: int) -> int:
    """Lanes of one sub-partition's pipe for a dtype: its cores per SM over the four sub-partitions."""
    return max(1, cores_per_sm // SUB_PARTITIONS)


def slice_clocks(instructions: float, fp_ops: float, pipe_lanes: int) -> float:
    """Clocks a warp's slice holds its sub-partition: max(r F, I), r = 32 / lanes."""
    return max(fp_ops * 32 / pipe_lanes, instructions)


def block_clocks(slices: int, instructions: float, fp_ops: float, pipe_lanes: int) -> float:
    """Clocks a warp of a block holds its sub-partition over ``slices`` slices and what the block issues beyond
    them (BLOCK_SLICES slices' worth of instructions, with no FP32 work: other blocks' FFMAs fill the pipe
    meanwhile): the slices' FP32 pipe time or every instruction's issue slot, whichever is longer."""
    return max(slices * fp_ops * 32 / pipe_lanes, (slices + BLOCK_SLICES) * instructions)


def peak_fraction(instructions: float, fp_ops: float, math_ops: float, pipe_lanes: int) -> float:
    """The fraction of the pipe's peak the loop can reach by issue slots: r M / max(r F, I)."""
    clocks = slice_clocks(instructions, fp_ops, pipe_lanes)
    return math_ops * 32 / pipe_lanes / clocks if clocks > 0 else math.nan


def issue_fractions(resources: pd.DataFrame) -> pd.DataFrame:
    """Per row of the build's resources.csv, the issue-limited fraction of the FP32 peak its main loop can
    reach on each family of sub-partitions (ISSUE_FAMILIES, rounded to 4 places), from the counts the build
    read from the machine code (loop_instructions, loop_fp32) and the strategy's m_R n_R k_S math FFMA per
    slice; NaN for a row that is not a float32 SIMT kernel of a known strategy, or whose loop was not read."""
    def fractions(row: pd.Series) -> list[float]:
        s = STRATEGIES.get(str(row["strategy"]))
        instructions, fp_ops = pd.to_numeric(pd.Series([row["loop_instructions"], row["loop_fp32"]]),
                                             errors="coerce")
        simt = row.get("mode", "simt") == "simt" and row["dtype"] == "float32"
        if s is None or not simt or not instructions > 0 or pd.isna(fp_ops):
            return [math.nan] * len(ISSUE_FAMILIES)
        return [round(peak_fraction(instructions, fp_ops, s.m_R * s.n_R * s.k_S, width), 4)
                for width in ISSUE_FAMILIES.values()]

    values = [fractions(row) for _, row in resources.iterrows()]
    return pd.DataFrame(values, columns=list(ISSUE_FAMILIES), index=resources.index, dtype=float)


def default_slice_counts(s: Strategy, w: tuple[int, int, int], dtype: str) -> tuple[float, float]:
    """(instructions, FP32-pipe instructions) per thread and k_S slice of the interior main loop, counted from
    what the kernel's loop does (kernels/mainloop.cuh), for kernels whose machine code was not read: the math
    FFMA, one FFMA per element and extra operand term, the fragment loads, one global load per term and vector
    with its 64-bit address add, the stores to shared memory (A's transposed, element by element), two pointer
    steps, the barrier and the loop's count, compare and branch."""
    size = np.dtype(dtype).itemsize
    w_a, w_b, _ = w
    a_elems, b_elems = s.m_S * s.k_S // s.threads, s.k_S * s.n_S // s.threads
    v_a, v_b = load_widths(s, dtype)
    a_vec, b_vec = max(1, a_elems // v_a), max(1, b_elems // v_b)
    math_ops = s.m_R * s.n_R * s.k_S
    sums = (w_a - 1) * a_elems + (w_b - 1) * b_elems
    lds = s.k_S * (s.m_R // vec_width(size, s.m_R) + s.n_R // vec_width(size, s.n_R))
    ldg = w_a * a_vec + w_b * b_vec
    sts = a_elems + b_vec
    overhead = 2 * ldg + 4 + 4  # address adds; two 64-bit pointer steps; barrier, count, compare, branch
    fp_ops = math_ops + sums
    return float(fp_ops + lds + ldg + sts + overhead), float(fp_ops)


_KEY = ["arch", "strategy", "dtype", "W_A", "W_B", "W_C"]
_TABLES: dict[int, tuple[weakref.ref, dict[tuple, object]]] = {}


def table_cache(resources: pd.DataFrame) -> dict[tuple, object]:
    """What has been derived from ``resources`` (a read-only table), kept while the table lives: a prediction
    asks for the same kernel's rows tens of thousands of times, and `strassenbench pick` for hundreds of
    candidates at every strategy."""
    cached = _TABLES.get(id(resources))
    if cached is None or cached[0]() is not resources:
        for key in [k for k, (ref, _) in _TABLES.items() if ref() is None]:  # tables gone since
            del _TABLES[key]
        cached = _TABLES[id(resources)] = (weakref.ref(resources), {})
    return cached[1]


def per_table(fn):  # noqa: ANN001, ANN201 - a decorator
    """``fn`` (whose last parameter ``resources`` is a read-only table or None) remembered per table and
    arguments. A call with every argument by position (the model's calls, millions per `pick` table) skips
    binding the signature."""
    signature = inspect.signature(fn)
    if list(signature.parameters)[-1] != "resources":
        raise TypeError(f"{fn.__qualname__}: per_table needs `resources` as the last parameter")
    arity = len(signature.parameters)
    without = functools.lru_cache(maxsize=65536)(fn)

    @functools.wraps(fn)
    def remembered(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if kwargs or len(args) != arity:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = tuple(bound.arguments.values())
        resources = args[-1]
        if resources is None:
            return without(*args)
        cache = table_cache(resources)
        key = (fn.__qualname__, *args[:-1])
        if key not in cache:
            cache[key] = fn(*args)
        return cache[key]

    return remembered


def _index(resources: pd.DataFrame) -> tuple[dict[tuple, pd.DataFrame], pd.DataFrame]:
    """The fused kernels' rows of ``resources`` (plain write-back, vector loads) by (arch, strategy, dtype, W_A,
    W_B, W_C), made once per table."""
    cache = table_cache(resources)
    if ("_index",) not in cache:
        rows = resources
        if "write_mode" in rows:
            rows = rows[rows["write_mode"] == "plain"]
        if "source" in rows:
            rows = rows[(rows["source"] == "strassenbench") & (rows["loads"] == "vector")]
        groups = {(str(a), str(st), str(d), int(wa), int(wb), int(wc)): part
                  for (a, st, d, wa, wb, wc), part in rows.groupby(_KEY, sort=False)}
        cache[("_index",)] = (groups, rows.iloc[0:0])
    return cache[("_index",)]  # type: ignore[return-value]


def write_mode_table(resources: pd.DataFrame | None, write_mode: str) -> pd.DataFrame | None:
    """``resources`` as the model reads it for the kernels of ``write_mode``: for atomic, each kernel's atomic
    write-back row in place of its plain one, where the build has one (the atomic scheme launches those kernels,
    whose registers, blocks per SM and main loop may differ); ``resources`` itself for plain. Made once per
    table and kept while it lives."""
    if resources is None or write_mode == "plain" or "write_mode" not in resources:
        return resources
    cache = table_cache(resources)
    if ("_write_mode", write_mode) not in cache:
        keys = [c for c in ("source", "arch", "strategy", "dtype", "mode", "W_A", "W_B", "W_C", "loads")
                if c in resources]
        mine = resources[resources["write_mode"] == write_mode]
        others = resources[resources["write_mode"] != write_mode]
        replaced = pd.MultiIndex.from_frame(others[keys].astype(str)).isin(
            pd.MultiIndex.from_frame(mine[keys].astype(str)))
        cache[("_write_mode", write_mode)] = pd.concat([mine.assign(write_mode="plain"), others[~replaced]],
                                                       ignore_index=True)
    return cache[("_write_mode", write_mode)]  # type: ignore[return-value]


def kernel_rows(resources: pd.DataFrame, arch: str, s: Strategy, w: tuple[int, int, int],
                dtype: str) -> pd.DataFrame:
    """The resources.csv rows of the fused kernel that runs (W_A, W_B, W_C) with strategy ``s`` on ``arch``:
    its plain write-back with vector loads (the CUTLASS baseline is a row of the table too)."""
    groups, empty = _index(resources)
    return groups.get((arch, s.name, dtype, int(w[0]), int(w[1]), int(w[2])), empty)


@per_table
def slice_counts(arch: str, s: Strategy, w: tuple[int, int, int], dtype: str,
                 resources: pd.DataFrame | None = None) -> tuple[tuple[float, float], str]:
    """((instructions, FP32-pipe instructions) per slice, where from): the build's machine code for this arch
    (resources.csv, plain write-back, vector loads) where it was read, else default_slice_counts."""
    if resources is not None and "loop_instructions" in resources:
        rows = kernel_rows(resources, arch, s, w, dtype)
        rows = rows[pd.to_numeric(rows["loop_instructions"], errors="coerce").notna()]
        if len(rows):
            r = rows.iloc[0]
            instructions = float(r["loop_instructions"])
            if "loop_fp32" in rows and pd.notna(r["loop_fp32"]):
                fp_ops = float(r["loop_fp32"])
            else:  # a resources.csv of an older build: its FFMA share of the loop
                fp_ops = instructions * float(r["loop_ffma_share"])
            return (instructions, fp_ops), "resources.csv"
    return default_slice_counts(s, w, dtype), "default"
