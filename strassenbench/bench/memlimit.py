"""`strassenbench memlimit`: the largest square n each implementation can run (the paper's "36,000 vs 22,500
on a 16 GB V100" experiment).

Predicted from the declared extra memory: the largest n (a multiple of ``step``) with
3 n^2 sizeof(T) + extra(n) <= free, where free is what pynvml reports (cuda) or a memory budget (numpy).
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
import subprocess
import sys

import numpy as np

from ..impls import get_impl
from ..results import MEMLIMIT_COLUMNS
from .backends import Backend, is_oom

__all__ = ["parse_bytes", "predict_max_n", "memlimit", "COLUMNS"]

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


def _run_cuda(backend: Backend, impl: str, n: int, dtype: str, build_dir: str) -> str:  # pragma: no cover - GPU
    xp = backend.xp
    chosen = get_impl(impl)
    arrays = []
    try:
        arrays = [xp.full((n, n), 0.5, dtype=dtype) for _ in range(3)]
        options = {"build_dir": build_dir} if chosen.kind in ("fused", "hybrid") else {}
        chosen(*arrays, 1.0, 1.0, engine="cuda", **options)
        backend.synchronize()
        return "ok"
    except Exception as err:  # noqa: BLE001 - an allocation failure of any layer is "oom"; others propagate
        if is_oom(err):
            return "oom"
        raise
    finally:
        del arrays
        backend.free()


def _run_capped(impl: str, n: int, dtype: str, budget: int) -> str:
    cmd = [sys.executable, "-m", "strassenbench.bench.memlimit", impl, str(n), dtype, str(budget)]
    env = dict(os.environ, MALLOC_ARENA_MAX="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=3600)
    status = result.stdout.strip().splitlines()[-1:] or [""]
    if status[0] in ("ok", "oom"):
        return status[0]
    if "Memory allocation" in result.stderr or "MemoryError" in result.stderr:  # OpenBLAS's own buffers
        return "oom"
    return "error: " + (result.stderr.strip().splitlines() or ["no output"])[-1][:160]


def memlimit(impls: list[str], backend: Backend, dtype: str, step: int, budget: int | None,
             build_dir: str = "build") -> list[dict[str, object]]:
    device = backend.device()
    ballast = None
    if backend.engine == "cuda":  # pragma: no cover - GPU
        backend.free()
        available = device.free_bytes()
        if not available:
            raise ValueError("pynvml reports no free memory for this GPU; pass --memory-budget")
        free = budget or available
        if budget and budget < available:  # hold the rest so that the device really has only the budget free,
            # less 64 MiB left for what the runs allocate outside CuPy's pool (cuBLAS workspace, module load)
            ballast = backend.xp.empty(available - budget - (64 << 20), dtype=backend.xp.uint8)
    else:
        if budget is None:
            raise ValueError("memlimit on numpy needs --memory-budget (a cap on the host, e.g. 256MiB)")
        free = budget
    rows = []
    gpu = backend.tags()["gpu"]
    for name in impls:
        impl = get_impl(name)
        n = predict_max_n(name, dtype, free, step)
        row = {"gpu": gpu, "engine": backend.engine, "impl": name, "label": impl.label,
               "dtype": dtype, "free_bytes": free, "step": step, "predicted_n": n,
               "predicted_bytes": needed_bytes(name, n, dtype) if n else 0, "message": ""}
        if backend.engine not in impl.engines:
            row.update({"run_at_n": "", "run_above": "", "confirmed": False,
                        "message": f"{name} does not run on {backend.engine}"})
            rows.append(row)
            continue
        if backend.engine == "cuda":  # pragma: no cover - GPU
            at, above = (_run_cuda(backend, name, x, dtype, build_dir) if x else "" for x in (n, n + step))
        else:
            at, above = (_run_capped(name, x, dtype, budget) if x else "" for x in (n, n + step))
        row.update({"run_at_n": at, "run_above": above, "confirmed": at == "ok" and above == "oom"})
        if backend.engine == "numpy" and not row["confirmed"]:
            row["message"] = "CPU stand-ins allocate host temporaries beyond the declared device memory"
        rows.append(row)
    del ballast
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


if __name__ == "__main__":
    print(_probe(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
