"""One multiplication on random inputs, checked against a float64 reference within the error bound."""

from __future__ import annotations

import numpy as np

from .accuracy import error_bound, reference_gemm, relative_error
from .engines import ENGINES
from .gemm import parse_dtype
from .impls import get_impl
from .plan import make_plan

__all__ = ["INPUTS", "random_operands", "verify"]

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
    inputs: str = "uniform",
) -> dict[str, object]:
    """Run one plan on ``engine``; status is ``ok`` when the relative error is within the bound.

    Either a plan (``algorithm``, ``levels``) on ``engine``, or an implementation of the registry (``impl``)
    on ``engine``. ``options`` go to the engine or implementation (strategy, scheme, streams, build_dir)."""
    options = dict(options or {})
    np_dtype = parse_dtype(dtype)
    A, B, C0 = random_operands(m, n, k, np_dtype, seed, inputs)
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
        **({"inputs": inputs} if inputs != "uniform" else {}),
        **{key: value for key, value in options.items() if key != "build_dir"},
        "rel_error": f"{err:.3e}",
        "bound": f"{bound:.3e}",
        "status": "ok" if err <= bound else "FAIL",
    }
