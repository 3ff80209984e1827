"""What the report reads: a run's folder (data/<device>/), its results and the model's files beside them.

Results: square.csv, rankk.csv, panel.csv, strategies.csv, memlimit.csv, verify.csv, verify_impls.csv,
accuracy.csv and system.json (strassenbench.results; any may be missing, and the report says so). The model:
the model_*.csv files `strassenbench model` writes into the same folder (strassenbench.model.files: the
workflow's model rules), each read as written; the report computes no model itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ..device import spec_key
from ..model.files import read_models
from ..results import ResultsError, check_no_links, folder_devices, read_results, read_system, timing_modes
from ..sweeps import SWEEPS

__all__ = ["RESULT_FILES", "RunData", "load_run", "load_report_inputs", "gpu_name", "device_of", "ModelGPU", "model_gpu", "model_frame"]

RESULT_FILES = [*(f"{s}.csv" for s in SWEEPS), "strategies.csv", "memlimit.csv", "verify.csv", "verify_impls.csv",
                "accuracy.csv"]


def _read(path: Path, kind: str) -> pd.DataFrame | None:
    """A result file of the run, checked (strassenbench.results; a broken one is refused), or None if absent."""
    return read_results(path, kind) if path.exists() else None


@dataclass(frozen=True)
class RunData:
    """A run's folder as the report and compare read it: its results, checked (None for a file that is not
    there; ``sweeps`` the three sweeps' rows, empty without any), system.json (``{}`` without it), and the model's
    files beside them (``models``: by name, None for each that is not there; empty where not asked for)."""

    sweeps: pd.DataFrame
    strategies: pd.DataFrame | None
    memlimit: pd.DataFrame | None
    verify: pd.DataFrame | None
    verify_impls: pd.DataFrame | None
    accuracy: pd.DataFrame | None
    system: dict
    models: dict[str, pd.DataFrame | None] = field(default_factory=dict)


def load_run(data: Path) -> RunData:
    """Every result file of a run's folder, checked; ResultsError if the folder holds none, or a symbolic link
    among its files (results.check_no_links)."""
    check_no_links(data)
    if not any((data / name).exists() for name in RESULT_FILES):
        raise ResultsError(f"{data}: no results ({', '.join(RESULT_FILES)})")
    sweeps = [f for f in (_read(data / f"{s}.csv", "bench") for s in SWEEPS) if f is not None]
    devices = folder_devices(data)
    if len(devices) > 1:
        listed = ", ".join(f"{name} ({where})" for name, where in devices.items())
        raise ResultsError(f"{data}: its results are of several devices ({listed}): one device per folder")
    modes = timing_modes(pd.concat(sweeps, ignore_index=True)) if sweeps else set()
    if len(modes) > 1:
        raise ResultsError(f"{data}: its sweeps were timed by different methods ({', '.join(sorted(modes))}), "
                           "which cannot be set against each other: measure them again with one --timing")
    return RunData(
        sweeps=pd.concat(sweeps, ignore_index=True) if sweeps else pd.DataFrame(),
        strategies=_read(data / "strategies.csv", "bench"),
        memlimit=_read(data / "memlimit.csv", "memlimit"),
        verify=_read(data / "verify.csv", "verify"),
        verify_impls=_read(data / "verify_impls.csv", "verify"),
        accuracy=_read(data / "accuracy.csv", "accuracy"),
        system=read_system(data / "system.json") or {},
    )


def load_report_inputs(data: Path) -> RunData:
    """What the report reads of a run's folder: its results (load_run) and, as ``models``, the model's files
    beside them (strassenbench.model.files.read_models: None for each that is not there), all checked."""
    return replace(load_run(data), models=read_models(data))


def model_frame(run: RunData, *names: str) -> pd.DataFrame:
    """The rows of the run's model files ``names`` (empty where none is there)."""
    frames = [run.models[name] for name in names if run.models.get(name) is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def gpu_name(system: dict, sweeps: pd.DataFrame) -> str:
    """The GPU a run measured: system.json's pynvml name, else the results' gpu column ('' if neither)."""
    name = (system.get("gpu") or {}).get("gpu")
    if not name and not sweeps.empty and "gpu" in sweeps:
        name = sweeps["gpu"].iloc[0]
    return str(name or "")


def device_of(run: RunData) -> str:
    """The device and engine the run measured on, for titles and tables: the GPU's name (cuda engine), else
    CPU stand-ins on the numpy engine."""
    gpu = (run.system.get("gpu") or {}).get("gpu")
    engine = run.system.get("engine") or ("cuda" if gpu else "numpy")
    return f"{gpu} ({engine} engine)" if gpu else f"CPU stand-ins ({engine} engine)"


@dataclass(frozen=True)
class ModelGPU:
    """The GPU the run's model files predict for (model_spec.csv: its last row), as the report names it."""

    name: str  # '' without model_spec.csv
    this_gpu: bool  # the GPU the run measured (a built-in spec its name holds, or the device's own attributes)
    peaks: dict[str, float] = field(default_factory=dict)  # TFLOPS, label -> value: drawn for this GPU only

    @property
    def title(self) -> str:
        if not self.name:
            return "no model (no model_spec.csv in the run's folder)"
        return f"{self.name} ({'this GPU' if self.this_gpu else 'the paper'}'s model)"


def model_gpu(run: RunData, cpu_run: bool) -> ModelGPU:
    """The run's model GPU from model_spec.csv (`strassenbench model spec`); this GPU's when the run measured a
    GPU and the spec is its own: a built-in spec whose key its name holds, or the queried device's."""
    spec = run.models.get("model_spec.csv")
    if spec is None or spec.empty:
        return ModelGPU("", False)
    row = spec.iloc[-1]
    measured = gpu_name(run.system, run.sweeps).lower()
    key = str(row["key"])
    this_gpu = not cpu_run and bool(measured) and (key == "device" or spec_key(measured, [key]) is not None)
    peaks = {"FP32 peak": row["tau_flop_float32"] / 1e12, "TF32 peak": row["tf32_flops"] / 1e12,
             "FP64 peak": row["tau_flop_float64"] / 1e12,
             "FP64 tensor peak": row.get("fp64_tensor_flops", float("nan")) / 1e12} if this_gpu else {}
    return ModelGPU(str(row["gpu"]), this_gpu, {k: float(v) for k, v in peaks.items() if v and v == v})
