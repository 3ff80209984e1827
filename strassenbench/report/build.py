"""`strassenbench report`: one HTML page with every figure (PNG and PDF) and table of the paper.

Reads a run's folder (data/<device>/: square.csv, rankk.csv, panel.csv, strategies.csv, memlimit.csv,
verify.csv, system.json; any may be missing, and the report says so) and writes ``out/index.html``,
``out/figures/*.{png,pdf}`` and ``out/tables/*.md``. Model curves are predictions and labelled so.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..accuracy import growth_constants
from ..algebra.levels import multilevel
from ..algebra.primitives import variants
from ..algebra.schedule import schedule
from ..io import publish, staging, write_atomic
from ..impls import algorithm_impl, get_impl
from ..model.bounds import bounds_rows
from ..model.gpus import SPECS, GPUSpec
from ..model.perf import MODELED_IMPLS, active_blocks, impl_time, load_resources
from ..model.predict import crossover, predict
from ..occupancy import ARCHS
from ..results import ResultsError, folder_devices, read_results, read_system, timing_modes
from ..strategies import STRATEGIES
from ..sweeps import SWEEPS
from .analysis import claims, left_out, ok_rows, speedups
from .figures import (MODEL_SQUARE_IMPLS, Drawn, check_caption, fig_algorithms, fig_intro_comparison, fig_issue_bounds,
                      fig_memlimit, fig_model_square, fig_model_sweeps, fig_stra_square, fig_stra_square_more,
                      fig_tensorcore_square, label_of)
from .palette import PAPER_LINES
from .render import Table, render, table_of

__all__ = ["load_run", "build_report", "REPORT_FIGURES", "REPORT_TABLES"]

REPORT_FIGURES = ["fig_stra_square", "fig_stra_square_more", "fig_intro_comparison", "fig_model_square",
                  "fig_model_sweeps", "fig_issue_bounds", "fig_algorithms", "fig_memlimit", "fig_tensorcore_square"]
REPORT_TABLES = ["block_sizes", "variants_L1", "variants_L2", "streaming_L1_S2", "model_notation", "occupancy",
                 "model_bounds", "issue_bounds", "model_crossover", "algorithms", "kernel_resources", "memory_limits",
                 "numerical_error", "numerical_error_checks", "claims", "tensorcore_accuracy", "tensorcore_kernels",
                 "points_left_out"]


def _read(path: Path, kind: str) -> pd.DataFrame | None:
    """A result file of the run, checked (strassenbench.results; a broken one is refused), or None if absent."""
    return read_results(path, kind) if path.exists() else None


def _system(path: Path) -> dict:
    """The run's system.json, checked (results.read_system); {} without one."""
    return read_system(path) or {}


RESULT_FILES = [*(f"{s}.csv" for s in SWEEPS), "strategies.csv", "memlimit.csv", "verify.csv", "verify_impls.csv",
                "accuracy.csv"]


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
        "accuracy": _read(data / "accuracy.csv", "accuracy"),
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


def _cell(value: object) -> object:
    """A table cell as a reader wants it: whole numbers with thousands separators (11,780, never 1.178e+04),
    other numbers to four significant digits (small ones in scientific notation), text as it is."""
    if isinstance(value, bool) or value is None or not isinstance(value, (int, float)):
        return value
    if value != value:  # NaN
        return ""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.1f}"
    return f"{value:.4g}"


def _table(frame: pd.DataFrame | None, empty: str) -> tuple[str, Table | None]:
    """(markdown, the cells the page shows) of a table; (a one-line note, None) when there is nothing to show."""
    if frame is None or frame.empty:
        return f"_{empty}_\n", None
    frame = frame.astype(object).where(frame.notna(), "").map(_cell)
    return frame.to_markdown(index=False, disable_numparse=True) + "\n", table_of(frame)


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


def _notation(spec: GPUSpec) -> pd.DataFrame:
    """Figure tab:notation, all 17 rows: the paper's value (V100) and this model GPU's where it is a number."""
    paper = SPECS["V100"]
    rates = (("tau_flop", "arithmetic operation throughput", spec.tau_flop(), paper.tau_flop(), "TFLOPS"),
             ("tau_gmop", "global memory bandwidth (read-only cache included)", spec.tau_gmop, paper.tau_gmop,
              "TMOPS (TB/s)"),
             ("tau_smop", "shared memory bandwidth", spec.tau_smop, paper.tau_smop, "TMOPS (TB/s)"))
    rows = [(name, text, f"{theirs / 1e12:.2f} {unit}", f"{ours / 1e12:.2f} {unit}")
            for name, text, ours, theirs, unit in rates]
    formulas = [
        ("T", "total execution time (in seconds)", "max(T_flop, T_gmop, T_smop)"),
        ("t_x t_y", "number of threads per thread block", "(m_S n_S) / (m_R n_R)"),
        ("N_flop^x", "total flops for GEMM per thread block", "2 m_S n_S k"),
        ("N_flop^+(A)", "extra + operations for operand A", "(W_A - 1) m_S k"),
        ("N_flop^+(B)", "extra + operations for operand B", "(W_B - 1) n_S k"),
        ("N_flop^+(C)", "extra + operations for operand C", "(W_C - 1) m_S n_S"),
        ("N_flop", "total flops per thread block", "Eq. (eqn:n_flop)"),
        ("T_flop", "time for arithmetic operations", "Eq. (eqn:t_flop)"),
        ("N_gmop(X)", "global mops per block for operand X", "Eqs. (eqn:AB_gr_rs), (eqn:C_rg)"),
        ("N_gmop", "global memory operations per block", "Eq. (eqn:n_gmop)"),
        ("T_gmop", "time for global memory operations", "Eq. (eqn:t_gmop)"),
        ("N_smop(X)", "shared mops per block for operand X", "Eqs. (eqn:AB_gr_rs), (eqn:AB_sr)"),
        ("N_smop", "shared operations per block", "Eq. (eqn:n_smop)"),
        ("T_smop", "time for shared memory operations", "Eq. (eqn:t_smop)"),
    ]
    rows += [(name, text, value, value) for name, text, value in formulas]
    return pd.DataFrame(rows, columns=["notation", "description", f"value ({paper.name}, paper)",
                                       f"value ({spec.name})"])


def _block_sizes() -> pd.DataFrame:
    """Figure tab:gpu_block_size: the six strategies, with the threads and shared memory they imply."""
    return pd.DataFrame([{
        "strategy": s.name, "m_S": s.m_S, "n_S": s.n_S, "k_S": s.k_S, "m_R": s.m_R, "n_R": s.n_R,
        "m_W / m_R": s.warp_m, "n_W / n_R": s.warp_n, "threads": s.threads, "smem bytes (float32)": s.smem_bytes(4)}
        for s in STRATEGIES.values()])


# The paper's footnote to #blocks (Sec. s:perf_predict): active blocks per SM on a V100 for these kernels.
OCCUPANCY_KERNELS = (("Small", "GEMM", (1, 1, 1), "24"), ("Small", "1-level Var#0", (2, 2, 2), "20"),
                     ("Small", "2-level Var#0", (4, 4, 4), "18"), ("Huge", "GEMM", (1, 1, 1), "2"),
                     ("Huge", "1-level Var#0", (2, 2, 2), "2"), ("Huge", "2-level Var#0", (4, 4, 4), "2"))


def _occupancy(resources: pd.DataFrame | None) -> pd.DataFrame:
    """The footnote's active blocks per SM beside ours on sm_70, sm_80 and sm_90: from the build's
    resources.csv (ptxas's registers) where that architecture was built, else from the paper's register
    formula, Eq. (constrain_reg), marked "(formula)"."""
    rows = []
    for strategy, kernel, w, paper in OCCUPANCY_KERNELS:
        s = STRATEGIES[strategy]
        row = {"strategy": strategy, "kernel": kernel, "W_A, W_B, W_C": ", ".join(map(str, w)),
               "paper (V100)": paper}
        for arch, limits in ARCHS.items():
            spec = next(spec for spec in SPECS.values() if spec.arch == arch)
            blocks, source = active_blocks(spec, s, w, "float32", resources)
            row[arch] = f"{blocks}" if source == "resources.csv" else f"{blocks} (formula)"
        rows.append(row)
    return pd.DataFrame(rows)


ISSUE_BOUND_IMPLS = ("strassen1", "strassen2-direct", "strassen2-hybrid")


def issue_bounds(resources: pd.DataFrame | None, n: int = 20480) -> pd.DataFrame:
    """Per built-in GPU model, each Strassen implementation's speedup over our GEMM at m = k = n (Huge, float32):
    by the paper's model alone (T_flop, T_gmop, T_smop) and by issue slots alone (T_issue,
    strassenbench.model.issue), the main loops' instructions from ``resources`` where the build read them for
    the GPU's architecture. Predictions."""
    huge = STRATEGIES["Huge"]
    rows = []
    for key, spec in SPECS.items():
        gemm = impl_time(spec, "gemm", huge, n, n, n, "float32", resources)
        gemm_paper = impl_time(spec, "gemm", huge, n, n, n, "float32", resources, issue_slots=False)
        for impl in ISSUE_BOUND_IMPLS:
            t = impl_time(spec, impl, huge, n, n, n, "float32", resources)
            paper = impl_time(spec, impl, huge, n, n, n, "float32", resources, issue_slots=False)
            rows.append({"gpu": key, "arch": spec.arch, "impl": impl, "n": n,
                         "paper_model": round(gemm_paper.seconds / paper.seconds, 4),
                         "issue_slots": round(gemm.t_issue / t.t_issue, 4),
                         "with_issue_slots": round(gemm.seconds / t.seconds, 4), "source": "model (prediction)"})
    return pd.DataFrame(rows)


def tensorcore_accuracy(accuracy: pd.DataFrame | None) -> pd.DataFrame | None:
    """The accuracy table (strassenbench accuracy): each implementation's relative error against float64 per
    input distribution and size, and its ratio to the SIMT FP32 fused implementation of the same levels on the
    same inputs (3xTF32 should stay within a small factor of it; 1xTF32 is some 1000x off)."""
    if accuracy is None or accuracy.empty:
        return None
    a = accuracy.copy()
    simt = a[(a["mode"] == "simt") & ~a["impl"].astype(str).str.startswith("cublas")]
    base = simt.groupby(["inputs", "m", "levels"])["rel_error"].first().rename("simt_error")
    a = a.join(base, on=["inputs", "m", "levels"])
    a["vs_simt_fp32"] = (a["rel_error"] / a.pop("simt_error")).round(3)
    return a[["inputs", "n", "impl", "mode", "levels", "engine", "rel_error", "vs_simt_fp32", "bound", "status"]]


def tensorcore_kernels(resources: pd.DataFrame | None) -> pd.DataFrame | None:
    """The tensor-core kernels' machine code (vector loads, plain write-back) beside CUTLASS's 3xTF32 SGEMM:
    main-loop instructions per k_S slice and per HMMA, the HMMA share, how far ahead of its use each global
    load is issued, registers, spills and blocks per SM."""
    if resources is None or resources.empty or "mode" not in resources:
        return None
    r = resources
    keep = r[((r["mode"] != "simt") & (r["loads"] == "vector") & (r["write_mode"] == "plain"))
             | (r["source"] == "cutlass-3xtf32")].copy()
    if keep.empty:
        return None
    keep["instructions_per_hmma"] = (keep["loop_instructions"] / keep["loop_hmma"]).round(2)
    columns = ["arch", "source", "strategy", "mode", "W_A", "W_B", "W_C", "registers", "spill_stores", "smem_bytes",
               "blocks_per_sm", "loop_instructions", "loop_hmma", "instructions_per_hmma", "loop_hmma_share",
               "load_use_distance", "loop_global_loads"]
    return keep[columns].sort_values(["arch", "mode", "strategy", "W_A", "W_B", "W_C"])


def _tables(run: dict, spec: GPUSpec, resources: pd.DataFrame | None, sweeps_model: pd.DataFrame,
            algorithms_model: pd.DataFrame, bounds_by_gpu: pd.DataFrame) -> dict[str, tuple[pd.DataFrame | None, str]]:
    """Every table of the report; ``sweeps_model`` is the model's predictions for the three sweeps (the
    crossovers are read from it), ``bounds_by_gpu`` the issue_bounds of the figure beside them."""
    sweeps = run["sweeps"]
    var_tables = {}
    for levels in (1, 2):
        var_tables[f"variants_L{levels}"] = pd.DataFrame([{
            "Var#": v.number, "W_A": v.W_A, "W_B": v.W_B, "W_C": v.W_C, "Cnt#": v.count,
            "products": " ".join(p.name for p in v.products)} for v in variants("strassen", levels)])
    stages = pd.DataFrame([{**r, "product": r["product"].describe()} for r in schedule("strassen", 1, 2).rows()])
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
    claim_rows = claims(sweeps, run["memlimit"], _device(run), sweeps_model, spec.name)
    return {
        "block_sizes": (_block_sizes(), ""),
        **{k: (v, "") for k, v in var_tables.items()},
        "streaming_L1_S2": (stages, ""),
        "model_notation": (_notation(spec), ""),
        "occupancy": (_occupancy(resources), ""),
        "model_bounds": (bounds, ""),
        "issue_bounds": (bounds_by_gpu, ""),
        "kernel_resources": (res, "no build/resources.csv: run `strassenbench build`"),
        "memory_limits": (run["memlimit"], "no memlimit results in this run"),
        "model_crossover": (model_cross, ""),
        "algorithms": (_algorithm_table(run, _algorithm_impls(run), algorithms_model), ""),
        "numerical_error": (error, "no timed results in this run"),
        "numerical_error_checks": (checked, "no verification results in this run"),
        "claims": (claim_rows, ""),
        "tensorcore_accuracy": (tensorcore_accuracy(run.get("accuracy")),
                                "no accuracy table in this run (the tensorcore profile writes accuracy.csv)"),
        "tensorcore_kernels": (tensorcore_kernels(resources),
                               "no tensor-core kernels in the build (`strassenbench build --strategy TcHuge`)"),
        "points_left_out": (left_out(sweeps), "every timed point is in the figures (status ok, no blocking "
                                              "timeout)"),
    }


def _header(run: dict) -> tuple[list[tuple[str, str]], bool]:
    """The page's header rows (what the run measured on, as (name, value)) and whether it was a CPU run."""
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
    return [(k, str(v)) for k, v in rows.items()], cpu_run


SOURCES = {  # the files of the run's folder each figure's measured lines come from
    "fig_stra_square": ["square.csv", "rankk.csv", "panel.csv"],
    "fig_stra_square_more": ["square.csv", "rankk.csv", "panel.csv"], "fig_intro_comparison": ["square.csv"],
    "fig_model_square": ["strategies.csv"], "fig_model_sweeps": [], "fig_issue_bounds": [],
    "fig_memlimit": ["memlimit.csv"],
    "fig_algorithms": ["square.csv", "rankk.csv", "panel.csv"],
    "fig_tensorcore_square": ["square.csv"],
}


def _listed(labels: list[str]) -> str:
    return f" Lines: {'; '.join(labels)}." if labels else ""


def caption(drawn: Drawn, context: dict[str, str]) -> str:
    """A figure's caption, written from what the figure shows (``drawn``) and the run (``context``: device,
    model, missing paper lines); check_caption holds it to the figure."""
    stem, marks = drawn.stem, drawn.marks
    solid = " measured (solid)" if drawn.solid else ""
    dashed = "the model's prediction (dashed)" if drawn.dashed else ""
    if stem == "fig_stra_square":
        text = ("Figure fig:stra_square as the paper draws it: effective TFLOPS (2mnk / time, float32, median time "
                "per point) of the paper's six implementations over its three sweeps: square, rank-k (k fixed), "
                "panel (m = n fixed).")
        if "peak" in marks:
            text += " The dotted line is the GPU's FP32 peak."
        if context["missing"]:
            text += f" Not timed in this run: {context['missing']}."
    elif stem == "fig_stra_square_more":
        text = ("The implementations this run timed beyond the paper's figure (our GEMM, direct 2-level Strassen, "
                "other algorithms), with cuBLAS as the yardstick, on fig:stra_square's axes.")
        if "peak" in marks:
            text += " The dotted line is the GPU's FP32 peak."
    elif stem == "fig_intro_comparison":
        text = ("Figure fig:intro_comparison: effective TFLOPS of our 1-level Strassen, of the workspace-based "
                "1-level reference (the state of the art the paper sets it against, Lai et al.'s, re-implemented "
                "over cuBLAS in reference/) and of cuBLAS on square problems.")
        if "break-even" in marks:
            text += (" Vertical marks: the break-even with cuBLAS, the smallest size from which an implementation "
                     "is faster at every larger size (paper, V100: 1,536 ours, 7,168 the reference).")
        else:
            text += " Neither Strassen implementation stays faster than cuBLAS up to the largest size of this run."
    elif stem == "fig_model_square":
        parts = " and ".join(p for p in (solid.strip(), dashed) if p) or "nothing"
        text = ("Figure fig:model_square: GEMM and direct 1- and 2-level Strassen (their 1, 7 or 49 products one "
                f"after another, without task parallelism) with the Huge and Small strategies: {parts}, Sec. "
                f"s:perf_predict, for {context['model']}. The paper draws both strategies in one plot with CUTLASS as "
                "the GEMM; here each strategy has its panel, and CUTLASS is measured in the Huge one only: CUTLASS "
                "4.2's SIMT GEMM does not compile for the Small strategy's 16 x 16 x 16 thread block (its epilogue "
                "rejects the tile), so our GEMM stands for it.")
        if not drawn.solid:
            text += " No measurement with these strategies in this run (they are timed on GPU runs)."
    elif stem == "fig_model_sweeps":
        text = (f"The model's predictions (dashed) for {context['model']} on the paper's three sweeps; predictions "
                "only, the crossovers are in the model crossover table.")
    elif stem == "fig_issue_bounds":
        text = ("Per GPU model, each Strassen implementation's speedup over our GEMM at the largest square size "
                "(Huge, float32), predicted by the paper's model (T_flop, T_gmop, T_smop: plain bars) and by issue "
                "slots alone (T_issue, hatched): on an H100 every instruction of the main loop that is not an "
                "FFMA takes an FFMA's slot, on V100 and A100 one per FFMA issues free. The main loops' "
                "instructions come from the kernel build's resource table where it read that architecture's machine "
                "code, else from counting the loop's work (sm_70). Dotted: the ideal 8/7 and (8/7)^2.")
    elif stem == "fig_algorithms":
        text = ("Which algorithm wins per shape (square, rank-k, panel): each algorithm's speedup over our fused "
                f"GEMM, as {dashed or 'the model predicts it'}"
                + (" and as" + solid + " on this run's GPU" if drawn.solid else "")
                + "; above 1 the algorithm wins. The algorithms table has their error growth and measured errors.")
    elif stem == "fig_tensorcore_square":
        text = ("Beyond the paper: effective TFLOPS (float32, median time per point) of the square sweep's SIMT FP32 "
                "implementations beside their TF32 tensor-core counterparts: cuBLAS with "
                "CUBLAS_COMPUTE_32F_FAST_TF32, and our fused GEMM and Strassen kernels in 1xTF32 (operands and "
                "operand sums rounded to TF32) and 3xTF32 (split into two TF32 parts, three products: FP32-level "
                "accuracy, see the tensorcore accuracy table).")
        if "peak" in marks:
            text += " Dotted: the GPU's FP32 and dense TF32 peaks."
    elif stem == "fig_memlimit":
        text = ("The largest square problem each implementation can run in the free memory (the paper: 36,000 for "
                "our 1-level Strassen, 22,500 for the 1-level reference, on a 16 GB V100).")
        if "confirmed" in marks:
            text += " Full bars were confirmed by running at n and running out of memory at n + step."
        if "not confirmed" in marks:
            text += " Hatched bars are the memory formula's, not confirmed by a run."
    else:
        raise KeyError(stem)
    sources = context["sources"]
    where = (f" Data: {', '.join(sources)} in {context['data']}, measured on {context['device']}." if sources
             else "")
    return text + where + _listed(drawn.lines)


def _checked_caption(drawn: Drawn, context: dict) -> str:
    """``drawn``'s caption, held to the figure by check_caption with the run's names (device, model, folder:
    text from results, which may hold anything, such as 'a.csv' or '; dashed') standing in as placeholders."""
    names = {"device": "DEVICE", "model": "MODEL", "data": "FOLDER"}
    plain = replace(drawn, lines=[line.replace(context["device"], names["device"]) for line in drawn.lines])
    check_caption(caption(plain, {**context, **names}), plain, context["sources"])
    return caption(drawn, context)


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


def _build_report(data: Path, out: Path, stage: Path, resources_path: Path | None) -> list[Path]:
    """The report's files, made under ``stage`` (``out``: the folder they will be published in)."""
    run = load_run(data)
    sweeps = run["sweeps"]
    spec, measured_gpu = spec_for(run["system"], sweeps)
    header, cpu_run = _header(run)
    figures, tables = stage / "figures", stage / "tables"
    device = _device(run)
    model_name = f"{spec.name} ({'this GPU' if measured_gpu else 'the paper'}'s model)"
    peak = spec.tau_flop() / 1e12 if measured_gpu else None
    drawn: list[Drawn] = [
        fig_stra_square(sweeps, figures, peak, device, cpu=cpu_run),
        fig_stra_square_more(sweeps, figures, peak, device, cpu=cpu_run),
        fig_intro_comparison(sweeps, figures, device, cpu=cpu_run),
    ]
    sizes = sorted(set(sweeps[sweeps["sweep"] == "square"]["x"].astype(int))) if not sweeps.empty else []
    model_sizes = sorted(set(sizes) | set(range(512, 20481, 512)))  # the paper's axis, and this run's sizes
    resources = load_resources(resources_path) if resources_path else None
    model = pd.concat([predict(spec, list(MODEL_SQUARE_IMPLS), "square", model_sizes, s, "float32", resources)
                       for s in ("Huge", "Small")], ignore_index=True)
    drawn.append(fig_model_square(model, run["strategies"], figures, spec.name, device))
    sweeps_model = pd.concat([predict(spec, list(MODELED_IMPLS), sweep, model_sizes, "best", "float32", resources)
                              .assign(sweep=sweep) for sweep in SWEEPS], ignore_index=True)
    drawn.append(fig_model_sweeps(sweeps_model, figures, spec.name))
    bounds_by_gpu = issue_bounds(resources)
    drawn.append(fig_issue_bounds(bounds_by_gpu, figures))
    algorithm_impls = _algorithm_impls(run)
    algorithms_model = pd.concat([predict(spec, ["gemm", *algorithm_impls], sweep, model_sizes, "best", "float32",
                                          resources).assign(sweep=sweep) for sweep in SWEEPS], ignore_index=True)
    measured = None if cpu_run else speedups(sweeps[sweeps["dtype"] == "float32"], baseline="gemm")
    drawn.append(fig_algorithms(algorithms_model, measured, figures, spec.name, device))
    drawn.append(fig_memlimit(run["memlimit"], figures, device))
    peaks = {"FP32 peak": peak, "TF32 peak": spec.tf32_flops / 1e12} if measured_gpu else {}
    drawn.append(fig_tensorcore_square(sweeps, figures, {k: v for k, v in peaks.items() if v}, device, cpu=cpu_run))
    written: list[Path] = [path for d in drawn for path in d.paths]
    shown = []
    for name, (frame, empty) in _tables(run, spec, resources, sweeps_model, algorithms_model, bounds_by_gpu).items():
        markdown, cells = _table(frame, empty)
        path = tables / f"{name}.md"
        write_atomic(path, markdown)
        written.append(path)
        shown.append({"name": name, "title": name.replace("_", " "), "table": cells, "note": empty})
    timed = set(ok_rows(sweeps)["impl"].astype(str)) if not sweeps.empty else set()
    missing = ", ".join(label_of(i) for i in PAPER_LINES if i not in timed)
    figs = []
    for d in drawn:
        measured_lines = d.solid or any(k in d.marks for k in ("confirmed", "not confirmed"))
        sources = [f for f in SOURCES[d.stem] if (data / f).is_file()] if measured_lines else []
        context = {"device": device, "model": model_name, "data": str(data), "sources": sources, "missing": missing}
        figs.append({"stem": d.stem, "caption": _checked_caption(d, context)})
    page = _page(out, header, spec.name if cpu_run else None, figs, shown)
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
