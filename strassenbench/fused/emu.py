"""Run launches on the CPU: the kernel sources compiled by g++ against kernels/emu/cuda_emu.hpp.

Libraries are compiled on first use, one per (dtype, strategy, levels) with the default kernels of that many
levels of Strassen (the GEMM's at 0; instances.default_level) so a test pays only for what it runs, plus one per
other plan's kernels, and cached under
$STRASSENBENCH_CACHE (default ~/.cache/strassenbench/emu) by a hash of the kernel sources.
$STRASSENBENCH_EMU_FLAGS adds compiler flags, e.g. "-fsanitize=address,undefined" for a sanitizer run (the
process then needs the sanitizer runtime in LD_PRELOAD; tests/fused/test_kernels_emu.py shows how). A library built
with flags of one's own (a sanitizer, a debugger's -O0 -g) holds only the kernels of the program that runs, not
every default kernel: an instrumented compile of a few kernels takes seconds.

The emulator checks the alignment of the kernels' global and shared loads and stores and ldmatrix rows (a
misaligned one faults on the GPU): run raises EmuFault after a launch that made one; after a launch through
entry, take_fault gives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import tempfile
import threading
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import env
from ..families import MODES, SIMT
from .instances import (BLOCK_KERNEL, Instance, default_level, instances, kernels_dir, operand_counts, parse_instance,
                        render, sources_digest)
from .program import Program, TensorMapArg, map_bytes
from .toolchain import ToolchainError, first_error, run_tool

__all__ = ["EmuError", "EmuFault", "CXX_FLAGS", "cache_dir", "entry", "library", "loaded_libraries", "run",
           "take_fault", "tracing"]

CXX_FLAGS = ["-std=c++20", "-O1", "-fPIC", "-shared", "-pthread"]
_LOCK = threading.Lock()
_LOADED: dict[str, ctypes.CDLL] = {}
_BOUNDS_LOCK = threading.Lock()  # emu.run's bounds are the process's (the emulator's globals are shared)
_NO_BOUNDS = np.zeros((0, 2), np.uint64)  # global_memory's form of "nothing checked"
_TRACING = False


def tracing(on: bool) -> None:
    """Record shared-memory accesses of the launches that run from now on (strassenbench.fused.smem)."""
    global _TRACING
    _TRACING = on


def loaded_libraries() -> list[ctypes.CDLL]:
    return list(_LOADED.values())


class EmuError(RuntimeError):
    """The emulator library did not build, or a launch on it faulted (EmuFault)."""


class EmuFault(EmuError):
    """A launch made an access that faults on the GPU: the message names the access, its address, the kernel,
    the block and the thread."""


def _take(lib: ctypes.CDLL) -> str | None:
    """The first fault (a misaligned or out-of-bounds access) since the last take (kernels/instances.cuh:
    emu_fault_take), cleared. g++ makes the emulator's globals unique symbols, which every loaded library
    shares: one fault per process (and one set of bounds, emu_bounds_set)."""
    take = lib.emu_fault_take
    take.argtypes, take.restype = [ctypes.c_char_p, ctypes.c_ulonglong], ctypes.c_ulonglong
    out = ctypes.create_string_buffer(1024)
    return out.value.decode() if take(out, len(out)) else None


def take_fault(kernel: str) -> str | None:
    """After a launch of ``kernel`` through entry: the message of the first misaligned (or, given its memory,
    out-of-bounds) access since the last take (it names the kernel, the access, its address, the block and the
    thread), or None; taken, that is cleared, from the loaded libraries that have the kernel (none is built)."""
    faults = [_take(lib) for lib in list(_LOADED.values()) if hasattr(lib, f"emu_{kernel}")]
    return next((fault for fault in faults if fault), None)


def cache_dir() -> Path:
    """$STRASSENBENCH_CACHE, else $XDG_CACHE_HOME/strassenbench/emu, else ~/.cache/strassenbench/emu; each
    checked (strassenbench.env: absolute, and a folder this user can write or create)."""
    own = env.cache_folder("STRASSENBENCH_CACHE")
    if own is not None:
        return own
    return (env.cache_folder("XDG_CACHE_HOME") or env.home_cache()) / "strassenbench" / "emu"


def _compiler_command() -> list[str]:
    """$CXX (a command and its arguments, checked by strassenbench.env), else g++ or c++ on PATH."""
    cxx = env.command("CXX") or [found for found in (shutil.which("g++") or shutil.which("c++"),) if found]
    if not cxx:
        raise EmuError("no C++ compiler found (the emulator needs g++ with C++20)")
    return cxx


def _compiler() -> str:
    """The compiler's executable (the first word of _compiler_command)."""
    return _compiler_command()[0]


def _defaults(precision: str, strategy: str, level: int | None) -> tuple[Instance, ...]:
    """The default instantiations of (precision, strategy) that ``level`` levels run (None: every level's)."""
    counts = operand_counts() if level is None else tuple(c for c in operand_counts() if default_level(c) == level)
    mode = precision if precision in MODES else SIMT  # a tensor-core mode, or a SIMT dtype
    dtypes = MODES[mode].dtypes if MODES[mode].tensor else (precision,)
    return tuple(instances(dtypes=dtypes, strategies=(strategy,), counts=counts, modes=(mode,)))


@lru_cache(maxsize=None)
def library(precision: str, strategy: str, extra_flags: tuple[str, ...] = (),
            selected: tuple[Instance, ...] | None = None, level: int | None = None) -> ctypes.CDLL:
    """The emulator library with the default instantiations of (precision, strategy) (precision is a dtype, or a
    tensor-core mode with a tensor-core strategy) that ``level`` levels of Strassen run (0: the GEMM's; None:
    every level's), or with exactly ``selected`` (the kernels of another algorithm's plan)."""
    source = render(selected if selected is not None else _defaults(precision, strategy, level))
    # A plan's own kernels are compiled for one use at small shapes: -O0 compiles them in two thirds of the time.
    base = CXX_FLAGS if selected is None else [flag if flag != "-O1" else "-O0" for flag in CXX_FLAGS]
    flags = [*base, *env.flags("STRASSENBENCH_EMU_FLAGS"), *extra_flags]
    compiler = _compiler_command()
    digest = sources_digest(source, " ".join(compiler), " ".join(flags))[:16]
    kind = "_plan" if selected is not None else "" if level is None else f"_L{level}"
    target = cache_dir() / f"{precision}_{strategy.lower()}{kind}_{digest}.so"
    with _LOCK:
        if not target.is_file():
            _compile(source, [*compiler, *flags], target)
    try:
        lib = ctypes.CDLL(str(target))
    except OSError as err:
        raise EmuError(f"the emulator library {target} does not load: {err}") from None
    _LOADED[str(target)] = lib
    return lib


@contextlib.contextmanager
def _compile_lock(target: Path):  # noqa: ANN202
    """An exclusive lock on the compile of ``target`` (``.<name>.lock`` beside it, never through a link), across
    processes: parallel workflow jobs (or test workers) that need the same library compile it once."""
    fd = os.open(target.parent / f".{target.name}.lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _compile(source: str, command: list[str], target: Path) -> None:
    """``command`` (compiler and flags) builds ``source`` into ``target``, through a temporary folder beside it,
    under _compile_lock: a process that waited for another's compile finds ``target`` there and compiles
    nothing. Bounded by $STRASSENBENCH_COMPILE_TIMEOUT (checked before the folder is made)."""
    env.seconds(env.COMPILE_TIMEOUT)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _compile_lock(target):
            if target.is_file():
                return
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                src = Path(tmp) / "instances.cpp"
                src.write_text(source)
                out = Path(tmp) / target.name
                try:
                    result = run_tool([*command, "-I", str(kernels_dir()), str(src), "-o", str(out)])
                except ToolchainError as err:
                    raise EmuError(f"emulator build failed: {err}") from None
                if result.returncode != 0:
                    raise EmuError(f"emulator build failed: {first_error(result.stderr)}")
                if not out.is_file():
                    raise EmuError(f"emulator build failed: {command[0]} wrote no library")
                os.replace(out, target)
    except OSError as err:
        raise EmuError(f"cannot write the emulator library in {target.parent}: {err.strerror or err}") from None


def _libraries(program: Program, extra_flags: tuple[str, ...]) -> dict[str, ctypes.CDLL]:
    """Kernel name -> the library that has it: the default library of its (precision, strategy, level) when its
    counts are a default kernel's, else one library with the program's other kernels of that (precision,
    strategy); with compiler flags of one's own, that library has all the program's kernels. Scale and
    blocking, in every library, come from one the program already loads where one has them."""
    own_flags = bool(extra_flags or env.flags("STRASSENBENCH_EMU_FLAGS"))
    default = set() if own_flags else set(operand_counts())
    others: dict[tuple[str, str], set[Instance]] = {}
    found: dict[str, ctypes.CDLL] = {}
    helpers = []
    for launch in program.launches:
        inst = launch.instance
        if inst is None:
            helpers.append(launch.kernel)
        elif inst.counts in default:
            found[launch.kernel] = _default_library(launch.kernel, extra_flags)
        else:
            others.setdefault((inst.precision, inst.strategy.name), set()).add(replace(inst, capped=True))
    for (precision, strategy), selected in others.items():
        lib = library(precision, strategy, extra_flags, tuple(sorted(selected, key=lambda i: i.name)))
        found.update((inst.name, lib) for inst in selected)
    for kernel in helpers:
        found[kernel] = next((lib for lib in found.values() if hasattr(lib, f"emu_{kernel}")), None) \
            or _default_library(kernel, extra_flags)
    return found


@lru_cache(maxsize=None)
def _struct(nbytes: int) -> type[ctypes.Structure]:
    """A ctypes structure of nbytes (a multiple of 8) with 8-byte alignment, passed by value as sb::Products."""
    return type(f"Products{nbytes}", (ctypes.Structure,), {"_fields_": [("raw", ctypes.c_ulonglong * (nbytes // 8))]})


# The blocks a persistent launch (the Wg kernels') runs on the emulator: two, so that a block runs several tiles
# and every ring's phases wrap across tiles, as on a GPU of many SMs with many more tiles.
PERSISTENT_BLOCKS = 2


def tensor_map_encoder(lib: ctypes.CDLL):  # noqa: ANN201 - a ctypes function
    """``lib``'s emu_tensor_map_encode (kernels/instances.cuh; every emulator library and probe has it) with its
    argument types: (map, base, element bytes, dim0, dim1, row stride, box0, box1, swizzle, why, its size)."""
    encode = lib.emu_tensor_map_encode
    encode.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_uint] * 3 + [ctypes.c_ulonglong] + \
        [ctypes.c_uint] * 3 + [ctypes.c_char_p, ctypes.c_ulonglong]
    encode.restype = ctypes.c_int
    return encode


def encode_tensor_map(lib: ctypes.CDLL, arg: TensorMapArg) -> np.ndarray:
    """The 128 bytes (64-byte aligned) of ``arg`` in the emulator's encoding (kernels/instances.cuh
    emu_tensor_map_encode; zeros for an unused map); EmuError with the encoder's reason for a map the driver would
    refuse."""
    out = map_bytes()
    if arg.array is None:
        return out
    x = arg.array
    why = ctypes.create_string_buffer(256)
    encode = tensor_map_encoder(lib)
    if encode(out.ctypes.data, x.ctypes.data, x.dtype.itemsize, x.shape[1], x.shape[0], x.strides[0], *arg.box,
              arg.swizzle, why, len(why)):
        raise EmuError(f"a TMA tensor map of a {x.shape[0]} x {x.shape[1]} operand: {why.value.decode()}")
    return out


def _ctype(arg, lib: ctypes.CDLL | None = None):  # noqa: ANN001, ANN202
    if isinstance(arg, TensorMapArg):  # by address: the emulator's entries take tensor maps so (instances.cuh)
        encoded = encode_tensor_map(lib, arg)
        return ctypes.c_void_p, ctypes.c_void_p(encoded.ctypes.data), encoded
    if isinstance(arg, np.ndarray) and arg.dtype.names:  # sb::Products, by value
        struct = _struct(arg.dtype.itemsize)
        return struct, struct.from_buffer_copy(arg.tobytes())
    if isinstance(arg, np.ndarray):
        return ctypes.c_void_p, ctypes.c_void_p(arg.ctypes.data)
    for np_type, c_type in ((np.int32, ctypes.c_int), (np.int64, ctypes.c_longlong),
                            (np.float32, ctypes.c_float), (np.float64, ctypes.c_double)):
        if isinstance(arg, np_type):
            return c_type, c_type(arg.item())
    raise TypeError(f"unsupported kernel argument {arg!r}")


def _default_library(kernel: str, extra_flags: tuple[str, ...]) -> ctypes.CDLL:
    """The default library that has ``kernel``: a default kernel's (precision, strategy, level), or for scale,
    presum and blocking (in every library) float32 or its dtype's Small GEMM library."""
    if kernel == BLOCK_KERNEL:
        return library("float32", "Small", extra_flags, level=0)
    if kernel.startswith(("scale_", "presum_")):
        return library({"f32": "float32", "f64": "float64"}[kernel.split("_")[1]], "Small", extra_flags, level=0)
    inst = parse_instance(kernel)
    if inst is None:
        raise EmuError(f"no kernel named {kernel}")
    return library(inst.precision, inst.strategy.name, extra_flags, level=default_level(inst.counts))


def _extent(x: np.ndarray) -> tuple[int, int]:
    """The bytes [first, last) from the first element of ``x`` (a view: any strides) to its last, gaps between
    its rows included (an over-read into a gap, or into a neighbouring row of a contiguous array, is inside)."""
    first = last = x.ctypes.data
    if x.size == 0:
        return first, first
    for n, stride in zip(x.shape, x.strides):
        if stride < 0:
            first += (n - 1) * stride
        else:
            last += (n - 1) * stride
    return first, last + x.itemsize


def global_memory(program: Program, operands: tuple) -> np.ndarray:  # noqa: ANN001 - NumPy arrays
    """The byte ranges the launches of ``program`` may touch, as the emulator's emu_bounds_set takes them: the
    operands (A, B, C, or views of them), the program's workspaces, the arrays its launches take and its tensor
    maps' operands; none (nothing checked) without operands."""
    if not operands:
        return _NO_BOUNDS
    arrays = [*operands, *program.workspace]
    for launch in program.launches:
        arrays += [a.array if isinstance(a, TensorMapArg) else a for a in launch.args]
    ranges = [_extent(a) for a in arrays if isinstance(a, np.ndarray) and not a.dtype.names and a.size]
    return np.array(ranges, dtype=np.uint64).reshape(-1, 2)


def _bound(lib: ctypes.CDLL, memory: np.ndarray) -> None:
    """The global memory the next launches may touch (global_memory's form; none: unchecked). One set for the
    process: every loaded library shares the emulator's globals (_take)."""
    memory = np.ascontiguousarray(memory, dtype=np.uint64)
    lib.emu_bounds_set(memory.ctypes.data_as(ctypes.c_void_p), ctypes.c_ulonglong(len(memory)))


def clear_bounds() -> None:
    """No bounds: the launches that follow are not checked (after a launch through entry with its memory)."""
    for lib in list(_LOADED.values())[:1]:  # one is all: the bounds are shared
        _bound(lib, _NO_BOUNDS)


def bounds_count() -> int:
    """How many byte ranges the emulator checks global accesses against now (0: unchecked)."""
    libs = list(_LOADED.values())
    if not libs:
        return 0
    libs[0].emu_bounds_count.restype = ctypes.c_ulonglong
    return int(libs[0].emu_bounds_count())


def run(program: Program, extra_flags: tuple[str, ...] = (), operands: tuple = ()) -> None:  # noqa: ANN001
    """Run ``program`` stage by stage, stream by stream (the emulator has one stream; any order that
    respects the stages is an order the GPU may choose). Given ``operands`` (A, B, C: NumPy arrays or views),
    its global loads and stores must stay inside them and the program's own arrays (global_memory): one that
    does not is an EmuFault, as a misaligned one is."""
    libraries = _libraries(program, extra_flags)
    one = list(libraries.values())[:1]  # the bounds are set once: every library shares them
    with _BOUNDS_LOCK:  # one run's bounds at a time, cleared however it ends
        for lib in one:
            _bound(lib, global_memory(program, operands))
        try:
            _launch_all(program, libraries)
        finally:
            for lib in one:
                _bound(lib, _NO_BOUNDS)


def _launch_all(program: Program, libraries: dict[str, ctypes.CDLL]) -> None:
    """Every launch of ``program``, in order; an EmuFault at the first that faults."""
    for launch in program.launches:
        lib = libraries[launch.kernel]
        lib.emu_trace_enable(int(_TRACING))
        fn = getattr(lib, f"emu_{launch.kernel}")
        converted = [_ctype(a, lib) for a in launch.args]  # a tensor map's third item: its bytes, kept alive
        types, values = [c[0] for c in converted], [c[1] for c in converted]
        fn.argtypes = [ctypes.c_uint] * 6 + list(types)
        fn.restype = None
        grid = launch.grid if not launch.persistent else (min(launch.grid[0], PERSISTENT_BLOCKS), *launch.grid[1:])
        fn(*grid, *launch.block, *values)
        fault = _take(lib)
        if fault:
            raise EmuFault(fault)


def entry(kernel: str, extra_flags: tuple[str, ...] = (), memory: np.ndarray | None = None):  # noqa: ANN201
    """The emulator's entry point ``emu_<kernel>(grid, block, kernel parameters...)`` of any kernel the build
    names (a default kernel, another algorithm's, scale or blocking), from the library that has it; its
    argtypes are the caller's to set (strassenbench's CPU device sets them from the kernel's PTX). ``memory``:
    the [first, last) byte ranges its launches may touch (global_memory's form; None: unchecked). After a
    launch through it, take_fault(kernel) says whether the launch made a misaligned or out-of-bounds access."""
    inst = parse_instance(kernel)
    if inst is None or inst.counts in set(operand_counts()):
        lib = _default_library(kernel, extra_flags)
    else:
        lib = library(inst.precision, inst.strategy.name, extra_flags, (replace(inst, capped=True),))
    lib.emu_trace_enable(int(_TRACING))
    _bound(lib, _NO_BOUNDS if memory is None else memory)
    return getattr(lib, f"emu_{kernel}")
