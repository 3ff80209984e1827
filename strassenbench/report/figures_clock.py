"""The square sweep at the GPU's maximum SM clock (beyond the paper): raw and per-clock TFLOPS side by side, the
power-capped points marked. A GPU under its power cap lowers its clock, and a point timed at a lower clock is
slower for that alone; the paper's V100 figures (Sec. s:gpu_exp) ran at one clock.

    per-clock TFLOPS = TFLOPS x f_max / f_point

f_max: system.json's gpu.max_sm_clock_mhz; f_point: the row's sm_clock_median_mhz (the SM clock over its kept
samples). A diagnosis of how much of a difference the clock explains, not a speed any run reaches. A point is
power-capped where its capped_share (the fraction of its samples under a power or thermal cap) is at least 0.5,
or, in rows without it (files from before the column), where throttle_reasons (NVML's clocks event reasons as
the point ended, hex) has 0x4 (software power cap) or 0x80 (hardware power brake) set.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from . import figures
from .analysis import best_rows
from .figures import Y_TFLOPS, Drawn, draw_measured, empty_note, legend_below, size_axis
from .figures_model import LEFT_OUT

__all__ = ["CAPPED", "CAP_BITS", "CAPPED_SHARE", "power_capped", "per_clock", "clock_left_out", "fig_clock_square"]

CAPPED = "power-capped"  # gid of the marks on power-capped points
CAP_BITS = 0x4 | 0x80  # NVML: software power cap, hardware power brake slowdown
CAPPED_SHARE = 0.5  # a point is power-capped from this fraction of its samples under a power or thermal cap


def _bits(value: object) -> int:
    """A throttle_reasons value (hex, as the bench writes it) as an integer; 0 for a blank or unreadable one."""
    try:
        return int(str(value).strip(), 16)
    except ValueError:
        return 0


def power_capped(frame: pd.DataFrame) -> pd.Series:
    """Per row: capped_share >= CAPPED_SHARE where the row has it, else throttle_reasons with a power-cap bit
    (CAP_BITS)."""
    share = pd.to_numeric(frame.get("capped_share", pd.Series(index=frame.index, dtype=float)), errors="coerce")
    reasons = frame.get("throttle_reasons", pd.Series("", index=frame.index))
    by_bits = reasons.map(lambda value: bool(_bits(value) & CAP_BITS)).astype(bool)
    return share.ge(CAPPED_SHARE).where(share.notna(), by_bits).astype(bool)


def per_clock(frame: pd.DataFrame, max_clock_mhz: float) -> pd.Series:
    """TFLOPS x f_max / f_point per row (NaN where the row has no median SM clock)."""
    clock = pd.to_numeric(frame.get("sm_clock_median_mhz", pd.Series(index=frame.index, dtype=float)),
                          errors="coerce")
    return pd.to_numeric(frame["tflops"], errors="coerce") * max_clock_mhz / clock.where(clock > 0)


def clock_left_out(square: pd.DataFrame, max_clock_mhz: object, cpu: bool) -> str:
    """Why the figure is left out ('' where it is drawn): a CPU run, no maximum SM clock, no point's clock."""
    if cpu:
        return "a CPU run has no SM clock"
    if not isinstance(max_clock_mhz, (int, float)) or isinstance(max_clock_mhz, bool) or not max_clock_mhz > 0:
        return "the run's system description names no maximum SM clock (gpu.max_sm_clock_mhz)"
    if square.empty:
        return "no square-sweep results in this run"
    if pd.to_numeric(square.get("sm_clock_median_mhz"), errors="coerce").gt(0).sum() == 0:
        return "no square-sweep point has its median SM clock (sm_clock_median_mhz)"
    return ""


def _capped_marks(ax: plt.Axes, rows: pd.DataFrame, y: str) -> None:
    """A circle on each power-capped point of ``rows`` (those drawn)."""
    capped = rows[power_capped(rows) & rows[y].notna()]
    if not capped.empty:
        ax.plot(capped["x"], capped[y], linestyle="none", marker="o", markersize=10, markerfacecolor="none",
                markeredgecolor="black", markeredgewidth=0.9, gid=CAPPED, label="_power-capped")


def fig_clock_square(frame: pd.DataFrame, out: Path, max_clock_mhz: object, device: str, cpu: bool = False) -> Drawn:
    """The square sweep's float32 implementations, each point at its fastest strategy (best_rows): effective
    TFLOPS (left) and per-clock TFLOPS (right), power-capped points circled; left out (a LEFT_OUT mark saying
    why, clock_left_out) where no clock is known."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.4), sharey=True)
    square = frame[(frame["sweep"] == "square") & (frame["dtype"] == "float32")] if not frame.empty else frame
    why = clock_left_out(square, max_clock_mhz, cpu)
    axes[0].set_title("as measured")
    axes[1].set_title("per clock" if why else f"per clock: at the maximum SM clock, {max_clock_mhz:,} MHz")
    for ax, name in zip(axes, (Y_TFLOPS, "per-clock TFLOPS = TFLOPS x f_max / f_point")):
        ax.set_xlabel("m = k = n")
        ax.set_ylabel(name)
    if why:
        for ax in axes:
            empty_note(ax, f"left out: {why}")
        axes[0].plot([], [], gid=LEFT_OUT, label=f"_{why}")
    else:
        impls = list(dict.fromkeys(square["impl"].astype(str)))
        rows = square.assign(per_clock_tflops=per_clock(square, float(max_clock_mhz)))
        for ax, y in zip(axes, ("tflops", "per_clock_tflops")):
            draw_measured(ax, rows, impls, y)
            _capped_marks(ax, best_rows(rows), y)
            size_axis(ax)
        top = max(line.get_ydata().max() for ax in axes for line in ax.lines if len(line.get_ydata()))
        axes[0].set_ylim(0, top * 1.05)  # one scale for both panels (sharey), from 0
        axes[1].tick_params(labelleft=True)
        fig.subplots_adjust(wspace=0.22)
        legend_below(fig, axes)
    fig.suptitle(f"Square problems, single precision, as measured and per clock: {device}")
    return figures.save(fig, out, "fig_clock_square")
