"""The CUDA toolchains `strassenbench build` can use, and the one it picks for an architecture and a driver.

A toolchain turns a kernel source into PTX (its front end: nvcc, or NVRTC) and PTX into machine code (its
ptxas). Found, in this order:

- nvcc in ``$STRASSENBENCH_CUDA_BIN``, on PATH, or from the pip package nvidia-cuda-nvcc (CUDA 13);
- NVRTC 12 with CUDA 12's ptxas and CCCL headers, from the pip packages nvidia-cuda-nvrtc-cu12,
  nvidia-cuda-nvcc-cu12 (which carries ptxas, no nvcc) and nvidia-cuda-cccl-cu12: the ``cu12`` extra. PyPI
  has no CUDA 12 nvcc, so this is the pip route to sm_70 (V100, the paper's GPU), which CUDA 13 cannot build,
  and to cubins a CUDA 12 driver loads.

choose() takes the newest toolchain whose CUDA major the driver runs (a driver runs code of its own major and
older ones, not newer) and that can build the architecture. cuobjdump and fatbinary come from CUDA 13 (pip's
nvidia-cuda-cuobjdump and nvidia-cuda-nvcc): the fatbin container is the same for every CUDA version, and
CUDA 13's disassembler reads sm_75 and newer (so sm_70 builds have no SASS figures).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import env

__all__ = ["ToolchainError", "ToolKilled", "Toolchain", "find_tool", "first_error", "toolchains", "choose",
           "driver_cuda", "parse_cuda_version", "MIN_ARCH"]

# The oldest architecture each CUDA major compiles for (CUDA 13 dropped Maxwell, Pascal and Volta).
MIN_ARCH = {12: 50, 13: 75}
CUDA_BIN = "STRASSENBENCH_CUDA_BIN"


class ToolchainError(RuntimeError):
    """A CUDA tool that is needed and not found, or no toolchain fits the architecture and the driver."""


class ToolKilled(ToolchainError):
    """A tool stopped by a signal (an interrupted build's kill_tools, or the system's): it said nothing to keep."""


def _failed(cmd: list[str], result: subprocess.CompletedProcess) -> ToolchainError:
    """The error of a tool that exited with ``result``'s non-zero status: its first error line, or the signal that
    stopped it."""
    if result.returncode < 0:
        number = -result.returncode
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else f"signal {number}"
        return ToolKilled(f"{Path(cmd[0]).name} was stopped by {name}")
    return ToolchainError(first_error(result.stdout + result.stderr))


def _pip_roots() -> list[Path]:
    try:
        import nvidia  # namespace package of the pip CUDA wheels
    except ImportError:
        return []
    return [Path(p) for p in nvidia.__path__]


def _pip_bins() -> list[Path]:
    return [root / sub / "bin" for root in _pip_roots() for sub in ("cu13", "cu12", "cuda_nvcc", "cuda_cuobjdump")]


def _override() -> Path | None:
    """$STRASSENBENCH_CUDA_BIN: a folder with nvcc and ptxas, or EnvError (never skipped for PATH's)."""
    return env.tool_folder(CUDA_BIN, ("nvcc", "ptxas"))


def _candidates(name: str) -> list[Path]:
    """Where a CUDA tool may be, in order: $STRASSENBENCH_CUDA_BIN, PATH, the pip wheels' bin/ folders;
    only executables that exist."""
    override = _override()
    paths = [override / name] if override else []
    paths += [Path(found) for found in [shutil.which(name)] if found] + [b / name for b in _pip_bins()]
    return [p for p in paths if p.is_file() and os.access(p, os.X_OK)]


@lru_cache(maxsize=None)
def find_tool(name: str) -> str:
    found = _candidates(name)
    if found:
        return str(found[0])
    raise ToolchainError(
        f"{name} not found (install it with: pip install nvidia-cuda-nvcc nvidia-cuda-cuobjdump, "
        "or put a CUDA toolkit's bin/ on PATH)"
    )


_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


def run_tool(cmd: list[str], limit: tuple[str, float] = env.COMPILE_TIMEOUT) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd)`` with its output captured, the tool in a process group of its own and known to
    ``kill_tools``: an interrupted build stops its compilers (and their children: nvcc runs cicc and ptxas) at
    once instead of waiting for them. ``limit`` is the variable (name, default seconds) that bounds the run:
    past it the tool and its children are killed and ToolchainError names the command, as it does a tool that
    cannot be started."""
    seconds = env.seconds(limit)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    except OSError as err:
        raise ToolchainError(f"cannot run {cmd[0]}: {err.strerror or err}") from None
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        _kill(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):  # a child that left the group may hold the pipes
            proc.communicate(timeout=5)
        raise ToolchainError(f"`{shlex.join(cmd)}` did not finish within {seconds:g} s (set {limit[0]} to "
                             "allow more)") from None
    except BaseException:  # an interrupt: the tool does not outlive the call
        _kill(proc)
        raise
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tools() -> None:
    """Kill every tool run_tool started that is still running, with its children."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _kill(proc)


def first_error(stderr: str) -> str:
    """The first line of a compiler's output that says "error", for a one-line message."""
    return next((line for line in stderr.splitlines() if "error" in line), stderr.strip()[:200])


def parse_cuda_version(text: str) -> tuple[int, int]:
    """"12.4" (or NVML's integer 12040) as (12, 4); ValueError otherwise."""
    if re.fullmatch(r"\d{4,6}", text):
        number = int(text)
        return number // 1000, number % 1000 // 10
    if m := re.fullmatch(r"(\d+)\.(\d+)", text.strip()):
        return int(m.group(1)), int(m.group(2))
    raise ValueError(f"{text!r} is not a CUDA version such as 12.4")


@dataclass(frozen=True)
class Toolchain:
    """A front end (``nvcc`` or ``nvrtc``, at ``frontend``) and the ptxas of the same CUDA version."""

    cuda: tuple[int, int]
    frontend: str
    path: str
    ptxas: str
    includes: tuple[str, ...] = ()

    @property
    def major(self) -> int:
        return self.cuda[0]

    def __str__(self) -> str:
        return f"{self.frontend} {self.cuda[0]}.{self.cuda[1]} ({self.path})"

    @property
    def name(self) -> str:
        """What the build stamp records: front end and CUDA version (not the path)."""
        return f"{self.frontend} {self.cuda[0]}.{self.cuda[1]}"

    def builds(self, arch: str) -> bool:
        return int(arch.removeprefix("sm_")) >= MIN_ARCH.get(self.major, 75)

    def ptx(self, source: Path, arch: str, include_dirs: list[Path], target: Path) -> str:
        """Compile ``source`` to PTX for ``arch`` into ``target``; the compiler's log. ToolchainError (the first
        error line) when it fails."""
        compute = arch.replace("sm_", "compute_")
        includes = [*map(str, include_dirs), *self.includes]
        if self.frontend == "nvcc":
            cmd = [self.path, "-ptx", "-std=c++17", "-lineinfo", f"-arch={compute}",
                   *(a for d in includes for a in ("-I", d)), str(source), "-o", str(target)]
            result = run_tool(cmd)
            if result.returncode != 0:
                raise _failed(cmd, result)
            return result.stdout + result.stderr
        # -default-device: unannotated constexpr helpers are device functions (NVRTC compiles no host code)
        options = ["-std=c++17", "-lineinfo", "-default-device", f"-arch={compute}", *(f"-I{d}" for d in includes)]
        ok, log, ptx = _nvrtc_compile(self.path, source.read_bytes(), source.name, options)
        if not ok:
            raise ToolchainError(first_error(log))
        target.write_bytes(ptx)
        return log

    def assemble(self, ptx: Path, arch: str, target: Path, options: tuple[str, ...] = ()) -> str:
        """ptxas ``-v``: PTX to a cubin for ``arch`` (with ptxas ``options``); ptxas's report (registers,
        spills, ...)."""
        cmd = [self.ptxas, "-v", "-O3", "-lineinfo", *options, f"-arch={arch}", str(ptx), "-o", str(target)]
        result = run_tool(cmd)
        if result.returncode != 0:
            raise _failed(cmd, result)
        return result.stdout + result.stderr


def _nvrtc_compile(library: str, source: bytes, name: str, options: list[str]) -> tuple[bool, str, bytes]:
    """NVRTC through its C API (nvrtcCreateProgram, nvrtcCompileProgram, nvrtcGetPTX): (ok, log, PTX)."""
    lib = ctypes.CDLL(library)
    program = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(program), source, name.encode(), 0, None, None) != 0:
        return False, "error: nvrtcCreateProgram failed", b""
    try:
        args = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        status = lib.nvrtcCompileProgram(program, len(options), args)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(program, log)
        if status != 0:
            return False, log.value.decode(errors="replace"), b""
        lib.nvrtcGetPTXSize(program, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(program, ptx)
        return True, log.value.decode(errors="replace"), ptx.value
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def _nvcc_version(nvcc: str) -> tuple[int, int] | None:
    """The CUDA release ``nvcc --version`` names (bounded by $STRASSENBENCH_PROBE_TIMEOUT), or None."""
    out = run_tool([nvcc, "--version"], env.PROBE_TIMEOUT).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _nvrtc_version(library: Path) -> tuple[int, int] | None:
    try:
        lib = ctypes.CDLL(str(library))
    except OSError:
        return None
    major, minor = ctypes.c_int(), ctypes.c_int()
    return (major.value, minor.value) if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0 else None


@lru_cache(maxsize=None)
def toolchains() -> tuple[Toolchain, ...]:
    """Every toolchain found on this machine, one per CUDA major (the first found of a major wins: the
    override, then PATH, then pip), newest first."""
    found: dict[int, Toolchain] = {}
    override = _override()
    for nvcc in _candidates("nvcc"):
        version = _nvcc_version(str(nvcc))
        if version is None and override and nvcc.parent == override:
            raise env.EnvError(f"{CUDA_BIN}={str(override)!r}: expected a CUDA toolkit's bin/ folder ({nvcc} "
                               "--version names no CUDA release)")
        ptxas = nvcc.with_name("ptxas")
        if version and ptxas.is_file() and version[0] not in found:
            found[version[0]] = Toolchain(version, "nvcc", str(nvcc), str(ptxas))
    for root in _pip_roots():  # the cu12 extra: NVRTC 12 + ptxas 12 + CCCL 12
        library, ptxas = root / "cuda_nvrtc" / "lib" / "libnvrtc.so.12", root / "cuda_nvcc" / "bin" / "ptxas"
        cccl = root / "cuda_cccl" / "include"
        if library.is_file() and ptxas.is_file() and cccl.is_dir() and 12 not in found:
            version = _nvrtc_version(library)
            if version:
                found[12] = Toolchain(version, "nvrtc", str(library), str(ptxas), (str(cccl),))
    return tuple(found[m] for m in sorted(found, reverse=True))


def choose(arch: str, driver: tuple[int, int] | None, available: tuple[Toolchain, ...], jit: bool = False) -> Toolchain:
    """The newest toolchain that builds ``arch`` and whose CUDA major the driver runs (``driver``: the CUDA
    version the driver supports, None when no driver is known: any major). ``jit``: the GPU runs no machine
    code of the build, only its PTX, which the driver compiles when loading; a driver compiles only PTX no
    newer than itself, so then the toolchain's minor must not exceed the driver's either."""
    fits = [t for t in available if t.builds(arch)]
    if not fits:
        have = ", ".join(t.name for t in available) or "none"
        fix = "pip install -e '.[cu12]' (NVRTC 12 and ptxas 12) or put a CUDA 12 toolkit's bin/ on PATH" \
            if int(arch.removeprefix("sm_")) < MIN_ARCH[13] else "pip install nvidia-cuda-nvcc"
        raise ToolchainError(f"no CUDA toolchain here builds {arch} (found: {have}): {fix}")
    runnable = [t for t in fits if driver is None or (t.cuda <= driver if jit else t.major <= driver[0])]
    if not runnable:
        if jit:
            raise ToolchainError(
                f"this GPU runs the {arch} build's PTX, which its driver (CUDA {driver[0]}.{driver[1]}) compiles "
                f"only when the toolchain is no newer; the toolchains here are {', '.join(t.name for t in fits)}: "
                f"pip install 'nvidia-cuda-nvcc=={driver[0]}.{driver[1]}.*', or update the driver")
        fix = "pip install -e '.[gpu-cu12]' (its NVRTC 12 builds for this driver), or update the driver" \
            if driver[0] == 12 else "update the driver (CUDA 12 or newer)"
        raise ToolchainError(
            f"the driver runs CUDA {driver[0]}.{driver[1]} code, and the toolchains here that build {arch} are "
            f"{', '.join(t.name for t in fits)}: {fix}")
    return max(runnable, key=lambda t: t.cuda)


def driver_cuda() -> tuple[int, int] | None:
    """The CUDA version the installed driver supports (NVML), or None without a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return parse_cuda_version(str(pynvml.nvmlSystemGetCudaDriverVersion()))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML library or no driver: no constraint from the driver
        return None
