"""Sampling with a noise-based stopping rule, after nvbench's "stdrel" criterion.

How a sample is timed (``Samples.timing``, the CSV's ``timing`` column; one mode for every row of a sweep):

- ``blocking`` (GPU, the default): nvbench's cold measurement. The L2 flush, then a kernel that spins on a flag
  in mapped host memory (kernels/blocking.cuh), then the start event, the call, the stop event, all enqueued
  while the GPU spins; then the host releases the flag. The host's enqueue time (Python, CuPy, a library's
  wrapper) never lands between the events, for any implementation, whatever library it calls. At most
  strassenbench.bench.queue.QUEUE_LIMIT operations are queued behind the spin (a sweep whose calls hold
  more is timed by ``graph``). A sample whose spin reached its timeout (the host did not release it in time:
  the sample may hold host time) is discarded and counted (``blocking_timeouts``).
- ``graph`` (GPU, ``--timing graph``): the call is captured once into a CUDA graph, and each sample replays
  the graph behind the same blocking kernel. An implementation that cannot be captured is an error naming
  it (TimingError): never a silent fallback to another mode.
- ``host`` (CPU engines): perf_counter around the call.

Older result files may say ``events`` (CUDA events around the Python call, launch time included): report and
compare refuse to set rows of different modes against each other.

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

import ctypes
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Criterion", "Samples", "Timer", "HostTimer", "CudaTimer", "TimingError", "sample", "TIMING_MODES",
           "GPU_TIMING"]

TIMING_MODES = ("blocking", "graph", "host", "events")  # events: written by earlier versions, read only
GPU_TIMING = ("blocking", "graph")  # what `bench --timing` takes on the cuda engine
BLOCKING_TIMEOUT_S = 10.0  # the blocking kernel gives up after this (the host never released it)


class TimingError(RuntimeError):
    """A timing mode that cannot be honoured for a call (graph capture of a call that cannot be captured)."""


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
    timeouts: int = 0  # samples discarded because their blocking kernel gave up waiting for the host
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
            "blocking_timeouts": self.timeouts if self.timing in GPU_TIMING else "",
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


class CudaTimer(Timer):  # GPU; runs in CI on the CPU device of tests/support/cudasim.py
    """Everything on one stream of its own: the L2 flush (a write of 2x L2), the blocking kernel, the two events
    and between them the call (``blocking``) or its CUDA graph (``graph``, captured by ``prepare``).

    ``block_kernel`` is the build's blocking kernel (kernels/blocking.cuh, a CuPy kernel); its flag and
    timeout word live in mapped host memory, which the GPU reads over the bus while it spins."""

    def __init__(self, l2_bytes: int, block_kernel, mode: str = "blocking",  # noqa: ANN001
                 timeout_s: float = BLOCKING_TIMEOUT_S) -> None:
        import cupy
        import numpy as np

        if mode not in GPU_TIMING:
            raise ValueError(f"unknown GPU timing '{mode}' (choose from {', '.join(GPU_TIMING)})")
        self.cupy, self.mode, self.timeouts = cupy, mode, 0
        self._graph = None
        self._stream = cupy.cuda.Stream(non_blocking=True)  # capturable (the legacy default stream is not)
        self._flush = cupy.empty(max(2 * l2_bytes // 4, 1), dtype=cupy.float32)
        self._start, self._stop = cupy.cuda.Event(), cupy.cuda.Event()
        runtime = cupy.cuda.runtime
        self._host = runtime.hostAlloc(8, runtime.hostAllocMapped)  # int flag, int timed_out
        self._words = (ctypes.c_int * 2).from_address(self._host)
        on_device = runtime.pointerGetAttributes(self._host).devicePointer
        self._block = block_kernel
        # Pointers and the 64-bit timeout as 8-byte NumPy scalars: the kernel's parameters are that wide.
        self._block_args = (np.uint64(on_device), np.uint64(on_device + 4), np.uint64(int(timeout_s * 1e9)))

    def __del__(self) -> None:
        try:
            self.cupy.cuda.runtime.freeHost(self._host)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

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
        """``graph``: capture one call into a CUDA graph on this timer's stream (TimingError when it cannot be
        captured: a call that allocates, synchronizes, or calls a library that refuses capture)."""
        if self.mode == "graph":
            self._stream.synchronize()
            try:
                with self._stream:
                    self._stream.begin_capture()
                    try:
                        fn()
                    finally:
                        graph = self._stream.end_capture()
            except Exception as err:  # noqa: BLE001 - reported, never replaced by another mode
                first = (str(err).splitlines() or [""])[0]
                raise TimingError(f"the call cannot be captured into a CUDA graph ({type(err).__name__}: "
                                  f"{first}); time it with --timing blocking") from None
            graph.launch(self._stream)  # the first replay uploads the graph: untimed
            self._stream.synchronize()
            self._graph = graph
        return self.mode

    def time(self, fn: Callable[[], object]) -> float:
        return self.batch(fn, 1)

    def batch(self, fn: Callable[[], object], count: int) -> float:
        """Seconds per call of ``count`` calls (graph replays once prepared) back to back between two events
        behind the blocking kernel, with no flush between them (nvbench's "batch" time when count > 1)."""
        words = self._words
        words[0] = words[1] = 0
        with self._stream:
            self._block((1,), (32,), self._block_args, stream=self._stream)
            self._start.record(self._stream)
            for _ in range(count):
                if self._graph is not None:
                    self._graph.launch(self._stream)
                else:
                    fn()
            self._stop.record(self._stream)
        words[0] = 1  # release: the GPU runs the events and the call, all queued already
        self._stop.synchronize()
        if words[1]:
            self.timeouts += 1
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
    running = _Running()
    started = time.perf_counter()
    while True:
        timer.flush()
        timeouts = getattr(timer, "timeouts", 0)
        seconds = timer.time(fn)
        timed_out = getattr(timer, "timeouts", 0) > timeouts
        clock, flagged = probe()
        kept = not timed_out and (floor is None or clock is None or clock >= floor)
        out.records.append((seconds, clock, flagged, kept))
        if timed_out:
            out.timeouts += 1
        elif not kept:
            out.discarded += 1
        else:
            out.times.append(seconds)
            out.noise.append(running.add(seconds))
        if kept and len(out.times) >= criterion.min_samples and running.total >= criterion.min_time:
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
    if out.timeouts and not out.times:
        raise TimingError(f"every sample ({out.timeouts}) reached the blocking kernel's timeout")
    if not out.times:  # every sample throttled: keep them all (the throttled_samples column says so)
        out.times = [seconds for seconds, *_ in out.records]
    return out


class _Running:
    """The relative standard deviation of the samples so far, updated in O(1) per sample (Welford's
    algorithm; nvbench made its stdrel bookkeeping O(n) the same way, its PR 374)."""

    def __init__(self) -> None:
        self.count, self.mean, self.m2, self.total = 0, 0.0, 0.0, 0.0

    def add(self, x: float) -> float:
        self.count += 1
        self.total += x
        delta = x - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (x - self.mean)
        if self.count < 2 or self.mean <= 0:
            return float("nan")
        return (self.m2 / (self.count - 1)) ** 0.5 / self.mean


def _stable(noise: list[float], criterion: Criterion) -> bool:
    """The relative stdev moved by less than ``stable_change`` of its mean over the last ``stable_window``
    samples (nvbench's exit for noise that will not fall below the target)."""
    window = noise[-criterion.stable_window:]
    if len(window) < criterion.stable_window or any(v != v for v in window):  # NaN: too few samples
        return False
    mean = statistics.fmean(window)
    return mean > 0 and (max(window) - min(window)) < criterion.stable_change * mean
