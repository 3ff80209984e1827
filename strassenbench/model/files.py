"""The model's tables as files: the name and columns of each file that `strassenbench model` writes into a
run's folder (data/<device>/model_*.csv), and their checked reader (strassenbench.results.read_results with
these kinds). The report reads its model curves and tables from these files and computes none itself; and the model's
reader of the build's resources.csv.

Data only: nothing here computes a prediction.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from ..readers import MAX_TABLE_BYTES, check_name, read_bytes
from ..results import Kind, read_results
from ..sweeps import SWEEPS

__all__ = ["ModelError", "RESOURCE_KEYS", "load_resources", "PREDICTIONS", "SPEEDUP", "BOUNDS", "ISSUE_BOUNDS",
           "OCCUPANCY", "SPEC", "WINNERS", "VALIDATE", "MODEL_FILES", "GPU_MODEL_FILES", "DEFAULT_MODEL",
           "read_model", "read_models"]


class ModelError(ValueError):
    """What the model cannot take: an implementation it has no formula for, a file that is not its input."""


RESOURCE_KEYS = ("kernel", "arch", "strategy", "dtype", "W_A", "W_B", "W_C", "registers", "blocks_per_sm")


def load_resources(path: str | Path, required: bool = False) -> pd.DataFrame | None:
    """``build/resources.csv`` from the kernel build; None when it does not exist and is not ``required`` (a
    path the user named is). A file that is not a resources table is refused (ModelError naming it)."""
    path = check_name(path, "--resources", ModelError)  # a name the system takes, before it is asked
    if not path.exists():
        if required:
            raise ModelError(f"--resources {path}: no such file (`strassenbench build` writes build/resources.csv)")
        return None
    # a regular file (never a FIFO or a device) of at most readers.MAX_TABLE_BYTES
    data = read_bytes(path, limit=MAX_TABLE_BYTES, what="the build's resources.csv (--resources)", error=ModelError)
    if not data.strip() or b"\0" in data:
        raise ModelError(f"--resources {path} is {'empty' if not data.strip() else 'binary'}, not a resources.csv")
    try:
        frame = pd.read_csv(io.BytesIO(data))
    except (ValueError, UnicodeDecodeError) as err:
        raise ModelError(f"--resources {path} is not a CSV ({str(err).splitlines()[0][:80]})") from None
    missing = [c for c in RESOURCE_KEYS if c not in frame.columns]
    if missing:
        raise ModelError(f"--resources {path} is not the build's resources.csv (no column {missing[0]!r})")
    for column in ("W_A", "W_B", "W_C", "registers", "blocks_per_sm"):  # what the model divides by and ranks with
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = ~((values >= 1) & (values % 1 == 0))
        if bad.any():
            line = int(bad.to_numpy().argmax()) + 2
            raise ModelError(f"--resources {path} line {line}: column {column!r} is "
                             f"{str(frame[column].iloc[line - 2])[:20]!r}, not a positive integer (no build writes it)")
    return frame


# The model of a prediction whose file has no ``model`` column (strassenbench.model.terms.MODELS: each one's terms)
DEFAULT_MODEL = "issue"

PREDICTIONS = Kind(  # `model predict`: one row per implementation, size (and strategy)
    "model predictions", ("gpu", "arch", "source", "sweep", "x", "m", "n", "k", "dtype", "impl", "strategy", "time_s",
                          "tflops"),
    ("x", "m", "n", "k"), ("time_s", "tflops", "t_flop_s", "t_gmop_s", "t_smop_s", "t_issue_s", "t_dram_s", "t_l2_s",
                           "t_stream_s", "t_latency_s"),
    ("gpu", "arch", "source", "sweep", "dtype", "impl", "strategy", "limiter", "reference_model", "occupancy",
     "model", "scheme"),
    times=("time_s", "t_flop_s", "t_gmop_s", "t_smop_s", "t_issue_s", "t_dram_s", "t_l2_s", "t_stream_s",
           "t_latency_s"))
SPEEDUP = Kind(  # `model speedup`: where each implementation of predictions overtakes the GEMM, per sweep
    "model speedup", ("gpu", "source", "sweep", "dtype", "impl", "baseline", "first", "stable", "max_speedup", "at",
                      "scheme"),
    ("at",), ("first", "stable", "max_speedup"), ("gpu", "source", "sweep", "dtype", "impl", "baseline", "scheme"),
    later=("scheme",))
BOUNDS = Kind(  # `model bounds`: the blocking-parameter bounds
    "model bounds", ("bound", "scope", "value", "unit", "holds", "meaning", "source"), (), ("value",),
    ("bound", "scope", "unit", "holds", "meaning", "source"))
ISSUE_BOUNDS = Kind(  # `model issue-bounds`: speedup over the GEMM by the paper's model and by issue slots
    "model issue bounds", ("gpu", "arch", "impl", "n", "paper_model", "issue_slots", "with_issue_slots", "source"),
    ("n",), ("paper_model", "issue_slots", "with_issue_slots"), ("gpu", "arch", "impl", "source"))
OCCUPANCY = Kind(  # `model occupancy`: active blocks per SM of the paper's footnote kernels, per architecture
    "model occupancy", ("strategy", "kernel", "W_A", "W_B", "W_C", "paper_v100", "arch", "blocks_per_sm",
                        "occupancy"),
    ("W_A", "W_B", "W_C", "blocks_per_sm"), (), ("strategy", "kernel", "paper_v100", "arch", "occupancy"))
SPEC = Kind(  # `model spec`: the GPU parameters of the model (the paper's tab:notation values)
    "model spec", ("key", "gpu", "arch", "tau_flop_float32", "tau_flop_float64", "tau_gmop", "tau_smop", "tf32_flops",
                   "fp64_tensor_flops", "source", "tau_l2"),
    (), ("tau_flop_float32", "tau_flop_float64", "tau_gmop", "tau_smop", "tf32_flops", "fp64_tensor_flops", "tau_l2"),
    ("key", "gpu", "arch", "source"), later=("tau_l2",),
    times=("tau_flop_float32", "tau_flop_float64", "tau_gmop", "tau_smop", "tau_l2"))
WINNERS = Kind(  # `model winners`: pick's first per size and precision mode, per GPU model
    "model winners", ("gpu", "key", "arch", "source", "sweep", "x", "m", "n", "k", "dtype", "precision", "impl",
                      "time_s", "cublas_s", "speedup_vs_cublas", "scheme"),
    ("x", "m", "n", "k"), ("time_s", "cublas_s", "speedup_vs_cublas"),
    ("gpu", "key", "arch", "source", "sweep", "dtype", "precision", "impl", "strategy", "limiter", "scheme"),
    later=("scheme",), times=("time_s", "cublas_s"))

VALIDATE = Kind(  # `model validate`: the model against a GPU's measured sweeps (strassenbench.model.validate)
    "model validation", ("gpu", "source", "sweep", "impl", "dtype", "model", "scheme", "points", "median_ratio",
                         "min_ratio", "max_ratio", "speedup_error"),
    ("points",), ("median_ratio", "min_ratio", "max_ratio", "speedup_error"),
    ("gpu", "source", "sweep", "impl", "dtype", "model", "scheme"))

# Every model file of a run's folder, by name: the three sweeps' predictions (best strategy per point), the
# strategies figure's (Huge and Small), the crossovers read from the sweeps', bounds, issue bounds, occupancy
# the GPU spec, and pick's winners per size for every GPU model.
MODEL_FILES: dict[str, Kind] = {
    **{f"model_{sweep}.csv": PREDICTIONS for sweep in SWEEPS},
    "model_strategies.csv": PREDICTIONS,
    "model_speedup.csv": SPEEDUP,
    "model_bounds.csv": BOUNDS,
    "model_issue_bounds.csv": ISSUE_BOUNDS,
    "model_occupancy.csv": OCCUPANCY,
    "model_spec.csv": SPEC,
    "model_winners.csv": WINNERS,
}
# The model files of a GPU run only: the model against the run's measured sweeps.
GPU_MODEL_FILES: dict[str, Kind] = {"model_validate.csv": VALIDATE}


def read_model(path: str | Path, kind: Kind) -> pd.DataFrame:
    """A model file, checked (results.read_results with its kind): ResultsError naming the file and line."""
    return read_results(path, kind)


def read_models(folder: str | Path) -> dict[str, pd.DataFrame | None]:
    """Every model file of a run's folder (MODEL_FILES, GPU_MODEL_FILES), checked; None for each one that is not
    there."""
    folder = Path(folder)
    return {name: read_model(folder / name, kind) if (folder / name).exists() else None
            for name, kind in {**MODEL_FILES, **GPU_MODEL_FILES}.items()}
