"""`strassenbench memlimit`: the largest square n each implementation can run (the paper's "36,000 vs 22,500
on a 16 GB V100" experiment).

Predicted from the declared extra memory: the largest n (a multiple of ``step``) with
3 n^2 sizeof(T) + extra(n) <= free. On the GPU, free is what cudaMemGetInfo reports after every
implementation ran once at a small size (cuBLAS's handle and workspace, the kernels' modules and CuPy's
kernels are then in memory, as in the runs) and, with ``--memory-budget`` below it, after a ballast allocation
holds the rest (measured again, never a negative ballast). On the CPU free is the budget.
Then confirmed by running once at n (expected to succeed) and once at n + step (expected to run out of
memory). On the GPU the run is real. On the CPU it runs in a child process whose address space is capped at
its size after start-up plus the budget (RLIMIT_AS), so an allocation past the budget fails as it would on
a full device; the CPU stand-ins allocate host temporaries beyond the declared device memory, so their
confirmation can fail where the GPU's would not.
"""

from __future__ import annotations

import os
import re
import resource
import sys
import tempfile
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from ..impls import get_impl
from ..results import MEMLIMIT_COLUMNS
from .backends import Backend, is_oom

__all__ = ["parse_bytes", "predict_max_n", "memlimit", "device_free", "COLUMNS"]

COLUMNS = MEMLIMIT_COLUMNS  # strassenbench.results: one schema for every reader
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_bytes(text: str) -> int:
    """'268435456', '256MiB', '16GB' -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"bad size '{text}': use bytes or a unit such as 256MiB, 16GB")
    value = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if value < 1:
        raise ValueError(f"size must be positive, got '{text}'")
    return value


def needed_bytes(impl: str, n: int, dtype: str) -> int:
    return 3 * n * n * np.dtype(dtype).itemsize + get_impl(impl).extra_bytes(n, n, n, dtype)


def predict_max_n(impl: str, dtype: str, free: int, step: int) -> int:
    """The largest multiple of ``step`` whose problem fits in ``free`` bytes (0 if none does)."""
    lo, hi = 0, step
    while needed_bytes(impl, hi, dtype) <= free:
        lo, hi = hi, hi * 2
    while hi - lo > step:  # invariant: lo fits (or is 0), hi does not
        mid = (lo + hi) // 2 // step * step
        if mid == lo:
            break
        lo, hi = (mid, hi) if needed_bytes(impl, mid, dtype) <= free else (lo, mid)
    return lo


def device_free(backend: Backend, budget: int | None, warm: Callable[[], None]) -> tuple[int, object, str]:
    """(free bytes to predict from, the ballast holding the rest of the device, a note for the rows): ``warm``
    first, then cudaMemGetInfo; with a budget below the free memory a ballast of exactly the difference, and
    cudaMemGetInfo again. A budget above the free memory cannot be honoured: the free memory is used, and
    the note says so."""
    warm()
    backend.free()
    available = backend.mem_free()
    if budget is None:
        return available, None, ""
    if budget >= available:
        return available, None, f"budget {budget} B is above the {available} B free: predicted from the free memory"
    ballast = backend.hold(available - budget)
    backend.synchronize()
    return backend.mem_free(), ballast, ""


def _run_cuda(backend: Backend, impl: str, n: int, dtype: str, build_dir: str) -> str:  # GPU, or the CPU device
    xp = backend.xp
    chosen = get_impl(impl)
    arrays = []
    try:
        arrays = [xp.full((n, n), 0.5, dtype=dtype) for _ in range(3)]
        chosen(*arrays, 1.0, 1.0, engine="cuda", build_dir=build_dir)  # every kind loads from the build (cutlass too)
        backend.synchronize()
        return "ok"
    except Exception as err:  # noqa: BLE001 - an allocation failure of any layer is "oom"; others propagate
        if is_oom(err):
            return "oom"
        raise
    finally:
        del arrays
        backend.free()


# The capped child's environment: one malloc arena and one BLAS thread, so that what it maps beyond its arrays
# stays small and the same from run to run.
_PROBE_ENV = {"MALLOC_ARENA_MAX": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


@lru_cache(maxsize=1)
def _probe_context():  # noqa: ANN202 - a multiprocessing context
    """A fork server started with _PROBE_ENV and this module imported: each probe is a fresh process forked from
    it (its own address space to cap) without a second of imports each."""
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    saved = {name: os.environ.get(name) for name in _PROBE_ENV}
    os.environ.update(_PROBE_ENV)  # the server inherits the environment it starts with
    try:
        from multiprocessing import forkserver

        forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return context


def _probe_child(send, errors: str, impl: str, n: int, dtype: str, budget: int) -> None:  # noqa: ANN001
    """A probe's process: its stderr into ``errors``, _probe's answer to ``send``."""
    with open(errors, "wb") as stream:
        os.dup2(stream.fileno(), 2)
    send.send(_probe(impl, n, dtype, budget))


def _run_capped(impl: str, n: int, dtype: str, budget: int) -> str:
    """_probe in a process of its own (_probe_context): ok, oom, or the error it died of."""
    context = _probe_context()
    receive, send = context.Pipe(duplex=False)
    with tempfile.TemporaryDirectory(prefix="strassenbench-memlimit-") as folder:
        errors = os.path.join(folder, "stderr")
        child = context.Process(target=_probe_child, args=(send, errors, impl, n, dtype, budget))
        child.start()
        send.close()
        status = ""
        if receive.poll(PROBE_TIMEOUT):
            try:
                status = receive.recv()
            except EOFError:  # it died before answering
                pass
        child.join(PROBE_TIMEOUT)
        if child.is_alive():
            child.kill()
            child.join()
        stderr = open(errors, errors="replace").read() if os.path.exists(errors) else ""
    receive.close()
    if status in ("ok", "oom"):
        return status
    if "Memory allocation" in stderr or "MemoryError" in stderr:  # OpenBLAS's own buffers
        return "oom"
    if not stderr.strip() and child.exitcode:
        stderr = f"the probe's process ended with {child.exitcode}"
    return "error: " + (stderr.strip().splitlines() or ["no output"])[-1][:160]


PROBE_TIMEOUT = 3600.0  # seconds a probe may take


def memlimit(impls: list[str], backend: Backend, dtype: str, step: int, budget: int | None,
             build_dir: str = "build") -> list[dict[str, object]]:
    ballast, note = None, ""
    if backend.engine == "cuda":
        runnable = [name for name in impls if backend.engine in get_impl(name).engines]

        def warm() -> None:
            for name in runnable:
                _run_cuda(backend, name, min(step, 256), dtype, build_dir)

        free, ballast, note = device_free(backend, budget, warm)
    else:
        if budget is None:
            raise ValueError("memlimit on numpy needs --memory-budget (a cap on the host, e.g. 256MiB)")
        free = budget
    from tqdm import tqdm

    rows = []
    gpu = backend.tags()["gpu"]
    for name in tqdm(impls, desc=f"memlimit {backend.engine}", unit="impl", disable=None):  # a bar on a terminal
        impl = get_impl(name)
        n = predict_max_n(name, dtype, free, step)
        row = {"gpu": gpu, "engine": backend.engine, "impl": name, "label": impl.label,
               "dtype": dtype, "free_bytes": free, "step": step, "predicted_n": n,
               "predicted_bytes": needed_bytes(name, n, dtype) if n else 0, "message": note}
        if backend.engine not in impl.engines:
            row.update({"run_at_n": "", "run_above": "", "confirmed": False,
                        "message": f"{name} does not run on {backend.engine}"})
            rows.append(row)
            continue
        if backend.engine == "cuda":
            at, above = (_run_cuda(backend, name, x, dtype, build_dir) if x else "" for x in (n, n + step))
        else:
            at, above = (_run_capped(name, x, dtype, budget) if x else "" for x in (n, n + step))
        row.update({"run_at_n": at, "run_above": above, "confirmed": at == "ok" and above == "oom"})
        if backend.engine == "numpy" and not row["confirmed"]:
            row["message"] = "CPU stand-ins allocate host temporaries beyond the declared device memory"
        elif backend.engine == "cuda" and at == "oom":
            row["message"] = "; ".join(filter(None, [note, "out of memory at the predicted n: the declared extra "
                                                            "memory or the free memory was wrong"]))
        rows.append(row)
    del ballast
    if backend.engine == "cuda":  # the ballast's block goes back to the device, not to CuPy's pool of this process
        backend.free()
    return rows


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize in /proc/self/status")


def _probe(impl: str, n: int, dtype: str, budget: int) -> str:
    """In a child process: cap the address space at its current size + budget, then allocate and run."""
    chosen = get_impl(impl)
    warm = np.ones((1024, 1024), dtype=dtype)  # BLAS allocates its packing buffers on the first large call
    chosen(warm, warm, np.zeros((1024, 1024), dtype=dtype), engine="numpy")
    del warm
    cap = _vm_size() + budget
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        arrays = [np.full((n, n), 0.5, dtype=dtype) for _ in range(3)]
        chosen(*arrays, 1.0, 0.0, engine="numpy")  # beta = 0: NumPy's matmul writes C without a temporary
        return "ok"
    except MemoryError:
        return "oom"
