"""Numbers the report derives from results: speedups, crossovers, the paper's headline claims."""

from __future__ import annotations

import math

import pandas as pd

from ..model.predict import crossover

__all__ = ["ok_rows", "speedups", "measured_crossover", "claims"]

BASELINE = "cublas"


def ok_rows(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    return frame[frame["status"] == "ok"]


def speedups(frame: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """time(baseline) / time(impl) per (sweep, x, dtype, impl)."""
    good = ok_rows(frame)
    if good.empty or baseline not in set(good["impl"]):
        return pd.DataFrame(columns=["sweep", "x", "dtype", "impl", "label", "speedup"])
    keys = ["sweep", "x", "dtype"]
    base = good[good["impl"] == baseline].set_index(keys)["time_median_s"]
    out = good[good["impl"] != baseline].copy()
    out["speedup"] = [base.get(tuple(r[k] for k in keys), math.nan) / r["time_median_s"] for _, r in out.iterrows()]
    return out.dropna(subset=["speedup"])[[*keys, "impl", "label", "speedup"]]


def measured_crossover(frame: pd.DataFrame, impl: str, baseline: str = BASELINE, sweep: str = "square",
                       dtype: str = "float32") -> dict[str, object] | None:
    good = ok_rows(frame)
    if good.empty:
        return None
    part = good[(good["sweep"] == sweep) & (good["dtype"] == dtype) & good["impl"].isin([impl, baseline])]
    part = part.rename(columns={"time_median_s": "time_s"})
    counts = part.groupby("x")["impl"].nunique()
    part = part[part["x"].isin(counts[counts == 2].index)]
    if part.empty:
        return None
    return crossover(part, impl, baseline)


def _fmt(value: object, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "not reached"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def claims(frame: pd.DataFrame, memlimit: pd.DataFrame | None) -> pd.DataFrame:
    """The paper's headline numbers beside this run's, with how each was computed."""
    rows = []

    def add(claim: str, paper: str, value: str, how: str) -> None:
        rows.append({"claim": claim, "paper (V100)": paper, "this run": value, "how it is computed": how})

    how_x = ("smallest size of the square sweep from which {impl} is faster than cuBLAS at every larger size "
             "(float32, median times)")
    how_s = "largest time(cuBLAS) / time({impl}) over the square sweep (float32)"
    for impl, name, paper_x, paper_s in (
        ("strassen1", "1-level (ours)", "1,536", "1.11x"),
        ("strassen2-hybrid", "2-level hybrid (ours)", "7,680", "1.19x"),
        ("strassen1-ref", "1-level reference", "7,168", ""),
        ("strassen2-ref", "2-level reference", "13,312", ""),
    ):
        cross = measured_crossover(frame, impl)
        add(f"{name}: break-even with cuBLAS", paper_x, _fmt(cross["stable"]) if cross else "no data",
            how_x.format(impl=impl))
        if paper_s:
            add(f"{name}: best speedup over cuBLAS", paper_s,
                f"{cross['max_speedup']:.2f}x at {cross['at']:,}" if cross else "no data", how_s.format(impl=impl))
    if memlimit is not None and not memlimit.empty:
        by = memlimit.set_index("impl")
        for impl, paper in (("strassen1", "36,000"), ("strassen2-ref", "22,500")):
            if impl in by.index:
                r = by.loc[impl]
                value = f"{int(r['predicted_n']):,} ({'confirmed' if bool(r['confirmed']) else 'not confirmed'})"
                add(f"largest square n, {r['label']} (16 GB V100 in the paper)", paper, value,
                    f"memlimit: largest multiple of {int(r['step'])} with 3n^2 sizeof(T) + declared extra <= "
                    f"{int(r['free_bytes']):,} free bytes, then run at n and n + step")
    return pd.DataFrame(rows)
