"""Model curves and crossovers. Every number here is a *prediction*, and its rows say so (source=model)."""

from __future__ import annotations

import pandas as pd

from ..breakeven import break_even
from ..families import family_of
from ..impls import get_impl
from ..strategies import STRATEGIES
from ..sweeps import shape
from .gpus import GPUSpec
from ..options import SPLITK
from .perf import active_blocks, best_split, best_strategy, effective_tflops, impl_time, modeled, own_scheme
from .tensor import tensor_active_blocks
from .terms import DEFAULT_MODEL

__all__ = ["predict", "crossover"]


def predict(
    spec: GPUSpec,
    impls: list[str],
    sweep: str,
    sizes: list[int],
    strategy: str = "best",
    dtype: str = "float32",
    resources: pd.DataFrame | None = None,
    model: str = DEFAULT_MODEL,
    scheme: str = "sequential",
) -> pd.DataFrame:
    """One row per (impl, size): modeled time and effective TFLOPS by ``model`` (strassenbench.model.terms:
    paper, issue or l2; its name in the ``model`` column), the fused products run by ``scheme``
    (strassenbench.model.schemes; in the ``scheme`` column)."""
    rows = []
    for impl in impls:
        for x in sizes:
            m, k, n = shape(sweep, x)
            if strategy == "best":
                name, t = best_strategy(spec, impl, m, k, n, dtype, resources, model, scheme)
            else:
                chosen = STRATEGIES[strategy]
                name, t = strategy, impl_time(spec, impl, chosen, m, k, n, dtype, resources, model, scheme)
            _, occupancy_source = occupancy(spec, impl, name, dtype, resources)
            rows.append({
                "gpu": spec.name, "arch": spec.arch, "source": "model", "sweep": sweep, "x": x,
                "m": m, "n": n, "k": k, "dtype": dtype, "impl": impl, "strategy": name,
                "time_s": t.seconds, "tflops": effective_tflops(m, k, n, t.seconds), "limiter": t.limiter,
                "t_flop_s": t.t_flop, "t_gmop_s": t.t_gmop, "t_smop_s": t.t_smop, "t_issue_s": t.t_issue,
                "t_dram_s": t.t_dram, "t_l2_s": t.t_l2, "t_stream_s": t.t_stream, "t_latency_s": t.t_latency,
                "reference_model": "extension" if modeled(impl)[0] else "paper",
                "model": model, "scheme": own_scheme(impl) or scheme, "split_k": _split(spec, impl, name, m, k, n,
                                                                                         dtype, resources, model, scheme),
                "occupancy": occupancy_source,
            })
    return pd.DataFrame(rows)


def _split(spec: GPUSpec, impl: str, name: str, m: int, k: int, n: int, dtype: str, resources: pd.DataFrame | None,
           model: str, scheme: str) -> int | str:
    """The parts of each product's k the prediction took in the splitk scheme (best_split), blank otherwise."""
    if scheme != SPLITK or own_scheme(impl) or modeled(impl)[1] == 0:
        return ""
    s = STRATEGIES[name] if name in STRATEGIES else family_of(get_impl(impl).mode).strategies[name]
    return best_split(spec, impl, s, m, k, n, dtype, resources, model)[0]


def occupancy(spec: GPUSpec, impl: str, name: str, dtype: str, resources: pd.DataFrame | None) -> tuple[int, str]:
    """(active blocks per SM, where from) of the GEMM kernel of strategy ``name``: SIMT, or the tensor-core family's
    of ``impl`` (strassenbench.model.tensor)."""
    if name in STRATEGIES:
        return active_blocks(spec, STRATEGIES[name], (1, 1, 1), dtype, resources)
    mode = get_impl(impl).mode
    return tensor_active_blocks(spec, family_of(mode).strategies[name], (1, 1, 1), mode, resources)


def crossover(frame: pd.DataFrame, impl: str, baseline: str = "gemm") -> dict[str, object]:
    """Where ``impl`` overtakes ``baseline`` in a predicted sweep (strassenbench.breakeven.break_even)."""
    return break_even(frame, impl, baseline)
