"""`strassenbench report`: one HTML page with every figure (PNG and PDF) and table of the paper.

Reads a run's folder (data/<device>/: its results, strassenbench.report.inputs, and the model's files that
`strassenbench model` wrote beside them, data/<device>/model_*.csv; any may be missing, and the report says so)
and writes ``out/index.html``, ``out/figures/*.{png,pdf}`` and ``out/tables/*.md``. Model curves are
predictions, read from the model's files and labelled so: the report computes no model itself.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..io import publish, staging, write_atomic
from ..model.files import load_resources
from .analysis import ok_rows
from .contents import FIGURES, REPORT_FIGURES, REPORT_TABLES, Context, checked_caption, figure
from .figures import Drawn, label_of
from .figures_clock import CAPPED_SHARE
from .inputs import ModelGPU, RunData, device_of, load_report_inputs, load_run, model_gpu
from .page_tables import TABLES, table_markdown
from .palette import PAPER_LINES
from .render import render

__all__ = ["load_run", "build_report", "REPORT_FIGURES", "REPORT_TABLES"]


def _header(run: RunData) -> tuple[list[tuple[str, str]], bool]:
    """The page's header rows (what the run measured on, as (name, value)) and whether it was a CPU run."""
    system, sweeps = run.system, run.sweeps
    gpu = system.get("gpu") or {}
    cpu_run = system.get("engine", "numpy") != "cuda" and (sweeps.empty or (sweeps["engine"] != "cuda").all())
    rows = {"GPU": gpu.get("gpu", "none (CPU run)"), "driver": gpu.get("driver", ""),
            "CUDA runtime": gpu.get("cuda_runtime", ""), "cuBLAS": gpu.get("cublas", ""),
            "commit": system.get("commit", ""), "host": (system.get("host") or {}).get("cpu", "")}
    if not sweeps.empty and "sm_clock_start_mhz" in sweeps:
        clocks = pd.to_numeric(pd.concat([sweeps["sm_clock_start_mhz"], sweeps["sm_clock_end_mhz"]]), errors="coerce")
        if clocks.notna().any():
            rows["SM clock (min-max over points)"] = f"{clocks.min():.0f}-{clocks.max():.0f} MHz"
        low = pd.to_numeric(sweeps.get("low_clock_discards"), errors="coerce").fillna(0)
        rows["low-clock samples"] = (f"{int((low > 0).sum())} of {len(sweeps)} points discarded samples taken "
                                     f"below 75% of the maximum SM clock ({int(low.sum())} samples)")
        capped = pd.to_numeric(sweeps.get("capped_share"), errors="coerce")
        if capped.notna().any():
            rows["power or thermal cap"] = (f"{int((capped >= CAPPED_SHARE).sum())} of {int(capped.notna().sum())} "
                                            "points had half their samples or more under a power or thermal cap")
    return [(k, str(v)) for k, v in rows.items()], cpu_run


def build_report(data: Path, out: Path, resources_path: Path | None = None) -> list[Path]:
    """Write ``out/index.html`` with every figure (PNG and PDF, captioned with what it shows and where its data
    came from) and table (Markdown under ``out/tables``, each linked); return the files written.

    The report is made in a folder beside ``out`` and its files are moved into ``out`` only when every one of
    them was made: a report that fails leaves ``out`` as it was, and so does one whose ``out`` holds a folder, a
    link or another kind of file where a report file goes (strassenbench.io.publish). Other files of ``out`` (its
    README, tables other steps wrote) stay."""
    with staging(out) as stage:
        written = _build_report(data, out, stage, resources_path)
        publish(stage, out)  # all or nothing: an unexpected folder or file in out refuses before any is replaced
        return [out / path.relative_to(stage) for path in written]


def _captioned(drawn: list[Drawn], run: RunData, data: Path, device: str, model: ModelGPU) -> list[dict]:
    """Each figure's stem and caption, the caption held to what the figure shows."""
    sweeps = run.sweeps
    timed = set(ok_rows(sweeps)["impl"].astype(str)) if not sweeps.empty else set()
    missing = ", ".join(label_of(i) for i in PAPER_LINES if i not in timed)
    figs = []
    for d in drawn:
        measured_lines = d.solid or any(k in d.marks for k in ("confirmed", "not confirmed"))
        sources = [f for f in figure(d.stem).sources if (data / f).is_file()] if measured_lines else []
        context = {"device": device, "model": model.title, "data": str(data), "sources": sources, "missing": missing}
        figs.append({"stem": d.stem, "caption": checked_caption(d, context)})
    return figs


def _build_report(data: Path, out: Path, stage: Path, resources_path: Path | None) -> list[Path]:
    """The report's files, made under ``stage`` (``out``: the folder they will be published in)."""
    run = load_report_inputs(data)
    header, cpu_run = _header(run)
    model = model_gpu(run, cpu_run)
    device = device_of(run)
    resources = load_resources(resources_path) if resources_path else None
    context = Context(run, model, stage / "figures", device, cpu_run, resources)
    drawn = [entry.draw(context) for entry in FIGURES]  # the registry's figures, in the page's order
    written: list[Path] = [path for d in drawn for path in d.paths]
    shown = []
    for entry in TABLES:
        markdown, cells = table_markdown(entry.make(context), entry.note)
        path = stage / "tables" / f"{entry.name}.md"
        write_atomic(path, markdown)
        written.append(path)
        shown.append({"name": entry.name, "title": entry.name.replace("_", " "), "table": cells, "note": entry.note})
    banner = (model.name or "no GPU (no model files in the run's folder)") if cpu_run else None
    page = _page(out, header, banner, _captioned(drawn, run, data, device, model), shown)
    index = stage / "index.html"
    write_atomic(index, page)
    return [index, *written]


def _page(out: Path, header: list[tuple[str, str]], banner_model: str | None, figs: list[dict],
          shown: list[dict]) -> str:
    """index.html: the header, contents, every figure with its caption and every table (``shown``), and the
    tables other steps wrote into ``out/tables`` (the workflow's schedule tables), from the template, every
    value escaped. ``banner_model``: the model a CPU run's curves predict (None: not a CPU run)."""
    published = out / "tables"
    extra = sorted(p for p in published.glob("*.md") if p.stem not in REPORT_TABLES) if published.is_dir() else []
    more = [(p.name, p.stem.replace("_", " ")) for p in extra]
    contents = [(f"#{f['stem']}", f["stem"]) for f in figs] + [(f"#{t['name']}", t["title"]) for t in shown]
    if more:
        contents.append(("#more_tables", "more tables"))
    if (out / "README.md").is_file():  # the folder's own description (report/README.md in the repository)
        contents.append(("README.md", "about these files"))
    return render("report.html.j2", banner_model=banner_model, header=header, contents=contents, figures=figs,
                  tables=shown, more_tables=more)
