"""The model's tables beyond the curves, each written to a file by `strassenbench model` for the report to read:
the GPU parameters (tab:notation), the paper's occupancy footnote beside the build's, the issue-slot bounds
per GPU model, and the crossovers of a set of predictions. Every number here is a prediction."""

from __future__ import annotations

import pandas as pd

from ..occupancy import ARCHS
from ..options import scheme_or_sequential
from ..results import bad_times
from ..strategies import STRATEGIES
from .files import ModelError
from .gpus import SPECS, get_gpu
from .perf import active_blocks, impl_time
from .predict import crossover

__all__ = ["spec_rows", "occupancy_rows", "issue_bound_rows", "speedup_rows", "OCCUPANCY_KERNELS",
           "ISSUE_BOUND_IMPLS"]


def spec_rows(keys: list[str]) -> pd.DataFrame:
    """One row per GPU (a built-in key, or ``device``; each once): the model's rates in units per second."""
    rows = []
    for key in dict.fromkeys(keys):
        spec = get_gpu(key)
        rows.append({"key": key, "gpu": spec.name, "arch": spec.arch, "tau_flop_float32": spec.tau_flop("float32"),
                     "tau_flop_float64": spec.tau_flop("float64"), "tau_gmop": spec.tau_gmop,
                     "tau_smop": spec.tau_smop, "tf32_flops": spec.tf32_flops,
                     "fp64_tensor_flops": spec.fp64_tensor_flops, "source": spec.source, "tau_l2": spec.tau_l2})
    return pd.DataFrame(rows)


# The paper's footnote to #blocks (Sec. s:perf_predict): active blocks per SM on a V100 for these kernels.
OCCUPANCY_KERNELS = (("Small", "GEMM", (1, 1, 1), "24"), ("Small", "1-level Var#0", (2, 2, 2), "20"),
                     ("Small", "2-level Var#0", (4, 4, 4), "18"), ("Huge", "GEMM", (1, 1, 1), "2"),
                     ("Huge", "1-level Var#0", (2, 2, 2), "2"), ("Huge", "2-level Var#0", (4, 4, 4), "2"))


def occupancy_rows(resources: pd.DataFrame | None) -> pd.DataFrame:
    """The footnote's kernels on sm_70, sm_80 and sm_90 (float32): active blocks per SM from the build's
    resources.csv (ptxas's registers) where that architecture was built, else from the paper's register
    formula, Eq. (constrain_reg); the ``occupancy`` column says which."""
    rows = []
    for strategy, kernel, w, paper in OCCUPANCY_KERNELS:
        for arch in ARCHS:
            spec = next(spec for spec in SPECS.values() if spec.arch == arch)
            blocks, source = active_blocks(spec, STRATEGIES[strategy], w, "float32", resources)
            rows.append({"strategy": strategy, "kernel": kernel, "W_A": w[0], "W_B": w[1], "W_C": w[2],
                         "paper_v100": paper, "arch": arch, "blocks_per_sm": blocks, "occupancy": source})
    return pd.DataFrame(rows)


ISSUE_BOUND_IMPLS = ("strassen1", "strassen2-direct", "strassen2-hybrid")


def issue_bound_rows(resources: pd.DataFrame | None, n: int = 20480) -> pd.DataFrame:
    """Per built-in GPU model, each Strassen implementation's speedup over our GEMM at m = k = n (Huge,
    float32): by the paper's model alone (T_flop, T_gmop, T_smop) and by issue slots alone (T_issue,
    strassenbench.model.issue), the main loops' instructions from ``resources`` where the build read them for
    the GPU's architecture."""
    huge = STRATEGIES["Huge"]
    rows = []
    for key, spec in SPECS.items():
        gemm = impl_time(spec, "gemm", huge, n, n, n, "float32", resources)
        gemm_paper = impl_time(spec, "gemm", huge, n, n, n, "float32", resources, "paper")
        for impl in ISSUE_BOUND_IMPLS:
            t = impl_time(spec, impl, huge, n, n, n, "float32", resources)
            paper = impl_time(spec, impl, huge, n, n, n, "float32", resources, "paper")
            rows.append({"gpu": key, "arch": spec.arch, "impl": impl, "n": n,
                         "paper_model": round(gemm_paper.seconds / paper.seconds, 4),
                         "issue_slots": round(gemm.t_issue / t.t_issue, 4),
                         "with_issue_slots": round(gemm.seconds / t.seconds, 4), "source": "model (prediction)"})
    return pd.DataFrame(rows)


def speedup_rows(predictions: pd.DataFrame, baseline: str = "gemm") -> pd.DataFrame:
    """Per GPU, sweep and dtype of ``predictions`` (`model predict`'s rows), where each implementation
    overtakes ``baseline`` and its largest speedup (predict.crossover). ModelError when a point is there
    twice (predictions of several strategies: give the best strategy's) or the baseline is not."""
    keys = ["gpu", "sweep", "dtype"]
    twice = predictions.duplicated([*keys, "impl", "x"])
    if twice.any():
        row = predictions[twice].iloc[0]
        raise ModelError(f"the predictions hold {row['impl']} at {row['sweep']} x = {row['x']} twice (one "
                         "strategy, model and scheme per point: `model predict --strategy best` with one --model "
                         "and one --scheme)")
    rows = []
    for (gpu, sweep, dtype), part in predictions.groupby(keys, sort=False):
        if baseline not in set(part["impl"]):
            raise ModelError(f"the predictions of {gpu}, {sweep} ({dtype}) have no {baseline} to compare with")
        for impl in (i for i in dict.fromkeys(part["impl"]) if i != baseline):
            pair = part[part["impl"].isin([baseline, impl])]
            both = pair.groupby("x")["impl"].nunique()
            pair = pair[pair["x"].isin(both[both == 2].index)]  # the sizes predicted for both
            if pair.empty:
                raise ModelError(f"the predictions of {gpu}, {sweep} ({dtype}) have no size where both {impl} and "
                                 f"{baseline} were predicted")
            if bad_times(pair["time_s"], positive=True).any():
                raise ModelError(f"the predictions of {gpu}, {sweep} ({dtype}) give {impl} or {baseline} a time that "
                                 "is not positive and finite")
            # predictions from before the column (read as blank) ran the products one after another
            named = pair["scheme"].dropna().astype(str).str.strip() if "scheme" in pair else pd.Series(dtype=str)
            scheme = scheme_or_sequential(named[named != ""].iloc[-1] if (named != "").any() else None)
            rows.append({"gpu": gpu, "source": "model", "sweep": sweep, "dtype": dtype,
                         **crossover(pair, impl, baseline), "scheme": scheme})
    columns = ["gpu", "source", "sweep", "dtype", "impl", "baseline", "first", "stable", "max_speedup", "at",
               "scheme"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.astype({"first": "Int64", "stable": "Int64"})
