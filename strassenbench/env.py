"""The environment variables strassenbench reads, each checked here when it is read.

One rule for all: a variable that is unset or empty means its default (an empty value is never a path, a
flag list or the current folder); any other value is checked, and one that cannot be used is refused with
EnvError, one line naming the variable and what it expects (the command exits with status 2). A value is
never skipped in favour of a default.

- ``STRASSENBENCH_CACHE``: the emulator's cache folder; under ``XDG_CACHE_HOME``, else ``HOME``/.cache, when
  unset. Each an absolute path of a folder this user can write, or create in a folder that exists (XDG's
  rule: a relative cache path is invalid); HOME a folder that exists.
- ``CXX``: the emulator's C++ compiler, a command and optional arguments (shell quoting); g++ or c++ on PATH
  when unset. ``NVCC_CCBIN``: the host compiler nvcc calls, an executable or the folder of one.
- ``STRASSENBENCH_EMU_FLAGS``: extra emulator compiler flags (shell quoting), each starting with '-'.
- ``STRASSENBENCH_CUDA_BIN``: a folder with nvcc and ptxas, tried before PATH.
- ``STRASSENBENCH_KERNELS``, ``STRASSENBENCH_ALGORITHMS``: source folders (kernels/, algorithms/ beside the
  package when unset); a relative path is from the current folder.
- ``STRASSENBENCH_PROBE_TIMEOUT`` (30) and ``STRASSENBENCH_COMPILE_TIMEOUT`` (1800): seconds a toolchain probe
  (``nvcc --version``) and one compiler run (nvcc, ptxas, fatbinary, cuobjdump, the emulator's g++) may take.
- ``STRASSENBENCH_INJECT_FAILURE``: the test hook of strassenbench.inject (planted failures and wrong results).
- ``CUDA_VISIBLE_DEVICES`` is CUDA's and keeps CUDA's meaning: empty hides every GPU (``visible_devices``).
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
from pathlib import Path

from .limits import MAX_PATH_BYTES

__all__ = ["EnvError", "PROBE_TIMEOUT", "COMPILE_TIMEOUT", "value", "cache_folder", "home_cache", "source_folder",
           "command", "flags", "seconds", "tool_folder", "compiler_path", "visible_devices"]

PROBE_TIMEOUT = ("STRASSENBENCH_PROBE_TIMEOUT", 30.0)
COMPILE_TIMEOUT = ("STRASSENBENCH_COMPILE_TIMEOUT", 1800.0)
# Flags that change what the emulator's compiler writes, or where: the library would not load.
_OUTPUT_FLAGS = {"-c", "-E", "-S", "-M", "-MM", "-###", "--help"}
_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?")
MAX_SECONDS = 7 * 24 * 3600  # a week: longer is no limit, and beyond what a wait can be given


class EnvError(RuntimeError):
    """An environment variable whose value cannot be used: the message names it and what it expects. Not a
    ValueError: argparse would replace its message by "invalid value" when an argument's check reads one."""


def _short(text: str) -> str:
    return text if len(text) <= 200 else f"{text[:200]}..."


def _refuse(name: str, text: str, expects: str) -> EnvError:
    return EnvError(f"{name}={_short(text)!r}: expected {expects}")


def value(name: str) -> str | None:
    """The variable's text; None when it is unset or empty (both mean the default)."""
    text = os.environ.get(name)
    return text or None


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (the folder a mkdir -p would create it in)."""
    while True:
        try:
            os.stat(path)
            return path
        except (FileNotFoundError, NotADirectoryError):
            path = path.parent
        except OSError:  # a name too long or a loop: nothing can be created under it
            return path


def cache_folder(name: str, *, exists: bool = False) -> Path | None:
    """A folder to write a cache in: absolute, and a folder this user can write, or create in a folder that
    exists (a path whose folder is missing too is a typo, not a cache to make); with ``exists`` (HOME) a folder
    that exists. None when unset."""
    text = value(name)
    if text is None:
        return None
    path = Path(text)
    expects = ("an absolute path of a folder that exists" if exists else
               "an absolute path of a folder this user can write, or create in a folder that exists")
    if not path.is_absolute():
        raise _refuse(name, text, f"{expects} (it is relative)")
    if any(len(os.fsencode(part)) > MAX_PATH_BYTES for part in path.parts):
        raise _refuse(name, text, f"{expects} (a name in it is longer than {MAX_PATH_BYTES} bytes)")
    base = _existing(path)
    if base != path and (exists or base != path.parent):
        raise _refuse(name, text, f"{expects} ({path if exists else path.parent} does not exist)")
    if not os.path.isdir(base):
        raise _refuse(name, text, f"{expects} ({base} is not a folder)")
    if not os.access(base, os.W_OK | os.X_OK):
        raise _refuse(name, text, f"{expects} ({base} is not writable)")
    return path


def home_cache() -> Path:
    """~/.cache: $HOME checked as cache_folder does (the default cache is under it), else, when HOME is unset or
    empty, the home folder of the password database."""
    home = cache_folder("HOME", exists=True)
    if home is None:
        try:
            home = Path(pwd.getpwuid(os.getuid()).pw_dir)
        except KeyError:
            raise EnvError("HOME is unset and this user has no home folder: set HOME, XDG_CACHE_HOME or "
                           "STRASSENBENCH_CACHE") from None
    return home / ".cache"


def source_folder(name: str, what: str, marker: str | None = None) -> Path | None:
    """A folder of sources, ``what`` in the message, that holds ``marker`` (a file every such folder has);
    None when unset."""
    text = value(name)
    if text is None:
        return None
    path = Path(text)
    if not (os.path.isdir(path) and (marker is None or os.path.isfile(path / marker))):
        raise _refuse(name, text, what + (f" (a folder with {marker})" if marker else " (a folder)"))
    return path


def _runnable(word: str) -> str | None:
    """The path of ``word``: an executable file (a path with '/') or a command on PATH; None otherwise."""
    if "/" in word:
        return word if os.path.isfile(word) and os.access(word, os.X_OK) else None
    return shutil.which(word)


def command(name: str) -> list[str] | None:
    """A command with optional arguments (shell quoting), its first word an executable; None when unset."""
    text = value(name)
    if text is None:
        return None
    expects = "a compiler command: an executable file or a command on PATH, then optional arguments"
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise _refuse(name, text, f"{expects} ({err})") from None
    found = _runnable(words[0]) if words else None
    if found is None:
        raise _refuse(name, text, expects)
    return [found, *words[1:]]


def flags(name: str) -> list[str]:
    """Compiler flags (shell quoting), each starting with '-' and none that changes the output; [] when unset."""
    text = value(name) or ""
    expects = "compiler flags in shell quoting, each starting with '-' (write -I/dir, not -I /dir)"
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise _refuse(name, text, f"{expects} ({err})") from None
    for word in words:
        if not word.startswith("-") or word == "-":
            raise _refuse(name, text, f"{expects}, not {_short(word)!r}")
        if word in _OUTPUT_FLAGS or word.startswith("-o"):
            raise _refuse(name, text, f"{expects}; {_short(word)} changes the output, which is strassenbench's "
                          "to choose")
    return words


def seconds(variable: tuple[str, float]) -> float:
    """A limit in seconds, a positive decimal such as 30 or 2.5; ``variable`` is (name, default)."""
    name, default = variable
    text = value(name)
    if text is None:
        return default
    if not _SECONDS.fullmatch(text) or not 0 < float(text) <= MAX_SECONDS:
        raise _refuse(name, text, f"a positive number of seconds up to {MAX_SECONDS} (a week), such as 30 or 2.5")
    return float(text)


def tool_folder(name: str, tools: tuple[str, ...]) -> Path | None:
    """A folder holding each of ``tools`` as an executable file; None when unset."""
    text = value(name)
    if text is None:
        return None
    path = Path(text)
    missing = [tool for tool in tools if _runnable(str(path / tool)) is None]
    if not os.path.isdir(path) or missing:
        why = "not a folder" if not os.path.isdir(path) else f"no executable {', '.join(missing)} in it"
        raise _refuse(name, text, f"a folder with executable {' and '.join(tools)} ({why})")
    return path


def compiler_path(name: str) -> str | None:
    """A compiler for nvcc's -ccbin: an executable (a path or a command on PATH) or the folder of one; None
    when unset."""
    text = value(name)
    if text is None:
        return None
    if os.path.isdir(text) or _runnable(text):
        return text
    raise _refuse(name, text, "a host compiler: an executable file, a command on PATH, or the folder of one")


def visible_devices() -> str | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: None when unset, '' (no GPU) when empty."""
    return os.environ.get("CUDA_VISIBLE_DEVICES")
