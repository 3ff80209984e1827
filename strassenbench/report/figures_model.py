"""The model's figures: its curves beside the measured ones (fig:model_square), its curves of the paper's three
sweeps, which algorithm wins per shape, and the issue-slot bounds per GPU model. Every model number is read
from the run's model files (strassenbench.model.files) as `strassenbench model` wrote it; the figures draw
them and compute no model."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..model.files import DEFAULT_MODEL
from ..options import SCHEMES
from ..sweeps import MODEL_SQUARE_IMPLS, MODEL_SQUARE_STRATEGIES, SWEEPS
from . import figures
from .analysis import ok_rows, schemes_of
from .figures import (Y_TFLOPS, Drawn, draw_line, empty_note, label_of, legend_below, panel_labels, size_axis,
                      speedup_panel)
from .palette import style

__all__ = ["fig_model_square", "fig_model_sweeps", "fig_algorithms", "fig_issue_bounds"]

LEFT_OUT = "left out"  # the gid of an implementation the model GPU cannot run (fig_algorithms' caption names it)
PREDICTED = ["gpu", "sweep", "x", "impl", "strategy", "time_s", "tflops"]  # what the figures read of predictions


# fig:model_square's model curves: (line style, legend) per `model predict --model`: the model dashed, as in the
# paper's figure, with global traffic through the L2 (what the paper's Sec. s:perf_discuss, "Cache effects",
# finds its model missing for the Small strategy) dotted, and the paper's alone dash-dotted where a file has it.
MODEL_LINES = {"issue": ("--", "model"), "l2": (":", "model with L2"), "paper": ("-.", "paper's model")}


def _predictions(model: pd.DataFrame | None) -> pd.DataFrame:
    """``model`` (rows of `model predict`; a file from before the ``model`` column is the default model's), or
    no rows with its columns when the run's folder has none."""
    if model is None or model.empty:
        return pd.DataFrame(columns=[*PREDICTED, "model"])
    return model if "model" in model else model.assign(model=DEFAULT_MODEL)

# Figure fig:model_square (strassenbench.sweeps.MODEL_SQUARE_IMPLS and _STRATEGIES); CUTLASS measured beside them
# where its kernel exists (Huge, the first strategy).


def fig_model_square(model: pd.DataFrame | None, measured: pd.DataFrame | None, out: Path, gpu: str,
                     device: str) -> Drawn:
    """Figure fig:model_square: measured (solid) and modeled (dashed, a prediction) effective TFLOPS of GEMM
    and direct 1- and 2-level Strassen with the Huge and Small strategies, CUTLASS measured with Huge."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    model = _predictions(model)
    good = ok_rows(measured) if measured is not None else pd.DataFrame()
    for ax, strategy in zip(axes, MODEL_SQUARE_STRATEGIES):
        mine = good[good["strategy"] == strategy] if not good.empty else good
        if strategy == MODEL_SQUARE_STRATEGIES[0] and not good.empty:  # CUTLASS's kernel is the Huge strategy's (128 x 128 x 8)
            mine = pd.concat([good[good["impl"] == "cutlass"], mine])
        for impl in ("cutlass", *MODEL_SQUARE_IMPLS):
            meas = mine[mine["impl"] == impl] if not mine.empty else mine
            if not meas.empty:
                draw_line(ax, meas, impl, "tflops", f"{label_of(impl)} (measured)")
            lines = model[(model["strategy"] == strategy) & (model["impl"] == impl)]
            for name, (look, what) in MODEL_LINES.items():
                line = lines[lines["model"] == name]
                if not line.empty:
                    draw_line(ax, line, impl, "tflops", f"{label_of(impl)} ({what})", dashed=look)
        if mine.empty:
            ax.text(0.02, 0.02, "no measurement with this strategy in this run (model only)" if not model.empty
                    else "no measurement with this strategy and no model_strategies.csv in this run",
                    transform=ax.transAxes, fontsize=8)
        ax.set_title(f"{strategy} strategy")
        ax.set_xlabel("m = k = n")
        size_axis(ax)
        ax.set_ylabel(Y_TFLOPS)
    legend_below(fig, axes, ncol=4)
    fig.suptitle(f"Measured (solid, {device}) and modeled (dashed, prediction for {gpu}), single precision")
    return figures.save(fig, out, "fig_model_square")


def _sweep_panels(model: pd.DataFrame | None, height: float):
    """A figure of the three sweeps side by side: (fig, axes, [(ax, sweep, that sweep's predictions)]), a panel
    without predictions saying which model file would have held them."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 3, figsize=(15, height), sharey=True)
    model = _predictions(model)
    panels = []
    for ax, sweep in zip(axes, SWEEPS):
        part = model[model["sweep"] == sweep]
        if part.empty:
            empty_note(ax, f"no model predictions of the {sweep} sweep in this run (model_{sweep}.csv)")
        panels.append((ax, sweep, part))
    return fig, axes, panels


def fig_model_sweeps(model: pd.DataFrame | None, out: Path, gpu: str) -> Drawn:
    """The model's predictions for the paper's three sweeps (square, rank-k, panel): predictions only."""
    fig, axes, panels = _sweep_panels(model, 4.2)
    for ax, sweep, part in panels:
        schemes = schemes_of(part)
        shown = [s for s in dict.fromkeys(schemes) if s in SCHEMES]
        for scheme in shown:
            ax.plot([], [], gid="scheme", label=f"_{scheme}")  # for the caption; '_': not in the legend
        for impl in dict.fromkeys(part["impl"]):
            for i, scheme in enumerate(shown):  # a curve per scheme where a file holds several ("-.": the second)
                line = part[(part["impl"] == impl) & (schemes == scheme)].sort_values("x")
                look, which = style(impl), f", {scheme}" if len(shown) > 1 else ""
                ax.plot(line["x"], line["tflops"], linestyle="--" if i == 0 else "-.", color=look["color"],
                        marker=look["marker"], markersize=3, markevery=max(1, len(line) // 8),
                        label=f"{label_of(impl)} (model{which})")
        panel_title, x_name = panel_labels(sweep, None)
        ax.set_title(panel_title)
        ax.set_xlabel(x_name)
        size_axis(ax)
        ax.set_ylabel(Y_TFLOPS)
    legend_below(fig, axes)
    fig.suptitle(f"Performance model, the paper's three sweeps, single precision: {gpu} (prediction, not measured)")
    return figures.save(fig, out, "fig_model_sweeps")


def fig_algorithms(model: pd.DataFrame | None, measured: pd.DataFrame | None, out: Path, gpu: str,
                   device: str) -> Drawn:
    """Which algorithm wins per shape: each algorithm's speedup over the GEMM on the three sweeps, predicted by
    the model (dashed) and measured where the run timed its implementation on a GPU (solid, markers)."""
    fig, axes, panels = _sweep_panels(model, 4.4)
    for ax, sweep, part in panels:
        gemm = part[part["impl"] == "gemm"].set_index("x")["time_s"]
        for impl in (i for i in dict.fromkeys(part["impl"]) if i != "gemm"):
            line = part[part["impl"] == impl].set_index("x").sort_index()
            label = label_of(impl).removesuffix(" (ours)")
            if not np.isfinite(line["time_s"].astype(float)).any():  # no TF32 tensor cores: never drawn at 0
                ax.plot([], [], gid=LEFT_OUT, label=f"_{label}")  # '_': not in the legend
                continue
            curve = pd.DataFrame({"x": line.index, "speedup": (gemm.reindex(line.index) / line["time_s"]).values})
            draw_line(ax, curve, impl, "speedup", f"{label} (model)", dashed=True)
            if measured is not None and not measured.empty:
                mine = measured[(measured["sweep"] == sweep) & (measured["impl"] == impl)]
                if not mine.empty:
                    draw_line(ax, mine, impl, "speedup", f"{label} (measured, {device})")
        speedup_panel(ax, sweep, "speedup over the GEMM = time(GEMM) / time")
    legend_below(fig, axes, ncol=3)
    fig.suptitle(f"Which algorithm wins per shape, single precision: {gpu} (dashed: prediction)")
    return figures.save(fig, out, "fig_algorithms")




def fig_issue_bounds(bounds: pd.DataFrame | None, out: Path) -> Drawn:
    """Per GPU model, each implementation's speedup over our GEMM at the largest square size: by the paper's
    model (T_flop, T_gmop, T_smop) and by issue slots alone (T_issue), both predictions; the ideal 8/7 and
    (8/7)^2 dotted."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(8, 4.2))
    if bounds is None or bounds.empty:
        empty_note(ax, "no model_issue_bounds.csv in this run (`strassenbench model issue-bounds`)")
        return figures.save(fig, out, "fig_issue_bounds")
    gpus = list(dict.fromkeys(bounds["gpu"]))
    impls = list(dict.fromkeys(bounds["impl"]))
    width = 0.8 / (2 * len(impls))
    for i, impl in enumerate(impls):
        mine = bounds[bounds["impl"] == impl].set_index("gpu").reindex(gpus)
        for j, (column, what, hatch) in enumerate((("paper_model", "paper's model", ""),
                                                    ("issue_slots", "issue slots", "//"))):
            x = [g + (2 * i + j - len(impls) + 0.5) * width for g in range(len(gpus))]
            ax.bar(x, mine[column], width, color=style(impl)["color"], hatch=hatch, edgecolor="white",
                   label=f"{label_of(impl)}: {what}")
    for ideal in (8 / 7, (8 / 7) ** 2):
        ax.axhline(ideal, color="black", linestyle=":", linewidth=0.8, gid="ideal", label="_ideal")
    ax.axhline(1.0, color="black", linewidth=0.8, gid="parity", label="_parity")
    ax.set_xticks(range(len(gpus)), gpus)
    ax.set_xlabel("GPU model (its specification, not a measurement)")
    ax.set_ylim(0.8, 1.4)
    ax.set_ylabel("speedup over our GEMM (prediction)")
    n = int(bounds["n"].iloc[0]) if not bounds.empty else 0
    ax.set_title(f"Speedup bounds at m = k = n = {n:,}, Huge, float32: paper's model vs issue slots")
    legend_below(fig, [ax], ncol=2)
    return figures.save(fig, out, "fig_issue_bounds")
