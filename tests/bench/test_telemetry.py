"""Which GPU the telemetry reads: NVML ignores CUDA_VISIBLE_DEVICES, so the project maps CUDA's device to
NVML by PCI bus id (Device) and honours CUDA_VISIBLE_DEVICES when naming the visible GPUs. Checked with a
fake pynvml module whose functions take and give fake handles: no GPU needed."""

from __future__ import annotations

import sys
import types

import pytest

from strassenbench.bench.telemetry import Device
from strassenbench.device import gpu_arch, visible_gpus

# A node with three GPUs of two models, as NVML numbers them (PCI bus order).
GPUS = [
    {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-aaaa", "bus": "00000000:07:00.0", "cc": (8, 0), "clock": 1410},
    {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-bbbb", "bus": "00000000:3B:00.0", "cc": (9, 0), "clock": 1980},
    {"name": "NVIDIA RTX A6000", "uuid": "GPU-cccc", "bus": "00000000:AF:00.0", "cc": (8, 6), "clock": 1800},
]


def _bus(text: str) -> str:
    """NVML accepts a 4- or 8-digit PCI domain; compare on the rest."""
    return text.upper().split(":", 1)[1]


@pytest.fixture()
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM, nvml.NVML_TEMPERATURE_GPU = 0, 1, 0
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetCount = lambda: len(GPUS)
    nvml.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    nvml.nvmlDeviceGetHandleByUUID = lambda u: ("handle", next(i for i, g in enumerate(GPUS) if g["uuid"] == u))
    nvml.nvmlDeviceGetHandleByPciBusId = lambda b: (
        "handle", next(i for i, g in enumerate(GPUS) if _bus(g["bus"]) == _bus(b)))
    nvml.nvmlDeviceGetName = lambda h: GPUS[h[1]]["name"].encode()
    nvml.nvmlDeviceGetCudaComputeCapability = lambda h: GPUS[h[1]]["cc"]
    nvml.nvmlDeviceGetClockInfo = lambda h, kind: GPUS[h[1]]["clock"] if kind == 0 else 1593
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return nvml


def test_device_by_pci_bus_id_reads_the_gpu_cuda_runs_on(fake_nvml: types.ModuleType) -> None:
    """Under CUDA_VISIBLE_DEVICES=1 CUDA's device 0 is NVML's GPU 1: by bus id (CUDA's 4-digit domain) the
    telemetry reads that GPU, where NVML's index 0 would read another model's clock."""
    mine = Device(pci_bus_id="0000:3B:00.0")
    assert mine.available and mine.snapshot()["sm_clock_mhz"] == 1980
    assert Device(0).snapshot()["sm_clock_mhz"] == 1410  # what reading NVML's index 0 would have reported


@pytest.mark.parametrize(("visible", "names"), [
    (None, [g["name"] for g in GPUS]),
    ("2", ["NVIDIA RTX A6000"]),
    ("1,0", ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"]),
    ("GPU-cccc", ["NVIDIA RTX A6000"]),
    ("0,7,1", ["NVIDIA A100-SXM4-80GB"]),  # CUDA stops at the first invalid entry
    ("", []),
])
def test_visible_gpus_honour_cuda_visible_devices(visible: str | None, names: list[str], fake_nvml,  # noqa: ANN001
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert visible_gpus() == names


def test_gpu_arch_is_the_visible_gpus(fake_nvml, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert gpu_arch() == "sm_86"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_arch() is None
