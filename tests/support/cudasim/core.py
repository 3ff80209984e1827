"""The CPU device behind CuPy (tests.support.cudasim): the device: its queue, memory and faults."""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass, field

import numpy as np


LAUNCH_S = 3e-6  # modelled cost of any launch
FLOP_RATE = 2e13  # modelled FLOP/s of a GEMM
BYTE_RATE = 2e12  # modelled bytes/s of a memory-bound kernel

QUEUE_CAPACITY = 32  # operations pending behind an unreleased blocking kernel (nvbench: about 32 launches)
MAX_GRID = (2**31 - 1, 65535, 65535)  # CUDA Programming Guide, "Compute Capabilities"
MAX_BLOCK, MAX_BLOCK_THREADS, MAX_SHARED = (1024, 1024, 64), 1024, 48 << 10
MAX_SHARED_OPTIN = 227 << 10  # what a block of sm_90 may take with the kernel's attribute (the same Guide's table)

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
        self.pooled: dict[int, np.ndarray] = {}  # the memory pool's live allocations: address -> host bytes
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
        from .streams import Stream

        self.null = Stream(null=True, _device=self)
        self.current: list[Stream] = [self.null]

    def allocated(self, address: int, nbytes: int) -> bool:
        """Whether [address, address + nbytes) lies in one live allocation: the runtime's (cudaMalloc, mapped
        host memory) or the memory pool's (CuPy's arrays)."""
        return any(base <= address and address + nbytes <= base + host.nbytes
                   for buffers in (self.buffers, self.pooled) for base, host in buffers.items())

    def global_memory(self) -> np.ndarray:
        """[first, last) of every live allocation and of memory freed while work was queued (stream-ordered
        frees): what a kernel may touch, as strassenbench.fused.emu.entry takes it (the emulator checks a
        launch's global loads, stores and reductions against it)."""
        hosts = [*self.buffers.values(), *self.pooled.values(), *self.freed]
        return np.array([(h.ctypes.data, h.ctypes.data + h.nbytes) for h in hosts if h.nbytes],
                        dtype=np.uint64).reshape(-1, 2)

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
        self.pooled[ptr] = host
        return _Memory(ptr, nbytes, lambda: self._release(ptr, nbytes), host), host

    def _release(self, ptr: int, nbytes: int) -> None:
        self.used -= nbytes
        self.pooled.pop(ptr, None)


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
