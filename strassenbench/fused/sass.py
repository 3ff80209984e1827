"""Read the machine code (``cuobjdump --dump-sass``): instruction classes and the main loop's quality.

Volta and later encode each instruction in 128 bits; the high 64-bit word holds the scheduling control bits
that the compiler sets and the hardware obeys (as documented by Jia et al., "Dissecting the NVIDIA Volta
GPU Architecture via Microbenchmarking", 2018, Sec. 2.1, and visible in every SASS listing):

    bits 41-44 stall cycles, 45 yield, 46-48 write scoreboard, 49-51 read scoreboard (7 = none),
    52-57 wait mask (bit b: wait until scoreboard b is released), 58-61 operand reuse.

A variable-latency instruction (a global or shared load) sets a write scoreboard; the first later
instruction whose wait mask has that bit is where the warp stalls until the data arrives. The number of
instructions between a global load and that instruction is how far ahead of its use the load is issued.

The main loop is the backward branch with a barrier (its shared-memory stages) whose body holds the most
FFMA/DFMA/HMMA/DMMA (of two such loops, as in a kernel with a 128-bit fast path and a scalar fallback, the one with
the higher share: the fast path); a write-back loop has no barrier, though over 8 or 16 blocks of C it may hold
more FFMAs. Its body is divided by its number of barriers (one ``BAR.SYNC`` per k_S slice) to give per-slice
figures.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

__all__ = ["Instruction", "parse_sass", "opcode_counts", "mainloop_metrics", "MAINLOOP_COLUMNS"]

_LINE = re.compile(
    r"/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?P<pred>@!?U?P[T0-9]+\s+)?(?P<op>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
    r"(?P<rest>[^;]*);\s*/\*\s*0x(?P<lo>[0-9a-f]{16})\s*\*/"
)
_HI = re.compile(r"^\s*/\*\s*0x(?P<hi>[0-9a-f]{16})\s*\*/\s*$")
_BRANCH_TARGET = re.compile(r"0x([0-9a-f]+)")

MAINLOOP_COLUMNS = [
    "loop_instructions", "loop_ffma_share", "loop_fp32", "loop_global_loads", "loop_generic_loads",
    "load_use_distance", "loop_barriers", "loop_hmma", "loop_hmma_share", "loop_mma_macs",
]
# The math instructions a main loop is found by: the SIMT kernels' FFMA and DFMA, the tensor-core kernels' HMMA
# (mma.sync with TF32 inputs is HMMA.1684.F32.TF32 or HMMA.1688.F32.TF32) and DMMA (mma.sync.m8n8k4 with f64 is
# DMMA.884; sm_90's m16n8k16 is DMMA.16x8x16) and the Wg kernels' wgmma (HGMMA.64x128x8.F32.TF32, which each
# warp of the warpgroup issues). loop_hmma counts every kind of tensor-core mma, and loop_mma_macs their
# multiply-adds (m n k of each instruction's shape; a warp's quarter of a wgmma's), which instructions of
# different shapes compare by.
MMA = ("HMMA", "DMMA", "HGMMA")
_MMA_SHAPES = {"884": (8, 8, 4), "1684": (16, 8, 4), "1688": (16, 8, 8), "16816": (16, 8, 16)}
MATH = ("FFMA", "DFMA", *MMA)
# Instructions that use the floating-point pipe of their dtype (the products' FFMA, the operand sums'); the
# issue-slot model (strassenbench.model.issue) charges each r = 32 / lanes clocks of that pipe.
FP_PIPE = ("FFMA", "FMUL", "FADD", "DFMA", "DMUL", "DADD")


@dataclass(frozen=True)
class Instruction:
    address: int
    opcode: str  # with modifiers, e.g. LDG.E.128
    operands: str
    predicated: bool
    control: int  # the high 64-bit word of the encoding

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def write_barrier(self) -> int | None:
        sb = (self.control >> 46) & 7
        return None if sb == 7 else sb

    @property
    def wait_mask(self) -> int:
        return (self.control >> 52) & 0x3F

    def waits_on(self, sb: int) -> bool:
        if self.wait_mask >> sb & 1:
            return True
        return self.base == "DEPBAR" and f"SB{sb}" in self.operands

    @property
    def is_global_load(self) -> bool:
        return self.base in ("LDG", "LD")


def parse_sass(sass: str) -> dict[str, list[Instruction]]:
    """Per-function instructions with their control words, from ``cuobjdump --dump-sass`` output."""
    functions: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    pending: re.Match | None = None
    for line in sass.splitlines():
        if m := re.match(r"\s*Function : (\w+)", line):
            current = functions.setdefault(m.group(1), [])
            pending = None
            continue
        if current is None:
            continue
        if m := _LINE.search(line):
            pending = m
            continue
        if pending is not None and (h := _HI.match(line)):
            current.append(Instruction(
                address=int(pending["addr"], 16), opcode=pending["op"], operands=pending["rest"].strip(),
                predicated=bool(pending["pred"]), control=int(h["hi"], 16),
            ))
            pending = None
    return functions


# Reductions and atomics on global memory: RED (sm_80's global reduction, e.g. RED.E.ADD.F32), REDG and ATOMG
# (sm_90's; REDG.E.ADD.F32x4 is one vector reduction of 4 floats), ATOM (generic addressing). Not ATOMS
# (shared memory).
GLOBAL_REDUCTIONS = ("RED", "REDG", "ATOM", "ATOMG")
# TMA's reductions of whole boxes into global memory (cp.reduce.async.bulk.tensor: UTMAREDG), the Wg kernels'
# tile reductions.
TILE_REDUCTIONS = ("UTMAREDG",)


def opcode_counts(instructions: list[Instruction]) -> Counter:
    """ffma (FFMA and DFMA), lds128, lds_other, ldg, local_mem_ops (LDL and STL), global_reductions (the
    atomic write-back's reduction instructions, GLOBAL_REDUCTIONS: a vector reduction counts once),
    tile_reductions (TILE_REDUCTIONS)."""
    counts: Counter = Counter()
    for ins in instructions:
        base = ins.base
        if base in ("FFMA", "DFMA"):
            counts["ffma"] += 1
        elif base == "LDS":
            counts["lds128" if ".128" in ins.opcode else "lds_other"] += 1
        elif base == "LDG":
            counts["ldg"] += 1
        elif base in ("LDL", "STL"):
            counts["local_mem_ops"] += 1
        elif base in GLOBAL_REDUCTIONS:
            counts["global_reductions"] += 1
        elif base in TILE_REDUCTIONS:
            counts["tile_reductions"] += 1
    return counts


def _loops(instructions: list[Instruction]) -> list[tuple[int, int]]:
    """(first, last) indices of every backward branch's body."""
    index = {ins.address: i for i, ins in enumerate(instructions)}
    loops = []
    for i, ins in enumerate(instructions):
        if ins.base == "BRA" and (m := _BRANCH_TARGET.search(ins.operands)):
            target = int(m.group(1), 16)
            if target <= ins.address and target in index:
                loops.append((index[target], i))
    return loops


def _load_use_distance(body: list[Instruction]) -> int | None:
    """The fewest instructions between a global load of the loop and the first instruction that waits on
    its scoreboard, following the loop around (a load's use may be in the next iteration)."""
    distances = []
    n = len(body)
    for i, ins in enumerate(body):
        sb = ins.write_barrier
        if not ins.is_global_load or sb is None:
            continue
        for step in range(1, n + 1):
            if body[(i + step) % n].waits_on(sb):
                distances.append(step - 1)
                break
        else:
            distances.append(n)
    return min(distances) if distances else None


def mma_macs(opcode: str) -> int | None:
    """The multiply-adds of one warp's tensor-core mma of this opcode: m n k of its shape (HMMA.1688.F32.TF32:
    16 x 8 x 8; DMMA.884; DMMA.16x8x16), a quarter of a wgmma's (HGMMA.64x128x8.F32.TF32, one instruction in
    each warp of the warpgroup); None for a shape this module does not know."""
    shape = opcode.split(".")[1] if "." in opcode else ""
    parts = shape.split("x") if "x" in shape else [str(d) for d in _MMA_SHAPES.get(shape, ())]
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return math.prod(map(int, parts)) // (4 if opcode.startswith("HGMMA") else 1)  # wgmma: 4 warps issue it


def mainloop_metrics(instructions: list[Instruction]) -> dict[str, float | int | None]:
    """Per-slice figures of the main loop (see the module docstring); None when there is no loop."""
    loops = _loops(instructions)
    empty = dict.fromkeys(MAINLOOP_COLUMNS)
    if not loops:
        return empty
    # A Wg kernel's main loop is its consumers' slice loop, found by its wgmma alone: the loader's sums and the
    # epilogue's FFMA are math of other loops.
    math_ops = ("HGMMA",) if any(ins.base == "HGMMA" for ins in instructions) else MATH

    def rank(loop: tuple[int, int]) -> tuple[bool, int, float]:
        """A barrier first, then the most math (the module docstring)."""
        body = instructions[loop[0]: loop[1] + 1]
        math = sum(ins.base in math_ops for ins in body)
        return any(ins.base == "BAR" for ins in body), math, math / len(body)

    first, last = max(loops, key=rank)
    body = instructions[first: last + 1]
    barriers = sum(ins.base == "BAR" for ins in body)
    slices = max(barriers, 1)
    ffma = sum(ins.base in ("FFMA", "DFMA") for ins in body)
    hmma = sum(ins.base in MMA for ins in body)
    if ffma + hmma == 0:
        return empty
    loads = [ins for ins in body if ins.is_global_load]
    macs = [mma_macs(ins.opcode) for ins in body if ins.base in MMA]
    return {
        "loop_instructions": round(len(body) / slices, 1),
        "loop_ffma_share": round(ffma / len(body), 4),
        "loop_fp32": round(sum(ins.base in FP_PIPE for ins in body) / slices, 1),
        "loop_global_loads": round(len(loads) / slices, 1),
        "loop_generic_loads": round(sum(ins.base == "LD" for ins in loads) / slices, 1),
        "load_use_distance": _load_use_distance(body),
        "loop_barriers": barriers,
        "loop_hmma": round(hmma / slices, 1),
        "loop_hmma_share": round(hmma / len(body), 4),
        "loop_mma_macs": None if None in macs else round(sum(macs) / slices, 1),
    }
