"""TF32 numerics of the tensor-core kernels (kernels/tensorcore.cuh), in NumPy, bit for bit.

``round_tf32`` is PTX's ``cvt.rna.tf32.f32``; ``split_3xtf32`` the big/small split of the 3xTF32 method
(CUTLASS's "fast accurate" SGEMM); ``mma_m16n8k8`` one warp's ``mma.sync.aligned.m16n8k8`` with TF32 inputs,
with the emulator's arithmetic; ``fragments`` the PTX ISA's fragment layout of each lane; ``matmul`` a
float32 product in 1xTF32 or 3xTF32 mode, k / 8 such mma after another as the kernels chain them.

The arithmetic of the sum. The PTX ISA leaves the order and rounding of mma's sum unspecified. What an NVIDIA
H200 does (data/nvidia-h200/3xtf32_bias.txt, measured with scripts/tf32_bias.py): a chain of mma into one
float32 accumulator loses a bias that grows with k, for 1xTF32 and 3xTF32 alike, 4e-5 of the result at
k = 4,096 with random [0, 1) operands, while cuBLAS's FP32 SGEMM stays at 1e-7 and CUTLASS's 3xTF32 (staged
accumulation) at 2e-7. A sum truncated toward zero, as Fasi, Higham, Mikaitis and Pranesh found on the V100,
T4 and A100 ("Numerical behavior of NVIDIA tensor cores", PeerJ Computer Science 7, 2021), loses that much:
here each mma's sum is formed exactly (float64: the products of TF32 values and the sum of eight of them and
an FP32 value fit) and rounded toward zero to float32.
"""

from __future__ import annotations

import numpy as np

from .families import MODES as TF32_MODES

__all__ = ["round_tf32", "split_3xtf32", "round_toward_zero", "mma_m16n8k8", "fragments", "matmul"]

# The modes on TF32 tensor cores (strassenbench.families): mma.sync's and wgmma's, the same arithmetic (the wgmma
# kernels' k-steps are mma's: 8 products summed exactly, then truncated; kernels/emu/cuda_emu.hpp tf32_dot8).
MODES = tuple(mode.name for mode in TF32_MODES.values() if mode.tf32)

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


def round_toward_zero(x: np.ndarray) -> np.ndarray:
    """float64 values rounded to float32 toward zero (the tensor core's rounding of its sum, as measured)."""
    x = np.asarray(x, dtype=np.float64)
    nearest = x.astype(np.float32)
    with np.errstate(invalid="ignore"):
        away = np.abs(nearest.astype(np.float64)) > np.abs(x)
    return np.where(away, np.nextafter(nearest, np.float32(0)), nearest).astype(np.float32)


def mma_m16n8k8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D = A B + C as the emulator computes it: A and B cut to their TF32 bits (all the tensor core reads),
    C plus the eight products summed in k order in float64 (exact but for extreme exponent ranges), and the
    sum rounded toward zero to float32."""
    a, b = _cut(a).astype(np.float64), _cut(b).astype(np.float64)
    d = np.asarray(c, dtype=np.float32).astype(np.float64)
    for k in range(a.shape[1]):
        d = d + np.outer(a[:, k], b[k, :])
    return round_toward_zero(d)


def matmul(a: np.ndarray, b: np.ndarray, mode: str, staged: bool = True, stage_k: int = 8,
           smalls_first: bool = False) -> np.ndarray:
    """A B in float32 as the tensor-core kernels form it, k / 8 mma after another (the mma's arithmetic of
    mma_m16n8k8; k's zero padding to a multiple of 8 adds nothing). ``1xtf32`` rounds both operands to TF32
    once and chains the mma into the accumulator. ``3xtf32`` takes a_small b_big, a_big b_small and a_big b_big
    (in that order, as CUTLASS's example 27) per slice of 8; ``staged`` (the kernels', and CUTLASS's
    MmaMultistage's) sums a slice's three from zero and adds that to the accumulator in rounded float32, else
    all three go into the accumulator, whose truncated sums then lose a bias growing with k. ``stage_k`` (a
    multiple of 8) is the k of one staged sum: 8 on the register pipeline, k_S (16) on the multistage one, 32 on
    the Wg kernels, which take a stage's small products first (``smalls_first``: every k-step's a_small b_big and
    a_big b_small, then every k-step's a_big b_big)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if mode not in MODES:
        raise ValueError(f"unknown tensor-core mode {mode!r} (choose from {', '.join(MODES)})")
    (m, k), n = a.shape, b.shape[1]
    stage = staged and TF32_MODES[mode].staged
    if TF32_MODES[mode].parts == 1:
        parts_a, parts_b, pairs = [round_tf32(a)], [round_tf32(b)], [(0, 0)]
    else:
        parts_a, parts_b, pairs = list(split_3xtf32(a)), list(split_3xtf32(b)), [(1, 0), (0, 1), (0, 0)]
    parts_a = [x.astype(np.float64) for x in parts_a]
    parts_b = [x.astype(np.float64) for x in parts_b]
    acc = np.zeros((m, n), np.float32)
    if stage_k < 8 or stage_k % 8:
        raise ValueError(f"stage_k is a multiple of the mma's k = 8, not {stage_k}")
    for s0 in range(0, k, stage_k):  # the last slice's missing k are the kernels' zero padding: they add nothing
        into = np.zeros((m, n), np.float32) if stage else acc
        steps = range(s0, min(s0 + stage_k, k), 8)
        order = ([(k0, p) for k0 in steps for p in pairs[:-1]] + [(k0, pairs[-1]) for k0 in steps] if smalls_first
                 else [(k0, p) for k0 in steps for p in pairs])
        for k0, (i, j) in order:  # one mma per pair: the k-step's 8 products, summed exactly, then truncated
            into = round_toward_zero(into + parts_a[i][:, k0:k0 + 8] @ parts_b[j][k0:k0 + 8, :])
        acc = acc + into if stage else into
    return acc
