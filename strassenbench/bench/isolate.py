"""Points measured in a worker process, so that a faulting kernel costs one point, never the sweep.

A CUDA error such as an illegal address (700), a misaligned address (716), a trap (715) or a launch failure
(719) is sticky: the CUDA runtime documentation says the process "must be terminated and relaunched", and
every later call in it fails. So ``bench`` (the parent) holds the results file and hands the points one at a
time to a worker process, which measures them with the function the parent gives it in WorkerConfig
(strassenbench.bench.runner.run_point: this module imports nothing of the runner). A point that ends in a
sticky error comes back with status ``fault`` and the error's name, and that worker stops; a worker that dies
(a signal, or ``STRASSENBENCH_INJECT_FAILURE=impl:m:n:k:crash``) costs its point, recorded as ``fault`` by
the parent. Either way the next point goes to a fresh worker.

Workers are forked where nothing in the parent holds a GPU (the numpy engine, or a CPU device of the tests,
which the fork inherits) and spawned otherwise: a process that initialised CUDA cannot fork one that uses it.
A worker dies with its parent (Linux: PR_SET_PDEATHSIG), so an interrupted ``bench`` leaves none behind.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["WorkerConfig", "Workers", "START_METHOD", "died"]

# Overridden by a CPU device installed in this process (tests/support/cudasim/): a forked worker inherits it.
START_METHOD: str | None = None


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs to measure points as the parent would (it makes its own backend)."""

    engine: str
    timing: str
    criterion: object  # strassenbench.bench.timers.Criterion
    seed: int
    build_dir: str
    measure: Callable  # (point, backend, criterion, seed, build_dir, records) -> row: runner.run_point


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the worker notices a closed pipe instead
        pass


def _serve(conn, config: WorkerConfig, backend=None) -> None:  # noqa: ANN001 - a Connection, a Backend
    """The worker: measure each point it is sent and send back (row, records); stop after a fault. A forked
    worker measures with its parent's backend (inherited); a spawned one makes its own."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops this process
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's cleanup (strassenbench.cli): a plain stop
    from .backends import make_backend

    if backend is None:
        backend = make_backend(config.engine, config.timing)
    while True:
        point = conn.recv()
        if point is None:
            return
        records: list = []
        row = config.measure(point, backend, config.criterion, config.seed, config.build_dir, records)
        conn.send((row, records))
        if row["status"] == "fault":  # a sticky error: nothing more can run in this process
            return


def died(exitcode: int | None) -> str:
    """How a worker ended, in words: 'killed by SIGKILL', 'exit status 1'."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


class Workers:
    """Worker processes for one sweep, started as needed: ``measure(point)`` gives (row, records), or
    (None, reason) when the worker died while measuring it."""

    def __init__(self, config: WorkerConfig, backend=None) -> None:  # noqa: ANN001 - the parent's Backend
        self.config = config
        self.method = START_METHOD or ("fork" if config.engine == "numpy" else "spawn")
        self._context = multiprocessing.get_context(self.method)
        self._backend = backend if self.method == "fork" else None
        self._process = None
        self._conn = None
        self.started = 0

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        self._process = self._context.Process(target=_serve, args=(child, self.config, self._backend), daemon=True,
                                              name="strassenbench-worker")
        self._process.start()
        child.close()
        self._conn = parent
        self.started += 1

    def measure(self, point) -> tuple[dict | None, object]:  # noqa: ANN001 - a runner.Point
        if self._process is None:
            self._start()
        try:
            self._conn.send(point)
            row, records = self._conn.recv()
        except (EOFError, ConnectionError, OSError):
            self._process.join()
            reason = died(self._process.exitcode)
            self._forget()
            return None, reason
        if row["status"] == "fault":
            self._process.join()
            self._forget()
        return row, records

    def _forget(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def close(self) -> None:
        """Stop the worker: asked to at the end of a sweep, killed when the parent is interrupted."""
        if self._process is None:
            return
        try:
            self._conn.send(None)
            self._process.join(timeout=30)
        except (OSError, ValueError):
            pass
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._forget()

    def kill(self) -> None:
        if self._process is not None and self._process.is_alive():
            os.kill(self._process.pid, signal.SIGKILL)
            self._process.join()
        self._forget()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, kind, *_: object) -> None:  # noqa: ANN001
        if kind is None:
            self.close()
        else:
            self.kill()

