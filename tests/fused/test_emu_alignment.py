"""The emulator's alignment checks (kernels/emu/cuda_emu.hpp, check_aligned): a vector global or shared access,
or an ldmatrix row, off its natural alignment faults on the GPU (cudaErrorMisalignedAddress) but reads fine on
x86; the emulator reports the first one of a launch with the kernel's name and the address
(strassenbench.fused.emu: EmuFault, take_fault)."""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_tensorcore import _emulator_library

from strassenbench.engines.fused_engine import emu_gemm
from strassenbench.fused import emu
from strassenbench.fused.launch import Launch, Program, plan_launches
from strassenbench.plan import make_plan
from strassenbench.families import get_strategy

PROBE = Path(__file__).resolve().parents[1] / "probes" / "alignment_probe.cu"
GRID_BLOCK = [ctypes.c_uint] * 6
PTR, LL, INT = ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """The probe kernels compiled for the emulator; every test starts and ends with no fault pending (the fault
    is one per process: the libraries share the emulator's globals)."""
    lib = _emulator_library(PROBE, tmp_path_factory.mktemp("alignment"))
    lib.emu_align_ldg.argtypes = [*GRID_BLOCK, PTR, LL, INT, INT, PTR]
    lib.emu_align_shared.argtypes = [*GRID_BLOCK, LL, INT, PTR, PTR]
    lib.emu_align_ldmatrix.argtypes = [*GRID_BLOCK, LL, PTR, PTR]
    lib.emu_align_epilogue.argtypes = [*GRID_BLOCK, PTR, INT, ctypes.c_float, INT, INT]
    assert emu._take(lib) is None
    return lib


@pytest.fixture(autouse=True)
def _no_fault_left(probe: ctypes.CDLL):  # noqa: ANN202
    yield
    assert emu._take(probe) is None, "a test left a fault behind"


def _aligned(floats: int) -> np.ndarray:
    """A float32 buffer whose first element is 16-byte aligned."""
    raw = np.zeros(floats + 4, np.float32)
    skip = (-raw.ctypes.data % 16) // 4
    return raw[skip:skip + floats]


def _fault(kind: str, bytes_: int, address: int, kernel: str) -> str:
    """The start of check_aligned's message (the block and thread follow)."""
    return f"misaligned {bytes_}-byte {kind} at {address:#x} in {kernel} (block (0,0,0), thread "


@pytest.mark.parametrize("bytes_", [16, 8])
@pytest.mark.parametrize("guard", [1, -1], ids=["ldg", "ldg_at"])
def test_global_vector_load(probe: ctypes.CDLL, bytes_: int, guard: int) -> None:
    data = _aligned(16)
    data[:] = np.arange(16)
    out = np.zeros(4, np.float32)
    lanes = bytes_ // 4
    for offset in (0, bytes_):  # aligned: read, no fault
        probe.emu_align_ldg(1, 1, 1, 1, 1, 1, data.ctypes.data, offset, bytes_, guard, out.ctypes.data)
        assert emu._take(probe) is None
        np.testing.assert_array_equal(out[:lanes], data[offset // 4:offset // 4 + lanes])
    probe.emu_align_ldg(1, 1, 1, 1, 1, 1, data.ctypes.data, 4, bytes_, guard, out.ctypes.data)
    fault = emu._take(probe)
    assert fault == _fault("global load", bytes_, data.ctypes.data + 4, "align_ldg") + "0)"
    np.testing.assert_array_equal(out[:lanes], data[1:1 + lanes])  # the emulator goes on


def test_predicated_off_load_reads_nothing(probe: ctypes.CDLL) -> None:
    data, out = _aligned(8), np.zeros(4, np.float32)
    probe.emu_align_ldg(1, 1, 1, 1, 1, 1, data.ctypes.data, 4, 16, 0, out.ctypes.data)
    assert emu._take(probe) is None


@pytest.mark.parametrize("store", [1, 0])
def test_shared_vector_access(probe: ctypes.CDLL, store: int) -> None:
    out, base = np.zeros(4, np.float32), np.zeros(1, np.uint64)
    probe.emu_align_shared(1, 1, 1, 1, 1, 1, 16, store, out.ctypes.data, base.ctypes.data)
    assert emu._take(probe) is None and int(base[0]) % 16 == 0
    probe.emu_align_shared(1, 1, 1, 1, 1, 1, 4, store, out.ctypes.data, base.ctypes.data)
    kind = "shared store" if store else "shared load"
    assert emu._take(probe) == _fault(kind, 16, int(base[0]) + 4, "align_shared") + "0)"


def test_ldmatrix_rows(probe: ctypes.CDLL) -> None:
    out, base = np.zeros(128, np.float32), np.zeros(1, np.uint64)
    probe.emu_align_ldmatrix(1, 1, 1, 32, 1, 1, 0, out.ctypes.data, base.ctypes.data)
    assert emu._take(probe) is None
    # register i of lane l: element (l / 4, l % 4) of matrix i, rows 8 i to 8 i + 7 of the buffer (row r: 4 r .. 4 r + 3)
    np.testing.assert_array_equal(out.reshape(32, 4), np.arange(32)[:, None] + 32 * np.arange(4))
    probe.emu_align_ldmatrix(1, 1, 1, 32, 1, 1, 4, out.ctypes.data, base.ctypes.data)
    fault = emu._take(probe)
    found = re.fullmatch(r"misaligned 16-byte ldmatrix row at (0x[0-9a-f]+) in align_ldmatrix "
                         r"\(block \(0,0,0\), thread (\d+)\)", fault or "")
    assert found, fault
    assert int(found[1], 16) == int(base[0]) + 16 * int(found[2]) + 4  # lane l's row, 4 bytes off


@pytest.mark.parametrize(("beta", "atomic"), [(0.0, 0), (1.0, 0), (0.0, 1)])
def test_epilogue_planted_misplaced_vector(probe: ctypes.CDLL, beta: float, atomic: int) -> None:
    """A tile that puts a thread's 4-wide write-back one column off: the read-modify-write, or the atomic
    write-back's vector reduction, is misaligned."""
    C = _aligned(8)
    probe.emu_align_epilogue(1, 1, 1, 1, 1, 1, C.ctypes.data, 0, beta, atomic, 0)
    assert emu._take(probe) is None
    np.testing.assert_array_equal(C[:4], [1, 2, 3, 4])
    C[:] = 0
    probe.emu_align_epilogue(1, 1, 1, 1, 1, 1, C.ctypes.data, 1, beta, atomic, 0)
    kind = "global reduction" if atomic else "global store" if beta == 0 else "global load"
    assert emu._take(probe) == _fault(kind, 16, C.ctypes.data + 4, "align_epilogue") + "0)"
    if atomic:  # each element reduced: the four values land one column on
        np.testing.assert_array_equal(C[:6], [0, 1, 2, 3, 4, 0])


def test_atomic_vector_write_back_refuses_unaligned_terms(probe: ctypes.CDLL) -> None:
    """The vector kernels' atomic write-back takes only C terms aligned to its reductions (the launch builder
    gives the others to the scalar kernel): a term one element off stops the kernel with one message, as a
    trap stops it on the GPU. In a process of its own: the emulator aborts."""
    script = (f"import ctypes, numpy as np; lib = ctypes.CDLL({probe._name!r}); "
              "C = np.zeros(12, np.float32); skip = (-C.ctypes.data % 16) // 4; "
              "lib.emu_align_epilogue(*[ctypes.c_uint(1)] * 6, ctypes.c_void_p(C[skip:].ctypes.data), 0, "
              "ctypes.c_float(0), 1, 1)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "vector kernel launched with C terms not aligned to its reductions" in done.stderr, done.stderr


def test_run_raises_and_take_fault(probe: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch) -> None:
    """emu.run raises EmuFault after a faulting launch; take_fault returns the fault of a kernel's library once."""
    data, out = _aligned(8), np.zeros(4, np.float32)
    monkeypatch.setattr(emu, "_libraries", lambda program, flags: {"align_ldg": probe})
    launch = Launch("align_ldg", (1, 1, 1), (1, 1, 1), (data[1:], np.int64(0), np.int32(16), np.int32(1), out))
    with pytest.raises(emu.EmuFault, match=re.escape(_fault("global load", 16, data.ctypes.data + 4, "align_ldg"))):
        emu.run(Program((((launch,),),)))
    assert emu._take(probe) is None  # run took it
    monkeypatch.setitem(emu._LOADED, "probe", probe)
    probe.emu_align_ldg(1, 1, 1, 1, 1, 1, data.ctypes.data, 4, 16, 1, out.ctypes.data)
    assert emu.take_fault("no_such_kernel") is None
    assert emu.take_fault("align_ldg") == _fault("global load", 16, data.ctypes.data + 4, "align_ldg") + "0)"
    assert emu.take_fault("align_ldg") is None


@pytest.mark.parametrize("strategy, mode, dtypes", [("Small", "simt", ("float32", "float64")),
                                                    ("TcSmall", "1xtf32", ("float32",))])
def test_fused_kernels_run_clean(strategy: str, mode: str, dtypes: tuple[str, ...]) -> None:
    """The fused kernels, vector (aligned operands, extents multiples of 4) and scalar loads, make no misaligned
    access (emu.run would raise EmuFault) and compute the product."""
    rng = np.random.default_rng(0)
    for dtype in dtypes:
        for (m, k, n), suffix in (((64, 32, 64), ""), ((33, 17, 30), "_scalar")):
            A, B, C = (rng.integers(-2, 3, shape).astype(dtype) for shape in ((m, k), (k, n), (m, n)))
            plan = make_plan("strassen", 1, m, k, n)
            kernels = {launch.kernel for launch in plan_launches(
                plan, A, B, C, 1.0, 1.0, strategy=get_strategy(strategy, mode), mode=mode).launches}
            assert all(kernel.endswith(f"_plain{suffix}") for kernel in kernels), kernels
            expected = A.astype(np.float64) @ B + C
            emu_gemm(plan, A, B, C, 1.0, 1.0, strategy=strategy, mode=mode)
            np.testing.assert_array_equal(C, expected.astype(dtype), err_msg=f"{strategy} {dtype} {m}x{k}x{n}")


@pytest.mark.parametrize("strategy, mode", [("Small", "simt"), ("TcSmall", "1xtf32")])
def test_an_unaligned_c_goes_to_the_scalar_kernel_only_for_the_atomic_write_back(strategy: str, mode: str) -> None:
    """A and B aligned, C one element off its vector alignment (a view one column into a wider buffer): the
    sequential scheme's plain write-back has a scalar path for it and keeps the vector kernels; the atomic
    scheme's vector kernels reduce whole vectors only (kernels/epilogue.cuh), so its launches take the scalar
    kernels. Both exact, with no misaligned access."""
    rng = np.random.default_rng(1)
    m = k = n = 64
    A, B = (rng.integers(-2, 3, (m, k)).astype(np.float32) for _ in range(2))
    for scheme, suffix in (("sequential", "_plain"), ("atomic", "_atomic_scalar")):
        wide = _aligned(m * (n + 4)).reshape(m, n + 4)
        wide[:, 1:n + 1] = rng.integers(-2, 3, (m, n))
        C = wide[:, 1:n + 1]
        assert C.ctypes.data % 16 == 4 and not C.flags.c_contiguous
        plan = make_plan("strassen", 1, m, k, n)
        kernels = {launch.kernel for launch in plan_launches(
            plan, A, B, C, 1.0, 1.0, strategy=get_strategy(strategy, mode), mode=mode, scheme=scheme).launches
            if launch.instance}
        assert kernels and all(kernel.endswith(suffix) for kernel in kernels), kernels
        expected = A.astype(np.float64) @ B + C
        emu_gemm(plan, A, B, C, 1.0, 1.0, strategy=strategy, mode=mode, scheme=scheme)
        np.testing.assert_array_equal(C, expected.astype(np.float32), err_msg=scheme)
        assert not wide[:, 0].any() and not wide[:, n + 1:].any()  # nothing written beside C
