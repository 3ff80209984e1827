"""The paper's figures with seaborn/matplotlib, each saved as PNG and PDF."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ..impls import IMPLS  # noqa: E402
from ..sweeps import SWEEPS  # noqa: E402
from .analysis import measured_crossover, ok_rows, speedups  # noqa: E402

__all__ = ["save", "fig_stra_square", "fig_intro_comparison", "fig_model_square", "fig_compare"]

ORDER = [impl.label for impl in IMPLS.values()]  # legend order: the registry's (cuBLAS, CUTLASS, ours, ...)
PANEL_TITLES = {"square": "m = k = n", "rankk": "k = 4096, m = n varying", "panel": "m = n = 8192, k varying"}


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


def fig_stra_square(frame: pd.DataFrame, out: Path, peak_tflops: float | None, title: str) -> list[Path]:
    """Figure fig:stra_square: effective TFLOPS vs size in three panels, the peak marked."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    good = ok_rows(frame)
    for ax, sweep in zip(axes, SWEEPS):
        part = good[(good["sweep"] == sweep) & (good["dtype"] == "float32")] if not good.empty else good
        if part.empty:
            _empty(ax, f"no {sweep} results in this run")
        else:
            hue = [label for label in ORDER if label in set(part["label"])]
            sns.lineplot(data=part, x="x", y="tflops", hue="label", hue_order=hue, style="label", style_order=hue,
                         markers=True, dashes=False, ax=ax)
            ax.legend(fontsize=7, loc="lower right")
        if peak_tflops:
            ax.axhline(peak_tflops, color="black", linestyle=":", linewidth=1)
            ax.annotate(f"FP32 peak {peak_tflops:.1f}", (0.01, peak_tflops), xycoords=("axes fraction", "data"),
                        va="bottom", fontsize=7)
        title = PANEL_TITLES[sweep]
        if not part.empty and sweep != "square":  # the fixed size this run used (smoke runs shrink it)
            fixed = int(part["k"].iloc[0]) if sweep == "rankk" else int(part["m"].iloc[0])
            title = title.replace("4096", f"{fixed:,}") if sweep == "rankk" else title.replace("8192", f"{fixed:,}")
        ax.set_title(title)
        ax.set_xlabel("x")
        ax.set_ylabel("effective TFLOPS = 2mnk / time")
    fig.suptitle(title)
    return save(fig, out, "fig_stra_square")


def fig_intro_comparison(frame: pd.DataFrame, out: Path, title: str) -> list[Path]:
    """Figure fig:intro_comparison: speedup over cuBLAS on the square sweep, break-even points annotated."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    s = speedups(frame)
    s = s[(s["sweep"] == "square") & (s["dtype"] == "float32")] if not s.empty else s
    if s.empty:
        _empty(ax, "no square-sweep results with cuBLAS in this run")
    else:
        hue = [label for label in ORDER if label in set(s["label"])]
        sns.lineplot(data=s, x="x", y="speedup", hue="label", hue_order=hue, marker="o", ax=ax)
        ax.axhline(1.0, color="black", linewidth=1)
        for impl in ("strassen1", "strassen2-hybrid", "strassen1-ref", "strassen2-ref"):
            cross = measured_crossover(frame, impl)
            if cross and cross["stable"]:
                ax.axvline(cross["stable"], color="grey", linestyle=":", linewidth=0.8)
                ax.annotate(f"{impl}: {cross['stable']:,}", (cross["stable"], 1.0), rotation=90, fontsize=7,
                            va="bottom", ha="right")
        ax.legend(fontsize=7)
    ax.set_xlabel("m = k = n")
    ax.set_ylabel("speedup over cuBLAS")
    ax.set_title(title)
    return save(fig, out, "fig_intro_comparison")


def fig_model_square(model: pd.DataFrame, measured: pd.DataFrame, out: Path, title: str) -> list[Path]:
    """Figure fig:model_square: modeled (dashed) vs measured (solid) for the Huge and Small strategies."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    good = ok_rows(measured) if measured is not None else pd.DataFrame()
    for ax, strategy in zip(axes, ("Huge", "Small")):
        part = model[model["strategy"] == strategy]
        for impl, color in (("gemm", "tab:blue"), ("strassen1", "tab:red"), ("strassen2-direct", "tab:green")):
            line = part[part["impl"] == impl]
            if not line.empty:
                ax.plot(line["x"], line["tflops"], linestyle="--", color=color, label=f"{impl} (model)")
            if not good.empty:
                meas = good[(good["impl"] == impl) & (good["strategy"] == strategy)].sort_values("x")
                if not meas.empty:
                    ax.plot(meas["x"], meas["tflops"], linestyle="-", marker="o", color=color,
                            label=f"{impl} (measured)")
        if good.empty:
            ax.text(0.02, 0.02, "no measurement with this strategy in this run (model only)",
                    transform=ax.transAxes, fontsize=8)
        ax.set_title(f"{strategy} strategy")
        ax.set_xlabel("m = k = n")
        ax.set_ylabel("effective TFLOPS")
        ax.legend(fontsize=7)
    fig.suptitle(title)
    return save(fig, out, "fig_model_square")


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
        ax.legend(fontsize=7)
    else:
        _empty(ax, "no square-sweep results with cuBLAS to compare")
    ax.set_xlabel("m = k = n")
    ax.set_ylabel("speedup over cuBLAS")
    ax.set_title("speedup over cuBLAS per GPU")
    return save(fig, out, "fig_compare_speedup")
