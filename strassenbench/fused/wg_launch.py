"""The Wg kernels' launches (kernels/wgmma_primitive.cuh, sm_90a; strassenbench.fused.launch dispatches to them):
a persistent grid over the tiles of a batch of products, TMA tensor maps of the whole operands, terms as places
in their operands, the kernel's dynamic shared memory."""

from __future__ import annotations

import numpy as np

from ..plan import Plan, Step
from ..strategies import WgStrategy
from .instances import Instance, kernel_counts, products_dtype
from .program import Launch, TensorMapArg, address, normalised

__all__ = ["tma_able", "wg_launches"]


def tma_able(x, ld: int) -> bool:  # noqa: ANN001 - NumPy or CuPy array
    """Whether a TMA tensor map can cover the operand ``x`` (leading dimension ``ld``): row-major with unit column
    stride, its address 16-byte aligned, its rows a multiple of 16 bytes apart (cuTensorMapEncodeTiled's
    globalAddress and globalStrides) and its extents nonzero."""
    itemsize = x.dtype.itemsize
    return (x.strides[1] == itemsize and address(x) % 16 == 0 and (ld * itemsize) % 16 == 0 and ld * itemsize < 2**40
            and min(x.shape) > 0)


def _wg_products(group: list[Step], inst: Instance) -> np.ndarray:
    """sb::Products for a Wg launch: as _products, but each term's address field holds its block's place in
    its operand, row << 32 | column (kernels/wgmma_primitive.cuh WgTerms), where TMA's boxes go."""
    buf = np.zeros((), dtype=products_dtype("float32", sum(inst.counts), inst.batch))
    for z, step in enumerate(group):
        first = 0
        for i, (side, width) in enumerate(zip((step.a, step.b, step.c), inst.counts)):
            coeffs = normalised([c for _, c in side]) if i < 2 else [c for _, c in side]
            for t, ((view, _), coeff) in enumerate(zip(side, coeffs), start=first):
                buf["address"][z, t] = 0 if view.empty else (view.row << 32) | view.col
                buf["rows"][z, t], buf["cols"][z, t] = view.rows, view.cols
                buf["coeff"][z, t] = float(coeff)
            first += width
    return buf


def wg_launches(group: list[Step], A, B, C, lds, strategy: WgStrategy, write_mode: str, plan: Plan,  # noqa: ANN001
                mode: str, alpha: float, beta: float, bk: int) -> list[Launch]:
    """The Wg kernels' launches of one group of products: a persistent grid over the tiles of at most a batch of
    products (grid[0] the tiles; an engine launches at most its SMs' worth, Launch.persistent), TMA tensor maps
    of A and B and, for the atomic write-back's tile reductions, of C in 16 x 32 boxes in the 128-byte swizzle
    (the TMA kernel when each of them allows one, tma_able; else the scalar kernel, with unused maps) and the
    kernel's dynamic shared memory."""
    atomic = write_mode == "atomic"
    tma = tma_able(A, lds[0]) and tma_able(B, lds[1]) and (not atomic or tma_able(C, lds[2]))
    first = group[0]
    inst = Instance(strategy, "float32", kernel_counts((len(first.a), len(first.b), len(first.c))), write_mode,
                    "vector" if tma else "scalar", mode=mode)
    bm, _, bn = plan.block
    tiles_n, tiles_m = -(-bn // strategy.n_S), -(-bm // strategy.m_S)
    maps = (TensorMapArg(A, (strategy.k_S, strategy.m_S)), TensorMapArg(B, (strategy.n_S, strategy.k_S)),
            TensorMapArg(C if inst.reduces else None, strategy.OUT_BOX, 128)) if tma else (TensorMapArg(None),) * 3
    launches = []
    for start in range(0, len(group), inst.batch):
        part = group[start: start + inst.batch]
        args = (np.int32(lds[0]), np.int32(lds[1]), np.int32(lds[2]), np.int32(bk), np.float32(alpha),
                np.float32(beta), np.int32(tiles_n), np.int32(tiles_m), np.int32(len(part)), A, B, C, *maps,
                _wg_products(part, inst))
        launches.append(Launch(inst.name, (tiles_n * tiles_m * len(part), 1, 1), (strategy.threads, 1, 1), args,
                               tuple(s.primitive.name for s in part), inst, inst.shared_bytes, persistent=True))
    return launches
