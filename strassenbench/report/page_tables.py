"""The report's tables: measured ones from the run's results, the model's as its files hold them
(strassenbench.model.files), and the paper's tables of the algorithm (variants, strategies, schedule)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ..accuracy import growth_constants
from ..algebra.levels import multilevel
from ..algebra.primitives import variants
from ..algebra.schedule import schedule
from ..families import FAMILIES, TF32
from ..impls import PAPER_MODELED, algorithm_impl, get_impl
from ..io import markdown
from ..strategies import STRATEGIES
from ..sweeps import SWEEPS
from .analysis import claims, left_out, ok_rows, scheme_name
from .winners import winners_table
from .inputs import ModelGPU, RunData, device_of, model_frame
from .render import Table, table_of

__all__ = ["cell", "table_markdown", "TableEntry", "TABLES", "algorithm_impls", "MODEL_LINES", "CROSSOVER_IMPLS"]

# The model's figure of the paper's three sweeps: the paper's implementations the model has a formula for
# (CUTLASS and cuBLAS have none: our GEMM stands for them).
MODEL_LINES = PAPER_MODELED  # the paper's implementations the model draws (strassenbench.impls)
CROSSOVER_IMPLS = ("strassen1", "strassen2-hybrid", "strassen2-direct")  # the model crossover table's
NO_MODEL = "no {name} in the run's folder: `strassenbench model {command}` writes it (the workflow's model rules)"


def cell(value: object) -> object:
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


def table_markdown(frame: pd.DataFrame | None, empty: str) -> tuple[str, Table | None]:
    """(markdown, the cells the page shows) of a table; (a one-line note, None) when there is nothing to show."""
    if frame is None or frame.empty:
        return f"_{empty}_\n", None
    frame = frame.astype(object).where(frame.notna(), "").map(cell)
    return markdown(frame, disable_numparse=True), table_of(frame)


def algorithm_impls(run: RunData) -> list[str]:
    """The fused implementations to compare algorithms by: 1-level Strassen, one level of every algorithm the
    run verified, and every fused implementation it timed beyond the paper's (mixed specs as themselves)."""
    names = ["strassen1"]
    verify = run.verify
    if verify is not None and not verify.empty and "algorithm" in verify:
        names += [algorithm_impl(a).name for a in dict.fromkeys(verify["algorithm"].astype(str))
                  if a not in ("strassen", "classical")]
    sweeps = run.sweeps
    if not sweeps.empty:
        names += [i for i in dict.fromkeys(sweeps["impl"].astype(str)) if i not in MODEL_LINES
                  and get_impl(i).kind == "fused"]
    return list(dict.fromkeys(names))


def _speedup(run: RunData, sweep: str, impl: str) -> dict[str, object]:
    """model_speedup.csv's row of ``impl`` in ``sweep`` ({} where there is none)."""
    speedup = run.models.get("model_speedup.csv")
    if speedup is None:
        return {}
    row = speedup[(speedup["sweep"] == sweep) & (speedup["impl"] == impl) & (speedup["dtype"] == "float32")]
    return row.iloc[0].to_dict() if not row.empty else {}


def _algorithm_table(run: RunData) -> pd.DataFrame:
    """Per algorithm: shape, rank, additions (counted naively), omega, the stability factor (error growth per
    level), the largest relative error of its verification runs per dtype, and the model's square crossover over
    the GEMM (model_speedup.csv)."""
    verify = run.verify
    rows = []
    for impl in algorithm_impls(run):
        chosen = get_impl(impl)
        alg = multilevel(chosen.algorithm, chosen.levels)
        row = {"implementation": impl, "algorithm": chosen.algorithm, "levels": chosen.levels,
               "shape": "x".join(map(str, alg.dims)), "rank": alg.rank, "additions": alg.additions,
               "omega": f"{alg.omega:.4f}",
               "stability factor e^L": str(growth_constants(chosen.algorithm, chosen.levels)[0])}
        if verify is not None and not verify.empty:
            mine = verify[verify["algorithm"].astype(str) == chosen.algorithm]
            for dtype in ("float32", "float64"):
                part = mine[mine["dtype"] == dtype]
                row[f"max rel. error {dtype} (verify, 1-2 levels)"] = (
                    f"{part['rel_error'].astype(float).max():.2e}" if not part.empty else "")
        cross = _speedup(run, "square", impl)
        row["model crossover (square)"] = cross.get("stable", "")
        row["model max speedup"] = cross.get("max_speedup", "")
        rows.append(row)
    return pd.DataFrame(rows)


def _notation(run: RunData) -> pd.DataFrame | None:
    """Figure tab:notation, all 17 rows: the paper's value (V100) and the model GPU's where it is a number
    (model_spec.csv: the paper's row, key V100, and the model's, its last)."""
    spec = run.models.get("model_spec.csv")
    if spec is None or spec.empty:
        return None
    ours, paper = spec.iloc[-1], spec[spec["key"] == "V100"]
    paper = paper.iloc[0] if not paper.empty else None
    rates = (("tau_flop", "arithmetic operation throughput", "tau_flop_float32", "TFLOPS"),
             ("tau_gmop", "global memory bandwidth (read-only cache included)", "tau_gmop", "TMOPS (TB/s)"),
             ("tau_smop", "shared memory bandwidth", "tau_smop", "TMOPS (TB/s)"))
    rows = [(name, text, f"{paper[column] / 1e12:.2f} {unit}" if paper is not None else "",
             f"{ours[column] / 1e12:.2f} {unit}") for name, text, column, unit in rates]
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
    paper_name = paper["gpu"] if paper is not None else "V100"
    return pd.DataFrame(rows, columns=["notation", "description", f"value ({paper_name}, paper)",
                                       f"value ({ours['gpu']})"])


def _block_sizes() -> pd.DataFrame:
    """Figure tab:gpu_block_size: the six strategies, with the threads and shared memory they imply."""
    return pd.DataFrame([{
        "strategy": s.name, "m_S": s.m_S, "n_S": s.n_S, "k_S": s.k_S, "m_R": s.m_R, "n_R": s.n_R,
        "m_W / m_R": s.warp_m, "n_W / n_R": s.warp_n, "threads": s.threads, "smem bytes (float32)": s.smem_bytes(4)}
        for s in STRATEGIES.values()])


def _occupancy(run: RunData) -> pd.DataFrame | None:
    """The paper's footnote to #blocks (active blocks per SM on a V100) beside ours on sm_70, sm_80 and sm_90,
    as model_occupancy.csv holds them: from the build's resources.csv where that architecture was built, else
    from the paper's register formula, marked "(formula)"."""
    occupancy = run.models.get("model_occupancy.csv")
    if occupancy is None or occupancy.empty:
        return None
    rows: dict[tuple, dict] = {}
    for r in occupancy.itertuples():
        row = rows.setdefault((r.strategy, r.kernel, r.W_A, r.W_B, r.W_C), {
            "strategy": r.strategy, "kernel": r.kernel, "W_A, W_B, W_C": f"{r.W_A}, {r.W_B}, {r.W_C}",
            "paper (V100)": str(r.paper_v100)})
        row[r.arch] = f"{r.blocks_per_sm}" if r.occupancy == "resources.csv" else f"{r.blocks_per_sm} (formula)"
    return pd.DataFrame(list(rows.values()))


def _model_crossover(run: RunData) -> pd.DataFrame | None:
    """The model's crossovers of 1-level, 2-level hybrid and 2-level direct Strassen over the GEMM, per sweep
    (model_speedup.csv)."""
    rows = [{"sweep": sweep, "impl": impl, "baseline": cross["baseline"], "gpu": cross["gpu"],
             "source": "model (prediction)", **{k: cross[k] for k in ("first", "stable", "max_speedup", "at")},
             "scheme": scheme_name(cross.get("scheme"))}
            for sweep in SWEEPS for impl in CROSSOVER_IMPLS if (cross := _speedup(run, sweep, impl))]
    return pd.DataFrame(rows) if rows else None


def tensorcore_accuracy(accuracy: pd.DataFrame | None) -> pd.DataFrame | None:
    """The accuracy table (strassenbench accuracy): each implementation's relative error (float32 against a
    float64 product, float64 against an exact one) per dtype, input distribution and size, and its ratio to the
    SIMT fused implementation of the same dtype and levels on the same inputs (3xTF32 should stay within a small
    factor of SIMT FP32, 1xTF32 is some 1000x off; DMMA within a small factor of SIMT FP64). A file that predates
    the dtype column is float32's."""
    if accuracy is None or accuracy.empty:
        return None
    a = accuracy.copy()
    a["dtype"] = a["dtype"].fillna("float32").replace("", "float32") if "dtype" in a else "float32"
    simt = a[(a["mode"] == "simt") & ~a["impl"].astype(str).str.startswith("cublas")]
    keys = ["dtype", "inputs", "m", "levels"]
    base = simt.groupby(keys)["rel_error"].first().rename("simt_error")
    a = a.join(base, on=keys)
    a["vs_simt"] = (a["rel_error"] / a.pop("simt_error")).round(3)
    return a[["dtype", "inputs", "n", "impl", "mode", "levels", "engine", "rel_error", "vs_simt", "bound", "status"]]


def tensorcore_kernels(resources: pd.DataFrame | None) -> pd.DataFrame | None:
    """The tensor-core kernels' machine code (vector loads, plain write-back) beside CUTLASS's 3xTF32 SGEMM and
    DMMA DGEMM: main-loop instructions per k_S slice, per mma and per 1,024 multiply-adds of mma, the mma share,
    how far ahead of its use each global load is issued, registers, spills and blocks per SM."""
    if resources is None or resources.empty or "mode" not in resources:
        return None
    r = resources
    keep = r[((r["mode"] != "simt") & (r["loads"] == "vector") & (r["write_mode"] == "plain"))
             | r["source"].isin(["cutlass-3xtf32", "cutlass-dmma", "cutlass-tf32-sm90"])].copy()
    if keep.empty:
        return None
    keep["instructions_per_hmma"] = (keep["loop_instructions"] / keep["loop_hmma"]).round(2)
    # Per 1,024 multiply-adds of mma (one m16n8k8): what mma of different shapes compare by (sm_90's DMMA.16x8x16
    # does eight DMMA.884's work); absent from a resources table written before the column was.
    macs = keep["loop_mma_macs"] if "loop_mma_macs" in keep else float("nan")
    keep["instructions_per_kmac"] = (keep["loop_instructions"] / (macs / 1024)).round(2)
    columns = ["arch", "source", "strategy", "mode", "W_A", "W_B", "W_C", "registers", "spill_stores", "smem_bytes",
               "blocks_per_sm", "loop_instructions", "loop_hmma", "instructions_per_hmma", "instructions_per_kmac",
               "loop_hmma_share", "load_use_distance", "loop_global_loads"]
    return keep[columns].sort_values(["arch", "mode", "strategy", "W_A", "W_B", "W_C"])


RESOURCE_COLUMNS = ["arch", "source", "strategy", "W_A", "W_B", "W_C", "write_mode", "loads", "registers",
                    "spill_stores", "spill_loads", "smem_bytes", "blocks_per_sm", "ffma", "lds128", "lds_other", "ldg",
                    "local_mem_ops", "global_reductions", "tile_reductions", "loop_instructions", "loop_ffma_share", "loop_global_loads",
                    "loop_generic_loads", "load_use_distance", "loop_barriers"]


def _kernel_resources(resources: pd.DataFrame | None) -> pd.DataFrame | None:
    if resources is None or resources.empty:
        return None
    keep = resources[(resources["dtype"] == "float32")]
    return keep[[c for c in RESOURCE_COLUMNS if c in keep]]


def _errors(sweeps: pd.DataFrame) -> pd.DataFrame | None:
    """The timed sweeps' errors, per implementation."""
    good = ok_rows(sweeps)
    if good.empty:
        return None
    g = good.assign(ratio=good["rel_error"] / good["error_bound"])
    return g.groupby(["impl", "levels", "dtype"], as_index=False).agg(
        points=("rel_error", "size"), median_rel_error=("rel_error", "median"), max_rel_error=("rel_error", "max"),
        max_error_over_bound=("ratio", "max"))


def _checks(run: RunData) -> pd.DataFrame | None:
    """The verification runs: implementations, then plans."""
    checks = []
    if run.verify_impls is not None and not run.verify_impls.empty:
        checks.append(run.verify_impls.groupby(["impl", "engine", "levels", "dtype"], as_index=False).agg(
            cases=("rel_error", "size"), max_rel_error=("rel_error", "max")).rename(columns={"impl": "checked"}))
    if run.verify is not None and not run.verify.empty:
        v = run.verify.groupby(["algorithm", "engine", "levels", "dtype"], as_index=False).agg(
            cases=("rel_error", "size"), max_rel_error=("rel_error", "max"))
        v.insert(0, "checked", "plan: " + v.pop("algorithm").astype(str))
        checks.append(v)
    return pd.concat(checks, ignore_index=True) if checks else None


def _variants(levels: int) -> pd.DataFrame:
    """Figure tab:perfeq_level2: the variants (Var#) of ``levels`` levels of Strassen."""
    return pd.DataFrame([{"Var#": v.number, "W_A": v.W_A, "W_B": v.W_B, "W_C": v.W_C, "Cnt#": v.count,
                          "products": " ".join(p.name for p in v.products)} for v in variants("strassen", levels)])


def _streaming() -> pd.DataFrame:
    """Figure tab:gpu_streaming: 1-level Strassen's stages on 2 streams."""
    return pd.DataFrame([{**r, "product": r["product"].describe()} for r in schedule("strassen", 1, 2).rows()])


@dataclass(frozen=True)
class TableEntry:
    name: str  # its file stem, anchor and title
    make: Callable[[object], pd.DataFrame | None]  # from the report's typed input (strassenbench.report.contents.Context)
    note: str = ""  # shown in its place when it is empty


def _claims(c) -> pd.DataFrame:  # noqa: ANN001 - a contents.Context
    return claims(c.run.sweeps, c.run.memlimit, device_of(c.run), model_frame(c.run, "model_speedup.csv"),
                  c.model.name)


# The report's tables, one entry each, in the page's order.
TABLES: tuple[TableEntry, ...] = (
    TableEntry("block_sizes", lambda c: _block_sizes()),
    TableEntry("variants_L1", lambda c: _variants(1)),
    TableEntry("variants_L2", lambda c: _variants(2)),
    TableEntry("streaming_L1_S2", lambda c: _streaming()),
    TableEntry("model_notation", lambda c: _notation(c.run), NO_MODEL.format(name="model_spec.csv", command="spec")),
    TableEntry("occupancy", lambda c: _occupancy(c.run),
               NO_MODEL.format(name="model_occupancy.csv", command="occupancy")),
    TableEntry("model_bounds", lambda c: c.run.models.get("model_bounds.csv"),
               NO_MODEL.format(name="model_bounds.csv", command="bounds")),
    TableEntry("issue_bounds", lambda c: c.run.models.get("model_issue_bounds.csv"),
               NO_MODEL.format(name="model_issue_bounds.csv", command="issue-bounds")),
    TableEntry("kernel_resources", lambda c: _kernel_resources(c.resources),
               "no build/resources.csv: run `strassenbench build`"),
    TableEntry("memory_limits", lambda c: c.run.memlimit, "no memlimit results in this run"),
    TableEntry("model_crossover", lambda c: _model_crossover(c.run),
               NO_MODEL.format(name="model_speedup.csv", command="speedup")),
    TableEntry("model_validation", lambda c: c.run.models.get("model_validate.csv"),
               "GPU runs only: the model against this GPU's measured sweeps (`strassenbench model validate`, "
               "model_validate.csv)"),
    TableEntry("algorithms", lambda c: _algorithm_table(c.run)),
    TableEntry("winners", lambda c: winners_table(c.run.models.get("model_winners.csv")),
               NO_MODEL.format(name="model_winners.csv", command="winners")),
    TableEntry("numerical_error", lambda c: _errors(c.run.sweeps), "no timed results in this run"),
    TableEntry("numerical_error_checks", lambda c: _checks(c.run), "no verification results in this run"),
    TableEntry("claims", _claims),
    TableEntry("tensorcore_accuracy", lambda c: tensorcore_accuracy(c.run.accuracy),
               "no accuracy table in this run (the tensorcore profile writes accuracy.csv)"),
    TableEntry("tensorcore_kernels", lambda c: tensorcore_kernels(c.resources),
               f"no tensor-core kernels in the build (`strassenbench build --strategy {FAMILIES[TF32].cutlass_tile}`)"),
    TableEntry("points_left_out", lambda c: left_out(c.run.sweeps),
               "every timed point is in the figures (status ok, no blocking timeout)"),
)
