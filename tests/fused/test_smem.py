"""Shared-memory wavefronts counted from the emulator's address traces (strassenbench.fused.smem)."""

from __future__ import annotations

import numpy as np
import pytest

from strassenbench.fused import emu
from strassenbench.fused.instances import Instance, products_dtype
from strassenbench.fused.launch import Launch, Program
from strassenbench.fused.smem import Access, count, trace, wavefronts
from strassenbench.strategies import STRATEGIES

# CUTLASS 4.2's SIMT SGEMM 128x128x8 (the paper's "CUTLASS" line), per warp and k_S = 8 slice: 8 k-steps of
# 4 fragment LDS.128 at 2 wavefronts each (its RowMajorInterleaved<2> lanes), 4 A stores and 4 B stores.
CUTLASS_WAVEFRONTS = 8 * 4 * 2 + 4 + 4


def access(addresses, width: int = 4, store: bool = False) -> Access:  # noqa: ANN001
    return Access(tuple(addresses), width, store)


def test_wavefront_rule() -> None:
    assert wavefronts(access(4 * n for n in range(32))) == (1, 0)  # consecutive words
    assert wavefronts(access([0] * 32)) == (1, 0)  # broadcast
    assert wavefronts(access(128 * n for n in range(32))) == (32, 31)  # one bank
    two_way = [4 * n for n in range(16)] + [128 + 4 * n for n in range(16)]
    assert wavefronts(access(two_way)) == (2, 1)
    assert wavefronts(access((16 * n for n in range(32)), width=16)) == (4, 0)  # 512 bytes, 4 phases
    paired = [16 * (n // 2) for n in range(32)]  # lanes n and n^1 share: 256 distinct bytes
    assert wavefronts(access(paired, width=16)) == (2, 0)
    unpaired_rows = [16 * ((n % 4) * 2) for n in range(32)]  # 4 addresses, lanes 0,1 differ: 4 phases
    assert wavefronts(access(unpaired_rows, width=16))[0] == 4
    assert wavefronts(access([None] * 16 + [4 * n for n in range(16)])) == (1, 0)


def _launch(counts: tuple[int, int, int], depth: int, A, B, C) -> Program:  # noqa: ANN001
    """One 128 x 128 Huge thread block whose operand sums add W_A copies of A and W_B of B."""
    inst = Instance(STRATEGIES["Huge"], "float32", counts, "plain", "vector")
    w_a, w_b, w_c = counts
    buf = np.zeros((), dtype=products_dtype("float32", sum(counts), inst.batch))
    terms = [(A, 128, depth)] * w_a + [(B, depth, 128)] * w_b + [(C, 128, 128)] * w_c
    for t, (x, rows, cols) in enumerate(terms):
        buf["address"][0, t], buf["rows"][0, t], buf["cols"][0, t], buf["coeff"][0, t] = x.ctypes.data, rows, cols, 1
    args = (np.int32(A.shape[1]), np.int32(B.shape[1]), np.int32(C.shape[1]), np.int32(depth), np.float32(1),
            np.float32(1), buf)
    return Program((((Launch(inst.name, (1, 1, 1), (256, 1, 1), args),),),))


@pytest.mark.parametrize("counts", [(1, 1, 1), (2, 2, 2), (4, 4, 4)])
def test_huge_main_loop_at_or_below_cutlass(counts: tuple[int, int, int]) -> None:
    """The float32 Huge GEMM, 1-level M0 and direct 2-level Var#0 kernels, measured on the emulator: at most
    CUTLASS's wavefronts per warp per slice, and no bank conflict in any load or store."""
    rng = np.random.default_rng(0)
    totals = {}
    for slices in (2, 4):
        depth = 8 * slices
        A = rng.integers(-2, 3, (128, depth)).astype(np.float32)
        B = rng.integers(-2, 3, (depth, 128)).astype(np.float32)
        C = np.zeros((128, 128), dtype=np.float32)
        totals[slices] = count(trace(lambda: emu.run(_launch(counts, depth, A, B, C))))
        np.testing.assert_array_equal(C, counts[2] * (counts[0] * A) @ (counts[1] * B))
    steady = totals[4] - totals[2]
    warps, slices = 256 // 32, 2
    per_warp_slice = steady.wavefronts / (warps * slices)
    assert per_warp_slice <= CUTLASS_WAVEFRONTS, per_warp_slice
    assert totals[4].load_conflicts == 0 and totals[4].store_conflicts == 0, totals[4]
