"""TF32 numerics of the tensor-core kernels (kernels/tensorcore.cuh), in NumPy, bit for bit.

``round_tf32`` is PTX's ``cvt.rna.tf32.f32``; ``split_3xtf32`` the big/small split of the 3xTF32 method
(CUTLASS's "fast accurate" SGEMM); ``mma_m16n8k8`` one warp's ``mma.sync.aligned.m16n8k8`` with TF32 inputs,
with the emulator's arithmetic; ``fragments`` the PTX ISA's fragment layout of each lane; ``matmul`` a
float32 product in 1xTF32 or 3xTF32 mode.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MODES", "round_tf32", "split_3xtf32", "mma_m16n8k8", "fragments", "matmul"]

MODES = ("1xtf32", "3xtf32")

_EXPONENT = np.uint32(0x7F800000)
_HALF = np.uint32(0x1000)      # half a unit in TF32's last place (bit 12)
_KEEP = np.uint32(0xFFFFE000)  # sign, exponent and the 10 explicit mantissa bits of TF32


def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to TF32 (10 explicit mantissa bits), to nearest with ties away from zero; the 13
    low bits zero. Rounding past the largest finite value gives infinity; infinities and NaN pass through."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    finite = (bits & _EXPONENT) != _EXPONENT
    with np.errstate(over="ignore"):
        rounded = (bits + _HALF) & _KEEP  # sign-magnitude: adding half a unit rounds the magnitude away from 0
    return np.where(finite, rounded, bits).view(np.float32)


def split_3xtf32(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(big, small) = (tf32(x), tf32(x - big)), both float32."""
    x = np.asarray(x, dtype=np.float32)
    big = round_tf32(x)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, as on the GPU
        return big, round_tf32(x - big)


def fragments(lane: int) -> dict[str, list[tuple[int, int]]]:
    """(row, column) of each register of lane ``lane`` in A (16 x 8), B (8 x 8) and C/D (16 x 8) of
    mma.m16n8k8 with .tf32 inputs (PTX ISA, "Matrix Fragments for mma.m16n8k8")."""
    g, t = divmod(lane, 4)
    return {"a": [(g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)],
            "b": [(t, g), (t + 4, g)],
            "c": [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]}


def _cut(x: np.ndarray) -> np.ndarray:
    return (np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) & _KEEP).view(np.float32)


def mma_m16n8k8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D = A B + C as the emulator computes it: A and B cut to their TF32 bits (all the tensor core reads),
    each product exact in float32, added to C in k order with float32 rounding."""
    a, b = _cut(a), _cut(b)
    d = np.asarray(c, dtype=np.float32).copy()
    for k in range(a.shape[1]):
        d = d + np.outer(a[:, k], b[k, :])  # float32: the product of two TF32 values is exact
    return d.astype(np.float32)


def matmul(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    """A B in float32 as the tensor-core kernels form it: ``1xtf32`` rounds both operands to TF32 once,
    ``3xtf32`` adds a_big b_small + a_small b_big to a_big b_big (the small products first, as CUTLASS's
    example 27 accumulates them). The products of TF32 values are exact in float32; the sums are BLAS's
    float32 sums, a model of the tensor core's, whose order and rounding are not specified."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if mode == "1xtf32":
        return round_tf32(a) @ round_tf32(b)
    if mode == "3xtf32":
        a_big, a_small = split_3xtf32(a)
        b_big, b_small = split_3xtf32(b)
        return (a_big @ b_small + a_small @ b_big) + a_big @ b_big
    raise ValueError(f"unknown tensor-core mode {mode!r} (choose from {', '.join(MODES)})")
