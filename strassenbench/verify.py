"""One multiplication on random inputs, checked against a float64 reference within the error bound."""

from __future__ import annotations

import numpy as np

from .accuracy import error_bound, reference_gemm, relative_error
from .engines import ENGINES
from .gemm import parse_dtype
from .impls import get_impl
from .plan import make_plan

__all__ = ["random_operands", "verify"]


def random_operands(m: int, n: int, k: int, dtype: np.dtype, seed: int) -> tuple[np.ndarray, ...]:
    """A, B, C uniform in [-1, 1) from ``seed`` (never zeros, so a dropped update cannot hide)."""
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1.0, 1.0, shape).astype(dtype) for shape in ((m, k), (k, n), (m, n)))


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
    options: dict[str, object] | None = None,
) -> dict[str, object]:
    """Run one plan on ``engine``; status is ``ok`` when the relative error is within the bound.

    Either a plan (``algorithm``, ``levels``) on ``engine``, or an implementation of the registry (``impl``)
    on ``engine``. ``options`` go to the engine or implementation (strategy, scheme, streams, build_dir)."""
    options = dict(options or {})
    np_dtype = parse_dtype(dtype)
    A, B, C0 = random_operands(m, n, k, np_dtype, seed)
    C = C0.copy()
    mode = str(options.get("mode", "simt"))
    if impl is None:
        if levels is None:
            raise ValueError("verify needs levels or impl")
        plan = make_plan(algorithm, levels, m, k, n)
        ENGINES[engine](plan, A, B, C, alpha, beta, **options)
    else:
        chosen = get_impl(impl)
        chosen(A, B, C, alpha, beta, engine=engine, **options)
        algorithm, levels, mode = chosen.bound_algorithm, chosen.effective_levels(m, k, n), chosen.mode
    reference = reference_gemm(A, B, C0, alpha, beta)
    err = relative_error(C, reference)
    bound = error_bound(np_dtype, algorithm, levels, A, B, C0, alpha, beta, reference, mode)
    return {
        **({"impl": impl} if impl else {}),
        "engine": engine,
        "algorithm": algorithm,
        "levels": levels,
        "m": m,
        "n": n,
        "k": k,
        "dtype": dtype,
        "alpha": alpha,
        "beta": beta,
        "seed": seed,
        **{key: value for key, value in options.items() if key != "build_dir"},
        "rel_error": f"{err:.3e}",
        "bound": f"{bound:.3e}",
        "status": "ok" if err <= bound else "FAIL",
    }
