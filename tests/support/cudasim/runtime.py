"""The CPU device behind CuPy (tests.support.cudasim): the runtime and raw kernels (modules, launches)."""

from __future__ import annotations

import ctypes
import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .arrays import DeviceArray
from .core import (
    CudaFault, ERR_ALLOCATION, ERR_ILLEGAL_ADDRESS, ERR_INVALID_VALUE, ERR_MISALIGNED_ADDRESS, LAUNCH_S, LaunchError,
    MAX_BLOCK, MAX_BLOCK_THREADS, MAX_GRID, MAX_SHARED, MAX_SHARED_OPTIN, _Op, _driver_error, _runtime_error, device,
)
from .streams import Stream


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
                "clockRate": 1_000_000, "maxThreadsPerBlock": MAX_BLOCK_THREADS, "sharedMemPerBlock": MAX_SHARED,
                "sharedMemPerBlockOptin": MAX_SHARED_OPTIN}

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


_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(([^)]*)\)\s*(?:\.maxntid\s+(\d+),\s*(\d+),\s*(\d+))?", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(u64|s64|u32|s32|f32|f64|b8)\b(?:[^\[,]*\[(\d+)\])?")
_SHARED = re.compile(r"Function (\w+):\s*\n\s*REG:\d+ STACK:\d+ SHARED:(\d+)")
_WIDTH = {"u64": 8, "s64": 8, "u32": 4, "s32": 4, "f32": 4, "f64": 8}
_CTYPES = {"u64": ctypes.c_uint64, "s64": ctypes.c_int64, "u32": ctypes.c_uint32, "s32": ctypes.c_int32,
           "f32": ctypes.c_float, "f64": ctypes.c_double}


@dataclass(frozen=True)
class KernelInfo:
    """What the driver knows of a kernel: its parameters (PTX type, bytes), its ``.maxntid`` (threads per block
    it was built for, 1,024 when unset), its static shared memory per block (bytes) and which parameters are
    64-byte aligned aggregates (tensor maps: the emulator's entries take them by address, kernels/instances.cuh)."""

    params: tuple[tuple[str, int], ...]
    max_threads: int
    shared_bytes: int
    by_address: tuple[bool, ...] = ()


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
        found = _PARAM.findall(params)
        out[name] = KernelInfo(tuple((kind, int(count) if kind == "b8" else _WIDTH[kind]) for _, kind, count in found),
                               int(np.prod([int(x) for x in maxntid])) if maxntid[0] else MAX_BLOCK_THREADS,
                               shared.get(name, 0), tuple(kind == "b8" and int(align or 1) >= 64
                                                          for align, kind, _ in found))
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
        self._dynamic = MAX_SHARED - info.shared_bytes  # cudaFuncAttributeMaxDynamicSharedMemorySize's default

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        return self._dynamic

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int) -> None:
        """cuFuncSetAttribute: CUDA_ERROR_INVALID_VALUE past what a block may opt in to, less the static."""
        device().alive()
        if value < 0 or value + self.info.shared_bytes > MAX_SHARED_OPTIN:
            raise _driver_error(1)
        self._dynamic = value

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
                or shared_mem > self._dynamic):  # the kernel's attribute bounds its dynamic shared memory
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
        fn = emu.entry(self.name, memory=device().global_memory())
        types, converted, kept = [], [], []
        for (kind, width), raw, by_address in zip(self.params, values, self.info.by_address or [False] * len(values)):
            if by_address:  # a tensor map: the parameter's copy, passed by its address
                kept.append(ctypes.create_string_buffer(raw, width))
                types.append(ctypes.c_void_p)
                converted.append(ctypes.cast(kept[-1], ctypes.c_void_p))
                continue
            ctype = emu._struct(width) if kind == "b8" else _CTYPES[kind]
            types.append(ctype)
            converted.append(ctype.from_buffer_copy(raw))
        fn.argtypes = [ctypes.c_uint] * 6 + types
        fn.restype = None
        try:
            fn(*grid, *block, *converted)
        finally:
            emu.clear_bounds()  # the device's allocations bound this launch only
        fault = emu.take_fault(self.name)
        if fault:  # an access outside every allocation: cudaErrorIllegalAddress, as a GPU's
            raise CudaFault(ERR_ILLEGAL_ADDRESS if fault.startswith("out-of-bounds") else ERR_MISALIGNED_ADDRESS, fault)


def _block_kernel() -> str:
    from strassenbench.fused.instances import BLOCK_KERNEL

    return BLOCK_KERNEL
