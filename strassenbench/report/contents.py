"""What the report holds: one registry entry per figure (its name, the run's files it reads, its caption writer and
its drawing) and per table (strassenbench.report.page_tables.TABLES), in the page's order, and the typed input
every one of them takes (Context). The workflow's report rule lists its outputs from here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import pandas as pd

from ..sweeps import SWEEPS
from . import captions as cap
from .captions import listed
from .analysis import speedups
from .figures import (BEST_STRATEGY, Drawn, check_caption, fig_dmma_square, fig_intro_comparison, fig_memlimit,
                      fig_stra_square, fig_stra_square_more, fig_tensorcore_square, fig_wgmma_square)
from .figures_clock import fig_clock_square
from .figures_model import fig_algorithms, fig_issue_bounds, fig_model_square, fig_model_sweeps
from .inputs import ModelGPU, RunData, model_frame
from .page_tables import MODEL_LINES, TABLES, algorithm_impls
from .winners import fig_winners

__all__ = ["Context", "FigureEntry", "FIGURES", "REPORT_FIGURES", "REPORT_TABLES", "figure", "caption",
           "checked_caption"]

SWEEP_FILES = tuple(f"{sweep}.csv" for sweep in SWEEPS)  # the paper's three sweeps' results
SWEEP_MODELS = tuple(f"model_{sweep}.csv" for sweep in SWEEPS)  # model predict's, best strategy per point


@dataclass(frozen=True)
class Context:
    """The typed input of every figure and table: the run's folder as read (RunData), the GPU its model files
    predict for, where figures go, the device's name, whether it was a CPU run, and the build's resources."""

    run: RunData
    model: ModelGPU
    figures: Path
    device: str
    cpu_run: bool
    resources: pd.DataFrame | None = None

    @cached_property
    def predicted(self) -> pd.DataFrame:
        """model predict's rows of the three sweeps (best strategy per point)."""
        return model_frame(self.run, *SWEEP_MODELS)

    def peaks(self, *names: str) -> dict[str, float]:
        """The model GPU's peaks of those names it has (TFLOPS; none unless the model is the measured GPU's)."""
        return {name: self.model.peaks[name] for name in names if name in self.model.peaks}

    @property
    def gpu(self) -> str:
        return self.model.name or "no model files"


@dataclass(frozen=True)
class FigureEntry:
    name: str  # its file stem and anchor
    sources: tuple[str, ...]  # the run folder's files its measured lines come from (the caption's data sentence)
    caption: Callable[[Drawn, dict], str]  # written from what it shows (strassenbench.report.captions)
    draw: Callable[[Context], Drawn]


def _paper_lines(c: Context) -> pd.DataFrame:
    return c.predicted[c.predicted["impl"].isin(MODEL_LINES)] if not c.predicted.empty else c.predicted


def _algorithms(c: Context) -> Drawn:
    shown = c.predicted[c.predicted["impl"].isin(["gemm", *algorithm_impls(c.run)])] if not c.predicted.empty \
        else c.predicted
    measured = None if c.cpu_run else speedups(c.run.sweeps[c.run.sweeps["dtype"] == "float32"], baseline="gemm")
    return fig_algorithms(shown, measured, c.figures, c.gpu, c.device)


FIGURES: tuple[FigureEntry, ...] = (
    FigureEntry("fig_stra_square", SWEEP_FILES, cap.stra_square_caption, lambda c: fig_stra_square(
        c.run.sweeps, c.figures, c.model.peaks.get("FP32 peak"), c.device, cpu=c.cpu_run)),
    FigureEntry("fig_stra_square_more", SWEEP_FILES, cap.stra_square_more_caption, lambda c: fig_stra_square_more(
        c.run.sweeps, c.figures, c.model.peaks.get("FP32 peak"), c.device, cpu=c.cpu_run)),
    FigureEntry("fig_clock_square", ("square.csv", "system.json"), cap.clock_square_caption, lambda c: fig_clock_square(
        c.run.sweeps, c.figures, (c.run.system.get("gpu") or {}).get("max_sm_clock_mhz"), c.device, c.cpu_run)),
    FigureEntry("fig_intro_comparison", ("square.csv",), cap.intro_comparison_caption, lambda c: fig_intro_comparison(
        c.run.sweeps, c.figures, c.device, cpu=c.cpu_run)),
    FigureEntry("fig_model_square", ("strategies.csv",), cap.model_square_caption, lambda c: fig_model_square(
        c.run.models["model_strategies.csv"], c.run.strategies, c.figures, c.gpu, c.device)),
    FigureEntry("fig_model_sweeps", (), cap.model_sweeps_caption, lambda c: fig_model_sweeps(
        _paper_lines(c), c.figures, c.gpu)),
    FigureEntry("fig_issue_bounds", (), cap.issue_bounds_caption, lambda c: fig_issue_bounds(
        c.run.models["model_issue_bounds.csv"], c.figures)),
    FigureEntry("fig_algorithms", SWEEP_FILES, cap.algorithms_caption, _algorithms),
    FigureEntry("fig_winners", SWEEP_FILES, cap.winners_caption, lambda c: fig_winners(
        c.run.models.get("model_winners.csv"), c.run.sweeps, c.figures, c.gpu, c.device, c.cpu_run)),
    FigureEntry("fig_memlimit", ("memlimit.csv",), cap.memlimit_caption, lambda c: fig_memlimit(
        c.run.memlimit, c.figures, c.device)),
    FigureEntry("fig_tensorcore_square", ("square.csv",), cap.tensorcore_square_caption,
                lambda c: fig_tensorcore_square(c.run.sweeps, c.figures, c.peaks("FP32 peak", "TF32 peak"), c.device,
                                                cpu=c.cpu_run)),
    FigureEntry("fig_dmma_square", ("square.csv",), cap.dmma_square_caption, lambda c: fig_dmma_square(
        c.run.sweeps, c.figures, c.peaks("FP64 peak", "FP64 tensor peak"), c.device, cpu=c.cpu_run)),
    FigureEntry("fig_wgmma_square", ("square.csv",), cap.wgmma_square_caption, lambda c: fig_wgmma_square(
        c.run.sweeps, c.figures, c.peaks("FP32 peak", "TF32 peak"), c.device, cpu=c.cpu_run)),
)
_BY_NAME = {entry.name: entry for entry in FIGURES}
REPORT_FIGURES = list(_BY_NAME)  # each written as PNG and PDF
REPORT_TABLES = [entry.name for entry in TABLES]  # each written as Markdown under tables/


def figure(name: str) -> FigureEntry:
    """The registry's entry of figure ``name``; KeyError for a figure the report does not have."""
    return _BY_NAME[name]


def _strategies(drawn: Drawn) -> str:
    """Where a point was timed with several strategies (the figure's BEST_STRATEGY marks), which were drawn."""
    chosen = [label.lstrip("_") for label in drawn.marks.get(BEST_STRATEGY, [])]
    if not chosen:
        return ""
    return (" Where the data time a point with several strategies, it is drawn at the fastest, as the paper draws "
            f"each implementation at its best strategy per size (the data's strategy column says which): "
            f"{'; '.join(chosen)}.")


def caption(drawn: Drawn, context: dict[str, str]) -> str:
    """A figure's caption, written from what the figure shows (``drawn``) and the run (``context``: device,
    model, missing paper lines): the registry's writer of that figure (strassenbench.report.captions), where its
    strategies and data came from, its lines; check_caption holds it to the figure. KeyError for an unknown
    figure."""
    text = figure(drawn.stem).caption(drawn, context) + _strategies(drawn)
    sources = context["sources"]
    where = (f" Data: {', '.join(sources)} in {context['data']}, measured on {context['device']}." if sources
             else "")
    return text + where + listed(drawn.lines)


def checked_caption(drawn: Drawn, context: dict) -> str:
    """``drawn``'s caption, held to the figure by check_caption with the run's names (device, model, folder:
    text from results, which may hold anything, such as 'a.csv' or '; dashed') standing in as placeholders."""
    names = {"device": "DEVICE", "model": "MODEL", "data": "FOLDER"}
    plain = replace(drawn, lines=[line.replace(context["device"], names["device"]) for line in drawn.lines])
    check_caption(caption(plain, {**context, **names}), plain, context["sources"])
    return caption(drawn, context)
