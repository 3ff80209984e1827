"""A CuPy-shaped CPU device, so that the cuda engine's own Python runs in CI (tests marked ``cudasim``).

The real ``cupy`` package is imported; ``install`` replaces, on its own modules, what needs a GPU:

- **Device memory.** Arrays (``DeviceArray``: shape, strides, dtype, ``data.ptr``) live in host memory, so an
  address is a host address that the emulator's kernels read and write. ``runtime.malloc``/``memGetInfo``
  account for a device of ``memory_bytes``; an allocation past it fails as CuPy's pool or the runtime does.
- **Modules and launches.** ``RawModule(path=...)`` reads the fatbin's PTX (``cuobjdump -ptx``) for each
  kernel's ``.entry`` signature. A launch marshals its arguments with CuPy's own ``CPointer``/``CScalar``, and
  the device copies each parameter at the byte width of its PTX type, as the driver does when it reads the
  kernelParams array. A scalar of another width is refused (the driver would silently read its first bytes:
  right for a small non-negative Python int on a little-endian host, garbage for a double passed to a float).
  The kernel runs on the emulator (strassenbench.fused.emu.entry).
- **Streams and events.** Work is queued per stream; the device runs it when the host waits, and only what the
  wait covers: a stream's synchronize (or a read of a result on it) what that stream's work depends on (the
  legacy default stream also every blocking stream's), an event's synchronize what the event depends on, a
  device synchronize everything. It runs in an order chosen among every order the streams and their event
  waits allow: random (seeded) or ``lifo`` (the latest enqueued first, which exposes any missing wait
  deterministically). A missing join therefore leaves work unrun, as on a GPU.
- **The queue behind a spinning kernel.** Behind the blocking kernel (kernels/blocking.cuh) still waiting for
  the host, at most ``queue_capacity`` operations can be pending (a graph launch is one). An enqueue past that
  blocks until the device gets through the queue: the spin runs first, and since the host that would release
  it is the one blocked, it waits out its timeout, exactly as on a GPU.
- **Faults.** A sticky error poisons the context: the blocking kernel reading a flag outside mapped host memory
  is an illegal address (700), an access the emulator finds misaligned is 716. From then on every runtime,
  stream, event, launch and cuBLAS wrapper call raises that error, and the C API's calls return
  CUBLAS_STATUS_EXECUTION_FAILED; queued work is lost. ``poison(status)`` does it directly.
- **Launch limits.** A launch past the grid's (2^31 - 1, 65,535, 65,535) or a block's (1,024 threads, 64 in z,
  the kernel's ``.maxntid``) limits, or with more shared memory than a block has (the kernel's static shared
  memory from ``cuobjdump -res-usage`` plus the dynamic), fails as the driver's cuLaunchKernel does
  (CUDA_ERROR_INVALID_VALUE).
- **Graphs.** Capture records the work of the capturing stream and of the streams that join it by waiting on one
  of its events. As CUDA does, end_capture refuses work that was not joined back (cudaErrorStreamCaptureUnjoined),
  and a synchronisation or an allocation during a capture fails (cudaErrorStreamCaptureUnsupported).
- **cuBLAS.** CuPy's wrapper (``cupy_backends.cuda.libs.cublas``) refuses a capturing stream exactly as CuPy 14
  does (``setStream`` raises NotImplementedError, CuPy issue 6290); the C-API stand-in that
  ``reference.array_ops.cublas_library`` returns computes on the host and can be captured. As the cuBLAS
  documentation says, ``cublasSetStream`` resets the handle's workspace to cuBLAS's own pool; a GEMM captured
  without a user workspace would allocate from that pool inside the graph and is refused here
  (CUBLAS_STATUS_NOT_SUPPORTED).
- **Time.** A virtual device clock in host seconds: an operation starts when the device reaches it, never before
  the host enqueued it, and lasts a modelled duration (``duration``). Events around a Python call therefore
  include the host's enqueue gaps; a graph replay, or a call queued behind the blocking kernel, does not.

Kernels and cuBLAS calls compute exactly what the GPU would (the emulator runs the CUDA sources; GEMM in the
working precision); timings are the model's and say nothing about any GPU.

From a shell, any command of the CLI runs on a CPU device: ``python -m tests.support.cudasim [OPTIONS] strassenbench
bench --engine cuda ...`` (``python -m tests.support.cudasim --help`` lists the options: queue capacity, order,
memory, an injected failure; each also from the environment).
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import operator
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

LAUNCH_S = 3e-6  # modelled cost of any launch
FLOP_RATE = 2e13  # modelled FLOP/s of a GEMM
BYTE_RATE = 2e12  # modelled bytes/s of a memory-bound kernel

QUEUE_CAPACITY = 32  # operations pending behind an unreleased blocking kernel (nvbench: about 32 launches)
MAX_GRID = (2**31 - 1, 65535, 65535)  # CUDA Programming Guide, "Compute Capabilities"
MAX_BLOCK, MAX_BLOCK_THREADS, MAX_SHARED = (1024, 1024, 64), 1024, 48 << 10

# CUDA runtime errors the device raises (cudaError_t)
ERR_ALLOCATION, ERR_INVALID_VALUE, ERR_INVALID_HANDLE, ERR_NOT_READY = 2, 1, 400, 600
ERR_CAPTURE_UNSUPPORTED, ERR_CAPTURE_INVALIDATED, ERR_CAPTURE_UNMATCHED = 900, 901, 903
ERR_CAPTURE_UNJOINED, ERR_CAPTURE_ISOLATION = 904, 905
ERR_ILLEGAL_ADDRESS, ERR_MISALIGNED_ADDRESS = 700, 716  # sticky
CUBLAS_EXECUTION_FAILED, CUBLAS_NOT_SUPPORTED = 13, 15


class LaunchError(TypeError):
    """A launch whose arguments do not match the kernel's PTX signature."""


class CudaFault(Exception):
    """A kernel did what faults on a GPU (``status``: the sticky cudaError_t); raised while the device runs it."""

    def __init__(self, status: int, what: str) -> None:
        super().__init__(what)
        self.status = status


def _runtime_error(status: int) -> Exception:
    from cupy_backends.cuda.api.runtime import CUDARuntimeError

    return CUDARuntimeError(status)


_DRIVER_NAMES = {1: "CUDA_ERROR_INVALID_VALUE: invalid argument", 500: "CUDA_ERROR_NOT_FOUND: named symbol not found"}


def _driver_error(status: int) -> Exception:
    """CuPy's CUDADriverError as cuLaunchKernel or cuModuleGetFunction raise it (made without libcuda, which
    CuPy's constructor would load for the message)."""
    from cupy_backends.cuda.api.driver import CUDADriverError

    err = CUDADriverError.__new__(CUDADriverError, status)
    err.status = status
    Exception.__init__(err, _DRIVER_NAMES[status])
    return err


# ---------------------------------------------------------------------------------------------- the device
@dataclass(eq=False)
class _Op:
    fn: object  # callable() -> None, run when the device reaches the operation
    duration: float
    label: str
    deps: list = field(default_factory=list)
    seq: int = 0
    enqueued: float = 0.0
    end: float = 0.0
    done: bool = False
    spin: bool = False  # the blocking kernel: it lasts until it returns
    replay: int | None = None  # the graph launch this op is part of (one queued operation for them all)


@dataclass(eq=False)
class _Capture:
    origin: object
    nodes: list = field(default_factory=list)
    streams: list = field(default_factory=list)
    invalidated: bool = False


class CpuDevice:
    """The device behind one ``install``: its memory, queues, capture, clock and logs (for the tests)."""

    def __init__(self, memory_bytes: int = 1 << 30, order: str = "random", seed: int = 0, l2_bytes: int = 1 << 20,
                 compute_capability: str = "90", queue_capacity: int = QUEUE_CAPACITY) -> None:
        if order not in ("random", "lifo", "fifo"):
            raise ValueError(order)
        self.queue_capacity = queue_capacity
        self.queue_full = 0  # enqueues that found the queue behind a spinning kernel full
        self.sticky: int | None = None  # the sticky error that poisoned the context
        self.fault = ""  # what caused it
        self.capacity, self.used = memory_bytes, 0
        self.order, self.rng = order, random.Random(seed)
        self.l2_bytes, self.compute_capability = l2_bytes, compute_capability
        self.pending: list[_Op] = []
        self.capture: _Capture | None = None
        self.buffers: dict[int, np.ndarray] = {}  # runtime.malloc / hostAlloc: address -> host bytes
        self.host_mapped: set[int] = set()
        self.allocator = None  # cupy.cuda.using_allocator
        self.launches: list[tuple[str, tuple, tuple]] = []  # every kernel launched (name, grid, block)
        self.executed: list[str] = []  # labels, in the order the device ran them
        self.syncs = 0
        self.freed: list[np.ndarray] = []  # memory freed while work was queued (stream-ordered frees)
        self.cublas_stream: dict[int, int] = {}  # handle -> stream ptr (the C API's cublasSetStream_v2)
        self.cublas_workspace: dict[int, tuple[int, int]] = {}
        self.cublas_math: dict[int, int] = {}  # handle -> math mode (cublasSetMathMode)
        self.cublas_handle = 0xC0B1A5
        self._seq = itertools.count()
        self._ptrs = itertools.count(0x7000)
        self.streams: dict[int, Stream] = {}
        self.null = Stream(null=True, _device=self)
        self.current: list[Stream] = [self.null]

    def mapped(self, address: int, nbytes: int) -> bool:
        """Whether [address, address + nbytes) lies in mapped host memory (hostAlloc with hostAllocMapped)."""
        return any(base <= address and address + nbytes <= base + self.buffers[base].nbytes
                   for base in self.host_mapped)

    # -- faults
    def alive(self) -> None:
        """Every call into a poisoned context fails with its sticky error."""
        if self.sticky is not None:
            raise _runtime_error(self.sticky)

    def poison(self, status: int, what: str = "") -> None:
        """A sticky error: the context is unusable from now on and its queued work is lost."""
        self.sticky, self.fault, self.pending = status, what, []

    # -- queues
    def enqueue(self, stream: Stream, op: _Op) -> None:
        self.alive()
        if stream.capture is None:
            self.wait_for_room()
        op.seq, op.enqueued = next(self._seq), time.perf_counter()
        if stream.last is not None:
            op.deps.append(stream.last)
        stream.last = op
        (stream.capture.nodes if stream.capture else self.pending).append(op)

    def wait_for_room(self) -> None:
        """An enqueue behind a blocking kernel that has not run yet, with ``queue_capacity`` operations already
        behind it, waits for the device to get through the queue: the kernel first, which nobody releases while
        the host is stuck here, so it spins to its timeout."""
        spin = next((op for op in self.pending if op.spin), None)
        if spin is None:
            return
        behind = [op for op in self.pending if op.seq > spin.seq]
        if sum(op.replay is None for op in behind) + len({op.replay for op in behind} - {None}) >= self.queue_capacity:
            self.queue_full += 1
            self._run(list(self.pending))

    def refuse_in_capture(self, what: str) -> None:
        """A synchronisation or an allocation while a capture is under way (CUDA's global capture mode)."""
        if self.capture is not None:
            self.capture.invalidated = True
            raise _runtime_error(ERR_CAPTURE_UNSUPPORTED)

    def synchronize(self, covered: list | None = None) -> None:
        """Wait for the operations ``covered`` and everything they depend on (default: everything queued), run
        in an order the dependencies allow (``order``), on the virtual clock."""
        self.refuse_in_capture("synchronize")
        self.alive()
        self.syncs += 1
        if covered is None:
            todo = list(self.pending)
        else:
            needed = _ancestors(*covered)
            todo = [op for op in self.pending if op in needed]
        self._run(todo)

    def _run(self, todo: list[_Op]) -> None:
        waiting = set(todo)
        while todo:
            ready = [op for op in todo if all(d.done for d in op.deps)]
            if self.order == "random":
                op = self.rng.choice(ready)
            else:
                op = (max if self.order == "lifo" else min)(ready, key=lambda o: o.seq)
            todo.remove(op)
            start = max([op.enqueued, *(d.end for d in op.deps)])
            try:
                op.fn()
            except CudaFault as fault:
                self.poison(fault.status, str(fault))
                raise _runtime_error(fault.status) from None
            op.end = max(start, time.perf_counter()) if op.spin else start + op.duration
            op.done, op.deps = True, []  # a finished op's dependencies are finished: forget them
            self.executed.append(op.label)
        self.pending = [op for op in self.pending if op not in waiting]
        if not self.pending:
            self.freed.clear()

    # -- memory
    def new_address(self, nbytes: int) -> tuple[int, np.ndarray]:
        raw = np.zeros(nbytes + 256, dtype=np.uint8)
        offset = -raw.ctypes.data % 256
        host = raw[offset: offset + nbytes]
        return host.ctypes.data if nbytes else next(self._ptrs) * 256, host

    def allocate(self, nbytes: int) -> tuple[object, np.ndarray]:
        """(a memory pointer owning the allocation, its host bytes): through the allocator in use, if any."""
        self.refuse_in_capture("allocation")
        self.alive()
        if self.allocator is not None:
            memory = self.allocator(nbytes)
            return memory, self.buffers[memory.ptr][:nbytes]
        if self.used + nbytes > self.capacity:
            import cupy

            raise cupy.cuda.memory.OutOfMemoryError(nbytes, self.used)
        self.used += nbytes
        ptr, host = self.new_address(nbytes)
        return _Memory(ptr, nbytes, lambda: self._release(nbytes), host), host

    def _release(self, nbytes: int) -> None:
        self.used -= nbytes


_DEVICE: CpuDevice | None = None


def device() -> CpuDevice:
    if _DEVICE is None:
        raise RuntimeError("no CPU device installed")
    return _DEVICE


class _Memory:
    """cupy.cuda.MemoryPointer's face: ``ptr``; frees when the last array on it goes. As CuPy's pool does, the
    free is stream-ordered: work already queued may still read the memory, so its host bytes stay until the
    device next drains."""

    def __init__(self, ptr: int, size: int, on_free=None, host: np.ndarray | None = None) -> None:  # noqa: ANN001
        self.ptr, self.size, self._on_free, self._host = ptr, size, on_free, host

    def __del__(self) -> None:
        if _DEVICE is not None and self._host is not None:
            _DEVICE.freed.append(self._host)
        if self._on_free is not None:
            self._on_free()


class _DataPointer:
    def __init__(self, ptr: int, mem: _Memory) -> None:
        self.ptr, self.mem = ptr, mem


# ---------------------------------------------------------------------------------------------- streams, events
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


def _ancestors(*ops: _Op | None) -> set:
    """The operations and all they depend on (finished ones forget their dependencies)."""
    seen: set = set()
    todo = [op for op in ops if op is not None]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(node.deps)
    return seen


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


# ---------------------------------------------------------------------------------------------- arrays
class DeviceArray:
    """A CuPy array whose memory is host memory: ``data.ptr`` is what a kernel on this device dereferences."""

    __array_priority__ = 100

    def __init__(self, host: np.ndarray, memory: object) -> None:
        self._h, self._mem = host, memory

    # layout
    shape = property(lambda self: self._h.shape)
    strides = property(lambda self: self._h.strides)
    dtype = property(lambda self: self._h.dtype)
    ndim = property(lambda self: self._h.ndim)
    size = property(lambda self: self._h.size)
    nbytes = property(lambda self: self._h.nbytes)
    itemsize = property(lambda self: self._h.itemsize)
    data = property(lambda self: _DataPointer(self._h.ctypes.data, self._mem))
    T = property(lambda self: DeviceArray(self._h.T, self._mem))

    def __getitem__(self, key: object) -> DeviceArray:
        view = self._h[key]
        if not isinstance(view, np.ndarray):
            return _read(lambda: np.asarray(view))
        return DeviceArray(view, self._mem)

    def __len__(self) -> int:
        return len(self._h)

    def reshape(self, *shape: object) -> DeviceArray:
        view = self._h.reshape(*shape)
        return DeviceArray(view, self._mem) if np.shares_memory(view, self._h) else _read(lambda: view)

    def ravel(self) -> DeviceArray:
        return self.reshape(-1)

    # kernels on the current stream (capturable)
    def fill(self, value: object) -> None:
        host, n = self._h, self.nbytes
        _enqueue_kernel(lambda: host.fill(value), LAUNCH_S + n / BYTE_RATE, "fill")

    # synchronous: the host waits for the device, then reads (refused during a capture)
    def astype(self, dtype: object, copy: bool = True) -> DeviceArray:
        return _read(lambda: self._h.astype(dtype))

    def copy(self) -> DeviceArray:
        return _read(lambda: self._h.copy())

    def get(self) -> np.ndarray:
        _wait_current()
        return self._h.copy()

    def max(self, axis: object = None, keepdims: bool = False) -> DeviceArray:
        return _read(lambda: np.asarray(self._h.max(axis=axis, keepdims=keepdims)))

    def min(self) -> DeviceArray:
        return _read(lambda: np.asarray(self._h.min()))

    def sum(self) -> DeviceArray:
        return _read(lambda: np.asarray(self._h.sum()))

    def __float__(self) -> float:
        _wait_current()
        return float(self._h)

    def __int__(self) -> int:
        _wait_current()
        return int(self._h)

    def __bool__(self) -> bool:
        _wait_current()
        return bool(self._h)

    def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                        "NumPy array explicitly.")

    def __abs__(self) -> DeviceArray:
        return _read(lambda: np.abs(self._h))

    def __neg__(self) -> DeviceArray:
        return _read(lambda: -self._h)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, ptr={self.data.ptr:#x})"


def _host(x: object) -> object:
    if isinstance(x, np.ndarray):
        raise TypeError("Unsupported type <class 'numpy.ndarray'>: a NumPy array next to a CuPy array")
    return x._h if isinstance(x, DeviceArray) else x


def _binary(name: str, reflected: bool = False):  # noqa: ANN202
    op = getattr(operator, name.replace("__r", "__", 1) if reflected else name)

    def method(self: DeviceArray, other: object) -> DeviceArray:
        other = _host(other)
        return _read(lambda: op(other, self._h) if reflected else op(self._h, other))

    return method


for _name in ("__add__", "__sub__", "__mul__", "__truediv__", "__matmul__"):
    setattr(DeviceArray, _name, _binary(_name))
for _name in ("__radd__", "__rsub__", "__rmul__", "__rtruediv__"):
    setattr(DeviceArray, _name, _binary(_name, reflected=True))


def _inplace(name: str):  # noqa: ANN202 - an elementwise kernel on the current stream, as CuPy's x += y
    op = getattr(operator, name)

    def method(self: DeviceArray, other: object) -> DeviceArray:
        host, value = self._h, _host(other)
        _enqueue_kernel(lambda: op(host, value), LAUNCH_S + 2 * self.nbytes / BYTE_RATE, name)
        return self

    return method


for _name in ("__iadd__", "__isub__", "__imul__"):
    setattr(DeviceArray, _name, _inplace(_name))


def _new(host: np.ndarray) -> DeviceArray:
    """A new device allocation holding a copy of ``host`` (C order)."""
    memory, raw = device().allocate(host.nbytes)
    out = raw.view(host.dtype).reshape(host.shape) if host.nbytes else np.empty(host.shape, host.dtype)
    out[...] = host
    return DeviceArray(out, memory)


def _wait_current() -> None:
    """A read of a result: CuPy's copy runs on the current stream, so the host waits for what that covers."""
    dev = device()
    dev.synchronize(dev.current[-1].covered())


def _read(compute) -> DeviceArray:  # noqa: ANN001
    """A synchronous operation on the current stream: the host waits for it (refused during a capture), then
    a new array."""
    _wait_current()
    return _new(np.asarray(compute(), order="C"))  # (ascontiguousarray would make a 0-d result 1-d)


def _enqueue_kernel(fn, duration: float, label: str, spin: bool = False) -> None:  # noqa: ANN001
    dev = device()
    dev.enqueue(dev.current[-1], _Op(fn, duration, label, spin=spin))


def asarray(x: object, dtype: object = None) -> DeviceArray:
    if isinstance(x, DeviceArray):
        return x if dtype is None or np.dtype(dtype) == x.dtype else x.astype(dtype)
    device().synchronize()  # cudaMemcpy from pageable host memory: synchronous
    return _new(np.asarray(x, dtype=dtype, order="C"))


def asnumpy(x: object) -> np.ndarray:
    return x.get() if isinstance(x, DeviceArray) else np.asarray(x)


def empty(shape: object, dtype: object = float) -> DeviceArray:
    memory, raw = device().allocate(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    host = raw.view(np.dtype(dtype)).reshape(shape) if raw.size else np.empty(shape, dtype)
    return DeviceArray(host, memory)


def full(shape: object, value: object, dtype: object = float) -> DeviceArray:
    out = empty(shape, dtype)
    out._h.fill(value)  # fresh memory: no queued work touches it
    return out


def zeros(shape: object, dtype: object = float) -> DeviceArray:
    return full(shape, 0, dtype)


def ones(shape: object, dtype: object = float) -> DeviceArray:
    return full(shape, 1, dtype)


def concatenate(arrays: object, axis: int = 0) -> DeviceArray:
    return _read(lambda: np.concatenate([_host(a) for a in arrays], axis=axis))


def norm(x: DeviceArray, *args: object, **kwargs: object) -> DeviceArray:
    return _read(lambda: np.asarray(np.linalg.norm(x._h, *args, **kwargs)))


class _Generator:
    def __init__(self, seed: object) -> None:
        self._rng = np.random.default_rng(seed)

    def random(self, size: object = None, dtype: object = np.float64) -> DeviceArray:
        return asarray(self._rng.random(size, dtype=dtype))


class ElementwiseKernel:
    """cupy.ElementwiseKernel: the operation, evaluated with NumPy on the operands' host memory, as a kernel
    on the current stream (capturable). Its parameters are ``T name`` lists; every output is passed in."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str = "kernel", **_: object) -> None:
        self.inputs = [p.split()[-1] for p in in_params.split(",")]
        self.outputs = [p.split()[-1] for p in out_params.split(",")]
        self.code, self.name = compile(operation, name, "exec"), name

    def __call__(self, *args: object) -> None:
        if len(args) != len(self.inputs) + len(self.outputs):
            raise TypeError(f"{self.name}: every output must be given")
        values = [a._h if isinstance(a, DeviceArray) else a for a in args]
        outs = values[len(self.inputs):]

        def run() -> None:
            scope = dict(zip(self.inputs + self.outputs, values))
            exec(self.code, {}, scope)  # noqa: S102 - the harness's own operations
            for name, out in zip(self.outputs, outs):
                out[...] = scope[name]

        size = max(v.nbytes for v in values if isinstance(v, np.ndarray))
        _enqueue_kernel(run, LAUNCH_S + 3 * size / BYTE_RATE, self.name)


class _Pool:
    def free_all_blocks(self) -> None:
        pass

    def used_bytes(self) -> int:
        return device().used

    def total_bytes(self) -> int:
        return device().used


class PythonFunctionAllocator:
    """cupy.cuda.memory.PythonFunctionAllocator: malloc(size, device_id) -> address, free(address, device_id)."""

    def __init__(self, malloc, free) -> None:  # noqa: ANN001
        self._malloc, self._free = malloc, free

    def malloc(self, size: int) -> _Memory:
        ptr = self._malloc(size, 0)
        return _Memory(ptr, size, lambda: self._free(ptr, 0))


@contextlib.contextmanager
def using_allocator(allocator=None):  # noqa: ANN001, ANN201
    dev = device()
    before, dev.allocator = dev.allocator, allocator
    try:
        yield
    finally:
        dev.allocator = before


# ---------------------------------------------------------------------------------------------- runtime
class _Runtime:
    """The cupy.cuda.runtime functions the harness calls."""

    hostAllocMapped = 2

    @staticmethod
    def getDeviceCount() -> int:
        return 1

    @staticmethod
    def getDevice() -> int:
        return 0

    @staticmethod
    def getDeviceProperties(index: int) -> dict:
        dev = device()
        dev.alive()
        cc = dev.compute_capability
        return {"name": b"CPU device (strassenbench tests)", "l2CacheSize": dev.l2_bytes, "major": int(cc[:-1]),
                "minor": int(cc[-1]), "multiProcessorCount": 2, "memoryBusWidth": 64, "totalGlobalMem": dev.capacity,
                "clockRate": 1_000_000, "maxThreadsPerBlock": MAX_BLOCK_THREADS, "sharedMemPerBlock": MAX_SHARED}

    @staticmethod
    def deviceGetPCIBusId(index: int) -> str:
        return "0000:00:00.0"

    @staticmethod
    def memGetInfo() -> tuple[int, int]:
        dev = device()
        dev.alive()
        return dev.capacity - dev.used, dev.capacity

    @staticmethod
    def malloc(size: int) -> int:
        dev = device()
        dev.refuse_in_capture("cudaMalloc")
        dev.alive()
        if dev.used + size > dev.capacity:
            raise _runtime_error(ERR_ALLOCATION)
        ptr, host = dev.new_address(size)
        dev.buffers[ptr] = host
        dev.used += size
        return ptr

    @staticmethod
    def free(ptr: int) -> None:
        dev = device()
        dev.alive()
        host = dev.buffers.pop(ptr)
        dev.used -= host.nbytes
        dev.freed.append(host)  # queued work may still read it (see _Memory)

    @staticmethod
    def hostAlloc(size: int, flags: int) -> int:
        dev = device()
        dev.alive()
        ptr, host = dev.new_address(size)
        dev.buffers[ptr] = host
        if flags & _Runtime.hostAllocMapped:
            dev.host_mapped.add(ptr)
        return ptr

    @staticmethod
    def freeHost(ptr: int) -> None:
        dev = device()
        dev.alive()
        dev.buffers.pop(ptr)
        dev.host_mapped.discard(ptr)

    @staticmethod
    def pointerGetAttributes(ptr: int) -> object:
        """cudaPointerGetAttributes: a mapped host allocation's device address (unified addressing: the same)."""
        device().alive()
        if ptr not in device().host_mapped:
            raise _runtime_error(ERR_INVALID_VALUE)
        return type("PointerAttributes", (), {"devicePointer": ptr, "hostPointer": ptr, "device": 0, "type": 1})()

    @staticmethod
    def deviceSynchronize() -> None:
        device().synchronize()

    @staticmethod
    def streamIsCapturing(stream: int) -> bool:
        device().alive()
        found = device().streams.get(stream)
        return bool(found and found.capture)


class CudaDevice:
    """cupy.cuda.Device."""

    def __init__(self, index: int = 0) -> None:
        self.id = index

    @property
    def compute_capability(self) -> str:
        return device().compute_capability

    def synchronize(self) -> None:
        device().synchronize()

    def __enter__(self) -> CudaDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


# ---------------------------------------------------------------------------------------------- kernels
_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(([^)]*)\)\s*(?:\.maxntid\s+(\d+),\s*(\d+),\s*(\d+))?", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(u64|s64|u32|s32|f32|f64|b8)\b(?:[^\[,]*\[(\d+)\])?")
_SHARED = re.compile(r"Function (\w+):\s*\n\s*REG:\d+ STACK:\d+ SHARED:(\d+)")
_WIDTH = {"u64": 8, "s64": 8, "u32": 4, "s32": 4, "f32": 4, "f64": 8}
_CTYPES = {"u64": ctypes.c_uint64, "s64": ctypes.c_int64, "u32": ctypes.c_uint32, "s32": ctypes.c_int32,
           "f32": ctypes.c_float, "f64": ctypes.c_double}


@dataclass(frozen=True)
class KernelInfo:
    """What the driver knows of a kernel: its parameters (PTX type, bytes), its ``.maxntid`` (threads per block
    it was built for, 1,024 when unset) and its static shared memory per block (bytes)."""

    params: tuple[tuple[str, int], ...]
    max_threads: int
    shared_bytes: int


@lru_cache(maxsize=None)
def ptx_signatures(path: str) -> dict[str, KernelInfo]:
    """Each kernel of a fatbin: its parameters and .maxntid from the PTX (cuobjdump -ptx), its static shared
    memory from the machine code's resource usage (cuobjdump -res-usage)."""
    from strassenbench.fused.toolchain import find_tool

    def dump(flag: str) -> str:
        return subprocess.run([find_tool("cuobjdump"), flag, path], capture_output=True, text=True, check=True).stdout

    shared = {name: int(size) for name, size in _SHARED.findall(dump("-res-usage"))}
    out = {}
    for name, params, *maxntid in _ENTRY.findall(dump("-ptx")):
        out[name] = KernelInfo(tuple((kind, int(count) if kind == "b8" else _WIDTH[kind])
                                     for kind, count in _PARAM.findall(params)),
                               int(np.prod([int(x) for x in maxntid])) if maxntid[0] else MAX_BLOCK_THREADS,
                               shared.get(name, 0))
    if not out:
        raise RuntimeError(f"no PTX entry in {path}")
    return out


class RawModule:
    """cupy.RawModule(path=...) of a fatbin built by `strassenbench build`."""

    def __init__(self, code: str | None = None, *, path: str | None = None, **_: object) -> None:
        if path is None:
            raise NotImplementedError("the CPU device loads built modules (path=...), not source code")
        self.path, self.signatures = path, ptx_signatures(path)

    def get_function(self, name: str) -> RawKernel:
        if name not in self.signatures:
            raise _driver_error(500)
        return RawKernel(name, self.signatures[name])


def _marshal(arg: object):  # noqa: ANN202 - a CuPy CPointer (CScalar is one)
    """What CuPy's launcher makes of one argument: CPointer as it is, an array as a pointer-sized value holding
    its address, a NumPy scalar or a Python number as a CScalar of its type (a Python int: int64, a float:
    float64)."""
    from cupy._core._scalar import CScalar
    from cupy.cuda.function import CPointer

    if isinstance(arg, CPointer):
        return arg
    if isinstance(arg, DeviceArray):
        return CScalar(np.uint64(arg.data.ptr))
    if isinstance(arg, (np.generic, int, float, bool)):
        return CScalar(arg)
    raise TypeError(f"Unsupported type {type(arg)}")


class RawKernel:
    """A kernel of a RawModule: a launch checks the launch limits, copies its parameters at their PTX widths
    and queues the emulator's run of the kernel on the stream."""

    def __init__(self, name: str, info: KernelInfo) -> None:
        self.name, self.params, self.info = name, info.params, info
        self.max_threads_per_block = info.max_threads
        self.shared_size_bytes = info.shared_bytes

    def _parameters(self, args: tuple) -> list[bytes]:
        from cupy._core._scalar import CScalar

        if len(args) != len(self.params):
            raise LaunchError(f"{self.name} takes {len(self.params)} parameters, got {len(args)}")
        raw = []
        for i, (arg, (kind, width)) in enumerate(zip(args, self.params)):
            marshalled = _marshal(arg)
            if isinstance(marshalled, CScalar):
                size = np.dtype(marshalled.dtype).itemsize
                if kind == "b8" or size != width:
                    given = type(arg).__name__ if not isinstance(arg, DeviceArray) else "an array"
                    raise LaunchError(f"{self.name} parameter {i} is .{kind} ({width} bytes), given {given} "
                                      f"({marshalled.dtype}, {size} bytes)")
            raw.append(ctypes.string_at(marshalled.ptr, width))  # the driver's copy, at the launch
        return raw

    def _check_limits(self, grid: tuple, block: tuple, shared_mem: int) -> None:
        """cuLaunchKernel's checks: CUDA_ERROR_INVALID_VALUE past a grid or block limit or the shared memory."""
        threads = int(np.prod(block))
        if (any(g < 1 or g > most for g, most in zip(grid, MAX_GRID)) or any(b < 1 or b > most for b, most in
                                                                               zip(block, MAX_BLOCK))
                or threads > min(MAX_BLOCK_THREADS, self.info.max_threads)
                or self.info.shared_bytes + shared_mem > MAX_SHARED):
            raise _driver_error(1)

    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0, stream: Stream | None = None):
        dev = device()
        dev.alive()
        grid, block = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
        self._check_limits(grid, block, shared_mem)
        values = self._parameters(tuple(args))
        stream = stream if stream is not None else dev.current[-1]
        dev.launches.append((self.name, grid, block))
        spin = self.name == _block_kernel()
        work = int(np.prod(grid)) * int(np.prod(block))
        dev.enqueue(stream, _Op(lambda: self._run(grid, block, values), LAUNCH_S + work * 1e-10, self.name,
                                spin=spin))

    def _run(self, grid: tuple, block: tuple, values: list[bytes]) -> None:
        from strassenbench.fused import emu

        if self.name == _block_kernel():  # it reads its flag and writes its timeout word: mapped host memory
            for raw in values[:2]:
                address = int.from_bytes(raw, "little")
                if not device().mapped(address, 4):
                    raise CudaFault(ERR_ILLEGAL_ADDRESS, f"{self.name} read address {address:#x}: not mapped")
        fn = emu.entry(self.name)
        types, converted = [], []
        for (kind, width), raw in zip(self.params, values):
            ctype = emu._struct(width) if kind == "b8" else _CTYPES[kind]
            types.append(ctype)
            converted.append(ctype.from_buffer_copy(raw))
        fn.argtypes = [ctypes.c_uint] * 6 + types
        fn.restype = None
        fn(*grid, *block, *converted)
        fault = emu.take_fault(self.name)
        if fault:
            raise CudaFault(ERR_MISALIGNED_ADDRESS, fault)


def _block_kernel() -> str:
    from strassenbench.fused.instances import BLOCK_KERNEL

    return BLOCK_KERNEL


# ---------------------------------------------------------------------------------------------- cuBLAS
def _column_major(ptr: int, rows: int, cols: int, ld: int, dtype: np.dtype) -> np.ndarray:
    """The rows x cols column-major matrix at ``ptr`` with leading dimension ``ld``, as a writable view."""
    count = ld * (cols - 1) + rows if rows and cols else 0
    flat = np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(ptr), dtype, count) if count \
        else np.empty(0, dtype)
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (dtype.itemsize, ld * dtype.itemsize))


def _gemm_op(dtype: np.dtype, transa: int, transb: int, m: int, n: int, k: int, alpha: float, a: int, lda: int,
             b: int, ldb: int, beta: float, c: int, ldc: int, tf32: bool = False) -> _Op:
    def run() -> None:
        from strassenbench.tensorcore import matmul

        A = _column_major(a, *((m, k) if transa == 0 else (k, m)), lda, dtype)
        B = _column_major(b, *((k, n) if transb == 0 else (n, k)), ldb, dtype)
        C = _column_major(c, m, n, ldc, dtype)
        A, B = (A if transa == 0 else A.T), (B if transb == 0 else B.T)
        product = dtype.type(alpha) * (matmul(A, B, "1xtf32") if tf32 else A @ B)
        C[...] = product if beta == 0 else product + dtype.type(beta) * C

    label = "cublas gemmex tf32" if tf32 else f"cublas {'s' if dtype == np.float32 else 'd'}gemm"
    return _Op(run, LAUNCH_S + 2.0 * m * n * k / FLOP_RATE, label)


class CublasWrapper:
    """cupy_backends.cuda.libs.cublas: CuPy's Cython wrapper. Every call first sets the handle's stream, and
    ``setStream`` refuses a capturing stream, as CuPy 14 does."""

    CUBLAS_OP_N, CUBLAS_OP_T = 0, 1

    @staticmethod
    def getVersion(handle: int) -> int:
        return 130100

    @staticmethod
    def setStream(handle: int, stream: int) -> None:
        if _Runtime.streamIsCapturing(stream):
            raise NotImplementedError("calling cuBLAS API during stream capture is currently unsupported")
        device().cublas_stream[handle] = stream
        device().cublas_workspace.pop(handle, None)  # cublasSetStream resets the workspace to cuBLAS's pool

    @classmethod
    def _gemm(cls, dtype: np.dtype, handle: int, transa: int, transb: int, m: int, n: int, k: int, alpha: int,
              A: int, lda: int, B: int, ldb: int, beta: int, C: int, ldc: int) -> None:
        device().alive()
        cls.setStream(handle, device().current[-1].ptr)
        ctype = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        op = _gemm_op(dtype, transa, transb, m, n, k, ctype.from_address(alpha).value, A, lda, B, ldb,
                      ctype.from_address(beta).value, C, ldc)
        dev = device()
        dev.enqueue(dev.streams.get(dev.cublas_stream[handle], dev.null), op)

    @classmethod
    def sgemm(cls, handle: int, *args: int) -> None:
        cls._gemm(np.dtype(np.float32), handle, *args)

    @classmethod
    def dgemm(cls, handle: int, *args: int) -> None:
        cls._gemm(np.dtype(np.float64), handle, *args)


class _CFunction:
    """A C entry point as ctypes shows it: argtypes/restype to set, arguments converted by them."""

    def __init__(self, name: str, impl) -> None:  # noqa: ANN001
        self.__name__, self._impl = name, impl
        self.argtypes: list | None = None
        self.restype = ctypes.c_int

    def __call__(self, *args: object) -> int:
        if self.argtypes is None or len(args) != len(self.argtypes):
            raise TypeError(f"{self.__name__}: declare its argtypes ({len(args)} arguments given)")
        values = []
        for arg, ctype in zip(args, self.argtypes):
            converted = arg if isinstance(arg, ctype) else ctype(arg)
            values.append(converted.value)
        return self._impl(*values)


class CublasLibrary:
    """libcublas's C API (what reference.array_ops loads with ctypes): v2 entry points on CuPy's handle. The
    stream set by cublasSetStream_v2 may be capturing: the GEMM is then captured like any kernel."""

    def __init__(self) -> None:
        for name in ("cublasSetStream_v2", "cublasSetWorkspace_v2", "cublasSgemm_v2", "cublasDgemm_v2",
                     "cublasSetMathMode", "cublasGemmEx"):
            setattr(self, name, _CFunction(name, getattr(self, "_" + name)))

    @staticmethod
    def _cublasSetStream_v2(handle: int, stream: int | None) -> int:
        dev = device()
        if dev.sticky is not None:
            return CUBLAS_EXECUTION_FAILED
        if (stream or 0) not in dev.streams:
            return 7  # CUBLAS_STATUS_INVALID_VALUE
        dev.cublas_stream[handle] = stream or 0
        dev.cublas_workspace.pop(handle, None)  # "resets the workspace to the default workspace pool"
        return 0

    @staticmethod
    def _cublasSetWorkspace_v2(handle: int, workspace: int | None, size: int) -> int:
        if device().sticky is not None:
            return CUBLAS_EXECUTION_FAILED
        device().cublas_workspace[handle] = (workspace or 0, size)
        return 0

    @staticmethod
    def _refused(handle: int) -> int:
        """The status a GEMM gets before it is enqueued: not initialised, a poisoned context, or a capture
        without a user workspace (which would allocate from cuBLAS's pool inside the graph); 0 when it runs."""
        dev = device()
        if handle != dev.cublas_handle:
            return 1  # CUBLAS_STATUS_NOT_INITIALIZED
        if dev.sticky is not None:
            return CUBLAS_EXECUTION_FAILED
        stream = dev.streams[dev.cublas_stream.get(handle, 0)]
        if stream.capture is not None and handle not in dev.cublas_workspace:
            return CUBLAS_NOT_SUPPORTED
        return 0

    @staticmethod
    def _gemm(dtype: np.dtype, ctype: type, handle: int, transa: int, transb: int, m: int, n: int, k: int,
              alpha: int, A: int, lda: int, B: int, ldb: int, beta: int, C: int, ldc: int) -> int:
        dev = device()
        refused = CublasLibrary._refused(handle)
        if refused:
            return refused
        op = _gemm_op(dtype, transa, transb, m, n, k, ctype.from_address(alpha).value, A, lda, B, ldb,
                      ctype.from_address(beta).value, C, ldc)
        dev.enqueue(dev.streams[dev.cublas_stream.get(handle, 0)], op)
        return 0

    @staticmethod
    def _cublasSetMathMode(handle: int, mode: int) -> int:
        if device().sticky is not None:
            return CUBLAS_EXECUTION_FAILED
        device().cublas_math[handle] = mode
        return 0

    @staticmethod
    def _cublasGemmEx(handle: int, transa: int, transb: int, m: int, n: int, k: int, alpha: int, A: int, atype: int,
                      lda: int, B: int, btype: int, ldb: int, beta: int, C: int, ctype: int, ldc: int, compute: int,
                      algo: int) -> int:
        """Float32 operands (CUDA_R_32F) with CUBLAS_COMPUTE_32F_FAST_TF32 only: the TF32 product of
        strassenbench.tensorcore."""
        dev = device()
        refused = CublasLibrary._refused(handle)
        if refused:
            return refused
        if (atype, btype, ctype, compute) != (0, 0, 0, 77):
            return 15  # CUBLAS_STATUS_NOT_SUPPORTED
        f32 = np.dtype(np.float32)
        op = _gemm_op(f32, transa, transb, m, n, k, ctypes.c_float.from_address(alpha).value, A, lda, B, ldb,
                      ctypes.c_float.from_address(beta).value, C, ldc, tf32=True)
        dev.enqueue(dev.streams[dev.cublas_stream.get(handle, 0)], op)
        return 0

    def _cublasSgemm_v2(self, *args: int) -> int:
        return self._gemm(np.dtype(np.float32), ctypes.c_float, *args)

    def _cublasDgemm_v2(self, *args: int) -> int:
        return self._gemm(np.dtype(np.float64), ctypes.c_double, *args)


# ---------------------------------------------------------------------------------------------- install
def install(monkeypatch, **options: object) -> CpuDevice:  # noqa: ANN001 - pytest's MonkeyPatch
    """Put a new CPU device behind the real ``cupy`` for the rest of the test (monkeypatch undoes it)."""
    import cupy
    import cupy.cuda.device
    import cupy.cuda.memory
    import cupy.cuda.runtime
    import cupy_backends.cuda.libs

    from strassenbench.bench import isolate
    from strassenbench.fused import cuda as fused_cuda
    from strassenbench.reference import array_ops

    dev = CpuDevice(**options)  # type: ignore[arg-type]
    monkeypatch.setattr(sys.modules[__name__], "_DEVICE", dev)
    monkeypatch.setattr(isolate, "START_METHOD", "fork")  # bench's workers inherit this device
    for name, value in {"RawModule": RawModule, "ElementwiseKernel": ElementwiseKernel, "asarray": asarray,
                        "asnumpy": asnumpy, "empty": empty, "zeros": zeros, "full": full, "ones": ones,
                        "concatenate": concatenate,
                        "get_default_memory_pool": _Pool}.items():
        monkeypatch.setattr(cupy, name, value)
    monkeypatch.setattr(cupy.random, "default_rng", _Generator)
    monkeypatch.setattr(cupy.linalg, "norm", norm)
    for name, value in {"Stream": Stream, "Event": Event, "Device": CudaDevice, "using_allocator": using_allocator,
                        "get_elapsed_time": get_elapsed_time,
                        "get_current_stream": lambda device_id=-1: device().current[-1]}.items():
        monkeypatch.setattr(cupy.cuda, name, value)
    monkeypatch.setattr(cupy.cuda.memory, "PythonFunctionAllocator", PythonFunctionAllocator)
    monkeypatch.setattr(cupy.cuda.device, "get_cublas_handle", lambda: device().cublas_handle)
    for name in ("getDeviceCount", "getDevice", "getDeviceProperties", "deviceGetPCIBusId", "memGetInfo", "malloc",
                 "free", "hostAlloc", "freeHost", "pointerGetAttributes", "deviceSynchronize", "streamIsCapturing"):
        monkeypatch.setattr(cupy.cuda.runtime, name, getattr(_Runtime, name))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.cublas", CublasWrapper)
    monkeypatch.setitem(vars(cupy_backends.cuda.libs), "cublas", CublasWrapper)  # its __getattr__ would load it
    library = CublasLibrary()
    monkeypatch.setattr(array_ops, "cublas_library", lambda: library)
    fused_cuda.clear_caches()  # modules and streams of an earlier device (the fixture clears them after, too)
    array_ops.clear_caches()
    return dev


# ---------------------------------------------------------------------------------------------- from a shell
class _Patches:
    """What ``install`` asks of pytest's MonkeyPatch, for a process that keeps the device to its end."""

    @staticmethod
    def setattr(target: object, name: str, value: object) -> None:
        setattr(target, name, value)

    @staticmethod
    def setitem(mapping: dict, key: object, value: object) -> None:
        mapping[key] = value


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.support.cudasim [OPTIONS] strassenbench COMMAND ...``: a CLI command on a CPU device."""
    import argparse
    import os

    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m tests.support.cudasim", description="Run a strassenbench command on "
                                     "the CPU device of tests/support/cudasim.py (real CuPy, kernels on the emulator).")
    parser.add_argument("--queue-capacity", type=int, default=int(env("CUDASIM_QUEUE_CAPACITY", QUEUE_CAPACITY)),
                        help="operations pending behind an unreleased blocking kernel (env CUDASIM_QUEUE_CAPACITY)")
    parser.add_argument("--order", choices=("random", "lifo", "fifo"), default=env("CUDASIM_ORDER", "random"),
                        help="the order the device runs what the streams allow (env CUDASIM_ORDER)")
    parser.add_argument("--memory", type=int, default=int(env("CUDASIM_MEMORY", 1 << 30)),
                        help="device memory in bytes (env CUDASIM_MEMORY)")
    parser.add_argument("--inject", metavar="IMPL:M:N:K[:KIND]",
                        help="STRASSENBENCH_INJECT_FAILURE for the command (KIND error, crash or fault)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="strassenbench COMMAND [ARGS]")
    args = parser.parse_args(argv)
    if not args.command or args.command[0] != "strassenbench":
        parser.error("give the command to run: strassenbench COMMAND [ARGS]")
    if args.inject:
        os.environ["STRASSENBENCH_INJECT_FAILURE"] = args.inject
    install(_Patches(), queue_capacity=args.queue_capacity, order=args.order, memory_bytes=args.memory)
    from strassenbench.cli import main as cli

    return cli(args.command[1:])


if __name__ == "__main__":
    sys.exit(main())

