"""The NumPy engine: runs any plan on the CPU, product by product.

Each step forms P = sum u_i X_i and Q = sum v_j V_j in block-sized buffers (the conventional approach's
workspace, Sec. s:gpu_stra), computes M = P Q with BLAS, then C_l += alpha gamma_l M. Blocks that reach past
an operand's edge are added into the buffer's top-left corner only, so the rest stays zero (padding by
bounds, Sec. s:fringe); C blocks receive only their in-bounds part.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..gemm import axpy, check_operands
from ..plan import BlockView, Plan, make_plan
from ..families import MODES, SIMT
from ..tensorcore import matmul

__all__ = ["gemm", "multiply"]


def _operand_sum(terms: tuple[tuple[BlockView, Fraction], ...], array: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """sum_i u_i X_i over in-bounds parts; a single full block with coefficient 1 is used in place."""
    if len(terms) == 1:
        view, coeff = terms[0]
        if coeff == 1 and (view.rows, view.cols) == buffer.shape:
            return view.of(array)
    buffer.fill(0)
    for view, coeff in terms:
        if not view.empty:
            axpy(buffer[: view.rows, : view.cols], view.of(array), coeff)
    return buffer


def _presums(plan: Plan, A: np.ndarray, B: np.ndarray) -> tuple[tuple, tuple[np.ndarray, np.ndarray], tuple]:
    """The presum scheme's workspace filled (strassenbench.fused.launch.presum_layout, the layout the kernels
    use): (the steps with their summed sides as workspace terms, the two workspaces, which sides are summed)."""
    from ..fused.launch import presum_layout

    layout = presum_layout(plan)
    work = tuple(np.empty(layout.shape(side), dtype=A.dtype) for side in (0, 1))
    for side, x in enumerate((A, B)):
        rows = layout.blocks[side]
        for index, terms in enumerate(layout.sums[side]):  # each of several terms: formed in its block
            _operand_sum(terms, x, work[side][index * rows: (index + 1) * rows])
    return layout.steps, work, layout.summed


def gemm(plan: Plan, A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float = 1.0, beta: float = 0.0,
         mode: str = SIMT, presum: bool = False) -> None:
    """C <- alpha A B + beta C in place, following ``plan``; with a TF32 tensor-core ``mode`` (1xTF32, 3xTF32)
    the products' operand sums are rounded and split as the tensor-core kernels do (strassenbench.tensorcore);
    DMMA's (float64 on FP64 tensor cores) are float64 products, as SIMT's. ``presum``: the presum scheme's
    order, every operand sum of several terms formed first into its workspace (the fused kernels' layout)."""
    m, k, n = check_operands(A, B, C)
    if (m, k, n) != (plan.m, plan.k, plan.n):
        raise ValueError(f"plan is for {plan.m}x{plan.k}x{plan.n}, operands are {m}x{k}x{n}")
    dtype = C.dtype
    if beta == 0:
        C.fill(0)  # C is not read when beta = 0, as in cuBLAS
    elif beta != 1:
        C *= dtype.type(beta)
    if alpha == 0:
        return
    P = np.empty(plan.block_shape_a, dtype=dtype)
    Q = np.empty(plan.block_shape_b, dtype=dtype)
    M = np.empty(plan.block_shape_c, dtype=dtype)
    steps, operands = plan.steps, [(A, B)] * len(plan.steps)
    if presum:
        steps, (WA, WB), summed = _presums(plan, A, B)
        operands = [(WA if sa else A, WB if sb else B) for sa, sb in summed]
    for step, (X, Y) in zip(steps, operands):
        if all(view.empty for view, _ in step.c):
            continue
        if not MODES[mode].tf32:  # SIMT, and DMMA: float64 products, as the FP64 tensor cores form them
            np.matmul(_operand_sum(step.a, X, P), _operand_sum(step.b, Y, Q), out=M)
        else:
            run = MODES[mode]  # the staged sums as the mode's kernels form them
            M[...] = matmul(_operand_sum(step.a, X, P), _operand_sum(step.b, Y, Q), mode, stage_k=run.stage_k,
                            smalls_first=run.smalls_first)
        for view, coeff in step.c:
            if not view.empty:
                axpy(view.of(C), M[: view.rows, : view.cols], dtype.type(alpha * float(coeff)))


def multiply(
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    alpha: float = 1.0,
    beta: float = 0.0,
    *,
    algorithm: str = "strassen",
    levels: int = 1,
) -> None:
    """Convenience: plan and run C <- alpha A B + beta C with ``levels`` levels of ``algorithm``."""
    m, k, n = check_operands(A, B, C)
    gemm(make_plan(algorithm, levels, m, k, n), A, B, C, alpha, beta)
