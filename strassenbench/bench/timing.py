"""Sampling with a noise-based stopping rule, after nvbench's "stdrel" criterion.

How a sample is timed (``Samples.timing``, the CSV's ``timing`` column):

- ``graph`` (GPU): the prepared call is captured once into a CUDA graph, and each sample replays the graph
  between two CUDA events. No Python runs inside the interval, so a Strassen call of 7 or 49 launches and
  cuBLAS's one call are timed alike, by the GPU alone.
- ``events`` (GPU, when the call cannot be captured): CUDA events around the Python call, launch time included.
- ``host`` (CPU engines): perf_counter around the call.

The host's enqueue time (the Python call without waiting for the GPU) is measured on the warm-up calls and
kept as its own column (``host_enqueue_s``). Warm-up runs for ``warmup_time`` seconds (and at least
``warmup`` calls) so that clocks ramp up first. The L2 cache is flushed before every sample (a write of a
buffer at least the L2 size; on the host the last-level cache).

After each sample the device's SM clock and throttle reasons are read (``probe``). As nvbench does, a sample
taken below ``throttle_threshold`` of the GPU's maximum SM clock is discarded (counted in
``throttled_samples``). Sampling stops once at least ``min_time`` seconds of kept samples and ``min_samples``
samples are taken and their relative standard deviation is below ``max_noise``, or when ``max_time`` seconds
have been spent, or, for inherently noisy points, once the noise has stopped falling: after ``stable_after``
samples, when the relative standard deviation has moved by less than ``stable_change`` (relative) over the last
``stable_window`` samples (``Samples.stop`` says which rule stopped it). Every sample (time, SM clock,
throttle flag, kept) is in ``Samples.records``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Criterion", "Samples", "Timer", "HostTimer", "CudaTimer", "sample", "TIMING_MODES"]

TIMING_MODES = ("graph", "events", "host")


@dataclass(frozen=True)
class Criterion:
    min_samples: int = 10
    min_time: float = 0.5  # seconds of measured samples before the noise test applies
    max_noise: float = 0.005  # relative standard deviation (0.5 %)
    max_time: float = 15.0  # cap on wall time per measurement, samples and flushes included
    max_samples: int = 10_000
    warmup: int = 2  # calls, at least
    warmup_time: float = 0.2  # seconds of warm-up calls, at least (clocks ramp up)
    throttle_threshold: float = 0.75  # of the maximum SM clock: samples taken below it are discarded
    stable_after: int = 64  # samples before the noise-has-stopped-falling exit applies
    stable_window: int = 16
    stable_change: float = 0.05


@dataclass
class Samples:
    times: list[float] = field(default_factory=list)  # the kept samples
    discarded: int = 0  # samples taken below the throttle threshold's SM clock
    converged: bool = False
    stop: str = ""  # "noise" (converged), "stable" (noise stopped falling), "max_time" or "max_samples"
    noise: list[float] = field(default_factory=list)  # the relative stdev after each kept sample
    timing: str = "host"  # TIMING_MODES
    host_enqueue_s: float = float("nan")  # median host time of one call (without waiting), from the warm-up
    records: list[tuple[float, float | None, bool, bool]] = field(default_factory=list)  # every sample:
    # (seconds, SM clock in MHz or None, throttle reasons set, kept)

    @property
    def clocks(self) -> list[float]:
        return [clock for _, clock, _, kept in self.records if kept and clock is not None]

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
            "throttled_samples": self.discarded,
            "timing": self.timing,
            "host_enqueue_s": self.host_enqueue_s,
            "sm_clock_median_mhz": statistics.median(self.clocks) if self.clocks else "",
        }


class Timer:
    """What sample() asks of a timer: flush the cache, time one call, the host's enqueue time of one call,
    and prepare (decide how the calls are timed: ``mode``). A synchronous host call is its own enqueue."""

    mode = "host"

    def flush(self) -> None:
        pass

    def time(self, fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    def enqueue(self, fn: Callable[[], object]) -> float:
        return self.time(fn)

    def prepare(self, fn: Callable[[], object]) -> str:
        return self.mode


class HostTimer(Timer):
    """perf_counter around the call; the cache flush writes ``flush_bytes`` (default 64 MiB)."""

    def __init__(self, flush_bytes: int = 64 << 20) -> None:
        import numpy as np

        self._flush = np.empty(max(flush_bytes // 8, 1), dtype=np.float64)

    def flush(self) -> None:
        self._flush.fill(1.0)


class CudaTimer(Timer):  # pragma: no cover - needs a GPU
    """Everything on one stream of its own: the flush (a write of 2x L2), the call or its CUDA graph, and the
    two events that time it. ``prepare`` captures the call into a graph (``mode`` "graph"); a call that cannot
    be captured is timed by events around the call (``mode`` "events")."""

    def __init__(self, l2_bytes: int) -> None:
        import cupy

        self.cupy = cupy
        self.mode = "events"
        self._graph = None
        self._stream = cupy.cuda.Stream(non_blocking=True)  # capturable (the legacy default stream is not)
        self._flush = cupy.empty(max(2 * l2_bytes // 4, 1), dtype=cupy.float32)
        self._start, self._stop = cupy.cuda.Event(), cupy.cuda.Event()

    def flush(self) -> None:
        with self._stream:
            self._flush.fill(1.0)

    def enqueue(self, fn: Callable[[], object]) -> float:
        """Host seconds to enqueue one call (the GPU's work is waited for afterwards, outside the interval)."""
        with self._stream:
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
        self._stream.synchronize()
        return elapsed

    def prepare(self, fn: Callable[[], object]) -> str:
        """Capture one call into a CUDA graph on this timer's stream; on any failure keep timing by events."""
        self._stream.synchronize()
        try:
            with self._stream:
                self._stream.begin_capture()
                try:
                    fn()
                finally:
                    graph = self._stream.end_capture()
            graph.launch(self._stream)  # the first replay uploads the graph: untimed
            self._stream.synchronize()
            self._graph, self.mode = graph, "graph"
        except Exception:  # noqa: BLE001 - a call that allocates or synchronizes cannot be captured
            self._graph, self.mode = None, "events"
            self._stream.synchronize()
        return self.mode

    def time(self, fn: Callable[[], object]) -> float:
        return self.batch(fn, 1)

    def batch(self, fn: Callable[[], object], count: int) -> float:
        """Seconds per call of ``count`` calls (graph replays once prepared) back to back between two events,
        with no flush between them: nvbench's "batch" time, warm caches and launches queued ahead."""
        with self._stream:
            self._start.record(self._stream)
            for _ in range(count):
                if self._graph is not None:
                    self._graph.launch(self._stream)
                else:
                    fn()
            self._stop.record(self._stream)
        self._stop.synchronize()
        return self.cupy.cuda.get_elapsed_time(self._start, self._stop) / 1e3 / count


def _no_probe() -> tuple[float | None, bool]:
    return None, False


def sample(
    fn: Callable[[], object], timer: Timer, criterion: Criterion,
    probe: Callable[[], tuple[float | None, bool]] = _no_probe, max_clock_mhz: float | None = None,
) -> Samples:
    """Warm up (measuring the host's enqueue time), prepare the timer (a CUDA graph on the GPU), then time
    ``fn`` until the criterion says stop. ``probe`` reads (SM clock in MHz, throttle reasons set) after each
    sample; with ``max_clock_mhz`` a sample below the throttle threshold of it is discarded."""
    enqueue: list[float] = []
    warm = time.perf_counter()
    while len(enqueue) < criterion.warmup or (time.perf_counter() - warm < criterion.warmup_time
                                              and len(enqueue) < criterion.max_samples):
        timer.flush()
        enqueue.append(timer.enqueue(fn))
    out = Samples(timing=timer.prepare(fn), host_enqueue_s=statistics.median(enqueue) if enqueue else float("nan"))
    floor = criterion.throttle_threshold * max_clock_mhz if max_clock_mhz else None
    started = time.perf_counter()
    while True:
        timer.flush()
        seconds = timer.time(fn)
        clock, flagged = probe()
        kept = floor is None or clock is None or clock >= floor
        out.records.append((seconds, clock, flagged, kept))
        if not kept:
            out.discarded += 1
        else:
            out.times.append(seconds)
            out.noise.append(out.rel_stdev)  # once per sample: it reads every sample so far
        if kept and len(out.times) >= criterion.min_samples and sum(out.times) >= criterion.min_time:
            noise = out.noise[-1]
            if noise < criterion.max_noise:
                out.converged, out.stop = True, "noise"
                break
            if len(out.times) >= criterion.stable_after and _stable(out.noise, criterion):
                out.stop = "stable"
                break
        if time.perf_counter() - started >= criterion.max_time:
            out.stop = "max_time"
            break
        if len(out.records) >= criterion.max_samples:
            out.stop = "max_samples"
            break
    if not out.times:  # every sample throttled: keep them all (the throttled_samples column says so)
        out.times = [seconds for seconds, *_ in out.records]
    return out


def _stable(noise: list[float], criterion: Criterion) -> bool:
    """The relative stdev moved by less than ``stable_change`` of its mean over the last ``stable_window``
    samples (nvbench's exit for noise that will not fall below the target)."""
    window = noise[-criterion.stable_window:]
    if len(window) < criterion.stable_window or any(v != v for v in window):  # NaN: too few samples
        return False
    mean = statistics.fmean(window)
    return mean > 0 and (max(window) - min(window)) < criterion.stable_change * mean
