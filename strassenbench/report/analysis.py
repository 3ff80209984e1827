"""Numbers the report derives from results: speedups, crossovers, the paper's headline claims."""

from __future__ import annotations

import math

import pandas as pd

from ..breakeven import break_even
from ..impls import ImplError, get_impl
from ..families import ALL_STRATEGIES, MODES
from ..options import RUN_SCHEMES

__all__ = ["ok_rows", "best_rows", "POINT", "chosen_strategies", "left_out", "speedups", "measured_crossover",
           "claims", "scheme_name", "schemes_of", "PRECISIONS", "precision_of", "precision_speedups"]

BASELINE = "cublas"
# The precisions compare draws apart, each against its own cuBLAS (in the precision's dtype): SIMT FP32 against
# cuBLAS's SGEMM, the TF32 tensor-core modes (1xTF32, 3xTF32) against cuBLAS TF32, FP64 (SIMT and DMMA) against
# cuBLAS's DGEMM.
PRECISIONS = {"FP32": "cublas", "TF32/3xTF32": "cublas-tf32", "FP64": "cublas"}


def _timeouts(frame: pd.DataFrame) -> pd.Series:
    """Samples of each row whose blocking kernel reached its timeout (0 where none or not recorded)."""
    if "blocking_timeouts" not in frame:
        return pd.Series(0, index=frame.index)
    return pd.to_numeric(frame["blocking_timeouts"], errors="coerce").fillna(0)


def scheme_name(value: object) -> str:
    """A model file's scheme as the report shows it: one of the paper's three or presum (a file from before the
    column, read as blank, ran the products one after another), or "(unknown)" for anything else a results
    folder holds."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or str(value).strip() == "":
        return "sequential"
    return str(value) if str(value) in RUN_SCHEMES else "(unknown)"


def schemes_of(frame: pd.DataFrame) -> pd.Series:
    """scheme_name of each row of ``frame`` (sequential for every row of a file without the column)."""
    if "scheme" not in frame:
        return pd.Series(["sequential"] * len(frame), index=frame.index, dtype=object)
    return frame["scheme"].map(scheme_name)


def ok_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows figures, tables and comparisons use: status ok, and no sample that reached the blocking
    kernel's timeout (such a sample may hold host time; results of earlier versions kept them)."""
    if frame.empty:
        return frame
    return frame[(frame["status"] == "ok") & (_timeouts(frame) == 0)]


# A point of a sweep: an implementation in a dtype at one shape. A sweep may hold several rows of one point, timed
# with different strategies (`--strategy` per run, a strategies file) or again.
POINT = ["sweep", "impl", "dtype", "m", "n", "k"]


def best_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """ok_rows, one per point (POINT): the fastest by median time, whose ``strategy`` column says which strategy
    that was. The paper draws each implementation at its best strategy per size (Sec. s:gpu_exp), as `bench
    --strategy best` records it; the measured figures, speedups and crossovers take these rows."""
    good = ok_rows(frame)
    if good.empty:
        return good
    times = pd.Series(pd.to_numeric(good["time_median_s"], errors="coerce").to_numpy())  # by position
    order = times.sort_values(kind="stable", na_position="last").index.to_numpy()  # fastest first
    first = ~good.iloc[order].duplicated([c for c in POINT if c in good]).to_numpy()
    return good.iloc[sorted(order[first])]  # in the rows' order


def chosen_strategies(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Per implementation, the strategies best_rows keeps where a point of it was timed with several (a name
    that is not a strategy shows as "(unknown)"); empty where every point has one."""
    good = ok_rows(frame)
    if good.empty or "strategy" not in good:
        return {}
    several = good.groupby([c for c in POINT if c in good])["strategy"].transform("nunique") > 1
    best = best_rows(good[several])
    return {str(impl): sorted({s if s in ALL_STRATEGIES else "(unknown)" for s in part["strategy"].astype(str)})
            for impl, part in best.groupby("impl", sort=False)}


def left_out(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows ok_rows leaves out, each with why: its status (fault, error, oom, check_failed) and message,
    or how many of its samples reached the blocking kernel's timeout."""
    columns = ["sweep", "impl", "m", "n", "k", "dtype", "status", "why"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    timeouts = _timeouts(frame)
    out = frame[(frame["status"] != "ok") | (timeouts > 0)].copy()
    out["why"] = [str(r["message"]) if r["status"] != "ok" else
                  f"{int(t)} samples reached the blocking kernel's timeout: left out"
                  for (_, r), t in zip(out.iterrows(), timeouts[out.index])]
    return out[[c for c in columns if c in out]]


def speedups(frame: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """time(baseline) / time(impl) per (sweep, x, dtype, impl), each at its fastest strategy (best_rows)."""
    good = best_rows(frame)
    if good.empty or baseline not in set(good["impl"]):
        return pd.DataFrame(columns=["sweep", "x", "dtype", "impl", "label", "speedup"])
    keys = ["sweep", "x", "dtype"]
    base = good[good["impl"] == baseline].set_index(keys)["time_median_s"]
    out = good[good["impl"] != baseline].copy()
    out["speedup"] = [base.get(tuple(r[k] for k in keys), math.nan) / r["time_median_s"] for _, r in out.iterrows()]
    return out.dropna(subset=["speedup"])[[*keys, "impl", "label", "speedup"]]


def precision_of(impl: str, dtype: str) -> str | None:
    """The precision (a key of PRECISIONS) of a row of ``impl`` in ``dtype``: FP64 for every float64 row, SIMT
    or DMMA; TF32/3xTF32 for the tensor-core modes; FP32 for SIMT float32; None for a name the registry does not
    know (strassenbench.impls.get_impl) or another dtype."""
    try:
        mode = get_impl(impl).mode
    except (ImplError, ValueError):
        return None
    if dtype == "float64":
        return "FP64"
    if MODES[mode].tf32:
        return "TF32/3xTF32"
    return "FP32" if not MODES[mode].tensor and dtype == "float32" else None


def precision_speedups(frame: pd.DataFrame, precision: str, sweep: str = "square") -> pd.DataFrame:
    """speedups of the rows of ``sweep`` in ``precision`` over the precision's cuBLAS (PRECISIONS)."""
    good = ok_rows(frame)
    if good.empty:
        return speedups(good)
    part = good[good["sweep"] == sweep]
    pairs = list(zip(part["impl"].astype(str), part["dtype"].astype(str)))
    of = {pair: precision_of(*pair) for pair in set(pairs)}  # each implementation looked up once
    part = part[[of[pair] == precision for pair in pairs]]
    return speedups(part, PRECISIONS[precision])


def measured_crossover(frame: pd.DataFrame, impl: str, baseline: str = BASELINE, sweep: str = "square",
                       dtype: str = "float32") -> dict[str, object] | None:
    good = best_rows(frame)
    if good.empty:
        return None
    part = good[(good["sweep"] == sweep) & (good["dtype"] == dtype) & good["impl"].isin([impl, baseline])]
    part = part.rename(columns={"time_median_s": "time_s"})
    counts = part.groupby("x")["impl"].nunique()
    part = part[part["x"].isin(counts[counts == 2].index)]
    if part.empty:
        return None
    return break_even(part, impl, baseline)


def _fmt(value: object, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "not reached"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _best(frame: pd.DataFrame, impl: str, baseline: str) -> tuple[float, int] | None:
    """(largest time(baseline) / time(impl), at which size) over the square sweep (float32), or None."""
    s = speedups(frame, baseline)
    s = s[(s["sweep"] == "square") & (s["dtype"] == "float32") & (s["impl"] == impl)] if not s.empty else s
    if s.empty:
        return None
    row = s.loc[s["speedup"].idxmax()]
    return float(row["speedup"]), int(row["x"])


def _modeled(model: pd.DataFrame | None, impl: str) -> pd.Series | None:
    """model_speedup.csv's row of ``impl`` over the GEMM in the square sweep (float32), or None."""
    if model is None or model.empty:
        return None
    row = model[(model["sweep"] == "square") & (model["impl"] == impl) & (model["baseline"] == "gemm")
                & (model["dtype"] == "float32")]
    return row.iloc[0] if not row.empty else None


NOT_MEASURED = "not measured"

# The paper's headline numbers (V100, Secs. s:gpu_intro and s:gpu_exp), each with the implementation and the
# quantity it is about: (claim, paper's value, impl, baseline or memlimit).
PAPER_CLAIMS = (
    ("1-level (ours): break-even with cuBLAS", "1,536", "strassen1", "break-even"),
    ("1-level (ours): best speedup over cuBLAS", "1.11x", "strassen1", "cublas"),
    ("2-level hybrid (ours): break-even with cuBLAS", "7,680", "strassen2-hybrid", "break-even"),
    ("2-level hybrid (ours): best speedup over cuBLAS", "1.19x", "strassen2-hybrid", "cublas"),
    ("2-level hybrid (ours): best speedup over CUTLASS", "1.22x", "strassen2-hybrid", "cutlass"),
    ("1-level reference: break-even with cuBLAS", "7,168", "strassen1-ref", "break-even"),
    ("2-level reference: break-even with cuBLAS", "13,312", "strassen2-ref", "break-even"),
    # Sec. s:gpu_exp: "our 1-level Strassen can compute [...] as large as 36,000, while the reference
    # implementation runs out of memory after reaching 22,500", beside "the 1-level reference implementation
    # consumes much more memory": both numbers are 1-level ones.
    ("largest square n, 1-level (ours), 16 GB V100", "36,000", "strassen1", "memlimit"),
    ("largest square n, 1-level reference, 16 GB V100", "22,500", "strassen1-ref", "memlimit"),
)


def claims(frame: pd.DataFrame, memlimit: pd.DataFrame | None, measured_on: str = "this run",
           model: pd.DataFrame | None = None, model_gpu: str = "") -> pd.DataFrame:
    """The paper's headline numbers beside this run's, each saying whether it was measured (and on what), is
    the model's prediction (``model``: model_speedup.csv's rows, our GEMM in CUTLASS's place) or was not
    measured."""
    rows = []
    measured, predicted = f"measured on {measured_on}", f"model (prediction for {model_gpu})"

    def add(claim: str, paper: str, value: str, status: str, how: str) -> None:
        rows.append({"claim": claim, "paper (V100)": paper, "this run": value, "status": status,
                     "how it is computed": how})

    mem = memlimit.set_index("impl") if memlimit is not None and not memlimit.empty else None
    for claim, paper, impl, what in PAPER_CLAIMS:
        if what == "break-even":
            cross = measured_crossover(frame, impl)
            add(claim, paper, _fmt(cross["stable"]) if cross else "-", measured if cross else NOT_MEASURED,
                f"smallest size of the square sweep from which {impl} is faster than cuBLAS at every larger "
                "size (float32, median times)")
        elif what == "memlimit":
            if mem is None or impl not in mem.index:
                add(claim, paper, "-", NOT_MEASURED, f"memlimit of {impl}")
                continue
            r = mem.loc[impl]
            confirmed = bool(r["confirmed"])  # a boolean column (results.read_results), never a string
            add(claim, paper, f"{int(r['predicted_n']):,} ({'confirmed' if confirmed else 'not confirmed'})",
                measured if confirmed else "model (memory formula; the run did not confirm it)",
                f"memlimit: largest multiple of {int(r['step'])} with 3n^2 sizeof(T) + declared extra <= "
                f"{int(r['free_bytes']):,} free bytes, then run at n and n + step")
        else:
            best = _best(frame, impl, what)
            how = f"largest time({what}) / time({impl}) over the square sweep (float32)"
            if best:
                add(claim, paper, f"{best[0]:.2f}x at {best[1]:,}", measured, how)
            elif what == "cutlass" and (cross := _modeled(model, impl)) is not None:
                add(claim, paper, f"{cross['max_speedup']:.2f}x at {cross['at']:,}", predicted,
                    f"the model's largest time(gemm) / time({impl}) over the square sweep: our GEMM's model in "
                    "CUTLASS's place, as in the paper's Sec. s:analysis; the products run by the scheme of the "
                    "model crossover table")
            else:
                add(claim, paper, "-", NOT_MEASURED, how)
    return pd.DataFrame(rows)
