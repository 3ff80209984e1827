"""The paper's figures with seaborn/matplotlib, each saved as PNG and PDF."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from ..impls import IMPLS, get_impl  # noqa: E402
from ..sweeps import PAPER_FIXED, SWEEPS  # noqa: E402
from .analysis import measured_crossover, ok_rows, speedups  # noqa: E402

__all__ = ["save", "fig_stra_square", "fig_intro_comparison", "fig_model_square", "fig_model_sweeps",
           "fig_memlimit", "fig_compare", "fig_algorithms", "panel_labels"]

ORDER = [impl.label for impl in IMPLS.values()]  # legend order: the registry's (cuBLAS, CUTLASS, ours, ...)


def _hue(labels) -> list[str]:  # noqa: ANN001
    """The labels present, the registry's first in its order, then other algorithms' implementations."""
    present = list(dict.fromkeys(labels))
    return [label for label in ORDER if label in present] + sorted(set(present) - set(ORDER))
Y_TFLOPS = "effective TFLOPS = 2mnk / time"


def save(fig: plt.Figure, out: Path, stem: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        path = out / f"{stem}.{ext}"
        fig.savefig(path, dpi=130, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths


def _empty(ax: plt.Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def panel_labels(sweep: str, fixed: int | None) -> tuple[str, str]:
    """(panel title, x-axis name) of a sweep as in the paper's figure fig:stra_square, with the fixed size this
    run used (smoke runs shrink it)."""
    fixed = fixed or PAPER_FIXED[sweep]
    return {
        "square": ("m = k = n", "m = k = n"),
        "rankk": (f"k = {fixed:,}, m = n vary", f"m = n (k = {fixed:,})"),
        "panel": (f"m = n = {fixed:,}, k vary", f"k (m = n = {fixed:,})"),
    }[sweep]


def _fixed(part: pd.DataFrame, sweep: str) -> int | None:
    if part.empty or sweep == "square":
        return None
    return int(part["k"].iloc[0]) if sweep == "rankk" else int(part["m"].iloc[0])


def _size_axis(ax: plt.Axes) -> None:
    """At most six size ticks, with thousands separators (20,480 rather than 20480), so labels never collide."""
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def _legend_below(fig: plt.Figure, axes, ncol: int = 4) -> None:  # noqa: ANN001
    """One legend for the figure, below the plots (outside the data), from every axis's labelled lines."""
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
        if ax.get_legend():
            ax.get_legend().remove()
    if handles:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(ncol, len(labels)),
                   frameon=False, fontsize=8)


def _stand_in(labels: list[str], cpu: bool) -> dict[str, str]:
    return {label: f"{label} [numpy stand-in]" if cpu else label for label in labels}


def fig_stra_square(frame: pd.DataFrame, out: Path, peak_tflops: float | None, device: str,
                    cpu: bool = False) -> list[Path]:
    """Figure fig:stra_square: effective TFLOPS vs size in the paper's three panels, the peak marked."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    good = ok_rows(frame)
    for ax, sweep in zip(axes, SWEEPS):
        part = good[(good["sweep"] == sweep) & (good["dtype"] == "float32")] if not good.empty else good
        if part.empty:
            _empty(ax, f"no {sweep} results in this run")
        else:
            hue = _hue(part["label"])
            names = _stand_in(hue, cpu)
            part = part.assign(label=part["label"].map(names))
            hue = [names[h] for h in hue]
            sns.lineplot(data=part, x="x", y="tflops", hue="label", hue_order=hue, style="label", style_order=hue,
                         markers=True, dashes=False, ax=ax)
        if peak_tflops:
            ax.axhline(peak_tflops, color="black", linestyle=":", linewidth=1)
            ax.annotate(f"FP32 peak {peak_tflops:.1f}", (0.01, peak_tflops), xycoords=("axes fraction", "data"),
                        va="bottom", fontsize=7)
        panel_title, x_name = panel_labels(sweep, _fixed(part, sweep))
        ax.set_title(panel_title)
        ax.set_xlabel(x_name)
        _size_axis(ax)
        ax.set_ylabel(Y_TFLOPS)
    _legend_below(fig, axes)
    fig.suptitle(f"Performance of Strassen implementations, single precision: {device}")
    return save(fig, out, "fig_stra_square")


def fig_intro_comparison(frame: pd.DataFrame, out: Path, device: str, cpu: bool = False) -> list[Path]:
    """Figure fig:intro_comparison: speedup over cuBLAS on the square sweep, break-even points annotated."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    s = speedups(frame)
    s = s[(s["sweep"] == "square") & (s["dtype"] == "float32")] if not s.empty else s
    if s.empty:
        _empty(ax, "no square-sweep results with cuBLAS in this run")
    else:
        hue = _hue(s["label"])
        names = _stand_in(hue, cpu)
        s = s.assign(label=s["label"].map(names))
        sns.lineplot(data=s, x="x", y="speedup", hue="label", hue_order=[names[h] for h in hue], marker="o", ax=ax)
        ax.axhline(1.0, color="black", linewidth=1)
        for impl in ("strassen1", "strassen2-hybrid", "strassen1-ref", "strassen2-ref"):
            cross = measured_crossover(frame, impl)
            if cross and cross["stable"]:
                ax.axvline(cross["stable"], color="grey", linestyle=":", linewidth=0.8)
                ax.annotate(f"{impl}: {cross['stable']:,}", (cross["stable"], 1.0), rotation=90, fontsize=7,
                            va="bottom", ha="right")
    ax.set_xlabel("m = k = n")
    _size_axis(ax)
    ax.set_ylabel("speedup over cuBLAS = time(cuBLAS) / time")
    _legend_below(fig, [ax], ncol=3)
    ax.set_title(f"Speedup over cuBLAS, square problems, single precision: {device}")
    return save(fig, out, "fig_intro_comparison")


MODEL_COLORS = (("gemm", "tab:blue"), ("strassen1", "tab:red"), ("strassen2-direct", "tab:green"))


def fig_model_square(model: pd.DataFrame, measured: pd.DataFrame, out: Path, gpu: str, device: str) -> list[Path]:
    """Figure fig:model_square: modeled (dashed) vs measured (solid) for the Huge and Small strategies."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    good = ok_rows(measured) if measured is not None else pd.DataFrame()
    for ax, strategy in zip(axes, ("Huge", "Small")):
        part = model[model["strategy"] == strategy]
        for impl, color in MODEL_COLORS:
            label = get_impl(impl).label
            line = part[part["impl"] == impl]
            if not line.empty:
                ax.plot(line["x"], line["tflops"], linestyle="--", color=color, label=f"{label} (model, {gpu})")
            if not good.empty:
                meas = good[(good["impl"] == impl) & (good["strategy"] == strategy)].sort_values("x")
                if not meas.empty:
                    ax.plot(meas["x"], meas["tflops"], linestyle="-", marker="o", color=color,
                            label=f"{label} (measured, {device})")
        if good.empty:
            ax.text(0.02, 0.02, "no measurement with this strategy in this run (model only)",
                    transform=ax.transAxes, fontsize=8)
        ax.set_title(f"{strategy} strategy")
        ax.set_xlabel("m = k = n")
        _size_axis(ax)
        ax.set_ylabel(Y_TFLOPS)
    _legend_below(fig, axes, ncol=3)
    fig.suptitle(f"Performance model (prediction, dashed) vs measurement (solid), single precision: {gpu}")
    return save(fig, out, "fig_model_square")


def fig_model_sweeps(model: pd.DataFrame, out: Path, gpu: str) -> list[Path]:
    """The model's predictions for the paper's three sweeps (square, rank-k, panel): predictions only."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    for ax, sweep in zip(axes, SWEEPS):
        part = model[model["sweep"] == sweep]
        for impl in dict.fromkeys(part["impl"]):
            line = part[part["impl"] == impl].sort_values("x")
            ax.plot(line["x"], line["tflops"], linestyle="--", label=f"{get_impl(impl).label} (model)")
        panel_title, x_name = panel_labels(sweep, None)
        ax.set_title(panel_title)
        ax.set_xlabel(x_name)
        _size_axis(ax)
        ax.set_ylabel(Y_TFLOPS)
    _legend_below(fig, axes)
    fig.suptitle(f"Performance model, the paper's three sweeps, single precision: {gpu} (prediction, not measured)")
    return save(fig, out, "fig_model_sweeps")


def fig_algorithms(model: pd.DataFrame, measured: pd.DataFrame | None, out: Path, gpu: str, device: str) -> list[Path]:
    """Which algorithm wins per shape: each algorithm's speedup over the GEMM on the three sweeps, predicted by
    the model (dashed) and measured where the run timed its implementation on a GPU (solid, markers)."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), sharey=True)
    for ax, sweep in zip(axes, SWEEPS):
        part = model[model["sweep"] == sweep]
        gemm = part[part["impl"] == "gemm"].set_index("x")["time_s"]
        for i, impl in enumerate(i for i in dict.fromkeys(part["impl"]) if i != "gemm"):
            line = part[part["impl"] == impl].set_index("x").sort_index()
            color = f"C{i % 10}"
            label = get_impl(impl).label.removesuffix(" (ours)")
            ax.plot(line.index, gemm.reindex(line.index) / line["time_s"], linestyle="--", color=color,
                    label=f"{label} (model)")
            if measured is not None and not measured.empty:
                mine = measured[(measured["sweep"] == sweep) & (measured["impl"] == impl)].set_index("x")["speedup"]
                if not mine.empty:
                    ax.plot(mine.index, mine, marker="o", color=color, label=f"{label} (measured, {device})")
        ax.axhline(1.0, color="black", linewidth=0.8)
        panel_title, x_name = panel_labels(sweep, None)
        ax.set_title(panel_title)
        ax.set_xlabel(x_name)
        _size_axis(ax)
        ax.set_ylabel("speedup over the GEMM = time(GEMM) / time")
    _legend_below(fig, axes, ncol=3)
    fig.suptitle(f"Which algorithm wins per shape, single precision: {gpu} (dashed: prediction)")
    return save(fig, out, "fig_algorithms")


def fig_memlimit(memlimit: pd.DataFrame | None, out: Path, device: str) -> list[Path]:
    """The largest square problem each implementation can run in the memory there is (paper: 36,000 for 1-level
    Strassen vs 22,500 for the 2-level reference on a 16 GB V100)."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    if memlimit is None or memlimit.empty:
        _empty(ax, "no memlimit results in this run")
    else:
        rows = memlimit.iloc[::-1]
        colors = ["tab:green" if bool(c) else "tab:grey" for c in rows["confirmed"]]  # typed by the reader
        ax.barh(rows["label"].astype(str), rows["predicted_n"], color=colors)
        for y, (n, confirmed) in enumerate(zip(rows["predicted_n"], rows["confirmed"])):
            note = "confirmed by a run" if bool(confirmed) else "not confirmed"
            ax.annotate(f" {int(n):,} ({note})", (n, y), va="center", fontsize=7)
        free = int(memlimit["free_bytes"].iloc[0])
        ax.set_title(f"Largest square problem that fits: {device}, {free / 2**30:,.2f} GiB free")
        ax.set_xlim(0, rows["predicted_n"].max() * 1.45)
    ax.set_xlabel("largest n (m = k = n), float32")
    return save(fig, out, "fig_memlimit")


def fig_compare(frames: dict[str, pd.DataFrame], out: Path) -> list[Path]:
    """Speedup over cuBLAS on the square sweep, one line per GPU and implementation."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    parts = []
    for gpu, frame in frames.items():
        s = speedups(frame)
        s = s[(s["sweep"] == "square") & (s["dtype"] == "float32")] if not s.empty else s
        if not s.empty:
            parts.append(s.assign(gpu=gpu))
    if parts:
        data = pd.concat(parts)
        sns.lineplot(data=data, x="x", y="speedup", hue="label", style="gpu", markers=True, ax=ax)
        ax.axhline(1.0, color="black", linewidth=1)
        _legend_below(fig, [ax], ncol=3)
    else:
        _empty(ax, "no square-sweep results with cuBLAS to compare")
    ax.set_xlabel("m = k = n")
    ax.set_ylabel("speedup over cuBLAS = time(cuBLAS) / time")
    ax.set_title("Speedup over cuBLAS per GPU, square problems, single precision")
    return save(fig, out, "fig_compare_speedup")
