"""Which backend a run uses, and what the visible GPU is: pynvml queries that never raise, and the hardware
figures of a device (``query_device``: SMs, cores, clocks, DRAM bandwidth, TF32 peak) that the model's GPU
spec (strassenbench.model.gpus) and a run's system.json are made from."""

from __future__ import annotations

import re

from .env import visible_devices
from .occupancy import ARCHS

__all__ = ["BACKENDS", "visible_gpus", "gpu_arch", "current_device", "resolve_backend", "slug", "spec_key", "hardware_figures",
           "query_device"]

BACKENDS = ("auto", "cuda", "numpy")
# FP32 and FP64 cores per SM by compute capability (CUDA C++ Programming Guide, "Arithmetic Instructions").
_CORES_PER_SM = {(7, 0): (64, 32), (8, 0): (64, 32), (8, 6): (128, 2), (8, 9): (128, 2), (9, 0): (128, 64)}
# Dense TF32 tensor-core flops per SM and clock (the architecture whitepapers: GA100 1024, GA10x and AD10x 256,
# GH100 2048 at its tensor boost clock).
_TF32_PER_SM_CLOCK = {(8, 0): 1024, (8, 6): 256, (8, 9): 256, (9, 0): 2048}
# Dense FP64 tensor-core flops per SM and clock (GA100 128: 19.5 TFLOPS on 108 SMs at 1,410 MHz; GH100 256: 67
# TFLOPS on 132 SMs at 1,980 MHz); the GA10x and AD10x GPUs have no FP64 tensor-core rate to speak of.
_FP64_TENSOR_PER_SM_CLOCK = {(8, 0): 128, (9, 0): 256}


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


def current_device() -> tuple[str, str]:
    """(name, sm_XY) of the CUDA device this process runs on, from CuPy's device properties (no NVML needed).
    RuntimeError without one."""
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
    except Exception as err:  # noqa: BLE001 - no CuPy, driver or device
        raise RuntimeError(f"no CUDA device to query: {str(err).splitlines()[0] if str(err) else type(err).__name__}") \
            from None
    name = props["name"].decode(errors="replace") if isinstance(props["name"], bytes) else str(props["name"])
    return name, f"sm_{int(props['major'])}{int(props['minor'])}"


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


def spec_key(name: str, keys) -> str | None:  # noqa: ANN001 - the built-in specs' keys
    """The first of ``keys`` (strassenbench.model.gpus.SPECS') that the GPU name ``name`` holds, in any case: H100 in
    'NVIDIA H100 80GB HBM3'; None if it holds none. The one rule from a GPU's name to its built-in spec."""
    return next((key for key in keys if key.lower() in name.lower()), None)


def slug(name: str) -> str:
    """A folder name for a device: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def hardware_figures(attrs: dict[str, int | float | str]) -> dict[str, object]:
    """A device's figures (the fields of strassenbench.model.gpus.GPUSpec) from its attributes (the keys
    ``query_device`` reads: name, cc_major, cc_minor, sm_count, bus_width_bits, max_sm_clock_mhz,
    max_mem_clock_mhz). DRAM bandwidth = 2 (double data rate) x memory clock x bus width / 8. ValueError for a
    compute capability outside the core table."""
    major, minor = int(attrs["cc_major"]), int(attrs["cc_minor"])
    if (major, minor) not in _CORES_PER_SM:
        raise ValueError(f"compute capability {major}.{minor} is not in the model's core table")
    fp32, fp64 = _CORES_PER_SM[(major, minor)]
    arch = f"sm_{major}{minor}"
    if arch not in ARCHS:
        arch = f"sm_{major}0"
    clock_hz = float(attrs["max_sm_clock_mhz"]) * 1e6
    return {
        "name": str(attrs["name"]), "arch": arch, "sm_count": int(attrs["sm_count"]), "fp32_cores_per_sm": fp32,
        "fp64_cores_per_sm": fp64, "boost_clock_hz": clock_hz,
        "dram_bandwidth": 2.0 * float(attrs["max_mem_clock_mhz"]) * 1e6 * int(attrs["bus_width_bits"]) / 8,
        "tf32_flops": _TF32_PER_SM_CLOCK.get((major, minor), 0) * int(attrs["sm_count"]) * clock_hz,
        "fp64_tensor_flops": _FP64_TENSOR_PER_SM_CLOCK.get((major, minor), 0) * int(attrs["sm_count"]) * clock_hz,
        "source": "live device query (CuPy device attributes, pynvml maximum clocks)",
    }


def query_device(index: int = 0) -> dict[str, object]:
    """The hardware figures (hardware_figures) of CUDA device ``index`` (after CUDA_VISIBLE_DEVICES), through
    CuPy and pynvml. RuntimeError without one, ValueError for a compute capability the table lacks."""
    try:
        import cupy
        import pynvml
    except ImportError as err:
        raise RuntimeError(f"--gpu device needs CuPy and pynvml: {err}") from None
    try:
        props = cupy.cuda.runtime.getDeviceProperties(index)
        pynvml.nvmlInit()
        # NVML ignores CUDA_VISIBLE_DEVICES: find the GPU CUDA calls ``index`` by its PCI bus id, as the telemetry does.
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(cupy.cuda.runtime.deviceGetPCIBusId(index))
        attrs = {
            "name": pynvml.nvmlDeviceGetName(handle),
            "cc_major": props["major"],
            "cc_minor": props["minor"],
            "sm_count": props["multiProcessorCount"],
            "bus_width_bits": props["memoryBusWidth"],
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "max_mem_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        }
        pynvml.nvmlShutdown()
    except Exception as err:  # noqa: BLE001 - any driver/runtime failure means "no usable device"
        raise RuntimeError(f"cannot query GPU {index}: {err}") from None
    return hardware_figures(attrs)
