"""`strassenbench report`: one HTML page with every figure (PNG and PDF) and table of the paper.

Reads a run's folder (data/<device>/: square.csv, rankk.csv, panel.csv, strategies.csv, memlimit.csv,
verify.csv, system.json; any may be missing, and the report says so) and writes ``out/index.html``,
``out/figures/*.{png,pdf}`` and ``out/tables/*.md``. Model curves are predictions and labelled so.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from ..accuracy import growth_constants
from ..algebra.levels import multilevel
from ..algebra.primitives import variants
from ..algebra.schedule import schedule
from ..io import write_atomic
from ..impls import algorithm_impl, get_impl
from ..model.bounds import bounds_rows
from ..model.gpus import SPECS, GPUSpec
from ..model.perf import MODELED_IMPLS, load_resources
from ..model.predict import crossover, predict
from ..results import ResultsError, folder_devices, read_results, timing_modes
from ..strategies import STRATEGIES
from ..sweeps import SWEEPS
from .analysis import claims, ok_rows, speedups
from .figures import (fig_algorithms, fig_intro_comparison, fig_memlimit, fig_model_square, fig_model_sweeps,
                      fig_stra_square)

__all__ = ["load_run", "build_report", "REPORT_FIGURES", "REPORT_TABLES"]

REPORT_FIGURES = ["fig_stra_square", "fig_intro_comparison", "fig_model_square", "fig_model_sweeps", "fig_algorithms",
                  "fig_memlimit"]
REPORT_TABLES = ["strategies", "variants_L1", "variants_L2", "streaming_L1_S2", "model_notation", "model_bounds",
                 "model_crossover", "algorithms", "kernel_resources", "memory_limits", "numerical_error",
                 "numerical_error_checks", "claims"]


def _read(path: Path, kind: str) -> pd.DataFrame | None:
    """A result file of the run, checked (strassenbench.results; a broken one is refused), or None if absent."""
    return read_results(path, kind) if path.exists() else None


def _system(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        system = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ResultsError(f"{path}: not a system description ({err})") from None
    if not isinstance(system, dict):
        raise ResultsError(f"{path}: not a system description (not a JSON object)")
    return system


RESULT_FILES = [*(f"{s}.csv" for s in SWEEPS), "strategies.csv", "memlimit.csv", "verify.csv", "verify_impls.csv"]


def load_run(data: Path) -> dict[str, object]:
    """Every result file of a run's folder, checked; ResultsError if the folder holds none."""
    if not any((data / name).exists() for name in RESULT_FILES):
        raise ResultsError(f"{data}: no results ({', '.join(RESULT_FILES)})")
    sweeps = [f for f in (_read(data / f"{s}.csv", "bench") for s in SWEEPS) if f is not None]
    devices = folder_devices(data)
    if len(devices) > 1:
        listed = ", ".join(f"{name} ({where})" for name, where in devices.items())
        raise ResultsError(f"{data}: its results are of several devices ({listed}): one device per folder")
    modes = timing_modes(pd.concat(sweeps, ignore_index=True)) if sweeps else set()
    if len(modes) > 1:
        raise ResultsError(f"{data}: its sweeps were timed by different methods ({', '.join(sorted(modes))}), "
                           "which cannot be set against each other: measure them again with one --timing")
    system = _system(data / "system.json")
    return {
        "sweeps": pd.concat(sweeps, ignore_index=True) if sweeps else pd.DataFrame(),
        "strategies": _read(data / "strategies.csv", "bench"),
        "memlimit": _read(data / "memlimit.csv", "memlimit"),
        "verify": _read(data / "verify.csv", "verify"),
        "verify_impls": _read(data / "verify_impls.csv", "verify"),
        "system": system,
    }


def gpu_name(system: dict, sweeps: pd.DataFrame) -> str:
    """The GPU a run measured: system.json's pynvml name, else the results' gpu column ('' if neither)."""
    name = (system.get("gpu") or {}).get("gpu")
    if not name and not sweeps.empty and "gpu" in sweeps:
        name = sweeps["gpu"].iloc[0]
    return str(name or "")


def spec_for(system: dict, sweeps: pd.DataFrame) -> tuple[GPUSpec, bool]:
    """(spec, measured_gpu): the GPU's model spec (a built-in one when the name matches, else the attributes
    the run recorded in system.json), or the paper's V100 for a CPU run."""
    name = gpu_name(system, sweeps)
    for key, spec in SPECS.items():
        if key.lower() in name.lower():
            return spec, True
    if system.get("model_spec"):
        return GPUSpec(**system["model_spec"]), True
    return SPECS["V100"], False


def _table(frame: pd.DataFrame | None, empty: str) -> tuple[str, str]:
    """(markdown, html) of a table, or of a one-line note when there is nothing to show."""
    if frame is None or frame.empty:
        return f"_{empty}_\n", f"<p class='note'>{html.escape(empty)}</p>"
    frame = frame.astype(object).where(frame.notna(), "")
    return frame.to_markdown(index=False) + "\n", frame.to_html(index=False, border=0, classes="table",
                                                              float_format=lambda v: f"{v:.4g}")


def _device(run: dict) -> str:
    """The device and engine the run measured on, for titles and tables: the GPU's name (cuda engine), else
    CPU stand-ins on the numpy engine."""
    gpu = (run["system"].get("gpu") or {}).get("gpu")
    engine = run["system"].get("engine") or ("cuda" if gpu else "numpy")
    return f"{gpu} ({engine} engine)" if gpu else f"CPU stand-ins ({engine} engine)"


def _algorithm_impls(run: dict) -> list[str]:
    """The fused implementations to compare algorithms by: 1-level Strassen, one level of every algorithm the
    run verified, and every fused implementation it timed (mixed specs as themselves)."""
    names = ["strassen1"]
    verify = run.get("verify")
    if verify is not None and not verify.empty and "algorithm" in verify:
        names += [algorithm_impl(a).name for a in dict.fromkeys(verify["algorithm"].astype(str))
                  if a not in ("strassen", "classical")]
    sweeps = run["sweeps"]
    if not sweeps.empty:
        names += [i for i in dict.fromkeys(sweeps["impl"].astype(str)) if i not in MODELED_IMPLS
                  and get_impl(i).kind == "fused"]
    return list(dict.fromkeys(names))


def _algorithm_table(run: dict, impls: list[str], model: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm: shape, rank, the stability factor (error growth per level), the largest relative error
    of its verification runs per dtype, and the model's square crossover over the GEMM."""
    verify = run.get("verify")
    rows = []
    for impl in impls:
        chosen = get_impl(impl)
        alg = multilevel(chosen.algorithm, chosen.levels)
        row = {"implementation": impl, "algorithm": chosen.algorithm, "levels": chosen.levels,
               "shape": "x".join(map(str, alg.dims)), "rank": alg.rank,
               "stability factor e^L": str(growth_constants(chosen.algorithm, chosen.levels)[0])}
        if verify is not None and not verify.empty:
            mine = verify[verify["algorithm"].astype(str) == chosen.algorithm]
            for dtype in ("float32", "float64"):
                part = mine[mine["dtype"] == dtype]
                row[f"max rel. error {dtype} (verify, 1-2 levels)"] = (
                    f"{part['rel_error'].astype(float).max():.2e}" if not part.empty else "")
        square = model[(model["sweep"] == "square") & model["impl"].isin(["gemm", impl])]
        cross = crossover(square, impl, "gemm")
        row["model crossover (square)"] = cross["stable"]
        row["model max speedup"] = cross["max_speedup"]
        rows.append(row)
    return pd.DataFrame(rows)


def _tables(run: dict, spec: GPUSpec, resources: pd.DataFrame | None,
            sweeps_model: pd.DataFrame, algorithms_model: pd.DataFrame) -> dict[str, tuple[pd.DataFrame | None, str]]:
    """Every table of the report; ``sweeps_model`` is the model's predictions for the three sweeps (the
    crossovers are read from it)."""
    sweeps = run["sweeps"]
    strategies = pd.DataFrame([{
        "strategy": s.name, "m_S": s.m_S, "n_S": s.n_S, "k_S": s.k_S, "m_R": s.m_R, "n_R": s.n_R, "m_W": s.m_W,
        "n_W": s.n_W, "threads": s.threads, "smem bytes (f32)": s.smem_bytes(4)} for s in STRATEGIES.values()])
    var_tables = {}
    for levels in (1, 2):
        var_tables[f"variants_L{levels}"] = pd.DataFrame([{
            "Var#": v.number, "W_A": v.W_A, "W_B": v.W_B, "W_C": v.W_C, "Cnt#": v.count,
            "products": " ".join(p.name for p in v.products)} for v in variants("strassen", levels)])
    stages = pd.DataFrame([{**r, "product": r["product"].describe()} for r in schedule("strassen", 1, 2).rows()])
    notation = pd.DataFrame([
        {"symbol": "tau_flop", "meaning": "peak FP32 flops (2 x cores x SMs x clock)", "value": f"{spec.tau_flop():.4g} /s"},
        {"symbol": "tau_gmop", "meaning": "global-memory bandwidth, read-only cache included", "value": f"{spec.tau_gmop:.4g} B/s"},
        {"symbol": "tau_smop", "meaning": "shared-memory bandwidth", "value": f"{spec.tau_smop:.4g} B/s"},
        {"symbol": "SMs", "meaning": "streaming multiprocessors", "value": spec.sm_count},
        {"symbol": "clock", "meaning": "boost clock", "value": f"{spec.boost_clock_hz / 1e9:.3f} GHz"},
        {"symbol": "arch", "meaning": "architecture (occupancy limits)", "value": spec.arch},
        {"symbol": "source", "meaning": "where these numbers come from", "value": spec.source},
    ])
    bounds = pd.DataFrame(bounds_rows(spec, "float32"))
    res = None
    if resources is not None and not resources.empty:
        keep = resources[(resources["dtype"] == "float32")]
        columns = ["arch", "source", "strategy", "W_A", "W_B", "W_C", "write_mode", "loads", "registers",
                   "spill_stores", "spill_loads", "smem_bytes", "blocks_per_sm", "ffma", "lds128", "lds_other", "ldg",
                   "local_mem_ops", "loop_instructions", "loop_ffma_share", "loop_global_loads",
                   "loop_generic_loads", "load_use_distance", "loop_barriers"]
        res = keep[[c for c in columns if c in keep]]
    error = None  # the timed sweeps' errors, per implementation
    good = ok_rows(sweeps)
    if not good.empty:
        g = good.assign(ratio=good["rel_error"] / good["error_bound"])
        error = g.groupby(["impl", "levels", "dtype"], as_index=False).agg(
            points=("rel_error", "size"), median_rel_error=("rel_error", "median"), max_rel_error=("rel_error", "max"),
            max_error_over_bound=("ratio", "max"))
    checks = []  # the verification runs: implementations, then plans
    if run.get("verify_impls") is not None and not run["verify_impls"].empty:
        checks.append(run["verify_impls"].groupby(["impl", "engine", "levels", "dtype"], as_index=False).agg(
            cases=("rel_error", "size"), max_rel_error=("rel_error", "max")).rename(columns={"impl": "checked"}))
    if run["verify"] is not None and not run["verify"].empty:
        v = run["verify"].groupby(["algorithm", "engine", "levels", "dtype"], as_index=False).agg(
            cases=("rel_error", "size"), max_rel_error=("rel_error", "max"))
        v.insert(0, "checked", "plan: " + v.pop("algorithm").astype(str))
        checks.append(v)
    checked = pd.concat(checks, ignore_index=True) if checks else None
    model_cross = pd.DataFrame([
        {"sweep": sweep, "impl": impl, "baseline": "gemm", "gpu": spec.name, "source": "model (prediction)",
         **crossover(sweeps_model[(sweeps_model["sweep"] == sweep) & sweeps_model["impl"].isin(["gemm", impl])],
                     impl, "gemm")}
        for sweep in SWEEPS for impl in ("strassen1", "strassen2-hybrid", "strassen2-direct")])
    measured_on = _device(run)
    claim_rows = claims(sweeps, run["memlimit"])
    if not claim_rows.empty:
        claim_rows.insert(3, "measured on", measured_on)
    return {
        "strategies": (strategies, ""),
        **{k: (v, "") for k, v in var_tables.items()},
        "streaming_L1_S2": (stages, ""),
        "model_notation": (notation, ""),
        "model_bounds": (bounds, ""),
        "kernel_resources": (res, "no build/resources.csv: run `strassenbench build`"),
        "memory_limits": (run["memlimit"], "no memlimit results in this run"),
        "model_crossover": (model_cross, ""),
        "algorithms": (_algorithm_table(run, _algorithm_impls(run), algorithms_model), ""),
        "numerical_error": (error, "no timed results in this run"),
        "numerical_error_checks": (checked, "no verification results in this run"),
        "claims": (claim_rows, ""),
    }


def _header(run: dict) -> tuple[str, bool]:
    system, sweeps = run["system"], run["sweeps"]
    gpu = system.get("gpu") or {}
    cpu_run = system.get("engine", "numpy") != "cuda" and (sweeps.empty or (sweeps["engine"] != "cuda").all())
    rows = {"GPU": gpu.get("gpu", "none (CPU run)"), "driver": gpu.get("driver", ""),
            "CUDA runtime": gpu.get("cuda_runtime", ""), "cuBLAS": gpu.get("cublas", ""),
            "commit": system.get("commit", ""), "host": (system.get("host") or {}).get("cpu", "")}
    if not sweeps.empty and "sm_clock_start_mhz" in sweeps:
        clocks = pd.to_numeric(pd.concat([sweeps["sm_clock_start_mhz"], sweeps["sm_clock_end_mhz"]]), errors="coerce")
        if clocks.notna().any():
            rows["SM clock (min-max over points)"] = f"{clocks.min():.0f}-{clocks.max():.0f} MHz"
        throttled = pd.to_numeric(sweeps.get("throttled_samples"), errors="coerce").fillna(0)
        rows["throttling"] = (f"{int((throttled > 0).sum())} of {len(sweeps)} points had throttled samples "
                              f"({int(throttled.sum())} samples)")
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows.items())
    return f"<table class='header'>{body}</table>", cpu_run


CAPTIONS = {
    "fig_stra_square": "Effective TFLOPS (2mnk / time) of every implementation over the paper's three sweeps "
                       "(figure fig:stra_square): square, rank-k (k fixed), panel (m = n fixed); float32, median "
                       "time per point; the dotted line is the GPU's FP32 peak.",
    "fig_intro_comparison": "Speedup over cuBLAS on the square sweep (figure fig:intro_comparison); a vertical "
                            "line marks where an implementation stays faster than cuBLAS at every larger size.",
    "fig_model_square": "The performance model (Sec. s:model; dashed, a prediction) beside measurements with "
                        "the Huge and Small strategies (solid; figure fig:model_square).",
    "fig_model_sweeps": "The model's predictions for the three sweeps on the paper's axes (predictions only; "
                        "the crossovers are in the model crossover table).",
    "fig_algorithms": "Which algorithm wins per shape (square, rank-k, panel): each algorithm's speedup over the "
                      "fused GEMM, as the performance model predicts it (dashed) and, on a GPU run that timed "
                      "its implementation, as measured (solid); above 1 the algorithm wins. The algorithms table "
                      "has their error growth and measured errors.",
    "fig_memlimit": "The largest square problem each implementation can run in the free memory (the paper: "
                    "36,000 for 1-level Strassen vs 22,500 for the 2-level reference on a 16 GB V100); green "
                    "bars were confirmed by running at n and running out of memory at n + step.",
}
SOURCES = {
    "fig_stra_square": ["square.csv", "rankk.csv", "panel.csv"], "fig_intro_comparison": ["square.csv"],
    "fig_model_square": ["strategies.csv"], "fig_model_sweeps": [], "fig_memlimit": ["memlimit.csv"],
    "fig_algorithms": ["square.csv", "rankk.csv", "panel.csv"],
}


def build_report(data: Path, out: Path, resources_path: Path | None = None) -> list[Path]:
    """Write ``out/index.html`` with every figure (PNG and PDF, captioned with what it shows and where its data
    came from) and table (Markdown under ``out/tables``, each linked); return the files written.

    The report is made in a folder beside ``out`` and its files are moved into ``out`` only when every one of
    them was made: a report that fails leaves ``out`` as it was. Other files of ``out`` (its README, tables
    other steps wrote) stay."""
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial.", dir=out.parent))
    try:
        written = _build_report(data, out, stage, resources_path)
        for path in written:  # publish: each file replaced whole (os.replace within one file system)
            target = out / path.relative_to(stage)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
        return [out / path.relative_to(stage) for path in written]
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _build_report(data: Path, out: Path, stage: Path, resources_path: Path | None) -> list[Path]:
    """The report's files, made under ``stage`` (``out``: the folder they will be published in)."""
    run = load_run(data)
    sweeps = run["sweeps"]
    spec, measured_gpu = spec_for(run["system"], sweeps)
    header, cpu_run = _header(run)
    figures, tables = stage / "figures", stage / "tables"
    device = _device(run)
    model_name = f"{spec.name} ({'this GPU' if measured_gpu else 'the paper'}'s model)"
    written: list[Path] = []
    peak = spec.tau_flop() / 1e12 if measured_gpu else None
    written += fig_stra_square(sweeps, figures, peak, device, cpu=cpu_run)
    written += fig_intro_comparison(sweeps, figures, device, cpu=cpu_run)
    sizes = sorted(set(sweeps[sweeps["sweep"] == "square"]["x"].astype(int))) if not sweeps.empty else []
    model_sizes = sorted(set(sizes) | set(range(512, 20481, 512)))  # the paper's axis, and this run's sizes
    resources = load_resources(resources_path) if resources_path else None
    model = pd.concat([predict(spec, ["gemm", "strassen1", "strassen2-direct"], "square", model_sizes, s, "float32",
                               resources) for s in ("Huge", "Small")], ignore_index=True)
    written += fig_model_square(model, run["strategies"], figures, spec.name, device)
    sweeps_model = pd.concat([predict(spec, list(MODELED_IMPLS), sweep, model_sizes, "best", "float32", resources)
                              .assign(sweep=sweep) for sweep in SWEEPS], ignore_index=True)
    written += fig_model_sweeps(sweeps_model, figures, spec.name)
    algorithm_impls = _algorithm_impls(run)
    algorithms_model = pd.concat([predict(spec, ["gemm", *algorithm_impls], sweep, model_sizes, "best", "float32",
                                          resources).assign(sweep=sweep) for sweep in SWEEPS], ignore_index=True)
    measured = None if cpu_run else speedups(sweeps[sweeps["dtype"] == "float32"], baseline="gemm")
    written += fig_algorithms(algorithms_model, measured, figures, spec.name, device)
    written += fig_memlimit(run["memlimit"], figures, device)
    sections, contents = [], []
    for name, (frame, empty) in _tables(run, spec, resources, sweeps_model, algorithms_model).items():
        markdown, table_html = _table(frame, empty)
        path = tables / f"{name}.md"
        write_atomic(path, markdown)
        written.append(path)
        sections.append(f"<h3 id='{name}'>{name.replace('_', ' ')} (<a href='tables/{name}.md'>Markdown</a>)</h3>"
                        f"{table_html}")
        contents.append(f"<a href='#{name}'>{name.replace('_', ' ')}</a>")
    # Tables other steps wrote beside ours (the workflow's schedule tables), linked too.
    published = out / "tables"
    extra = sorted(p for p in published.glob("*.md") if p.stem not in REPORT_TABLES) if published.is_dir() else []
    if extra:
        links = "".join(f"<li><a href='tables/{p.name}'>{html.escape(p.stem.replace('_', ' '))}</a></li>" for p in extra)
        sections.append(f"<h3 id='more_tables'>more tables</h3><ul>{links}</ul>")
        contents.append("<a href='#more_tables'>more tables</a>")
    if (out / "README.md").is_file():  # the folder's own description (report/README.md in the repository)
        contents.append("<a href='README.md'>about these files</a>")
    banner = ""
    if cpu_run:
        banner = ("<div class='banner'>CPU run: no GPU was used. Timings are of CPU stand-ins on the numpy "
                  "engine at smoke sizes and say nothing about any GPU; model curves are predictions for "
                  f"{html.escape(spec.name)}.</div>")
    figs = []
    for f in REPORT_FIGURES:
        files = ", ".join(SOURCES[f])
        source = (f"Data: {html.escape(files)} in {html.escape(str(data))}, measured on {html.escape(device)}."
                  if files else f"Model for {html.escape(model_name)}; no measurement.")
        figs.append(f"<figure id='{f}'><img src='figures/{f}.png' alt='{f}'><figcaption><b>{f}.</b> "
                    f"{html.escape(CAPTIONS[f])} {source} (<a href='figures/{f}.pdf'>PDF</a>)</figcaption></figure>")
        contents.insert(len(figs) - 1, f"<a href='#{f}'>{f}</a>")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>strassenbench report</title>
<style>body{{font-family:sans-serif;max-width:1200px;margin:auto}} img{{max-width:100%}}
.banner{{background:#fde68a;border:2px solid #b45309;padding:.8em;font-weight:bold}}
table{{border-collapse:collapse;font-size:12px}} td,th{{border:1px solid #ccc;padding:2px 6px}}
figcaption{{font-size:13px;margin-bottom:1.5em}} .note{{color:#666;font-style:italic}}</style></head><body>
<h1>strassenbench: Strassen's algorithm with fused kernels (FLAME Working Note #88)</h1>
{banner}{header}
<p>Contents: {' &middot; '.join(contents)}</p>
<h2>Figures</h2>{''.join(figs)}
<h2>Tables</h2>{''.join(sections)}
</body></html>
"""
    index = stage / "index.html"
    write_atomic(index, page)
    return [index, *written]
