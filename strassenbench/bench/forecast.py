"""What a sweep will do before it runs: the strategies ``best`` times at each point, and its predicted wall time.

The paper picks the best strategy per size (Sec. s:gpu_exp). ``best`` times every strategy of the family where the
largest side is at most SMALL_SIDE (4,096: where wave quantization decides which wins), and above that the
model's TOP_STRATEGIES fastest (strassenbench.model.perf.ranked_strategies, by the GPU's model); ``best+Huge+Small``
times those named always too (fig:model_square's pair). The tensor-core families have three strategies each:
every one is timed.

The predicted wall time of a point: the warm-up (``warmup_time``), the check's calls and its reference, then the
samples the stopping rule needs (strassenbench.bench.timers): enough for the median's 95% interval to reach
``precision`` at an assumed spread of ASSUMED_SPREAD (the median's interval half-width is about
1.96 sqrt(pi / 2) spread / sqrt(n)), and at least ``min_samples``, ``clock_window`` and ``min_time`` of them,
each costing the call's predicted time (strassenbench.model.pick.predicted_time) and the flush and readings
around it; never more than ``max_time``. It is a prediction, and says so; the caps bound it for sure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..families import counterpart
from ..impls import get_impl
from ..options import scheme_or_sequential
from ..strategies import STRATEGIES
from .timers import Criterion

__all__ = ["SMALL_SIDE", "TOP_STRATEGIES", "ASSUMED_SPREAD", "parse_request", "candidates", "Forecast", "forecast",
           "describe", "duration"]

SMALL_SIDE = 4096
TOP_STRATEGIES = 3
ASSUMED_SPREAD = 0.01  # the samples' relative spread a GPU point is assumed to have (the H100's: 0.3% to 2%)
SAMPLE_OVERHEAD_S = 3e-4  # per sample: the L2 flush, the blocking kernel's release, the clock and power readings
POINT_OVERHEAD_S = 0.3  # per point: operands, the check's reference, the worker's bookkeeping


def parse_request(request: str | None) -> tuple[str | None, tuple[str, ...]]:
    """``--strategy`` as (strategy or "best" or None, strategies best always times): ``best+Huge+Small``."""
    if not request or not request.startswith("best"):
        return request, ()
    return "best", tuple(part for part in request.split("+")[1:] if part)


def candidates(impl_name: str, m: int, k: int, n: int, dtype: str, request: str | None, engine: str,
               spec=None, resources=None, scheme: str | None = None) -> list[str | None]:  # noqa: ANN001
    """The strategies a point times on ``engine`` (module docstring): [None] where the implementation takes
    none there; Huge (its family's counterpart) by default; for ``best``, every one up to SMALL_SIDE, else the
    model's TOP_STRATEGIES fastest on ``spec`` (every one without a spec) and those the request names."""
    impl = get_impl(impl_name)
    if not impl.takes("strategy", engine):
        return [None]
    kind, always = parse_request(request)
    if impl.tensor:  # the tensor-core families: three strategies each, every one for best
        if kind == "best":
            return list(impl.family.strategies)
        return [counterpart(kind or "Huge", impl.mode)]
    if kind != "best":
        return [kind or "Huge"]
    if max(m, k, n) <= SMALL_SIDE or spec is None:
        return list(STRATEGIES)
    from ..model.perf import ranked_strategies

    ranked = ranked_strategies(spec, impl_name, m, k, n, dtype, resources, scheme=scheme_or_sequential(scheme))
    chosen = {name for name, _ in ranked[:TOP_STRATEGIES]} | set(always)
    return [s for s in STRATEGIES if s in chosen]


@dataclass(frozen=True)
class Forecast:
    points: int
    calls: int  # strategies timed, summed over the points
    predicted_s: float | None  # None without a GPU model
    cap_s: float  # every strategy of every point at its --max-time cap

    def __add__(self, other: Forecast) -> Forecast:
        predicted = None if self.predicted_s is None or other.predicted_s is None \
            else self.predicted_s + other.predicted_s
        return Forecast(self.points + other.points, self.calls + other.calls, predicted, self.cap_s + other.cap_s)


def _samples(call_s: float, criterion: Criterion) -> int:
    """Samples the stopping rule is predicted to take at ASSUMED_SPREAD."""
    z = 1.959964 * math.sqrt(math.pi / 2)
    for_precision = math.ceil((z * ASSUMED_SPREAD / criterion.precision) ** 2)
    return max(criterion.min_samples, criterion.clock_window, for_precision,
               math.ceil(criterion.min_time / max(call_s, 1e-9)))


def _point_seconds(call_s: float, criterion: Criterion) -> float:
    sampling = _samples(call_s, criterion) * (call_s + SAMPLE_OVERHEAD_S)
    return POINT_OVERHEAD_S + criterion.warmup_time + 2 * call_s + min(criterion.max_time, sampling)


def forecast(points: Iterable, criterion: Criterion, engine: str, spec=None,  # noqa: ANN001
             resources=None) -> Forecast:  # noqa: ANN001
    """The forecast of ``points`` (strassenbench.bench.runner.Point) on ``engine``; predicted from ``spec``'s
    model (strassenbench.model.gpus.GPUSpec) where given."""
    from ..model.pick import predicted_time

    count = calls = 0
    predicted, cap = 0.0, 0.0
    for p in points:
        strategies = candidates(p.impl, p.m, p.k, p.n, p.dtype, p.strategy, engine, spec, resources, p.scheme)
        count, calls = count + 1, calls + len(strategies)
        cap += len(strategies) * (POINT_OVERHEAD_S + criterion.warmup_time + criterion.max_time)
        if spec is not None and not p.impl.startswith("auto"):
            call_s = predicted_time(spec, p.impl, p.m, p.k, p.n, p.dtype, resources, scheme_or_sequential(p.scheme))
            predicted += len(strategies) * _point_seconds(call_s, criterion)
    return Forecast(count, calls, predicted if spec is not None else None, cap)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def describe(found: Forecast, gpu: str | None = None) -> str:
    """One line: the points, the predicted wall time (labelled a prediction and by which GPU's model) and the
    caps' bound."""
    head = f"{found.points:,} points ({found.calls:,} strategy timings)"
    if found.predicted_s is None:
        return f"{head}: at most {duration(found.cap_s)} at the --max-time caps (no GPU model to predict by)"
    return (f"{head}: predicted wall time {duration(found.predicted_s)} (a prediction of the model of {gpu}; "
            f"at most {duration(found.cap_s)} at the --max-time caps)")
