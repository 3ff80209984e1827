"""Which backend a run uses. The only GPU-facing code here is a pynvml query, and it never raises."""

from __future__ import annotations

import re

from .env import visible_devices

__all__ = ["BACKENDS", "visible_gpus", "gpu_arch", "resolve_backend", "slug"]

BACKENDS = ("auto", "cuda", "numpy")


def _visible_handles(pynvml) -> list:  # noqa: ANN001
    """NVML handles of the GPUs CUDA_VISIBLE_DEVICES leaves visible, in its order (NVML itself ignores it):
    a UUID entry (GPU-...) by UUID, an integer by NVML's index (NVML numbers GPUs in PCI bus order; CUDA
    agrees under CUDA_DEVICE_ORDER=PCI_BUS_ID, as SLURM's allocations are numbered). Unset: every GPU."""
    visible = visible_devices()
    if visible is None:
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    handles = []
    for entry in (e.strip() for e in visible.split(",")):
        if not entry:
            break
        if entry.isdigit():
            if int(entry) >= pynvml.nvmlDeviceGetCount():
                break  # CUDA stops at the first invalid entry
            handles.append(pynvml.nvmlDeviceGetHandleByIndex(int(entry)))
        else:
            handles.append(pynvml.nvmlDeviceGetHandleByUUID(entry))
    return handles


def visible_gpus() -> list[str]:
    """Names of the NVIDIA GPUs this process may use (CUDA_VISIBLE_DEVICES honoured); empty without a driver
    or device."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            names = [pynvml.nvmlDeviceGetName(h) for h in _visible_handles(pynvml)]
            return [n.decode() if isinstance(n, bytes) else str(n) for n in names]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no library, driver or device: all mean "no GPU"
        return []


def gpu_arch(index: int = 0) -> str | None:
    """sm_XY of visible GPU ``index`` (CUDA_VISIBLE_DEVICES honoured) from pynvml, or None without one."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(_visible_handles(pynvml)[index])
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
