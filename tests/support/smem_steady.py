"""Shared-memory wavefronts of a tensor-core kernel's steady main loop, counted on the emulator: one block of a
kernel instantiation on one tile, whose every term is the same A, B or C, at two depths (tests/fused/test_tensorcore.py,
tests/fused/test_dmma.py)."""

from __future__ import annotations

import numpy as np


def steady_totals(inst, dtype: str, slices: tuple[int, int] = (2, 4),  # noqa: ANN001, ANN201
                  extra_flags: tuple[str, ...] = ()):
    """(the counts of the deeper run minus the shallower one's, the deeper run's counts): the steady slices'
    wavefronts and conflicts. Each run's C is checked against the product of its terms. ``extra_flags``: the
    emulator library's own compiler flags (-DSB_EMU_SM90: the sm_90 path)."""
    from strassenbench.fused import emu
    from strassenbench.fused.instances import products_dtype
    from strassenbench.fused.launch import Launch, Program
    from strassenbench.fused.smem import count, trace

    s, counts, item = inst.strategy, inst.counts, np.dtype(dtype).type
    rng = np.random.default_rng(0)
    totals = {}
    for n in slices:
        depth = s.k_S * n
        A = rng.integers(-2, 3, (s.m_S, depth)).astype(dtype)
        B = rng.integers(-2, 3, (depth, s.n_S)).astype(dtype)
        C = np.zeros((s.m_S, s.n_S), dtype=dtype)
        buf = np.zeros((), dtype=products_dtype(dtype, sum(counts), inst.batch))
        terms = [(A, s.m_S, depth)] * counts[0] + [(B, depth, s.n_S)] * counts[1] + [(C, s.m_S, s.n_S)] * counts[2]
        for t, (x, rows, cols) in enumerate(terms):
            buf["address"][0, t], buf["rows"][0, t], buf["cols"][0, t], buf["coeff"][0, t] = x.ctypes.data, rows, cols, 1
        args = (np.int32(depth), np.int32(s.n_S), np.int32(s.n_S), np.int32(depth), item(1), item(1), buf)
        program = Program((((Launch(inst.name, (1, 1, 1), (s.threads, 1, 1), args, (), inst),),),))
        totals[n] = count(trace(lambda: emu.run(program, extra_flags)))  # noqa: B023 - run at once
        np.testing.assert_array_equal(C, counts[2] * (counts[0] * A) @ (counts[1] * B))
    return totals[slices[1]] - totals[slices[0]], totals[slices[1]]
