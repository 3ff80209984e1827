"""The CPU device behind CuPy (tests.support.cudasim): streams, events and graphs."""

from __future__ import annotations

import time

from .core import (
    CpuDevice, ERR_CAPTURE_INVALIDATED, ERR_CAPTURE_ISOLATION, ERR_CAPTURE_UNJOINED, ERR_CAPTURE_UNMATCHED,
    ERR_CAPTURE_UNSUPPORTED, ERR_INVALID_HANDLE, ERR_NOT_READY, _Capture, _Op, _ancestors, _runtime_error, device,
)


class Stream:
    """cupy.cuda.Stream on the CPU device."""

    def __init__(self, null: bool = False, non_blocking: bool = False, ptr: int = 0, priority: int | None = None,
                 _device: CpuDevice | None = None) -> None:
        dev = _device or device()
        dev.alive()
        self.null, self.non_blocking = null, non_blocking
        self.ptr = 0 if null else next(dev._ptrs) * 16
        self.last: _Op | None = None
        self.capture: _Capture | None = None
        self._before_capture: _Op | None = None
        dev.streams[self.ptr] = self

    def __enter__(self) -> Stream:
        device().current.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        device().current.pop()

    def record(self, event: Event | None = None) -> Event:
        event = event if event is not None else Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        dev = device()
        dev.alive()
        if event.op is None:  # never recorded: nothing to wait for
            return
        capture = next((c for c in [dev.capture] if c is not None and event.op in c.nodes), None)
        if capture is not None and self.capture is None:  # the stream joins the capture (a fork)
            self.capture, self._before_capture, self.last = capture, self.last, None
            capture.streams.append(self)
        elif self.capture is not None and capture is None:
            self.capture.invalidated = True
            raise _runtime_error(ERR_CAPTURE_ISOLATION)
        op = _Op(lambda: None, 0.0, f"wait {self.ptr}", deps=[event.op])
        dev.enqueue(self, op)

    def synchronize(self) -> None:
        device().synchronize(self.covered())

    def covered(self) -> list[_Op]:
        """What a wait for this stream waits for: its last operation, and on the legacy default stream every
        blocking stream's too (a non-blocking stream's work needs an explicit join)."""
        streams = [self]
        if self.null:
            streams += [s for s in device().streams.values() if not s.non_blocking and not s.null]
        return [s.last for s in streams if s.last is not None]

    def begin_capture(self, mode: object = None) -> None:
        dev = device()
        dev.alive()
        if self.null:
            raise _runtime_error(ERR_CAPTURE_UNSUPPORTED)  # the legacy default stream cannot capture
        if dev.capture is not None:
            raise _runtime_error(ERR_CAPTURE_UNSUPPORTED)
        dev.capture = _Capture(self, streams=[self])
        self.capture, self._before_capture, self.last = dev.capture, self.last, None

    def is_capturing(self) -> bool:
        return self.capture is not None

    def end_capture(self) -> Graph:
        dev = device()
        capture = self.capture
        if capture is None or capture.origin is not self:
            raise _runtime_error(ERR_CAPTURE_UNMATCHED)
        sink = self.last
        for stream in capture.streams:
            stream.capture, stream.last = None, stream._before_capture
        dev.capture = None
        if capture.invalidated:
            raise _runtime_error(ERR_CAPTURE_INVALIDATED)
        joined = _ancestors(sink)
        if any(node not in joined for node in capture.nodes):
            raise _runtime_error(ERR_CAPTURE_UNJOINED)
        return Graph(capture.nodes, sink)

    def __repr__(self) -> str:
        return f"<cpu stream {self.ptr:#x}>"


class Graph:
    """cupy.cuda.graph.Graph: the captured work, replayed as one launch."""

    def __init__(self, nodes: list[_Op], sink: _Op | None) -> None:
        self.nodes, self.sink = nodes, sink
        self.replays = 0

    def launch(self, stream: Stream | None = None) -> None:
        dev = device()
        dev.alive()
        stream = stream if stream is not None else dev.current[-1]
        if stream.capture is not None:
            raise _runtime_error(ERR_CAPTURE_UNSUPPORTED)
        dev.wait_for_room()
        self.replays += 1
        copies: dict[_Op, _Op] = {}
        before, now = stream.last, time.perf_counter()
        for node in self.nodes:  # capture order: every node after its dependencies
            deps = [copies[d] for d in node.deps] or ([before] if before is not None else [])
            copy = _Op(node.fn, node.duration, node.label, deps, next(dev._seq), now, spin=node.spin,
                       replay=id(self) + self.replays)
            copies[node] = copy
            dev.pending.append(copy)
        if self.sink is not None:
            stream.last = copies[self.sink]

    def upload(self, stream: Stream | None = None) -> None:
        pass


class Event:
    """cupy.cuda.Event on the CPU device."""

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
        device().alive()
        self.disable_timing = disable_timing
        self.op: _Op | None = None

    def record(self, stream: Stream | None = None) -> None:
        dev = device()
        stream = stream if stream is not None else dev.current[-1]
        self.op = _Op(lambda: None, 0.0, "event")
        dev.enqueue(stream, self.op)

    def synchronize(self) -> None:
        device().synchronize([self.op] if self.op is not None else [])

    @property
    def done(self) -> bool:
        return self.op is None or self.op.done


def get_elapsed_time(start: Event, stop: Event) -> float:
    """Milliseconds between two recorded, completed events with timing (cudaEventElapsedTime)."""
    device().alive()
    if start.disable_timing or stop.disable_timing or start.op is None or stop.op is None:
        raise _runtime_error(ERR_INVALID_HANDLE)
    if not (start.op.done and stop.op.done):
        raise _runtime_error(ERR_NOT_READY)
    return (stop.op.end - start.op.end) * 1e3
