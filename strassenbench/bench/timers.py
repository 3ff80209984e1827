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

After each sample the device's SM clock, throttle reasons (the bit mask) and power are read (``probe``). As
nvbench does, a sample taken below ``throttle_threshold`` of the GPU's maximum SM clock is discarded (counted in
``low_clock_discards``).

When to stop (``Samples.stop``, the CSV's ``stop`` column): ``precision`` once at least ``min_samples`` samples
and ``min_time`` seconds of kept samples are in, the 95% confidence interval of the median (distribution-free:
order statistics, ``median_interval``) is within ``precision`` of the median (relative half-width), and the SM
clock has settled (over the last ``clock_window`` kept samples the median clock of the later half is within
``clock_drift`` of the earlier half's: a clock still falling towards a power cap is not a steady state);
otherwise at a cap, ``time_cap`` after ``max_time`` seconds or ``sample_cap`` after ``max_samples`` samples.
The interval's relative half-width is kept (``median_ci_rel``). Every sample (time, SM clock, throttle reasons,
kept, power) is in ``Samples.records``.
"""

from __future__ import annotations

import bisect
import ctypes
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from .telemetry import THROTTLE_MASK

__all__ = ["Criterion", "Samples", "Timer", "HostTimer", "BlockingTimer", "GraphTimer", "TIMERS", "gpu_timer",
           "TimingError", "sample", "TIMING_MODES", "GPU_TIMING", "STOPS", "median_interval", "CAP_MASK"]
BLOCKING_TIMEOUT_S = 10.0  # the blocking kernel gives up after this (the host never released it)
STOPS = ("precision", "time_cap", "sample_cap")  # why sampling stopped (the ``stop`` column)
CAP_MASK = THROTTLE_MASK  # the throttle reasons that are a power or thermal cap (strassenbench.bench.telemetry)
Z95 = 1.959964  # the standard normal's 97.5% quantile


class TimingError(RuntimeError):
    """A timing mode that cannot be honoured for a call (graph capture of a call that cannot be captured)."""


@dataclass(frozen=True)
class Criterion:
    min_samples: int = 10
    min_time: float = 0.5  # seconds of measured samples before the precision test applies
    precision: float = 0.005  # relative half-width of the median's 95% confidence interval (0.5 %)
    max_time: float = 15.0  # cap on wall time per measurement, samples and flushes included
    max_samples: int = 10_000
    warmup: int = 2  # calls, at least
    warmup_time: float = 0.2  # seconds of warm-up calls, at least (clocks ramp up)
    throttle_threshold: float = 0.75  # of the maximum SM clock: samples taken below it are discarded
    clock_window: int = 16  # kept samples over which the SM clock must have settled
    clock_drift: float = 0.01  # relative change of the median clock between the window's halves, at most


@lru_cache(maxsize=4096)
def _median_ranks(n: int, z: float) -> tuple[int, int]:
    """1-based ranks (j, n + 1 - j) of the median's interval: the largest j with P(Bin(n, 1/2) < j) at most the
    tail (exact below 1,000 samples; the normal approximation above)."""
    tail = 0.5 * math.erfc(z / math.sqrt(2))
    if n > 1000:
        j = max(1, math.floor((n - z * math.sqrt(n)) / 2))
        return j, n + 1 - j
    total, below, j = 2**n, 0, 0
    while j < n // 2 and (below + math.comb(n, j)) / total <= tail:
        below += math.comb(n, j)
        j += 1
    return max(1, j), n + 1 - max(1, j)


def median_interval(ordered: list[float], z: float = Z95) -> tuple[float, float]:
    """The distribution-free 95% confidence interval of the median of ``ordered`` (sorted): the order statistics
    whose ranks the binomial distribution gives (Conover, "Practical Nonparametric Statistics", 3rd ed.,
    Sec. 3.2); the whole range where there are too few samples for 95% (below 6)."""
    if not ordered:
        return math.nan, math.nan
    low, high = _median_ranks(len(ordered), z)
    return ordered[low - 1], ordered[high - 1]


@dataclass
class Samples:
    times: list[float] = field(default_factory=list)  # the kept samples
    discarded: int = 0  # samples taken below the throttle threshold's SM clock
    stop: str = ""  # STOPS
    median_ci_rel: float = float("nan")  # the median's 95% interval, half its width over the median
    timing: str = "host"  # TIMING_MODES
    timeouts: int = 0  # samples discarded because their blocking kernel gave up waiting for the host
    host_enqueue_s: float = float("nan")  # median host time of one call (without waiting), from the warm-up
    records: list[tuple] = field(default_factory=list)  # every sample: (seconds, SM clock in MHz or None,
    # throttle reasons (a bit mask, 0 where unknown), kept, power in W or None)

    @property
    def converged(self) -> bool:
        return self.stop == "precision"

    @property
    def kept(self) -> list[tuple]:
        return [r for r in self.records if r[3]]

    @property
    def clocks(self) -> list[float]:
        return [r[1] for r in self.kept if r[1] is not None]

    @property
    def rel_stdev(self) -> float:
        if len(self.times) < 2:
            return float("nan")
        mean = statistics.fmean(self.times)
        return statistics.stdev(self.times) / mean if mean > 0 else float("nan")

    def summary(self) -> dict[str, float | int | bool | str]:
        powers = [r[4] for r in self.kept if r[4] is not None]
        reasons = 0
        for record in self.records:
            reasons |= record[2]
        return {
            "time_min_s": min(self.times),
            "time_median_s": statistics.median(self.times),
            "time_mean_s": statistics.fmean(self.times),
            "time_rel_stdev": self.rel_stdev,
            "median_ci_rel": self.median_ci_rel,
            "samples": len(self.times),
            "converged": self.converged,
            "stop": self.stop,
            "low_clock_discards": self.discarded,
            "timing": self.timing,
            "blocking_timeouts": self.timeouts if self.timing in GPU_TIMING else "",
            "host_enqueue_s": self.host_enqueue_s,
            "sm_clock_median_mhz": statistics.median(self.clocks) if self.clocks else "",
            "capped_share": (sum(1 for r in self.kept if r[2] & CAP_MASK) / len(self.kept)
                             if self.kept and any(r[1] is not None for r in self.kept) else ""),
            "throttle_reasons": hex(reasons) if any(r[1] is not None for r in self.records) else "",
            "power_w": statistics.median(powers) if powers else "",
        }


class Timer:
    """The one interface of the timing methods, one class each (as nvbench's timers): what sample() asks of a
    timer. Flush the cache, time one call, the host's enqueue time of one call, and prepare the calls once per
    point (a graph's capture); ``method`` is the CSV's ``timing`` value, ``gpu`` whether it times a GPU. A
    synchronous host call is its own enqueue."""

    method = "host"
    gpu = False

    def flush(self) -> None:
        pass

    def time(self, fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    def enqueue(self, fn: Callable[[], object]) -> float:
        return self.time(fn)

    def prepare(self, fn: Callable[[], object]) -> str:
        return self.method


class HostTimer(Timer):
    """perf_counter around the call; the cache flush writes ``flush_bytes`` (default 64 MiB)."""

    def __init__(self, flush_bytes: int = 64 << 20) -> None:
        import numpy as np

        self._flush = np.empty(max(flush_bytes // 8, 1), dtype=np.float64)

    def flush(self) -> None:
        self._flush.fill(1.0)


class BlockingTimer(Timer):  # GPU; runs in CI on the CPU device of tests/support/cudasim/
    """nvbench's cold measurement. Everything on one stream of its own: the L2 flush (a write of 2x L2), the
    blocking kernel, the two events and between them the call.

    ``block_kernel`` is the build's blocking kernel (kernels/blocking.cuh, a CuPy kernel); its flag and
    timeout word live in mapped host memory, which the GPU reads over the bus while it spins."""

    method = "blocking"
    gpu = True

    def __init__(self, l2_bytes: int, block_kernel, timeout_s: float = BLOCKING_TIMEOUT_S) -> None:  # noqa: ANN001
        import cupy
        import numpy as np

        self.cupy, self.timeouts = cupy, 0
        self._graph = None  # GraphTimer's, once prepared
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


class GraphTimer(BlockingTimer):  # GPU; runs in CI on the CPU device of tests/support/cudasim/
    """The call captured once into a CUDA graph (``prepare``), each sample a replay of the graph behind the same
    blocking kernel: one queued operation, whatever the call enqueues."""

    method = "graph"

    def prepare(self, fn: Callable[[], object]) -> str:
        """Capture one call into a CUDA graph on this timer's stream (TimingError when it cannot be captured: a
        call that allocates, synchronizes, or calls a library that refuses capture)."""
        self._stream.synchronize()
        try:
            with self._stream:
                self._stream.begin_capture()
                try:
                    fn()
                finally:
                    graph = self._stream.end_capture()
        except Exception as err:  # noqa: BLE001 - reported, never replaced by another method
            first = (str(err).splitlines() or [""])[0]
            raise TimingError(f"the call cannot be captured into a CUDA graph ({type(err).__name__}: "
                              f"{first}); time it with --timing blocking") from None
        graph.launch(self._stream)  # the first replay uploads the graph: untimed
        self._stream.synchronize()
        self._graph = graph
        return self.method


# The timing methods by name (the CSV's ``timing`` column), each its class; ``events`` is only read (older files).
TIMERS: dict[str, type[Timer]] = {cls.method: cls for cls in (BlockingTimer, GraphTimer, HostTimer)}
TIMING_MODES = (*TIMERS, "events")
GPU_TIMING = tuple(method for method, cls in TIMERS.items() if cls.gpu)  # what `bench --timing` takes on cuda


def gpu_timer(method: str, l2_bytes: int, block_kernel, timeout_s: float = BLOCKING_TIMEOUT_S) -> Timer:  # noqa: ANN001
    """The GPU timer of ``method`` (GPU_TIMING), behind ``block_kernel``; ValueError naming the methods otherwise."""
    if method not in GPU_TIMING:
        raise ValueError(f"unknown GPU timing '{method}' (choose from {', '.join(GPU_TIMING)})")
    return TIMERS[method](l2_bytes, block_kernel, timeout_s)


def _no_probe() -> tuple[float | None, int, float | None]:
    return None, 0, None


def sample(
    fn: Callable[[], object], timer: Timer, criterion: Criterion,
    probe: Callable[[], tuple[float | None, int, float | None]] = _no_probe, max_clock_mhz: float | None = None,
) -> Samples:
    """Warm up (measuring the host's enqueue time), prepare the timer (a CUDA graph on the GPU), then time
    ``fn`` until the criterion says stop (module docstring). ``probe`` reads (SM clock in MHz, throttle reasons,
    power in W) after each sample; with ``max_clock_mhz`` a sample below the throttle threshold of it is
    discarded."""
    enqueue: list[float] = []
    warm = time.perf_counter()
    while len(enqueue) < criterion.warmup or (time.perf_counter() - warm < criterion.warmup_time
                                              and len(enqueue) < criterion.max_samples):
        timer.flush()
        enqueue.append(timer.enqueue(fn))
    out = Samples(timing=timer.prepare(fn), host_enqueue_s=statistics.median(enqueue) if enqueue else float("nan"))
    floor = criterion.throttle_threshold * max_clock_mhz if max_clock_mhz else None
    ordered: list[float] = []
    clocks: list[float] = []
    total = 0.0
    started = time.perf_counter()
    while True:
        timer.flush()
        timeouts = getattr(timer, "timeouts", 0)
        seconds = timer.time(fn)
        timed_out = getattr(timer, "timeouts", 0) > timeouts
        clock, reasons, power = probe()
        kept = not timed_out and (floor is None or clock is None or clock >= floor)
        out.records.append((seconds, clock, int(reasons or 0), kept, power))
        if timed_out:
            out.timeouts += 1
        elif not kept:
            out.discarded += 1
        else:
            out.times.append(seconds)
            bisect.insort(ordered, seconds)
            total += seconds
            if clock is not None:
                clocks.append(clock)
        if kept and len(out.times) >= criterion.min_samples and total >= criterion.min_time:
            out.median_ci_rel = _half_width(ordered)
            if out.median_ci_rel <= criterion.precision and _settled(clocks, criterion):
                out.stop = "precision"
                break
        if time.perf_counter() - started >= criterion.max_time:
            out.stop = "time_cap"
            break
        if len(out.records) >= criterion.max_samples:
            out.stop = "sample_cap"
            break
    if out.timeouts and not out.times:
        raise TimingError(f"every sample ({out.timeouts}) reached the blocking kernel's timeout")
    if not out.times:  # every sample throttled: keep them all (the low_clock_discards column says so)
        out.times = [record[0] for record in out.records]
        ordered = sorted(out.times)
    out.median_ci_rel = _half_width(ordered)
    return out


def _half_width(ordered: list[float]) -> float:
    """The median's 95% interval, half its width over the median (median_interval); O(1) on a sorted list."""
    low, high = median_interval(ordered)
    n = len(ordered)
    median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
    return (high - low) / 2 / median if median > 0 else float("inf")


def _settled(clocks: list[float], criterion: Criterion) -> bool:
    """Whether the SM clock has settled over the last ``clock_window`` kept samples: the later half's median
    within ``clock_drift`` of the earlier half's. Without clocks (a CPU, no NVML) there is nothing to settle."""
    if not clocks:
        return True
    window = clocks[-criterion.clock_window:]
    if len(window) < criterion.clock_window:
        return False
    half = len(window) // 2
    early, late = statistics.median(window[:half]), statistics.median(window[half:])
    return abs(late - early) <= criterion.clock_drift * early
