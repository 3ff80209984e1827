"""What was measured on: pynvml for the GPU (name, UUID, driver, clocks, temperature, power, throttle
reasons), CuPy for the CUDA runtime and cuBLAS versions, and the host. Every query degrades to an empty
value instead of raising, so a missing field never loses a measurement."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path

__all__ = ["Device", "cuda_pci_bus_id", "host_description", "git_commit", "source_hash", "source_folders",
           "THROTTLE_MASK"]

# Throttle reasons that slow a measurement down (nvmlClocksEventReason*): software power cap, hardware
# slowdown, software/hardware thermal slowdown, power brake. Idle and application-clock settings are not.
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def source_folders() -> dict[str, Path]:
    """The sources a measurement runs, by their name in the project: the package, the CUDA kernels (as
    strassenbench.fused.instances finds them) and the workspace-based reference."""
    from ..fused.instances import kernels_dir
    from ..reference import strassen_ref

    package = Path(__file__).resolve().parents[1]
    return {"strassenbench": package, "kernels": kernels_dir().resolve(),
            "reference": Path(strassen_ref.__file__).resolve().parent}


@lru_cache(maxsize=None)
def source_hash() -> str:
    """The first 12 hex digits of a SHA-256 over every source file that runs (source_folders: each file's path
    below its folder and its bytes, in a fixed order; compiled caches left out): the same code gives the same
    hash whatever checkout, copy or commit it sits in (the ``source`` column)."""
    digest = hashlib.sha256()
    for name, folder in sorted(source_folders().items()):
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                           and p.suffix not in (".pyc", ".so", ".o")):
            digest.update(f"{name}/{path.relative_to(folder).as_posix()}\0".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:12]


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


@lru_cache(maxsize=None)
def git_commit() -> str:
    """The commit of the checkout the package runs from (12 hex digits), with ``+dirty`` where a source that
    runs (source_folders) differs from it, or ``unknown`` outside a git checkout."""
    folders = source_folders()
    root = folders["strassenbench"].parent
    head = (_git(root, "rev-parse", "--short=12", "HEAD") or "").strip()
    if not head:
        return "unknown"
    inside = [str(f) for f in folders.values() if f == root or root in f.parents]
    if len(inside) < len(folders):  # a source from elsewhere ($STRASSENBENCH_KERNELS): not the commit's
        return f"{head}+dirty"
    status = _git(root, "status", "--porcelain", "--untracked-files=all", "--", *inside)
    return f"{head}+dirty" if status is None or any(
        "__pycache__" not in line and not line.endswith((".pyc", ".so")) for line in status.splitlines()) else head


def host_description() -> dict[str, object]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy as np

    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "os": platform.platform()}


def cuda_pci_bus_id(device: int = 0) -> str:
    """The PCI bus id of CUDA device ``device`` as CUDA numbers it (after CUDA_VISIBLE_DEVICES), e.g.
    '0000:3B:00.0'."""
    import cupy

    return cupy.cuda.runtime.deviceGetPCIBusId(device)


class Device:
    """pynvml handle of a GPU; ``available`` is False without a driver or device.

    NVML numbers GPUs by itself and ignores CUDA_VISIBLE_DEVICES, so under SLURM its index 0 is the node's
    first GPU, not the one this job was given. Pass ``pci_bus_id`` (the CUDA device's, cuda_pci_bus_id) to
    describe and watch the GPU that runs the work; ``index`` is NVML's own numbering."""

    def __init__(self, index: int = 0, pci_bus_id: str | None = None) -> None:
        self.available = False
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            if pci_bus_id:
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
            else:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self.available = True
        except Exception:  # noqa: BLE001 - no library, driver or device
            self.nvml = None
        self._reasons = self._reasons_call()

    def _reasons_call(self) -> str | None:
        """The NVML call for the throttle (clocks event) reasons, found once: the current name, or the one
        drivers before r535 have."""
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            if self._get(name, default=None) not in (None, ""):
                return name
        return None

    def _get(self, name: str, *args, default=""):  # noqa: ANN001, ANN002, ANN202
        if not self.available:
            return default
        try:
            value = getattr(self.nvml, name)(self.handle, *args)
            return value.decode() if isinstance(value, bytes) else value
        except Exception:  # noqa: BLE001
            return default

    def throttle_reasons(self) -> int:
        """One NVML call (the one _reasons_call found); 0 where neither answers."""
        return int(self._get(self._reasons, default=0) or 0) if self._reasons else 0

    def throttled(self) -> bool:
        return bool(self.throttle_reasons() & THROTTLE_MASK)

    def probe(self) -> tuple[float | None, int, float | None]:
        """(SM clock in MHz now, the throttle reasons' bit mask, power in W or None): read after every timed
        sample (strassenbench.bench.timers.sample)."""
        if not self.available:
            return None, 0, None
        clock = self._get("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM, default=None)
        power = self._get("nvmlDeviceGetPowerUsage", default=None)
        return ((float(clock) if isinstance(clock, int) else None), self.throttle_reasons(),
                (power / 1000 if isinstance(power, int) else None))

    def max_sm_clock_mhz(self) -> float | None:
        """The SM clock the throttle threshold is a fraction of (nvbench: the device's clock rate)."""
        if not self.available:
            return None
        clock = self._get("nvmlDeviceGetMaxClockInfo", self.nvml.NVML_CLOCK_SM, default=None)
        return float(clock) if isinstance(clock, int) and clock > 0 else None

    def snapshot(self) -> dict[str, object]:
        """Clocks (MHz), temperature (C), power (W) and throttle reasons now."""
        if not self.available:
            return {}
        n = self.nvml
        power = self._get("nvmlDeviceGetPowerUsage", default=None)
        return {
            "sm_clock_mhz": self._get("nvmlDeviceGetClockInfo", n.NVML_CLOCK_SM),
            "mem_clock_mhz": self._get("nvmlDeviceGetClockInfo", n.NVML_CLOCK_MEM),
            "temperature_c": self._get("nvmlDeviceGetTemperature", n.NVML_TEMPERATURE_GPU),
            "power_w": round(power / 1000, 1) if isinstance(power, int) else "",
            "throttle_reasons": hex(self.throttle_reasons()),
        }

    def free_bytes(self) -> int | None:
        info = self._get("nvmlDeviceGetMemoryInfo", default=None)
        return int(info.free) if info not in (None, "") else None

    def total_bytes(self) -> int | None:
        info = self._get("nvmlDeviceGetMemoryInfo", default=None)
        return int(info.total) if info not in (None, "") else None

    def process_bytes(self) -> int | None:
        """GPU memory pynvml attributes to this process (None when it cannot tell)."""
        procs = self._get("nvmlDeviceGetComputeRunningProcesses", default=None)
        if not procs:
            return None
        mine = [p.usedGpuMemory for p in procs if p.pid == os.getpid() and p.usedGpuMemory is not None]
        return int(sum(mine)) if mine else None

    def describe(self) -> dict[str, object]:
        """The system description of this GPU (written beside the CSVs as system.json)."""
        if not self.available:
            return {}
        n = self.nvml
        info = {
            "gpu": self._get("nvmlDeviceGetName"),
            "uuid": self._get("nvmlDeviceGetUUID"),
            "driver": self._get_system("nvmlSystemGetDriverVersion"),
            "cuda_driver_version": self._get_system("nvmlSystemGetCudaDriverVersion_v2"),
            "memory_total_bytes": self.total_bytes(),
            "max_sm_clock_mhz": self._get("nvmlDeviceGetMaxClockInfo", n.NVML_CLOCK_SM),
            "max_mem_clock_mhz": self._get("nvmlDeviceGetMaxClockInfo", n.NVML_CLOCK_MEM),
            "power_limit_w": (lambda p: round(p / 1000, 1) if isinstance(p, int) else "")(
                self._get("nvmlDeviceGetEnforcedPowerLimit", default=None)),
            "persistence_mode": self._get("nvmlDeviceGetPersistenceMode"),
            "compute_mode": self._get("nvmlDeviceGetComputeMode"),
            "pci_bus_id": getattr(self._get("nvmlDeviceGetPciInfo", default=None), "busId", ""),
            "ecc_mode": self._get("nvmlDeviceGetCurrentEccMode", default=""),
            "mig_mode": self._get("nvmlDeviceGetMigMode", default=""),
        }
        if isinstance(info["pci_bus_id"], bytes):
            info["pci_bus_id"] = info["pci_bus_id"].decode()
        info.update(cuda_versions())
        return info

    def _get_system(self, name: str) -> object:
        try:
            value = getattr(self.nvml, name)()
            return value.decode() if isinstance(value, bytes) else value
        except Exception:  # noqa: BLE001
            return ""


def cuda_versions() -> dict[str, object]:
    """CUDA runtime and cuBLAS versions as CuPy sees them (empty without CuPy)."""
    try:
        import cupy
        from cupy_backends.cuda.libs import cublas

        return {"cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
                "cublas": cublas.getVersion(cupy.cuda.device.get_cublas_handle()), "cupy": cupy.__version__}
    except Exception:  # noqa: BLE001
        return {}
