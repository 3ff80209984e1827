"""The emulator's bounds checks (kernels/emu/cuda_emu.hpp, inside_global): given a program's operands, its global
loads, stores and reductions stay inside them and the program's own arrays, or the launch is an EmuFault naming
the access, the kernel and the thread (on a GPU: another allocation's data, or an illegal-address fault). The
access outside is not made, so the emulator's process never reads or writes memory it does not own."""

from __future__ import annotations

import numpy as np
import pytest

from strassenbench.fused import emu
from strassenbench.fused.launch import Launch, Program, plan_launches
from strassenbench.fused.program import TensorMapArg
from strassenbench.plan import make_plan
from strassenbench.strategies import STRATEGIES


def test_a_views_extent_spans_its_first_to_its_last_element() -> None:
    base = np.zeros((8, 6), np.float32)
    start, row = base.ctypes.data, 6 * 4
    assert emu._extent(base) == (start, start + 8 * row)
    assert emu._extent(base[2:5, 1:4]) == (start + 2 * row + 4, start + 4 * row + 4 * 4)
    assert emu._extent(base[::-1]) == (start, start + 8 * row)  # negative strides
    assert emu._extent(base.T) == (start, start + 8 * row)
    assert emu._extent(base[3:4, 5:6]) == (start + 3 * row + 5 * 4, start + 3 * row + 6 * 4)
    first, last = emu._extent(base[2:2])
    assert first == last  # empty: no byte


def test_global_memory_is_the_operands_workspaces_and_arrays_of_the_launches() -> None:
    A, B, C, work, mapped = (np.zeros((4, 4), np.float32) for _ in range(5))
    launch = Launch("k", (1, 1, 1), (1, 1, 1), (C, np.int32(4), TensorMapArg(mapped, (4, 4)), TensorMapArg(None)))
    program = Program((((launch,),),), workspace=(work,))
    ranges = {tuple(int(x) for x in r) for r in emu.global_memory(program, (A, B))}
    assert ranges == {emu._extent(x) for x in (A, B, C, work, mapped)}
    assert emu.global_memory(program, ()).shape == (0, 2)  # no operands: nothing checked


def _huge_program(scheme: str):  # noqa: ANN202 - the operands and the program
    """A 1-level Huge float32 product whose term blocks are one tile and 4 k_S slices deep (its interior path
    runs), integer data; beta 1, so that no launch takes C whole (a scale launch would: its bounds then hold C)."""
    huge = STRATEGIES["Huge"]
    m, k, n = 2 * huge.m_S, 8 * huge.k_S, 2 * huge.n_S
    rng = np.random.default_rng(3)
    A, B, C = (rng.integers(-2, 3, shape).astype(np.float32) for shape in ((m, k), (k, n), (m, n)))
    program = plan_launches(make_plan("strassen", 1, m, k, n), A, B, C, 1.0, 1.0, strategy=huge, scheme=scheme)
    assert all(launch.instance for launch in program.launches)
    return A, B, C, program


@pytest.mark.parametrize(("scheme", "writes"), [("sequential", "global load"), ("atomic", "global reduction")])
def test_accesses_outside_the_operands_fault_and_are_not_made(scheme: str, writes: str) -> None:
    """Operands given one row short: the kernels' loads of B's last row, and their write-back to C's last row
    (the sequential scheme's reads C before it stores, the atomic one's reduces into it), are outside them, each
    an EmuFault, and no write outside is made. Given whole, or not given, the same program runs clean (the
    bounds of a faulting run do not outlive it)."""
    A, B, C, program = _huge_program(scheme)
    original, expected = C.copy(), A.astype(np.float64) @ B + C
    with pytest.raises(emu.EmuFault, match=r"^out-of-bounds 16-byte global load at 0x[0-9a-f]+ in strassen_f32_huge"):
        emu.run(program, operands=(A, B[:-1], C))
    C[...] = original
    with pytest.raises(emu.EmuFault, match=rf"^out-of-bounds 16-byte {writes} at 0x[0-9a-f]+ in strassen_f32_huge"):
        emu.run(program, operands=(A, B, C[:-1]))
    assert emu.bounds_count() == 0  # a faulting run's bounds do not outlive it
    written = C != original
    assert not written[-1].any() and written[:-1].any()  # the writes inside were made, none outside
    for operands in ((A, B, C), ()):
        C[...] = original
        emu.run(program, operands=operands)
        np.testing.assert_array_equal(C, expected)
        assert emu.bounds_count() == 0


@pytest.mark.parametrize(("scheme", "kernel", "access"), [
    ("sequential", "strassen_f32_small_w2x2x2_plain_scalar", "global load"),  # C read before it is written
    ("atomic", "strassen_f32_small_w2x2x2_atomic_scalar", "global reduction"),
    ("presum", "presum_f32", "global load"),  # the operand sums, formed into the workspace first
])
def test_the_scalar_write_back_and_the_presum_kernel_are_checked(scheme: str, kernel: str, access: str) -> None:
    """An odd shape (the scalar kernels) with C one row short, and the presum scheme with B one row short: the
    scalar write-back's loads, stores and atomicAdd and the presum kernel's loads are checked as the vector
    kernels' are (a plain store outside is not made: only C's last row is outside, and it is unchanged)."""
    rng = np.random.default_rng(4)
    m, k, n = 33, 17, 30
    A, B, C = (rng.integers(-2, 3, shape).astype(np.float32) for shape in ((m, k), (k, n), (m, n)))
    original = C.copy()
    program = plan_launches(make_plan("strassen", 1, m, k, n), A, B, C, 1.0, 1.0, strategy=STRATEGIES["Small"],
                            scheme=scheme)
    operands = (A, B[:-1], C) if scheme == "presum" else (A, B, C[:-1])
    with pytest.raises(emu.EmuFault, match=rf"^out-of-bounds \d-byte {access} at 0x[0-9a-f]+ in {kernel} "):
        emu.run(program, operands=operands)
    if scheme != "presum":
        np.testing.assert_array_equal(C[-1], original[-1])
