"""The workspace-based ("conventional") Strassen over BLAS GEMM: the paper's reference (Sec. s:gpu_exp,
[StrassenGPU2] = Lai, Arafat, Elango, Sadayappan, HiPC 2013) and the top level of the hybrid 2-level.

Per level it holds one A-sized, one B-sized and one C-sized block in workspace, X (m/2 x k/2), Y (k/2 x n/2)
and Z (m/2 x n/2): O(mk/4 + kn/4 + mn/4) per level, as the paper states for [StrassenGPU2]. The workspace
is allocated once (per call, or once per benchmark and passed in) and its size is ``workspace_bytes``.

Two schedules:

- ``winograd`` (default; Lai et al.'s choice): Strassen-Winograd, 7 products and 15 block additions,
  ordered so that X, Y, Z suffice and C is only ever accumulated into (C += alpha A B after beta is applied
  once). The operand sums are S1..S4, T1..T4 of Winograd's variant; see ``_winograd``.
- ``conventional``: any one-level algorithm of strassenbench.algebra (Strassen's by default): for each
  product, X = sum u_i A_i, Y = sum v_j B_j, Z = alpha X Y, C_l += gamma_l Z (the paper's Sec. s:gpu_stra,
  "the conventional approach").

Odd sizes: padding by views, never by copies or peeling. A dimension d splits into ceil(d/2) and
d - ceil(d/2); a block past an edge is a smaller view that reads as zero-padded. Sums into X, Y write the
covered part and zero the rest; a product X Y into a smaller C block multiplies only the rows, columns and
inner extent that the operands cover (the padded part contributes zero). This equals the zero padding of the
fused kernels and plans (Sec. s:fringe), so both give the same blocks at every level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from strassenbench.algebra.primitives import primitives

from .array_ops import NumpyOps, ops_for

__all__ = ["SCHEDULES", "Workspace", "level_blocks", "workspace_elements", "workspace_bytes", "multiply"]

SCHEDULES = ("winograd", "conventional")

Leaf = Callable[[object, object, object, float, float], None]  # leaf(out, a, b, alpha, beta)


def _half(d: int) -> int:
    return -(-d // 2)


def level_blocks(m: int, k: int, n: int, levels: int) -> list[tuple[int, int, int]]:
    """Block sizes (m_l, k_l, n_l) = ceil(d / 2^l) for l = 1..levels."""
    blocks = []
    for _ in range(levels):
        m, k, n = _half(m), _half(k), _half(n)
        blocks.append((m, k, n))
    return blocks


def workspace_elements(m: int, k: int, n: int, levels: int) -> int:
    """sum over levels of m_l k_l + k_l n_l + m_l n_l: X, Y and Z of every level."""
    return sum(bm * bk + bk * bn + bm * bn for bm, bk, bn in level_blocks(m, k, n, levels))


def workspace_bytes(m: int, k: int, n: int, levels: int, dtype: str | np.dtype) -> int:
    return workspace_elements(m, k, n, levels) * np.dtype(dtype).itemsize


@dataclass
class _Level:
    X: object
    Y: object
    Z: object


class Workspace:
    """One allocation holding X, Y, Z for every level of an m x k x n problem."""

    def __init__(self, m: int, k: int, n: int, levels: int, dtype: str | np.dtype, ops: NumpyOps | None = None):
        ops = ops or NumpyOps()
        self.shape = (m, k, n, levels)
        self.dtype = np.dtype(dtype)
        self.buffer = ops.zeros(workspace_elements(m, k, n, levels), self.dtype)
        self.levels: list[_Level] = []
        offset = 0
        for bm, bk, bn in level_blocks(m, k, n, levels):
            views = []
            for rows, cols in ((bm, bk), (bk, bn), (bm, bn)):
                views.append(self.buffer[offset : offset + rows * cols].reshape(rows, cols))
                offset += rows * cols
            self.levels.append(_Level(*views))

    @property
    def nbytes(self) -> int:
        return int(self.buffer.nbytes)

    def fits(self, m: int, k: int, n: int, levels: int) -> bool:
        return all(
            have[0] >= need[0] and have[1] >= need[1] and have[2] >= need[2]
            for have, need in zip(level_blocks(*self.shape[:3], self.shape[3]), level_blocks(m, k, n, levels))
        ) and levels <= self.shape[3]


def _block(x, i: int, j: int):  # noqa: ANN001, ANN202
    """Block (i, j) of x split 2 x 2: the first block is ceil(rows/2) x ceil(cols/2), later ones may be
    smaller or empty."""
    r, c = _half(x.shape[0]), _half(x.shape[1])
    return x[i * r : (i + 1) * r if i == 0 else None, j * c : (j + 1) * c if j == 0 else None]


def _quadrants(x):  # noqa: ANN001, ANN202
    """x11, x12, x21, x22."""
    return tuple(_block(x, i, j) for i in (0, 1) for j in (0, 1))


class _Run:
    def __init__(self, ops: NumpyOps, ws: Workspace, leaf: Leaf, schedule: str, algorithm: str, levels: int):
        self.ops, self.ws, self.leaf, self.schedule, self.algorithm = ops, ws, leaf, schedule, algorithm
        self.levels = levels

    def buffers(self, A, B, C, depth: int):  # noqa: ANN001, ANN201
        """This level's X, Y, Z cut to the first blocks of A, B and C."""
        lv = self.ws.levels[depth]
        return tuple(buf[: x.shape[0], : x.shape[1]] for buf, x in ((lv.X, _block(A, 0, 0)), (lv.Y, _block(B, 0, 0)),
                                                                     (lv.Z, _block(C, 0, 0))))

    def product(self, out, a, b, alpha: float, beta: float, depth: int) -> None:  # noqa: ANN001
        """out = alpha a b + beta out for zero-padded a, b: only the covered rows, columns and inner extent."""
        r, c = min(out.shape[0], a.shape[0]), min(out.shape[1], b.shape[1])
        kk = min(a.shape[1], b.shape[0])
        if beta != 1:  # the part of out that a, b do not cover gets only the beta scaling
            if r < out.shape[0]:
                self.ops.scale(out[r:, :], beta)
            if c < out.shape[1]:
                self.ops.scale(out[:r, c:], beta)
        if r == 0 or c == 0:
            return
        target = out[:r, :c]
        if kk == 0:
            self.ops.scale(target, beta)
            return
        self.multiply(a[:r, :kk], b[:kk, :c], target, alpha, beta, depth)

    def multiply(self, A, B, C, alpha: float, beta: float, depth: int) -> None:  # noqa: ANN001
        """C = alpha A B + beta C with the remaining levels below ``depth``."""
        if depth == self.levels or min(A.shape[0], A.shape[1], B.shape[1]) < 2:
            self.leaf(C, A, B, alpha, beta)
            return
        self.ops.scale(C, beta)  # beta once; the schedules below only accumulate
        if self.schedule == "winograd":
            self._winograd(A, B, C, alpha, depth)
        else:
            self._conventional(A, B, C, alpha, depth)

    def _winograd(self, A, B, C, alpha: float, depth: int) -> None:  # noqa: ANN001
        """Strassen-Winograd in X, Y, Z (Lai et al.'s memory-efficient ordering), C += alpha A B.

        S1 = A21 + A22, S2 = S1 - A11, S3 = A11 - A21, S4 = A12 - S2;
        T1 = B12 - B11, T2 = B22 - T1, T3 = B22 - B12, T4 = T2 - B21;
        P1 = A11 B11, P2 = A12 B21, P3 = S4 B22, P4 = A22 T4, P5 = S1 T1, P6 = S2 T2, P7 = S3 T3;
        C11 += P1 + P2, C12 += P1 + P6 + P5 + P3, C21 += P1 + P6 + P7 - P4, C22 += P1 + P6 + P7 + P5.
        """
        ops = self.ops
        A11, A12, A21, A22 = _quadrants(A)
        B11, B12, B21, B22 = _quadrants(B)
        C11, C12, C21, C22 = _quadrants(C)
        X, Y, Z = self.buffers(A, B, C, depth)
        nxt = depth + 1
        ops.sum2(X, A11, 1, A21, -1)  # S3
        ops.sum2(Y, B22, 1, B12, -1)  # T3
        self.product(Z, X, Y, alpha, 0, nxt)  # Z = P7
        ops.axpy(C21, Z[: C21.shape[0], : C21.shape[1]], 1)
        ops.axpy(C22, Z[: C22.shape[0], : C22.shape[1]], 1)
        ops.sum2(X, A21, 1, A22, 1)  # S1
        ops.sum2(Y, B12, 1, B11, -1)  # T1
        self.product(Z, X, Y, alpha, 0, nxt)  # Z = P5
        ops.axpy(C12, Z[: C12.shape[0], : C12.shape[1]], 1)
        ops.axpy(C22, Z[: C22.shape[0], : C22.shape[1]], 1)
        ops.axpy(X, A11, -1)  # S2 = S1 - A11
        ops.scale(Y, -1)
        ops.axpy(Y, B22, 1)  # T2 = B22 - T1
        self.product(Z, A11, B11, alpha, 0, nxt)  # Z = P1
        ops.axpy(C11, Z, 1)
        self.product(Z, X, Y, alpha, 1, nxt)  # Z = P1 + P6
        for Cb in (C12, C21, C22):
            ops.axpy(Cb, Z[: Cb.shape[0], : Cb.shape[1]], 1)
        self.product(C11, A12, B21, alpha, 1, nxt)  # C11 += P2
        ops.scale(X, -1)
        ops.axpy(X, A12, 1)  # S4 = A12 - S2
        self.product(C12, X, B22, alpha, 1, nxt)  # C12 += P3
        ops.axpy(Y, B21, -1)  # T4 = T2 - B21
        self.product(C21, A22, Y, -alpha, 1, nxt)  # C21 -= P4

    def _conventional(self, A, B, C, alpha: float, depth: int) -> None:  # noqa: ANN001
        """Each product of the one-level algorithm through X, Y, Z (Eq. e:straprim1 with workspace)."""
        ops = self.ops
        X, Y, Z = self.buffers(A, B, C, depth)
        for prim in primitives(self.algorithm, 1):
            left = self._operand(prim.a, A, X)
            right = self._operand(prim.b, B, Y)
            self.product(Z, left, right, alpha, 0, depth + 1)
            for t in prim.c:
                Cb = _block(C, t.row, t.col)
                ops.axpy(Cb, Z[: Cb.shape[0], : Cb.shape[1]], t.coeff)

    def _operand(self, terms, M, buffer):  # noqa: ANN001, ANN202
        """sum_i u_i M_i: a view when it is a single block with coefficient 1, else summed into buffer."""
        if len(terms) == 1 and terms[0].coeff == 1:
            return _block(M, terms[0].row, terms[0].col)
        self.ops.fill_zero(buffer)
        for t in terms:
            self.ops.axpy(buffer, _block(M, t.row, t.col), t.coeff)
        return buffer


def multiply(
    A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
    levels: int = 1,
    schedule: str = "winograd",
    algorithm: str = "strassen",
    workspace: Workspace | None = None,
    leaf: Leaf | None = None,
    ops: NumpyOps | None = None,
) -> Workspace:
    """C <- alpha A B + beta C by ``levels`` levels of the workspace-based Strassen; returns the workspace.

    ``leaf(out, a, b, alpha, beta)`` multiplies below the last level (BLAS GEMM by default: cuBLAS for CuPy
    arrays, NumPy's matmul for NumPy arrays; the hybrid 2-level passes the fused 1-level kernel). ``ops``: the
    array operations (default: those of C's kind, array_ops.ops_for).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown reference schedule '{schedule}' (choose from {', '.join(SCHEDULES)})")
    m, k = A.shape
    n = B.shape[1]
    ops = ops or ops_for(C)
    if workspace is None:
        workspace = Workspace(m, k, n, levels, C.dtype, ops)
    elif workspace.dtype != C.dtype or not workspace.fits(m, k, n, levels):
        raise ValueError(f"workspace for {workspace.shape} does not fit {m}x{k}x{n} with {levels} levels")
    _Run(ops, workspace, leaf or ops.gemm, schedule, algorithm, levels).multiply(A, B, C, alpha, beta, 0)
    return workspace
