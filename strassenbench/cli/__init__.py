"""The ``strassenbench`` command line.

Bad input (an argument, a shape, a dtype) prints one line on stderr and exits 2, never a traceback.

Each group of commands is a module with ``add_parser(subparsers)`` and ``run(args)``: ``tables`` (algorithms,
variants, schedule, impls), ``runs`` (verify, accuracy, bench, memlimit, sysinfo), ``build`` (build, doctor),
``results`` (collect, report, compare), ``model`` and ``pick``. Argument types are in ``types``, the checks every
command shares in ``checks``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from .. import __version__
from ..algebra.algorithm import AlgorithmError
from ..env import EnvError
from ..fused.arch import CudaError
from ..fused.build import BuildError
from ..fused.emu import EmuError
from ..fused.launch import FusedError
from ..fused.toolchain import ToolchainError
from ..gemm import GemmError
from ..impls import ImplError
from ..io import OutputError, output_lock
from ..limits import LimitError
from ..model.perf import ModelError
from ..model.pick import PickError
from ..options import OptionsError
from ..plan import PlanError
from ..results import ResultsError
from . import build, model, pick, results, runs, tables
from .checks import EXIT_FAIL, EXIT_USAGE, UsageError, check_outputs, check_work

__all__ = ["main", "build_parser", "UsageError", "EXIT_FAIL", "EXIT_USAGE"]

GROUPS = (tables, runs, build, results, model, pick)  # each adds its commands' parsers
# The errors of bad input a command finds after parsing: one line, exit status 2.
INPUT_ERRORS = (PlanError, GemmError, UsageError, ImplError, FusedError, BuildError, ToolchainError, EmuError,
                CudaError, ResultsError, AlgorithmError, ModelError, LimitError, OutputError, EnvError, OptionsError,
                PickError)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}\n")  # a value's control characters escaped


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="strassenbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parser(sub)
    return parser


# Options whose value may begin with '-' (-inf, -1e5): argparse would take such a value for an option.
_SIGNED_OPTIONS = ("--alpha", "--beta")


def _join_signed(argv: Sequence[str]) -> list[str]:
    """``--alpha -1e5`` as ``--alpha=-1e5``, so that every number reaches its parser (and its message)."""
    out, i = [], 0
    while i < len(argv):
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if argv[i] in _SIGNED_OPTIONS and value.startswith("-") and value not in ("-", "--"):
            out.append(f"{argv[i]}={value}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)} | {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def one_line(err: object) -> str:
    """An error's text with its control characters escaped (a path holding a line break or an escape sequence
    cannot split the message or forge another status line)."""
    return str(err).translate(_CONTROL)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: unwound as Ctrl-C is, so that every staging folder, partial file and lock goes."""


def _terminate(signum: int, _frame: object) -> None:
    signal.signal(signum, signal.SIG_IGN)  # once: the cleanup itself is not interrupted again
    raise Terminated(signal.Signals(signum).name)


@contextlib.contextmanager
def _terminable() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Terminated while a command runs (in the main thread); the former handlers after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    former = {signum: signal.signal(signum, _terminate) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in former.items():
            signal.signal(signum, handler)


def main(argv: Sequence[str] | None = None) -> int:
    with _terminable():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(_join_signed(sys.argv[1:] if argv is None else argv))
    except SystemExit as stop:  # usage errors, --help and --version: return their status
        return int(stop.code or 0)
    except EnvError as err:  # a variable read to check an argument (STRASSENBENCH_ALGORITHMS for --algorithm)
        print(f"strassenbench: error: {one_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        check_work(args)
        check_outputs(args)
        out = getattr(args, "out", None)
        with output_lock(out) if out else contextlib.nullcontext():
            return args.func(args)
    except INPUT_ERRORS as err:
        print(f"strassenbench: error: {one_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except Terminated as stop:
        print(f"strassenbench: stopped by {stop}", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("strassenbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
