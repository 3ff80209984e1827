"""Which backend a run uses. The only GPU-facing code here is a pynvml query, and it never raises."""

from __future__ import annotations

import re


__all__ = ["BACKENDS", "visible_gpus", "gpu_arch", "resolve_backend", "slug"]

BACKENDS = ("auto", "cuda", "numpy")


def visible_gpus() -> list[str]:
    """Names of the NVIDIA GPUs pynvml can see; empty without a driver or device."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [
                str(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)))
                for i in range(pynvml.nvmlDeviceGetCount())
            ]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no library, no driver, no device: all mean "no GPU"
        return []


def gpu_arch(index: int = 0) -> str | None:
    """sm_XY of GPU ``index`` from pynvml, or None without one."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(index))
            return f"sm_{major}{minor}"
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001
        return None


def resolve_backend(requested: str) -> tuple[str, str]:
    """(backend, reason). ``auto`` means cuda when a GPU is visible and the cuda engine is available."""
    if requested not in BACKENDS:
        raise ValueError(f"unknown backend '{requested}' (choose from {', '.join(BACKENDS)})")
    gpus = visible_gpus()
    if requested == "numpy":
        return "numpy", "backend numpy requested"
    if not gpus:
        if requested == "cuda":
            raise ValueError("backend cuda requested but no NVIDIA GPU is visible")
        return "numpy", "no NVIDIA GPU is visible"
    try:
        import cupy  # noqa: F401
    except ImportError:
        if requested == "cuda":
            raise ValueError("backend cuda requested but CuPy is not installed (pip install -e '.[gpu]')") from None
        return "numpy", f"GPU {gpus[0]} is visible but CuPy is not installed (pip install -e '.[gpu]')"
    return "cuda", f"GPU {gpus[0]}"


def slug(name: str) -> str:
    """A folder name for a device: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
