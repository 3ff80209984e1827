"""Which implementation wins, per shape and per GPU model: the winners figure and table, read from
model_winners.csv (`strassenbench model winners`, pick's first per size and precision mode) and, where the run
measured a GPU, from its sweeps. Nothing here computes a prediction."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..families import MODES, by_accuracy
from ..impls import get_impl
from ..options import SCHEMES
from ..sweeps import SWEEPS
from . import figures
from .analysis import ok_rows, schemes_of
from .figures import Drawn, label_of, legend_below, speedup_panel
from .palette import style

__all__ = ["fig_winners", "winners_table", "TABLE_SIZES", "PRECISIONS"]

PRECISIONS = {mode: MODES[mode].precision for mode in by_accuracy("float32")}  # model_winners.csv's precision column
TABLE_SIZES = (2048, 8192, 16384)  # the winners table's square sizes
_LINE = {mode: MODES[mode].line for mode in PRECISIONS}


def _measured_winners(sweeps: pd.DataFrame) -> pd.DataFrame:
    """Per sweep and size, the fastest implementation the run timed in full float32 precision (SIMT, cuBLAS,
    CUTLASS) and its speedup over the measured cuBLAS: sweep, x, impl, speedup."""
    good = ok_rows(sweeps) if not sweeps.empty else sweeps
    if good.empty:
        return pd.DataFrame(columns=["sweep", "x", "impl", "speedup"])
    good = good[(good["dtype"] == "float32") & good["impl"].map(lambda i: not get_impl(str(i)).tensor)
                & (good["impl"] != "auto")]
    rows = []
    for (sweep, x), part in good.groupby(["sweep", "x"]):
        cublas = part[part["impl"] == "cublas"]["time_median_s"]
        if cublas.empty:
            continue
        best = part.loc[part["time_median_s"].astype(float).idxmin()]
        rows.append({"sweep": sweep, "x": int(x), "impl": str(best["impl"]),
                     "speedup": float(cublas.iloc[0]) / float(best["time_median_s"])})
    return pd.DataFrame(rows, columns=["sweep", "x", "impl", "speedup"])


def _draw_winners(ax: plt.Axes, part: pd.DataFrame, label: str, line: str, hollow: bool) -> None:
    """One precision's winners: a line through their speedups, each point in its winner's colour and marker."""
    part = part.sort_values("x")
    ax.plot(part["x"], part["speedup"], linestyle=line, color="0.55", linewidth=1.0, label=f"_{label}")
    for impl, mine in part.groupby("impl"):
        look = style(str(impl))
        ax.scatter(mine["x"], mine["speedup"], marker=look.get("marker", "o"), s=28, zorder=3,
                   facecolors="none" if hollow else look["color"], edgecolors=look["color"],
                   label=f"{label_of(str(impl)).removesuffix(' (ours)')} ({label})")


def fig_winners(winners: pd.DataFrame | None, sweeps: pd.DataFrame, out: Path, gpu: str, device: str,
                cpu: bool) -> Drawn:
    """Which implementation wins at each size of the three sweeps, by the model (pick's first per precision mode
    the GPU has; lines styled per mode) and, on a GPU run, by the measurements (hollow markers, full float32)."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), sharey=True)
    mine = winners[winners["gpu"] == gpu] if winners is not None and not winners.empty else pd.DataFrame()
    for scheme in (s for s in dict.fromkeys(schemes_of(mine)) if s in SCHEMES):  # for the caption, not the legend
        axes[0].plot([], [], gid="scheme", label=f"_{scheme}")
    measured = pd.DataFrame() if cpu else _measured_winners(sweeps)
    for ax, sweep in zip(axes, SWEEPS):
        part = mine[mine["sweep"] == sweep] if not mine.empty else mine
        for precision, line in _LINE.items():
            rows = part[part["precision"] == precision] if not part.empty else part
            if not rows.empty:
                _draw_winners(ax, rows.rename(columns={"speedup_vs_cublas": "speedup"}),
                              f"model, {PRECISIONS[precision]}", line, hollow=False)
                ax.plot([], [], linestyle=line, color="0.55", label=f"model, {PRECISIONS[precision]} winners")
        done = measured[measured["sweep"] == sweep] if not measured.empty else measured
        if not done.empty:
            _draw_winners(ax, done, f"measured, {device}", "-", hollow=True)
        if part.empty and done.empty:
            figures.empty_note(ax, "no model_winners.csv rows for this GPU and no measurements")
        speedup_panel(ax, sweep, "speedup over cuBLAS (SGEMM)")
    legend_below(fig, axes, ncol=4)
    fig.suptitle(f"Which implementation wins per size, single precision: {gpu} (model: prediction)")
    return figures.save(fig, out, "fig_winners")


def _scheme_of(part: pd.DataFrame) -> str:
    """How the winners' fused candidates ran: the rows' scheme (blank in a file from before the column:
    sequential), "(unknown)" for a value that is not a scheme."""
    names = sorted(set(schemes_of(part)), key=lambda name: (name not in SCHEMES, name))
    return ", ".join(names)


def winners_table(winners: pd.DataFrame | None) -> pd.DataFrame | None:
    """Per GPU model in model_winners.csv, the predicted best at n = 2,048, 8,192 and 16,384 (square) in each
    precision mode and its speedup over cuBLAS; a mode the GPU does not have says so instead of a number."""
    if winners is None or winners.empty:
        return None
    square = winners[(winners["sweep"] == "square") & winners["x"].isin(TABLE_SIZES)]
    rows = []
    for (key, x), part in square.groupby(["key", "x"], sort=False):
        row = {"GPU model": f"{part['gpu'].iloc[0]} ({key})", "n": f"{int(x):,}", "scheme": _scheme_of(part)}
        for precision, name in PRECISIONS.items():
            best = part[part["precision"] == precision]
            row[f"best, {name}"] = (label_of(best["impl"].iloc[0]) + f" [{best['impl'].iloc[0]}]" if not best.empty
                                    else "(not on this GPU)")
            row[f"speedup, {name}"] = f"{best['speedup_vs_cublas'].iloc[0]:.2f}x" if not best.empty else ""
        rows.append(row)
    return pd.DataFrame(rows)
