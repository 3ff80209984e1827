"""Sampling with a noise-based stopping rule, after nvbench's "stdrel" criterion.

Each sample is one call, timed by CUDA events on the GPU or by perf_counter on the host, with the L2 cache
flushed before it (a write of a buffer at least the L2 size; on the host the last-level cache). Sampling
stops once at least ``min_time`` seconds of samples and ``min_samples`` samples are taken and the relative
standard deviation of the samples is below ``max_noise``, or when ``max_time`` seconds have been spent, or, as
nvbench does for inherently noisy points, once the noise has stopped falling: after ``stable_after``
samples, when the relative standard deviation has moved by less than ``stable_change`` (relative) over the
last ``stable_window`` samples (``Samples.stop`` says which rule stopped it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Criterion", "Samples", "HostTimer", "CudaTimer", "sample"]


@dataclass(frozen=True)
class Criterion:
    min_samples: int = 10
    min_time: float = 0.5  # seconds of measured samples before the noise test applies
    max_noise: float = 0.005  # relative standard deviation (0.5 %)
    max_time: float = 15.0  # cap on wall time per measurement, samples and flushes included
    max_samples: int = 10_000
    warmup: int = 2
    stable_after: int = 64  # samples before the noise-has-stopped-falling exit applies
    stable_window: int = 16
    stable_change: float = 0.05


@dataclass
class Samples:
    times: list[float] = field(default_factory=list)
    flagged: int = 0  # samples taken while the device reported throttling
    converged: bool = False
    stop: str = ""  # "noise" (converged), "stable" (noise stopped falling), "max_time" or "max_samples"
    noise: list[float] = field(default_factory=list)  # the relative stdev after each sample

    @property
    def rel_stdev(self) -> float:
        if len(self.times) < 2:
            return float("nan")
        mean = statistics.fmean(self.times)
        return statistics.stdev(self.times) / mean if mean > 0 else float("nan")

    def summary(self) -> dict[str, float | int | bool]:
        return {
            "time_min_s": min(self.times),
            "time_median_s": statistics.median(self.times),
            "time_mean_s": statistics.fmean(self.times),
            "time_rel_stdev": self.rel_stdev,
            "samples": len(self.times),
            "converged": self.converged,
            "throttled_samples": self.flagged,
        }


class HostTimer:
    """perf_counter around the call; the cache flush writes ``flush_bytes`` (default 64 MiB)."""

    def __init__(self, flush_bytes: int = 64 << 20) -> None:
        import numpy as np

        self._flush = np.empty(max(flush_bytes // 8, 1), dtype=np.float64)

    def flush(self) -> None:
        self._flush.fill(1.0)

    def time(self, fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start


class CudaTimer:  # pragma: no cover - needs a GPU
    """CUDA events recorded around the call on the current stream; the flush writes a buffer of 2x L2."""

    def __init__(self, l2_bytes: int) -> None:
        import cupy

        self.cupy = cupy
        self._flush = cupy.empty(max(2 * l2_bytes // 4, 1), dtype=cupy.float32)
        self._start, self._stop = cupy.cuda.Event(), cupy.cuda.Event()

    def flush(self) -> None:
        self._flush.fill(1.0)

    def time(self, fn: Callable[[], object]) -> float:
        stream = self.cupy.cuda.get_current_stream()
        self._start.record(stream)
        fn()
        self._stop.record(stream)
        self._stop.synchronize()
        return self.cupy.cuda.get_elapsed_time(self._start, self._stop) / 1e3


def sample(
    fn: Callable[[], object], timer: HostTimer | CudaTimer, criterion: Criterion,
    throttled: Callable[[], bool] = lambda: False,
) -> Samples:
    """Warm up, then time ``fn`` until the criterion says stop."""
    for _ in range(criterion.warmup):
        timer.flush()
        timer.time(fn)
    out = Samples()
    started = time.perf_counter()
    while True:
        timer.flush()
        out.times.append(timer.time(fn))
        if throttled():
            out.flagged += 1
        measured = sum(out.times)
        noise = out.rel_stdev  # once per sample: it reads every sample so far
        out.noise.append(noise)
        if len(out.times) >= criterion.min_samples and measured >= criterion.min_time:
            if noise < criterion.max_noise:
                out.converged, out.stop = True, "noise"
                break
            if len(out.times) >= criterion.stable_after and _stable(out.noise, criterion):
                out.stop = "stable"
                break
        if time.perf_counter() - started >= criterion.max_time:
            out.stop = "max_time"
            break
        if len(out.times) >= criterion.max_samples:
            out.stop = "max_samples"
            break
    return out


def _stable(noise: list[float], criterion: Criterion) -> bool:
    """The relative stdev moved by less than ``stable_change`` of its mean over the last ``stable_window``
    samples (nvbench's exit for noise that will not fall below the target)."""
    window = noise[-criterion.stable_window:]
    if len(window) < criterion.stable_window or any(v != v for v in window):  # NaN: too few samples
        return False
    mean = statistics.fmean(window)
    return mean > 0 and (max(window) - min(window)) < criterion.stable_change * mean
