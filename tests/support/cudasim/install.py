"""The CPU device behind CuPy (tests.support.cudasim): installing it behind CuPy, and running a command on it."""

from __future__ import annotations

import sys

from . import core
from .arrays import (
    ElementwiseKernel, PythonFunctionAllocator, _Generator, _Pool, asarray, asnumpy, concatenate, empty, full, norm,
    ones, using_allocator, zeros,
)
from .core import CpuDevice, QUEUE_CAPACITY, device
from .cublas import CublasLibrary, CublasWrapper
from .driver import DriverLibrary
from .runtime import CudaDevice, RawModule, _Runtime
from .streams import Event, Stream, get_elapsed_time


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
    monkeypatch.setattr(core, "_DEVICE", dev)
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
    driver = DriverLibrary()
    monkeypatch.setattr(fused_cuda, "driver_library", lambda: driver)
    dev.driver = driver
    fused_cuda.clear_caches()  # modules and streams of an earlier device (the fixture clears them after, too)
    array_ops.clear_caches()
    return dev


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
                                     "the CPU device of tests/support/cudasim/ (real CuPy, kernels on the emulator).")
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
