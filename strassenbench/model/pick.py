"""`strassenbench pick` and the `auto` implementations: for one GPU and one m x k x n product, every implementation
that could run it, ranked by predicted time, fastest first. Every time is the model's prediction (the paper's
model, Sec. s:model, with this project's issue slots) unless a result folder of that GPU measured the same point,
which then replaces it and says so.

The candidates: cuBLAS and CUTLASS; the paper's implementations and the presum ones (strassen1-presum,
strassen2-presum: their workspace in the extra_bytes column); every catalogue algorithm at one and two levels
and on top of one level of Strassen (``<name>+strassen``), where its fused kernels exist (each product's terms
within a launch's parameters, strassenbench.fused.build.check_counts); and, in float32 on sm_80 and later, the
tensor-core modes of the GEMM, of the paper's Strassen and of every algorithm at one level, with cuBLAS TF32 and
CUTLASS 3xTF32; in float64 on sm_80 and later, the same on the FP64 tensor cores (``-dmma``). Each fused one at
its best strategy (Small to Huge, or the tensor-core family), its products run by one scheme (``scheme``:
sequential by default, one kernel after another as the paper's model; streams, atomic or splitk,
strassenbench.model.schemes).

A splitk run's split S (RunOptions.split_k) is the model's too where none is given (``split_options``): the
fastest split for the run's shape, strategy and GPU (strassenbench.model.perf.best_split), on the GPU auto ranks by.

Assumptions, stated where the numbers are printed:
- cuBLAS and CUTLASS have no formula of their own: they are predicted as the model's GEMM (the paper's premise,
  Sec. s:gemm: CUTLASS's SIMT SGEMM runs at cuBLAS's speed), on the tensor cores as our 1xTF32 and 3xTF32 GEMM;
  cuBLAS's DGEMM on a GPU with FP64 tensor cores (A100, H100) as our DMMA GEMM.
- The error bound is strassenbench.accuracy's, for inputs uniform on [0, 1) (max norms 1, ||C||_F = sqrt(mn) k/4).

`auto` runs what pick ranks first among the candidates the engine runs whose error bound is at most that of
2-level Strassen in the same precision (strassen2-direct; strassen2-3xtf32 for `auto-3xtf32`), the deepest of
the paper's implementations, whose bound verify already holds every run to. CUTLASS is not among auto's
candidates (its kernels are a build of their own, `build --cutlass`), and auto ranks by the model only: its choice
does not depend on which result files a working folder holds.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import pandas as pd

from ..accuracy import bound_from_norms
from ..algebra.algorithm import ALGORITHMS, AlgorithmError, algorithm_names, get_algorithm
from ..algebra.levels import grid_dims
from ..algebra.primitives import variant_counts
from ..fused.build import plan_fits
from ..device import current_device, spec_key
from ..families import FAMILIES, MODES, SIMT, by_accuracy, counterpart
from ..impls import IMPLS, PAPER_MODELED, ImplError, family_impls, get_impl
from ..options import PRESUM, SPLITK, RunOptions
from ..results import KINDS, ResultsError, kind_of, read_results, read_system
from ..sweeps import shape
from .gpus import SPECS, GPUSpec, get_gpu
from .perf import best_split, best_strategy, effective_tflops, load_resources, modeled
from .terms import DEFAULT_MODEL

__all__ = ["Choice", "AUTO", "candidates", "rank", "auto_choice", "error_bound", "measured_points", "PickError",
           "auto_spec", "resolve", "split_options", "predicted_time", "WINNER_MODES", "winner_rows", "firsts", "lower_bound",
           "PICK_SCHEMES"]

# The auto implementations: their candidates' mode, and the implementation whose error bound they keep within.
AUTO = {"auto": (SIMT, "strassen2-direct"), **{f"auto-{m.suffix}": (m.name, f"strassen2-{m.suffix}")
                                                for m in MODES.values() if m.staged}}
# Baselines with no formula of their own, and the model's implementation each is predicted as.
_AS_MODELED = {"cublas": "gemm", "cutlass": "gemm", "cublas-tf32": "gemm-tf32", "cutlass-3xtf32": "gemm-3xtf32",
               "cutlass-dmma": "gemm-dmma", "cutlass-tf32-sm90": "gemm-tf32-wgmma"}
# The schemes pick ranks by (strassenbench.model.schemes). Not streams: its schedules of every 2-level catalogue
# algorithm (hundreds of products each, strassenbench.algebra.schedule) take a minute to build for one ranking.
PICK_SCHEMES = ("sequential", "atomic", SPLITK)


class PickError(ValueError):
    """A shape or GPU pick cannot answer for (no candidate runs it)."""


@dataclass(frozen=True)
class Choice:
    """One ranked candidate: its time (predicted, or measured where ``source`` names the file)."""

    impl: str
    strategy: str
    seconds: float
    source: str  # "model", or "measured: <file>"
    limiter: str  # flop, gmop, smop, issue, latency, ... (the model's term: Timing.limiter), "" for a measured time

    def row(self, m: int, k: int, n: int, dtype: str, baseline: float) -> dict[str, object]:
        """The row pick prints: the time, its speedup over ``baseline`` (cuBLAS's), and what the candidate costs:
        extra device memory and the error bound (made here, for the rows shown: a plan each)."""
        chosen = get_impl(self.impl)
        return {"impl": self.impl, "strategy": self.strategy, "time_s": self.seconds,
                "tflops": effective_tflops(m, k, n, self.seconds), "speedup_vs_cublas": baseline / self.seconds,
                "limiter": self.limiter, "extra_bytes": chosen.extra_bytes(m, n, k, dtype),
                "error_bound": error_bound(self.impl, m, k, n, dtype), "mode": chosen.mode, "source": self.source}


def candidates(dtype: str, arch: str) -> list[str]:
    """The implementations pick ranks for ``dtype`` on ``arch`` (module docstring), in a fixed order."""
    names = ["cublas", *(["cutlass"] if dtype == "float32" else []), *PAPER_MODELED]
    names += [name for name, impl in IMPLS.items() if impl.scheme == PRESUM]  # the presum ones, beside them
    catalogue = [a for a in algorithm_names() if a not in ALGORITHMS or a == "winograd"]
    for alg in catalogue:
        get_algorithm(alg)  # a broken catalogue file is refused naming its file and line, never skipped
        names += [f"{alg}x{levels}" for levels in (1, 2) if plan_fits(alg, levels)]
        names += [f"{alg}+strassen"] if alg != "winograd" and plan_fits(f"{alg}+strassen", 2) else []
    for family in FAMILIES.values():  # the tensor-core families in the dtype they compute, where the GPU has them
        if family.tensor and dtype == family.computes and family.builds_for(arch):
            names += family_impls(family.name)
            names += [f"{alg}x1-{MODES[mode].suffix}" for mode in family.modes for alg in catalogue
                      if plan_fits(alg, 1)]
    return [n for n in dict.fromkeys(names) if dtype in get_impl(n).dtypes]


def error_bound(impl: str, m: int, k: int, n: int, dtype: str) -> float:
    """The relative error bound of ``impl`` for inputs uniform on [0, 1)."""
    chosen = get_impl(impl)
    return bound_from_norms(dtype, chosen.bound_algorithm, chosen.effective_levels(m, k, n), (m, n, k), (1.0, 1.0, 0.0),
                            1.0, 0.0, math.sqrt(m * n) * k / 4, 0.0, chosen.mode)


def _as_modeled(spec: GPUSpec, impl: str, dtype: str) -> str:
    """The implementation the model predicts ``impl`` as: itself, or for a baseline without a formula our GEMM of
    its math; cuBLAS's DGEMM runs on the FP64 tensor cores where the GPU has them (sm_80 and later)."""
    if impl == "cublas" and dtype == "float64" and spec.fp64_tensor_flops > 0:
        return "gemm-dmma"
    return _AS_MODELED.get(impl, impl)


def _predicted(spec: GPUSpec, impl: str, m: int, k: int, n: int, dtype: str, resources: pd.DataFrame | None,
               model: str = DEFAULT_MODEL, scheme: str = "sequential") -> tuple[str, float, str]:
    strategy, timing = best_strategy(spec, _as_modeled(spec, impl, dtype), m, k, n, dtype, resources, model, scheme)
    if impl in _AS_MODELED:
        strategy = ""
    elif get_impl(impl).tensor:  # the tensor-core kernels take the family's strategy in that one's role
        strategy = counterpart(strategy, get_impl(impl).mode)
    return strategy, timing.seconds, timing.limiter


def predicted_time(spec: GPUSpec, impl: str, m: int, k: int, n: int, dtype: str = "float32",
                   resources: pd.DataFrame | None = None, scheme: str = "sequential") -> float:
    """The model's seconds for one call of ``impl`` at its best strategy (a baseline predicted as the GEMM of its
    math): what a run's predicted wall time is made of (strassenbench.bench.forecast)."""
    return _predicted(spec, impl, m, k, n, dtype, resources, scheme=scheme)[1]


def _spec_key(name: str) -> str | None:
    """The built-in spec whose key a GPU's name holds (H100 in 'NVIDIA H100 80GB HBM3'), None if none does."""
    return spec_key(name, SPECS)


def measured_points(folders: list[Path], spec: GPUSpec) -> pd.DataFrame:
    """The timed points (status ok) of every result file in ``folders`` that measured ``spec``'s GPU (its key in
    the device's name, e.g. H100 in 'NVIDIA H100 80GB HBM3'): impl, m, k, n, dtype, strategy, time_s, source."""
    key = _spec_key(spec.name) or spec.name
    frames = []
    for folder in folders:
        gpu = ((read_system(folder / "system.json") or {}).get("gpu") or {}).get("gpu", "")
        if key.lower() not in str(gpu).lower():
            continue
        for path in sorted(p for p in folder.glob("*.csv") if not p.is_symlink()):  # never read through a link
            try:
                rows = read_results(path, "bench")
            except (OSError, ResultsError):  # another kind of table (verify, memlimit, accuracy), or not a result file
                if _bench_header(path):
                    raise  # a bench table that cannot be right: refused naming its file and line, never skipped
                continue
            ok = rows[rows["status"] == "ok"]
            frames.append(pd.DataFrame({"impl": ok["impl"].astype(str), "m": ok["m"].astype(int),
                                        "k": ok["k"].astype(int), "n": ok["n"].astype(int),
                                        "dtype": ok["dtype"].astype(str), "strategy": ok["strategy"].astype(str),
                                        "time_s": ok["time_median_s"].astype(float),
                                        "source": f"measured: {path}"}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["impl", "m", "k", "n", "dtype", "strategy", "time_s", "source"])


def _bench_header(path: Path) -> bool:
    """Whether ``path``'s first line is a bench table's header."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            header = next(csv.reader([f.readline(1 << 16)]), [])
    except OSError:
        return False
    return kind_of([c.strip() for c in header]) is KINDS["bench"]


def rank(spec: GPUSpec, m: int, k: int, n: int, dtype: str = "float32", resources: pd.DataFrame | None = None,
         measured: pd.DataFrame | None = None, names: list[str] | None = None,
         model: str = DEFAULT_MODEL, scheme: str = "sequential") -> list[Choice]:
    """Every candidate (or ``names``) for m x k x n on ``spec``, fastest first (module docstring), predicted by
    ``model`` (strassenbench.model.terms.MODELS), the fused ones' products run by ``scheme``."""
    if min(m, k, n) < 1:
        raise PickError(f"m, k and n must be positive, not {m} x {k} x {n}")
    found = []
    for impl in names if names is not None else candidates(dtype, spec.arch):
        strategy, seconds, limiter = _predicted(spec, impl, m, k, n, dtype, resources, model, scheme)
        source = "model"
        if measured is not None and not measured.empty:
            mine = measured[(measured["impl"] == impl) & (measured["m"] == m) & (measured["k"] == k)
                            & (measured["n"] == n) & (measured["dtype"] == dtype)]
            if not mine.empty:
                best = mine.loc[mine["time_s"].idxmin()]
                strategy, seconds, limiter, source = best["strategy"], float(best["time_s"]), "", best["source"]
        if not math.isfinite(seconds):
            continue  # a kernel no block of which fits this GPU's SM, or no tensor cores
        found.append(Choice(impl, strategy, seconds, source, limiter))
    if not found:
        raise PickError(f"no implementation runs {m} x {k} x {n} in {dtype} on {spec.name}")
    return sorted(found, key=lambda c: c.seconds)


@lru_cache(maxsize=256)
def auto_choice(auto: str, spec: GPUSpec, m: int, k: int, n: int, dtype: str, engine: str) -> Choice:
    """What ``auto`` (a key of AUTO) runs for m x k x n on ``engine``: pick's first among the candidates that run
    there within the error bound of its precision."""
    mode, within = AUTO[auto]
    if dtype not in MODES[mode].dtypes:
        raise ImplError(f"{auto} runs {', '.join(MODES[mode].dtypes)} only (the tensor-core modes), not {dtype}")
    limit = error_bound(within, m, k, n, dtype) * (1 + 1e-12)
    names = [c for c in candidates(dtype, spec.arch if engine == "cuda" else "sm_90")
             if engine in get_impl(c).engines and get_impl(c).mode in (SIMT, mode) and get_impl(c).kind != "cutlass"]
    found = next((c for c in rank(spec, m, k, n, dtype, names=names) if error_bound(c.impl, m, k, n, dtype) <= limit),
                 None)
    if found is None:
        raise PickError(f"{auto}: no implementation on {engine} runs {m} x {k} x {n} within {within}'s error bound")
    return found


def auto_spec(engine: str) -> GPUSpec:
    """The GPU whose model `auto` ranks by. On the cuda engine the device's: the built-in spec its name holds
    (H100 in 'NVIDIA H100 80GB HBM3'), else the built-in spec of its architecture, else its queried figures
    (`--gpu device`). On the CPU engines, which stand in for a GPU, the H100's: the newest model GPU, with every
    precision mode."""
    if engine != "cuda":
        return SPECS["H100"]
    try:
        name, arch = current_device()
        same = [spec for spec in SPECS.values() if spec.arch == arch]
        key = _spec_key(name)
        return SPECS[key] if key else same[0] if same else get_gpu("device")
    except (RuntimeError, ValueError) as err:
        raise ImplError(f"auto ranks by the GPU's model: {err}") from None


def resolve(impl: str, m: int, k: int, n: int, dtype: str, engine: str) -> tuple[str, str, str]:
    """(implementation, strategy, note) that ``impl`` runs for m x k x n on ``engine``: pick's first for an auto
    implementation (with a note saying what it chose and by which GPU's model), else ``impl`` itself."""
    if impl not in AUTO:
        return impl, "", ""
    spec = auto_spec(engine)
    choice = auto_choice(impl, spec, m, k, n, dtype, engine)
    return choice.impl, choice.strategy, f"{impl} chose {choice.impl} ({spec.name}, {choice.source})"


def split_options(options: RunOptions, impl: str, m: int, k: int, n: int, dtype: str, engine: str) -> RunOptions:
    """``options`` with the splitk scheme's split S where none was given: the model's fastest for ``impl`` on
    m x k x n with the run's strategy, on the GPU auto ranks by (auto_spec), with the build's resources.csv on
    the cuda engine (its kernels' registers and main loops) where the build folder has one. Other options as
    they are."""
    if options.scheme_name != SPLITK or options.split_k is not None:
        return options
    spec = auto_spec(engine)
    found = Path(options.build_dir) / "resources.csv"
    resources = load_resources(found) if engine == "cuda" and found.is_file() else None
    split, _ = best_split(spec, impl, options.kernel_strategy(engine), m, k, n, dtype, resources)
    return replace(options, split_k=split)


# The precisions a winner is found for, most accurate first: full float32 (SIMT, cuBLAS, CUTLASS), and every
# float32 tensor-core mode.
WINNER_MODES = by_accuracy("float32")


def lower_bound(spec: GPUSpec, impl: str, m: int, k: int, n: int, dtype: str) -> float:
    """A time no prediction of ``impl`` for m x k x n goes below, by any model and with its products one after
    another or atomic: for a fused implementation its products' flops on the padded grid at the peak of their
    math (every model bounds a launch by T_flop at least, and T_flop counts 2 m_S n_S k_S per block of every
    product at least: strassenbench.model.schemes.alone and stage_time); 0 for any other."""
    if impl in _AS_MODELED or get_impl(impl).kind != "fused":
        return 0.0
    chosen = get_impl(impl)
    _, levels, algorithm = modeled(impl)
    gm, gk, gn = grid_dims(algorithm, levels)
    rate = spec.tau_tensor(chosen.mode) if chosen.tensor else spec.tau_flop(dtype)
    products = sum(variant_counts(algorithm, levels).values())
    return products * 2.0 * math.ceil(m / gm) * math.ceil(k / gk) * math.ceil(n / gn) / rate if rate > 0 else math.inf


def firsts(spec: GPUSpec, m: int, k: int, n: int, dtype: str = "float32", resources: pd.DataFrame | None = None,
           scheme: str = "sequential") -> tuple[dict[str, Choice], float]:
    """(the first of `rank` in each mode, cuBLAS's predicted seconds), as `rank` would give them, without
    predicting a candidate whose lower_bound is above the best of its mode found so far (candidates taken by
    their bound, fastest-possible first)."""
    names = candidates(dtype, spec.arch)
    order = {name: i for i, name in enumerate(names)}
    bounds = {name: lower_bound(spec, name, m, k, n, dtype) for name in names}
    best: dict[str, Choice] = {}
    cublas = math.inf
    for impl in sorted(names, key=lambda c: (bounds[c], order[c])):
        mode = get_impl(impl).mode
        if impl != "cublas" and mode in best and bounds[impl] > best[mode].seconds * (1 + 1e-9):
            continue  # slower than the best of its mode whatever its strategy: rank puts it below that one
        strategy, seconds, limiter = _predicted(spec, impl, m, k, n, dtype, resources, DEFAULT_MODEL, scheme)
        cublas = seconds if impl == "cublas" else cublas
        if math.isfinite(seconds) and (mode not in best or (seconds, order[impl]) < (best[mode].seconds,
                                                                                   order[best[mode].impl])):
            best[mode] = Choice(impl, strategy, seconds, "model", limiter)
    return best, cublas


def winner_rows(spec: GPUSpec, key: str, sweep: str, sizes: list[int], dtype: str = "float32",
                resources: pd.DataFrame | None = None, scheme: str = "sequential") -> list[dict[str, object]]:
    """`model winners`: per size of ``sweep`` (the paper's fixed sides: k = 4,096 for rank-k, m = n = 8,192 for
    panel), pick's first in each precision mode the GPU has (firsts: rank's first of each mode), with its
    predicted speedup over cuBLAS, the fused candidates' products run by ``scheme``."""
    rows = []
    for x in sizes:
        m, k, n = shape(sweep, x)
        found, cublas = firsts(spec, m, k, n, dtype, resources, scheme)
        for mode in WINNER_MODES:
            best = found.get(mode)
            if best is None:
                continue  # no such mode on this GPU (or in this dtype): left out, never drawn at 0
            rows.append({"gpu": spec.name, "key": key, "arch": spec.arch, "source": "model", "sweep": sweep, "x": x,
                         "m": m, "n": n, "k": k, "dtype": dtype, "precision": mode, "impl": best.impl,
                         "strategy": best.strategy, "time_s": best.seconds, "cublas_s": cublas,
                         "speedup_vs_cublas": cublas / best.seconds, "limiter": best.limiter, "scheme": scheme})
    return rows
