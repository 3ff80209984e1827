"""The paper's figures with seaborn/matplotlib, each saved as PNG and PDF.

Every figure function returns a ``Drawn``: what the saved figure holds, read back from the matplotlib objects
(its legend's entries, whether it has solid or dashed lines, the marks tagged with a ``gid``), so that the
report's captions are written from what was drawn and checked against it (``check_caption``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from ..families import DMMA, FAMILIES, TF32, WGMMA  # noqa: E402
from ..impls import get_impl  # noqa: E402
from ..sweeps import PAPER_FIXED, SWEEPS  # noqa: E402
from .analysis import best_rows, chosen_strategies, measured_crossover, precision_speedups  # noqa: E402
from .palette import DMMA_LINES, INTRO_LINES, PAPER_LINES, TENSORCORE_LINES, WGMMA_LINES, style  # noqa: E402

__all__ = ["speedup_panel", "Drawn", "CaptionError", "check_caption", "save", "fig_stra_square", "fig_stra_square_more",
           "fig_intro_comparison", "fig_memlimit", "fig_compare", "fig_tensorcore_square", "fig_dmma_square",
           "fig_wgmma_square", "panel_labels",
           "label_of", "draw_line", "draw_measured", "BEST_STRATEGY", "size_axis", "legend_below", "empty_note",
           "Y_TFLOPS"]

Y_TFLOPS = "effective TFLOPS = 2mnk / time"
PEAK = "peak"  # gid of the FP32 peak line
BREAK_EVEN = "break-even"  # gid of a break-even marker
BEST_STRATEGY = "best strategy"  # gid of an implementation drawn at the fastest of several strategies per point


class CaptionError(ValueError):
    """A caption that names something its figure does not show."""


@dataclass
class Drawn:
    """What a saved figure shows: its files, legend entries, line styles and tagged marks (gid: text)."""

    stem: str
    paths: list[Path]
    lines: list[str]
    solid: bool
    dashed: bool
    marks: dict[str, list[str]] = field(default_factory=dict)
    panels: list[str] = field(default_factory=list)
    dotted: bool = False


def _describe(fig: plt.Figure, stem: str) -> Drawn:
    lines = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    solid = dashed = dotted = False
    marks: dict[str, list[str]] = {}
    for ax in fig.axes:
        for line in ax.lines:
            gid = line.get_gid()
            if gid:
                marks.setdefault(gid, []).append(line.get_label())
            elif line.get_linestyle() in ("--", "-."):  # a model's (-.: the paper's alone, beside another)
                dashed = True
            elif line.get_linestyle() == "-":
                solid = True
            elif line.get_linestyle() == ":":
                dotted = True
        for patch in ax.patches:  # bars
            if patch.get_gid():
                marks.setdefault(patch.get_gid(), []).append(patch.get_label())
    return Drawn(stem, [], lines, solid, dashed, marks, [ax.get_title() for ax in fig.axes], dotted)


def save(fig: plt.Figure, out: Path, stem: str) -> Drawn:
    """Save ``fig`` as ``out/stem.png`` and ``.pdf`` and say what it shows. Every text (GPU, folder and other
    names from results among them) is drawn as written, never parsed as mathtext ($...$) or passed to TeX."""
    drawn = _describe(fig, stem)
    out.mkdir(parents=True, exist_ok=True)
    for text in fig.findobj(Text):
        text.set(parse_math=False, usetex=False)
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):  # texts made while saving
        for ext in ("png", "pdf"):
            path = out / f"{stem}.{ext}"
            fig.savefig(path, dpi=130, bbox_inches="tight")
            drawn.paths.append(path)
    plt.close(fig)
    return drawn


_FILE = re.compile(r"\b[\w.-]+\.(?:csv|json)\b")


def check_caption(caption: str, drawn: Drawn, sources: list[str]) -> None:
    """Refuse a caption that names a file the figure was not drawn from, a line its legend does not have
    (the caption's ``Lines: a; b.`` list must be the legend's entries), a dotted peak line, a break-even mark
    or dashed/solid curves that are not there."""
    for name in _FILE.findall(caption):
        if name not in sources:
            raise CaptionError(f"{drawn.stem}: the caption names {name}, which the figure was not drawn from")
    listed = re.search(r"Lines: (.*?)\.(?:\s|$)", caption)
    if listed:
        named = [s.strip() for s in listed.group(1).split(";")]
        if named != drawn.lines:
            missing = [s for s in named if s not in drawn.lines]
            raise CaptionError(f"{drawn.stem}: the caption lists {missing or named}, the legend has {drawn.lines}")
    elif drawn.lines:
        raise CaptionError(f"{drawn.stem}: the caption does not list the figure's lines")
    checks = (("dotted line", PEAK in drawn.marks, "a dotted peak line"),
              ("break-even", BREAK_EVEN in drawn.marks, "a break-even mark"),
              ("dashed", drawn.dashed, "dashed curves"), ("solid", drawn.solid, "solid curves"))
    for word, present, what in checks:
        if word in caption.lower() and not present:
            raise CaptionError(f"{drawn.stem}: the caption mentions {what}, which the figure does not have")


def empty_note(ax: plt.Axes, text: str) -> None:
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


def speedup_panel(ax: plt.Axes, sweep: str, ylabel: str) -> None:
    """A sweep's panel of speedups: the parity line at 1, the paper's title and x axis for the sweep, ``ylabel``."""
    ax.axhline(1.0, color="black", linewidth=0.8, gid="parity", label="_parity")
    title, x_name = panel_labels(sweep, None)
    ax.set_title(title)
    ax.set_xlabel(x_name)
    size_axis(ax)
    ax.set_ylabel(ylabel)


def size_axis(ax: plt.Axes) -> None:
    """At most six size ticks, with thousands separators (20,480 rather than 20480), so labels never collide."""
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def legend_below(fig: plt.Figure, axes, ncol: int = 4) -> None:  # noqa: ANN001
    """One legend for the figure, below the plots (outside the data), from every axis's labelled lines."""
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels and not label.startswith("_"):
                handles.append(handle)
                labels.append(label)
        if ax.get_legend():
            ax.get_legend().remove()
    if handles:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(ncol, len(labels)),
                   frameon=False, fontsize=8)


def label_of(impl: str, cpu: bool = False) -> str:
    """An implementation's legend entry: the registry's label, marked as a CPU stand-in on a CPU run."""
    label = get_impl(impl).label
    return f"{label} [numpy stand-in]" if cpu else label


def draw_line(ax: plt.Axes, part: pd.DataFrame, impl: str, y: str, label: str, dashed: bool | str = False) -> None:
    """One implementation's curve in its palette colour: solid with markers (measured) or dashed (model; or
    the line style ``dashed`` names)."""
    part = part.sort_values("x")
    look = style(impl)
    if dashed:
        ax.plot(part["x"], part[y], linestyle="--" if dashed is True else dashed, color=look["color"], linewidth=1.2,
                label=label)
    else:
        ax.plot(part["x"], part[y], linestyle="-", color=look["color"], marker=look["marker"], markersize=4,
                label=label)


def _present(frame: pd.DataFrame, impls) -> list[str]:  # noqa: ANN001
    return [impl for impl in impls if impl in set(frame["impl"])] if not frame.empty else []


def draw_measured(ax: plt.Axes, part: pd.DataFrame, impls, y: str = "tflops",  # noqa: ANN001
                  cpu: bool = False) -> list[str]:
    """The measured curve of each of ``impls`` in ``part`` (a sweep's rows of one dtype), each point at its
    fastest strategy (analysis.best_rows; the paper's figures, Sec. s:gpu_exp); an implementation chosen among
    several strategies somewhere is marked (BEST_STRATEGY: its label and the strategies that won). The
    implementations drawn, in order."""
    best = best_rows(part)
    present = _present(best, impls)
    chosen = chosen_strategies(part) if present else {}
    for impl in present:
        draw_line(ax, best[best["impl"] == impl], impl, y, label_of(impl, cpu))
        if impl in chosen:
            ax.plot([], [], gid=BEST_STRATEGY, label=f"_{label_of(impl, cpu)}: {', '.join(chosen[impl])}")
    return present


def _peak(ax: plt.Axes, peak_tflops: float | None, name: str = "FP32 peak") -> None:
    if peak_tflops:
        ax.axhline(peak_tflops, color="black", linestyle=":", linewidth=1, gid=PEAK,
                   label=f"_{name} {peak_tflops:,.1f} TFLOPS")
        ax.annotate(f"{name} {peak_tflops:,.1f}", (0.01, peak_tflops), xycoords=("axes fraction", "data"),
                    va="bottom", fontsize=7)


def _sweep_panels(frame: pd.DataFrame, impls: list[str], peak_tflops: float | None, cpu: bool,
                  nothing: str) -> plt.Figure:
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    for ax, sweep in zip(axes, SWEEPS):
        part = frame[(frame["sweep"] == sweep) & (frame["dtype"] == "float32")] if not frame.empty else frame
        if not draw_measured(ax, part, impls, cpu=cpu):
            empty_note(ax, nothing.format(sweep=sweep))
        _peak(ax, peak_tflops)
        ax.set_ylim(bottom=0)
        panel_title, x_name = panel_labels(sweep, _fixed(part, sweep))
        ax.set_title(panel_title)
        ax.set_xlabel(x_name)
        size_axis(ax)
        ax.set_ylabel(Y_TFLOPS)
    legend_below(fig, axes)
    return fig


def fig_stra_square(frame: pd.DataFrame, out: Path, peak_tflops: float | None, device: str,
                    cpu: bool = False) -> Drawn:
    """Figure fig:stra_square as the paper drew it: effective TFLOPS of its six lines (CUTLASS, cuBLAS, 1-level
    ours and reference, 2-level hybrid and reference) over its three sweeps, the FP32 peak dotted when known."""
    fig = _sweep_panels(frame, list(PAPER_LINES), peak_tflops, cpu, "none of the paper's lines in the {sweep} sweep")
    fig.suptitle(f"Performance of Strassen implementations, single precision: {device}")
    return save(fig, out, "fig_stra_square")


def more_impls(frame: pd.DataFrame) -> list[str]:
    """The implementations a run timed beyond the paper's six lines (our GEMM, 2-level direct, other
    algorithms), in the order they were run."""
    good = best_rows(frame)
    return [] if good.empty else [i for i in dict.fromkeys(good["impl"].astype(str)) if i not in PAPER_LINES]


def fig_stra_square_more(frame: pd.DataFrame, out: Path, peak_tflops: float | None, device: str,
                         cpu: bool = False) -> Drawn:
    """The same panels for the implementations beyond the paper's figure, with cuBLAS as the yardstick."""
    extra = more_impls(frame)
    fig = _sweep_panels(frame, ["cublas", *extra] if extra else [], peak_tflops, cpu,
                        "no implementation beyond the paper's in the {sweep} sweep")
    fig.suptitle(f"Beyond the paper's figure, single precision: {device}")
    return save(fig, out, "fig_stra_square_more")


def _square_lines(frame: pd.DataFrame, impls, cpu: bool, size: tuple[float, float],  # noqa: ANN001, ANN202
                  dtype: str = "float32"):
    """A one-panel figure with the square sweep's curve in ``dtype`` of each of ``impls`` the run timed: (figure,
    axes, the implementations drawn)."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=size)
    part = frame[(frame["sweep"] == "square") & (frame["dtype"] == dtype)] if not frame.empty else frame
    return fig, ax, draw_measured(ax, part, impls, cpu=cpu)


def _square_axes(fig: plt.Figure, ax: plt.Axes) -> None:
    """The square sweep's axes, from 0 TFLOPS, with the legend below."""
    ax.set_ylim(bottom=0)
    ax.set_xlabel("m = k = n")
    size_axis(ax)
    ax.set_ylabel(Y_TFLOPS)
    legend_below(fig, [ax], ncol=3)


def _family_square(frame: pd.DataFrame, out: Path, lines: tuple[str, ...], peaks: dict[str, float], cpu: bool,
                   dtype: str, family: str, title: str, stem: str, where: str = "") -> Drawn:
    """The square sweep's ``lines`` in ``dtype`` with ``peaks``; a note where no implementation of the kernel
    family ``family`` (strassenbench.families) was timed (``where``: on which GPUs the profile times them)."""
    fig, ax, present = _square_lines(frame, lines, cpu, (7.5, 4.6), dtype)
    if not any(get_impl(i).family.name == family for i in present):
        empty_note(ax, f"no {FAMILIES[family].what}results in this run (the tensorcore profile times them"
                       f"{' in float64' if dtype == 'float64' else ''}{where})")
    for name, tflops in peaks.items():
        _peak(ax, tflops, name)
    ax.set_title("square: m = k = n")
    _square_axes(fig, ax)
    fig.suptitle(title)
    return save(fig, out, stem)


def fig_tensorcore_square(frame: pd.DataFrame, out: Path, peaks: dict[str, float], device: str,
                          cpu: bool = False) -> Drawn:
    """Beyond the paper: the square sweep's SIMT FP32 lines (cuBLAS, our GEMM, 1- and 2-level Strassen) beside
    their tensor-core counterparts (cuBLAS TF32, CUTLASS's 3xTF32 SGEMM, ours in 1xTF32 and 3xTF32), each where
    the run timed it, with the FP32 and dense TF32 peaks (``peaks``: label -> TFLOPS, measured GPU only)."""
    return _family_square(frame, out, TENSORCORE_LINES, peaks, cpu, "float32", TF32,
                          f"SIMT FP32 and TF32 tensor cores, single precision: {device}", "fig_tensorcore_square")


def fig_dmma_square(frame: pd.DataFrame, out: Path, peaks: dict[str, float], device: str, cpu: bool = False) -> Drawn:
    """Beyond the paper: the square sweep in float64: cuBLAS's DGEMM (on the FP64 tensor cores of an A100 or
    H100), our SIMT GEMM, and CUTLASS's and our DMMA GEMM and 1- and 2-level Strassen on the FP64 tensor cores,
    with the FP64 and FP64 tensor peaks (``peaks``: label -> TFLOPS, measured GPU only)."""
    return _family_square(frame, out, DMMA_LINES, peaks, cpu, "float64", DMMA,
                          f"SIMT and FP64 tensor cores, double precision: {device}", "fig_dmma_square")


def fig_wgmma_square(frame: pd.DataFrame, out: Path, peaks: dict[str, float], device: str,
                     cpu: bool = False) -> Drawn:
    """Beyond the paper: the square sweep's wgmma implementations (Hopper's warpgroup tensor cores, sm_90a) in
    1xTF32 and 3xTF32 beside cuBLAS SGEMM and TF32, CUTLASS's sm_90 TF32 and 3xTF32 GEMMs and our mma.sync 3xTF32
    GEMM, each where the run timed it, with the FP32 and dense TF32 peaks (``peaks``, measured GPU only)."""
    return _family_square(frame, out, WGMMA_LINES, peaks, cpu, "float32", WGMMA,
                          f"Hopper's wgmma tensor cores, single precision: {device}", "fig_wgmma_square",
                          ", where every GPU of the run is sm_90")


def fig_intro_comparison(frame: pd.DataFrame, out: Path, device: str, cpu: bool = False) -> Drawn:
    """Figure fig:intro_comparison: effective TFLOPS of our 1-level Strassen, the state of the art it is set
    against (the 1-level reference) and cuBLAS on square problems, each break-even with cuBLAS marked."""
    fig, ax, present = _square_lines(frame, INTRO_LINES, cpu, (7.5, 4.2))
    if not present:
        empty_note(ax, "no square-sweep results of cuBLAS or 1-level Strassen in this run")
    at: dict[int, list[str]] = {}  # break-even size -> the implementations that reach it there
    for impl in ("strassen1", "strassen1-ref"):
        cross = measured_crossover(frame, impl)
        if cross and cross["stable"]:
            ax.axvline(cross["stable"], color=style(impl)["color"], linestyle=":", linewidth=1, gid=BREAK_EVEN,
                       label=f"_{impl}: {cross['stable']:,}")
            at.setdefault(cross["stable"], []).append(label_of(impl, cpu))
    for x, names in at.items():
        ax.annotate(f"break-even {', '.join(names)}: {x:,}", (x, 0.02), xycoords=("data", "axes fraction"),
                    rotation=90, fontsize=7, va="bottom", ha="right")
    _square_axes(fig, ax)
    ax.set_title(f"Break-even with cuBLAS, square problems, single precision: {device}")
    return save(fig, out, "fig_intro_comparison")


def fig_memlimit(memlimit: pd.DataFrame | None, out: Path, device: str) -> Drawn:
    """The largest square problem each implementation can run in the memory there is (paper: 36,000 for 1-level
    Strassen vs 22,500 for the 1-level reference on a 16 GB V100), each bar in its implementation's colour,
    hatched where no run confirmed it."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    if memlimit is None or memlimit.empty:
        empty_note(ax, "no memlimit results in this run")
    else:
        rows = memlimit.iloc[::-1]
        for y, r in enumerate(rows.itertuples()):
            confirmed = bool(r.confirmed)  # typed by the checked reader
            ax.barh(y, r.predicted_n, color=style(str(r.impl))["color"], hatch="" if confirmed else "//",
                    alpha=1.0 if confirmed else 0.45, gid="confirmed" if confirmed else "not confirmed")
            note = "confirmed by a run" if confirmed else "not confirmed"
            ax.annotate(f" {int(r.predicted_n):,} ({note})", (r.predicted_n, y), va="center", fontsize=7)
        ax.set_yticks(range(len(rows)), [str(label) for label in rows["label"]])
        free = int(memlimit["free_bytes"].iloc[0])
        ax.set_title(f"Largest square problem that fits: {device}, {free / 2**30:,.2f} GiB free")
        ax.set_xlim(0, rows["predicted_n"].max() * 1.45)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.set_xlabel("largest n (m = k = n), float32")
    return save(fig, out, "fig_memlimit")


# compare's panels: the title of each precision (analysis.PRECISIONS), against its own cuBLAS
COMPARE_PANELS = {"FP32": "FP32 (SIMT, float32): over cuBLAS SGEMM",
                  "TF32/3xTF32": "TF32 and 3xTF32 (tensor cores): over cuBLAS TF32",
                  "FP64": "FP64 (SIMT and DMMA, float64): over cuBLAS DGEMM"}


def _compare_legend(fig: plt.Figure, axes: list, gpus: list[str]) -> None:
    """One legend below the panels: every implementation drawn, then the GPUs (their line styles)."""
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
        ax.get_legend().remove()
    order = [label for label in entries if label not in gpus and label not in ("label", "gpu")]
    order += [gpu for gpu in gpus if gpu in entries]
    fig.legend([entries[label] for label in order], order, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3,
               frameon=False, fontsize=8)


def fig_compare(frames: dict[str, pd.DataFrame], out: Path) -> Drawn:
    """Speedup over cuBLAS on the square sweep, one panel per precision, each against its own cuBLAS
    (analysis.PRECISIONS; a precision no run has is left out), one line per GPU and implementation (colour:
    implementation, as in the report; line style: GPU)."""
    sns.set_theme(style="whitegrid", context="paper")
    data = {}
    for precision in COMPARE_PANELS:
        parts = [s.assign(gpu=gpu) for gpu, frame in frames.items()
                 if not (s := precision_speedups(frame, precision)).empty]
        if parts:
            data[precision] = pd.concat(parts)
    fig, axes = plt.subplots(1, max(len(data), 1), figsize=(7.5 * max(len(data), 1), 4.5), squeeze=False)
    for ax, (precision, part) in zip(axes[0], data.items()):
        palette = {label: style(impl)["color"] for impl, label in zip(part["impl"], part["label"])}
        sns.lineplot(data=part, x="x", y="speedup", hue="label", style="gpu", markers=True, palette=palette, ax=ax)
        ax.axhline(1.0, color="black", linewidth=1, gid="parity", label="_parity")
        ax.set_title(COMPARE_PANELS[precision])
        ax.set_xlabel("m = k = n")
        size_axis(ax)
        ax.set_ylabel("speedup = time(its cuBLAS) / time")
    if data:
        _compare_legend(fig, list(axes[0]), list(frames))
    else:
        empty_note(axes[0][0], "no square-sweep results with their cuBLAS to compare")
    fig.suptitle("Speedup over cuBLAS per GPU, square problems")
    return save(fig, out, "fig_compare_speedup")
