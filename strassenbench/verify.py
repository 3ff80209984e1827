"""Multiplications on random inputs, checked: one (``verify``), or the accuracy table (``accuracy_rows``).

The error is measured against the bench's reference (strassenbench.freivalds: C along random directions
against A (B x) in double-double, shared with no implementation), or with ``exact`` against an exact product
(accuracy.exact_reference: the float64 rows of the accuracy table). A result is right when its error is within
the tolerance (accuracy.tolerance: a few times the error expected of it) for the uniform inputs the tolerance
is made for, and within the paper's bound (accuracy.error_bound, which no wrong result need exceed) for the
wide ones; both are reported."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .accuracy import bound_from_norms, exact_reference, relative_error, tolerance
from .freivalds import REFERENCE, Reference
from .engines import ENGINES, FUSED_ENGINES
from .engines.fused_engine import run as run_fused
from .gemm import parse_dtype
from .families import MODES
from .impls import fast_impl, get_impl
from .model.pick import resolve, split_options
from .options import RunOptions
from .plan import make_plan
from .results import ACCURACY_COLUMNS

__all__ = ["INPUTS", "random_operands", "verify", "ACCURACY_COLUMNS", "accuracy_rows"]

# The input distributions: ``uniform`` in [-1, 1); ``wide``, uniform [-1, 1) times 2^e with e a uniform integer in
# [-WIDE_EXPONENT, WIDE_EXPONENT] per element (magnitudes over 2 x 12 binades, where Strassen's operand sums mix
# large and small terms).
INPUTS = ("uniform", "wide")
WIDE_EXPONENT = 12


def random_operands(m: int, n: int, k: int, dtype: np.dtype, seed: int, inputs: str = "uniform") -> tuple[np.ndarray, ...]:
    """A, B, C from ``seed`` in the distribution ``inputs`` (INPUTS; never zeros, so a dropped update cannot
    hide)."""
    if inputs not in INPUTS:
        raise ValueError(f"unknown inputs {inputs!r} (choose from {', '.join(INPUTS)})")
    rng = np.random.default_rng(seed)
    out = []
    for shape in ((m, k), (k, n), (m, n)):
        x = rng.uniform(-1.0, 1.0, shape)
        if inputs == "wide":
            x = np.ldexp(x, rng.integers(-WIDE_EXPONENT, WIDE_EXPONENT + 1, shape))
        out.append(x.astype(dtype))
    return tuple(out)


_EXACT: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def _exact(A: np.ndarray, B: np.ndarray, C0: np.ndarray, alpha: float, beta: float,
           operands: tuple) -> tuple[np.ndarray, np.ndarray]:
    """exact_reference of the last operands asked for (``operands``: what random_operands made them from): the
    accuracy table runs every implementation on the same inputs one after another."""
    key = (*operands, alpha, beta)
    if key not in _EXACT:
        _EXACT.clear()
        _EXACT[key] = exact_reference(A, B, C0, alpha, beta)
    return _EXACT[key]


def _error(A, B, C0, C, alpha: float, beta: float, seed: int,  # noqa: ANN001
           exact: tuple | None) -> tuple[float, float, str]:
    """(relative error of C, ||alpha A B + beta C0||_F, the reference's name): against the bench's reference
    (strassenbench.freivalds), or with ``exact`` (the operands' key) against an exact product."""
    if exact:
        pair = _exact(A, B, C0, alpha, beta, exact)
        return relative_error(C, pair), float(np.linalg.norm(pair[0])), "exact"
    check = Reference(A, B, C0, alpha, beta, np, seed).check(C)
    return check.rel_error, check.ref_norm, REFERENCE


def _plan_impl(algorithm: str, levels: int, mode: str) -> str:
    """The implementation that runs ``levels`` levels of ``algorithm`` in ``mode`` (the model's name for a plan)."""
    if levels:
        return fast_impl(algorithm, levels, mode).name
    return "gemm" if not MODES[mode].tensor else f"gemm-{MODES[mode].suffix}"


def verify(
    *,
    engine: str,
    algorithm: str = "strassen",
    levels: int | None = None,
    impl: str | None = None,
    m: int,
    n: int,
    k: int,
    dtype: str = "float32",
    alpha: float = 1.0,
    beta: float = 0.0,
    seed: int = 0,
    options: RunOptions | Mapping[str, object] | None = None,
    inputs: str = "uniform",
    exact: bool = False,
) -> dict[str, object]:
    """Run one plan on ``engine``; status is ``ok`` when the relative error is within the tolerance (uniform
    inputs) or the bound (wide ones): the module docstring.

    Either a plan (``algorithm``, ``levels``) on ``engine``, or an implementation of the registry (``impl``)
    on ``engine``. ``options`` go to the engine or implementation (strassenbench.options.RunOptions, or its
    fields by name: strategy, scheme, streams, build_dir, mode). ``exact``: the error against an exact product
    (accuracy.exact_reference, several float64 GEMMs) instead of the bench's reference."""
    np_dtype = parse_dtype(dtype)
    A, B, C0 = random_operands(m, n, k, np_dtype, seed, inputs)
    C = C0.copy()
    if impl is None:
        if levels is None:
            raise ValueError("verify needs levels or impl")
        run = options if isinstance(options, RunOptions) else RunOptions(**(options or {}))
        plan = make_plan(algorithm, levels, m, k, n)
        if engine in FUSED_ENGINES:  # a splitk run without its S: the model's (strassenbench.model.pick)
            run = split_options(run, _plan_impl(algorithm, levels, run.mode), m, k, n, dtype, engine)
        if engine in FUSED_ENGINES:
            run_fused(engine, plan, A, B, C, alpha, beta, run)
        else:
            ENGINES[engine](plan, A, B, C, alpha, beta, **({"mode": run.mode} if run.tensor else {}))
        mode = run.mode
    else:
        name, strategy, note = resolve(impl, m, k, n, dtype, engine)  # auto: pick's first (strassenbench.model.pick)
        chosen = get_impl(name)
        if note:  # auto takes no options: the chosen one runs with pick's strategy, where it takes one
            options = {"strategy": strategy} if strategy and chosen.takes("strategy", engine) else None
        run = options if isinstance(options, RunOptions) else chosen.run_options(engine, **(options or {}))
        run = split_options(run, chosen.name, m, k, n, dtype, engine)
        chosen.run(A, B, C, alpha, beta, engine, run)
        algorithm, levels, mode = chosen.bound_algorithm, chosen.effective_levels(m, k, n), chosen.mode
    err, ref_norm, ref_name = _error(A, B, C0, C, alpha, beta, seed, (m, n, k, dtype, seed, inputs) if exact else None)
    norms = (float(np.max(np.abs(A))), float(np.max(np.abs(B))), float(np.max(np.abs(C0))) if beta else 0.0)
    bound = bound_from_norms(np_dtype, algorithm, levels, (m, n, k), norms, alpha, beta, ref_norm, 0.0, mode)
    limit = tolerance(np_dtype, algorithm, levels, k, mode) if inputs == "uniform" else float("nan")
    ok = err <= limit if inputs == "uniform" else err <= bound
    return {
        **({"impl": impl} if impl else {}),
        **({"chose": chosen.name} if impl and chosen.name != impl else {}),
        "engine": engine, "algorithm": algorithm, "levels": levels, "m": m, "n": n, "k": k, "dtype": dtype,
        "alpha": alpha, "beta": beta, "seed": seed,
        **({"inputs": inputs} if inputs != "uniform" else {}),
        **run.given(),
        "rel_error": f"{err:.3e}",
        "tolerance": f"{limit:.3e}" if limit == limit else "",
        "reference": ref_name,
        "bound": f"{bound:.3e}",
        "status": "ok" if ok else "FAIL",
    }


def accuracy_rows(impls: list[str], sizes: list[int], inputs: tuple[str, ...], engine: str, seed: int = 0,
                  build_dir: str = "build", progress=None,  # noqa: ANN001
                  dtypes: tuple[str, ...] = ("float32",)) -> list[dict]:
    """The accuracy table beyond the paper: the relative error of each implementation (SIMT FP32, 1xTF32, 3xTF32;
    SIMT FP64 and DMMA; GEMM and Strassen at any level) on square problems of ``sizes`` in each of ``dtypes`` it
    computes, for each input distribution (INPUTS), every implementation on the same inputs; float32 against a
    float64 product, float64 against an exact one (accuracy.exact_reference). The columns are ACCURACY_COLUMNS.
    Each runs on ``engine`` where it has it, else on numpy (cuBLAS's CPU stand-ins on the emulator);
    ``build_dir``: where the cuda engine finds the kernels."""
    rows = []
    for n, dtype, dist, name in ((n, t, d, i) for n in sizes for t in dtypes for d in inputs for i in impls):
        impl = get_impl(name)
        if dtype not in impl.dtypes:
            continue
        run_on = engine if engine in impl.engines else "numpy"
        options = impl.run_options(run_on, build_dir=build_dir)
        result = verify(impl=name, engine=run_on, m=n, n=n, k=n, dtype=dtype, seed=seed, options=options,
                        inputs=dist, exact=dtype == "float64")
        rows.append({"impl": name, "label": impl.label, "mode": impl.mode, "levels": result["levels"],
                     "engine": run_on, "inputs": dist, "dtype": dtype, "m": n, "n": n, "k": n, "seed": seed,
                     "rel_error": float(result["rel_error"]), "tolerance": result["tolerance"],
                     "reference": result["reference"], "bound": float(result["bound"]),
                     "status": result["status"]})
        if progress:
            progress(rows[-1])
    return rows
