"""Plans become kernel launches: one description that the GPU (CuPy) and the CPU emulator both run.

A Launch is (kernel name, grid, block, arguments); arguments are the engine's arrays and NumPy scalars.
Products of one variant share a kernel and run as one batched launch with blockIdx.z selecting the
product (paper, "Task Parallelism: Batching"); their offsets, extents and coefficients go in parameter
arrays in device memory. With plain write-back a batch never holds two products that write the same C
block (they would race on the GPU); with atomicAdd write-back one launch per variant holds them all
(paper, "Task Parallelism: Atomic write").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..plan import BlockView, Plan, Step
from ..strategies import Strategy
from .instances import WRITE_MODES, Instance, operand_counts, scale_kernel

__all__ = ["FusedError", "Launch", "SCALE_BLOCK", "plan_launches", "batches"]

SCALE_BLOCK = 256
SCALE_MAX_GRID = 1024


class FusedError(ValueError):
    """A plan or option the fused kernels cannot run."""


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Any, ...]
    products: tuple[str, ...] = ()  # the plan's product names this launch computes


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _leading_dimension(name: str, x) -> int:  # noqa: ANN001 - NumPy or CuPy array
    itemsize = x.dtype.itemsize
    if x.strides[1] != itemsize or x.strides[0] % itemsize or x.strides[0] < x.shape[1] * itemsize:
        raise FusedError(f"{name} must be row-major with unit column stride (a C-contiguous array or a row slice)")
    return x.strides[0] // itemsize


def batches(steps: tuple[Step, ...], write_mode: str, batch: bool) -> list[list[Step]]:
    """Group steps into launches: per variant (plan order), split so that plain batches write disjoint C blocks."""
    if not batch:
        return [[s] for s in steps]
    by_variant: dict[int, list[Step]] = {}
    for s in steps:
        by_variant.setdefault(s.variant, []).append(s)
    groups: list[list[Step]] = []
    for members in by_variant.values():
        if write_mode == "atomic":
            groups.append(members)
            continue
        open_groups: list[tuple[list[Step], set]] = []
        for s in members:
            writes = set(s.primitive.writes)
            for group, used in open_groups:
                if not used & writes:
                    group.append(s)
                    used |= writes
                    break
            else:
                open_groups.append(([s], writes))
        groups.extend(g for g, _ in open_groups)
    return groups


def _term_arrays(step: Step, lds: tuple[int, int, int]) -> tuple[list[int], list[int], list[float]]:
    offsets, extents, coeffs = [], [], []
    for terms, ld in ((step.a, lds[0]), (step.b, lds[1]), (step.c, lds[2])):
        for view, coeff in terms:
            view: BlockView
            offsets.append(0 if view.empty else view.row * ld + view.col)
            extents += [view.rows, view.cols]
            coeffs.append(coeff)
    return offsets, extents, coeffs


def plan_launches(
    plan: Plan,
    A, B, C,  # noqa: ANN001 - arrays of the engine (NumPy for emu, CuPy for cuda)
    alpha: float,
    beta: float,
    *,
    strategy: Strategy,
    write_mode: str = "plain",
    batch: bool = True,
    to_device: Callable[[np.ndarray], Any] = lambda x: x,
) -> list[Launch]:
    """The launches that compute C <- alpha A B + beta C following ``plan``."""
    if write_mode not in WRITE_MODES:
        raise FusedError(f"unknown write mode '{write_mode}' (choose from {', '.join(WRITE_MODES)})")
    dtype = np.dtype(C.dtype)
    scalar = dtype.type
    lds = tuple(_leading_dimension(n, x) for n, x in (("A", A), ("B", B), ("C", C)))
    steps = tuple(s for s in plan.steps if not all(v.empty for v, _ in s.c))
    for s in steps:
        if s.primitive.counts not in operand_counts():
            raise FusedError(f"no fused kernel has operand counts {s.primitive.counts} (plan {plan.algorithm}, "
                             f"{plan.levels} levels); fused kernels are generated for 1- and 2-level Strassen")
    # beta is applied once: folded into the kernel when one plain launch writes each element once (GEMM),
    # otherwise by a scale launch before the products accumulate.
    fold_beta = write_mode == "plain" and len(steps) == 1 and len(steps[0].c) == 1 and alpha != 0
    launches: list[Launch] = []
    if beta != 1 and not fold_beta:
        m, n = C.shape
        grid = min(_ceil_div(m * n, SCALE_BLOCK), SCALE_MAX_GRID)
        launches.append(Launch(scale_kernel(str(dtype)), (grid, 1, 1), (SCALE_BLOCK, 1, 1),
                               (C, np.int32(m), np.int32(n), np.int32(lds[2]), scalar(beta))))
    if alpha == 0:
        return launches
    bm, bk, bn = plan.block
    kernel_beta = scalar(beta if fold_beta else 1)
    for group in batches(steps, write_mode, batch):
        counts = group[0].primitive.counts
        inst = Instance(strategy, str(dtype), counts, write_mode)
        arrays = [_term_arrays(s, lds) for s in group]
        offsets = to_device(np.array([a[0] for a in arrays], dtype=np.int64))
        extents = to_device(np.array([a[1] for a in arrays], dtype=np.int32))
        coeffs = to_device(np.array([a[2] for a in arrays], dtype=dtype))
        grid = (_ceil_div(bn, strategy.n_S), _ceil_div(bm, strategy.m_S), len(group))
        args = (A, B, C, np.int32(lds[0]), np.int32(lds[1]), np.int32(lds[2]), np.int32(bk), scalar(alpha),
                kernel_beta, offsets, extents, coeffs)
        launches.append(Launch(inst.name, grid, (strategy.threads, 1, 1), args, tuple(s.primitive.name for s in group)))
    return launches
