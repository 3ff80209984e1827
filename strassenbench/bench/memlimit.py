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

import contextlib
import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..impls import get_impl
from ..results import MEMLIMIT_COLUMNS
from .backends import Backend, is_oom

__all__ = ["parse_bytes", "predict_max_n", "memlimit", "device_free", "COLUMNS"]

COLUMNS = MEMLIMIT_COLUMNS  # strassenbench.results: one schema for every reader
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_bytes(text: str) -> int:
    """'268435456', '256MiB', '16GB' -> bytes."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)  # ASCII digits: float() takes others
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
# stays small and the same from run to run, and every block of 128 KiB or more mapped afresh (glibc's
# threshold would otherwise rise to the largest block freed, and the warm-up's freed arrays, still mapped,
# would hold later ones outside the cap).
_PROBE_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "131072", "OPENBLAS_NUM_THREADS": "1",
              "OMP_NUM_THREADS": "1"}
PROBE_TIMEOUT = 3600.0  # seconds a probe may take


@lru_cache(maxsize=1)
def _prober() -> subprocess.Popen:
    """A process started once with _PROBE_ENV and this module imported (serve_probes): it forks the probes'
    processes (each its own address space to cap), so that a probe costs no second of imports, and an
    implementation's two probes one warm-up. It ends when this process closes its input (exits)."""
    # -P: the package this process runs, never one in the working folder
    cmd = [sys.executable, "-P", "-c", f"from {__name__} import serve_probes; serve_probes()"]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                            env=dict(os.environ, **_PROBE_ENV), start_new_session=True)


def _forked(errors: str, work: Callable[[], str]) -> tuple[str, int]:
    """(``work()``'s answer, its exit status) from a forked child whose stdout and stderr go to the file
    ``errors`` (appended: a probe's whole story), "" as the answer of one that died or raised."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing of it may reach the reply channel
        os.close(read)
        fd = os.open(errors, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        code = 0
        try:
            os.write(write, work().encode())
        except BaseException:  # noqa: BLE001 - its last line is the probe's error
            traceback.print_exc()
            code = 1
        sys.stderr.flush()
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        status = answer.read().decode(errors="replace")
    _, wait = os.waitpid(pid, 0)
    return status, os.waitstatus_to_exitcode(wait)


def serve_probes() -> None:
    """_prober's loop: for each request line (JSON [impl, sizes, dtype, budget, stderr file]), a forked child
    warms ``impl`` up (_warm) and forks a grandchild per size for _capped_run, each as a fresh process with
    the warm one's state would be; one reply line (JSON: per size [its answer, its exit status])."""
    for line in sys.stdin:
        impl, sizes, dtype, budget, errors = json.loads(line)

        def warm_then_probe() -> str:
            _warm(impl, dtype)
            return json.dumps([_forked(errors, lambda n=n: _capped_run(impl, n, dtype, budget)) for n in sizes])

        answer, code = _forked(errors, warm_then_probe)
        print(answer if answer else json.dumps([["", code]] * len(sizes)), flush=True)


def _run_capped(impl: str, sizes: list[int], dtype: str, budget: int) -> list[str]:
    """_capped_run at each of ``sizes`` after one _warm (forked by _prober): ok, oom, or the error it died of."""
    prober = _prober()
    with tempfile.TemporaryDirectory(prefix="strassenbench-memlimit-") as folder:
        errors = os.path.join(folder, "stderr")
        try:
            prober.stdin.write(json.dumps([impl, sizes, dtype, budget, errors]) + "\n")
            prober.stdin.flush()
            ready, _, _ = select.select([prober.stdout], [], [], PROBE_TIMEOUT)
        except (BrokenPipeError, ValueError):  # it has died (or its pipe was closed)
            ready = [prober.stdout]
        reply = prober.stdout.readline() if ready and not prober.stdout.closed else ""
        stderr = Path(errors).read_text(errors="replace") if os.path.exists(errors) else ""
    if not reply:  # timed out, or the prober died: a new one for the next probe
        with contextlib.suppress(ProcessLookupError):
            os.killpg(prober.pid, signal.SIGKILL)
        prober.wait()
        _prober.cache_clear()
        return ["error: " + ("timed out" if not ready else "the probe's server ended")] * len(sizes)
    return [_verdict(status, code, stderr) for status, code in json.loads(reply)]


def _verdict(status: str, code: int, stderr: str) -> str:
    if status in ("ok", "oom"):
        return status
    if "Memory allocation" in stderr or "MemoryError" in stderr:  # OpenBLAS's own buffers
        return "oom"
    if not stderr.strip() and code:
        stderr = f"the probe's process ended with {code}"
    return "error: " + (stderr.strip().splitlines() or ["no output"])[-1][:160]


def memlimit(impls: list[str], backend: Backend, dtype: str, step: int, budget: int | None,
             build_dir: str = "build") -> list[dict[str, object]]:
    ballast, note = None, ""
    if backend.engine == "cuda":
        runnable = [name for name in impls
                    if backend.engine in get_impl(name).engines and dtype in get_impl(name).dtypes]

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
        skip = (f"{name} does not run on {backend.engine}" if backend.engine not in impl.engines else
                f"{name} computes {', '.join(impl.dtypes)}, not {dtype}" if dtype not in impl.dtypes else "")
        if skip:  # said in its row, never run into an error
            row.update({"run_at_n": "", "run_above": "", "confirmed": False, "message": skip})
            rows.append(row)
            continue
        if backend.engine == "cuda":
            at, above = (_run_cuda(backend, name, x, dtype, build_dir) if x else "" for x in (n, n + step))
        else:
            at, above = _run_capped(name, [n, n + step], dtype, budget) if n else ("", "")
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


def _warm(impl: str, dtype: str) -> None:
    """A probe's start: BLAS allocates its packing buffers on the first large call."""
    warm = np.ones((1024, 1024), dtype=dtype)
    get_impl(impl)(warm, warm, np.zeros((1024, 1024), dtype=dtype), engine="numpy")


def _capped_run(impl: str, n: int, dtype: str, budget: int) -> str:
    """In a child process after _warm: cap the address space at its current size + budget, then allocate and
    run."""
    cap = _vm_size() + budget
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        arrays = [np.full((n, n), 0.5, dtype=dtype) for _ in range(3)]
        get_impl(impl)(*arrays, 1.0, 0.0, engine="numpy")  # beta = 0: NumPy's matmul writes C without a temporary
        return "ok"
    except MemoryError:
        return "oom"
