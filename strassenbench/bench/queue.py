"""How many operations one call of an implementation enqueues, and so how a sweep can be timed on a GPU.

``blocking`` timing (strassenbench.bench.timers) enqueues the start event, the whole call and the stop event
behind a kernel that spins until the host releases it. A GPU holds only so many pending operations behind a
spinning kernel: nvbench's blocking_kernel.cuh warns of about 32 launches, depending on the device and driver.
Past that, the host blocks inside the call while the GPU spins, only the spin's timeout ends the wait, and
the sample then holds host enqueue time, the very bias blocking timing removes. So blocking may queue at most
``QUEUE_LIMIT`` operations behind the spin, the timer's two events included. A sweep with any point above it
is timed by ``graph`` for every implementation: a graph launch is one queued operation, whatever it holds.

The count is made without a device, from the same code that enqueues: the fused kernels' programs
(``strassenbench.fused.cuda.program_ops``), and the reference's operations on shape-only stand-ins that
record each operation instead of computing it. One cuBLAS call counts as one operation, as do a kernel, a
fill, an event record and a stream wait.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import numpy as np

__all__ = ["plan_timing", "QUEUE_LIMIT", "TIMER_OPS", "AUTO", "call_ops", "choose_timing", "TimingChoice"]

QUEUE_LIMIT = 32  # operations behind the blocking kernel (nvbench: "about 32 kernel launches")
TIMER_OPS = 2  # the start and stop events the timer records around the call
AUTO = "auto"
ALPHA, BETA = 1.0, 1.0  # as bench times every call (strassenbench.bench.runner)


def _standin(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A C-contiguous array of ``shape`` that owns no memory of that size: a view with real strides over a
    small aligned buffer, for code that reads only shapes, strides and addresses (never its elements)."""
    base = np.zeros(64, dtype=np.uint8)
    strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize for i in range(len(shape)))
    view = np.lib.stride_tricks.as_strided(base.view(dtype), shape=shape, strides=strides, writeable=False)
    return view.view(_StandIn)


class _Pointer:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class _StandIn(np.ndarray):
    """A stand-in array: ``data.ptr`` is its address, as a CuPy array's is."""

    @property
    def data(self) -> _Pointer:  # type: ignore[override]
        return _Pointer(self.ctypes.data)


def _counting_ops(counter: list[int]):  # noqa: ANN202
    """The GPU reference's operations (reference.array_ops.CupyOps) on stand-ins: each kernel, fill or cuBLAS
    call adds one to ``counter[0]`` and touches nothing."""
    from ..reference.array_ops import CupyOps

    def one(*_: object) -> None:
        counter[0] += 1

    class CountingOps(CupyOps):
        def __init__(self) -> None:  # CupyOps's logic, with these primitives
            self.xp = None
            self._axpy = self._sum2 = one
            self._cublas = type("CountingCublas", (), {"gemm": staticmethod(one)})()

        def zeros(self, size: int, dtype: np.dtype):  # noqa: ANN201
            return _standin((size,), np.dtype(dtype))

        def fill_zero(self, out) -> None:  # noqa: ANN001
            one()

        def scale(self, out, s: float) -> None:  # noqa: ANN001
            if s != 1:
                one()

        def _stream(self) -> int:
            return 0

    return CountingOps()


@lru_cache(maxsize=4096)
def call_ops(impl_name: str, m: int, n: int, k: int, dtype: str = "float32", strategy: str | None = None,
             scheme: str | None = None) -> int:
    """Operations one timed call of ``impl_name`` on m x k x n enqueues on a GPU (the cuda engine; ``strategy``
    and ``scheme`` as bench passes them, None for the defaults). A splitk call is counted at its most parts
    (MAX_SPLIT): its S is the model's for the GPU, which is not asked here, and no split launches more."""
    from ..options import MAX_SPLIT, SPLITK, RunOptions, scheme_or_sequential
    from ..fused.cuda import program_ops
    from ..fused.launch import plan_launches
    from ..impls import get_impl
    from ..plan import make_plan
    from ..reference.strassen_ref import Workspace, multiply

    impl = get_impl(impl_name)
    if impl.kind in ("blas", "cutlass"):
        return 1
    item = np.dtype(dtype)
    A, B, C = (_standin(s, item) for s in ((m, k), (k, n), (m, n)))
    chosen = RunOptions(strategy, mode=impl.mode).kernel_strategy("cuda")

    def fused(plan, A, B, C, alpha: float, beta: float) -> int:  # noqa: ANN001
        return program_ops(plan_launches(plan, A, B, C, alpha, beta, strategy=chosen,
                                         scheme=scheme_or_sequential(scheme), mode=impl.mode,
                                         split_k=MAX_SPLIT if scheme == SPLITK else None))

    if impl.kind == "fused":
        return fused(make_plan(impl.algorithm, impl.effective_levels(m, k, n), m, k, n), A, B, C, ALPHA, BETA)
    counter = [0]
    ops = _counting_ops(counter)
    leaf, levels = None, impl.levels
    if impl.kind == "hybrid":  # the top reference level, then fused 1-level Strassen per product (impls._Leaves)
        levels -= 1

        def leaf(out, a, b, alpha: float, beta: float) -> None:  # noqa: ANN001
            (mm, kk), nn = a.shape, b.shape[1]
            one_level = get_impl("strassen1").effective_levels(mm, kk, nn)
            counter[0] += fused(make_plan("strassen", one_level, mm, kk, nn), a, b, out, alpha, beta)

    workspace = Workspace(m, k, n, impl.workspace_levels, item, ops)
    multiply(A, B, C, ALPHA, BETA, levels=levels, workspace=workspace, leaf=leaf, ops=ops)
    return counter[0]


class TimingChoice:
    """The method a sweep is timed by, and why (``reason``: one line to print, or "" when nothing needs
    saying)."""

    def __init__(self, method: str, reason: str = "") -> None:
        self.method, self.reason = method, reason


def choose_timing(requested: str | None, points: Iterable[tuple]) -> TimingChoice:
    """The GPU timing of a sweep of ``points`` ((impl, m, n, k, dtype, strategy, scheme) each): ``auto`` (the
    default) is blocking when every call fits behind the blocking kernel, else graph; ``blocking`` asked for
    a sweep with a point that does not fit is refused (ValueError naming it); ``graph`` is graph."""
    requested = requested or AUTO
    if requested == "graph":
        return TimingChoice("graph")
    most = QUEUE_LIMIT - TIMER_OPS
    for point in points:
        ops = call_ops(*point)
        if ops > most:
            impl, m, n, k = point[:4]
            what = (f"{impl} enqueues {ops} operations per call at {m}x{n}x{k} (m x n x k), more than the {most} "
                    f"that blocking timing may queue behind its kernel ({QUEUE_LIMIT} with the timer's two "
                    "events)")
            if requested == "blocking":
                raise ValueError(f"{what}: time this sweep with --timing graph (or auto)")
            return TimingChoice("graph", f"timing by graph: {what}; every implementation of this sweep is "
                                         "timed by graph, a graph launch being one queued operation")
    return TimingChoice("blocking")


def plan_timing(requested: str | None, points: Iterable, earlier: set[str] = frozenset()) -> TimingChoice:
    """The GPU timing method of a sweep or a whole run (the one entry point of `bench` and the workflow alike):
    strassenbench.bench.queue.choose_timing over every call of ``points`` (strassenbench.bench.runner.Point; ``auto`` is blocking unless a call
    queues more than the blocking kernel may hold), and graph where ``auto`` would choose blocking but rows
    ``earlier`` written to the same file were timed by graph: every row of a sweep is timed alike. A TimingChoice
    (its ``reason`` one line to say); ValueError for ``blocking`` asked of a sweep that cannot have it."""
    from .runner import queue_points

    choice = choose_timing(requested, (call for p in points for call in queue_points(p)))
    if choice.method == "blocking" and requested in (None, "auto") and "graph" in earlier:
        return TimingChoice("graph", "timing by graph: the file holds rows timed by graph, and a sweep's rows are "
                                     "timed alike")
    return choice
