"""The checks every command shares, made before it does any work: its --out, the work it asks for, the
memory a problem needs, a report's folders. Each refusal is a UsageError: one line and exit status 2."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..algebra.levels import check_levels, plan_products
from ..io import check_names, check_replace, first_line
from ..limits import MAX_PATH_BYTES, MAX_SCHEDULE_PRODUCTS, check_products

__all__ = ["EXIT_FAIL", "EXIT_USAGE", "UsageError", "FOLDER_OUTPUTS", "check_output", "check_work", "check_outputs",
           "check_memory", "outside_inputs"]

EXIT_FAIL = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input found after parsing; reported as one line with exit status 2."""


FOLDER_OUTPUTS = ("build", "report", "compare")  # commands whose --out is a folder
_RESULT_KIND = {"memlimit": "memlimit", "verify": "verify", "bench": "bench", "accuracy": "accuracy"}  # the results a command writes


def check_output(path: str | Path) -> None:
    """An output file checked before any work is done: not a folder, and its folder a folder (created when
    missing) that can be written to."""
    target = Path(path)
    if any(len(part.encode()) > MAX_PATH_BYTES for part in target.parts):
        raise UsageError(f"output name too long (a part of more than {MAX_PATH_BYTES} bytes): {str(target)[:60]}...")
    if target.is_dir():
        raise UsageError(f"output {target} is a folder; give a file name")
    for folder in (target.parent, *target.parent.parents):
        if folder.exists():
            if not folder.is_dir():
                raise UsageError(f"output {target}: {folder} is a file, not a folder")
            if not os.access(folder, os.W_OK | os.X_OK):
                raise UsageError(f"output {target}: cannot write in {folder}")
            break


def check_work(args: argparse.Namespace) -> None:
    """The work a command asks for, bounded before it starts (strassenbench.limits): a mixed spec has as many
    parts as levels, a plan's products and a schedule's are within their limits."""
    levels = getattr(args, "levels", None)
    if levels is None or not hasattr(args, "algorithm"):
        return
    check_levels(args.algorithm, levels)
    if args.command == "schedule":
        check_products(plan_products(args.algorithm, levels), f"the schedule of {levels} levels of {args.algorithm}",
                       MAX_SCHEDULE_PRODUCTS,
                       "3 levels of Strassen: the scheduler's search grows with the square of the products")


def _a(word: str) -> str:
    """``word`` with its indefinite article: a bench, an accuracy."""
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _check_results_file(out: str, kind: str, option: str = "--out") -> None:
    """An existing ``option`` (--out) a command resumes or replaces is a results file of its own kind."""
    from ..results import kind_of

    head = first_line(out)
    header = head.decode("utf-8", errors="replace").strip().split(",")
    found = kind_of(header)
    if found is None or found.name != kind:
        what = f"{_a(found.name)} results file" if found else f"it begins {','.join(header)[:30]!r}"
        if not head.strip() or b"\0" in head:
            what = "an empty file" if not head.strip() else "not a CSV file: binary data"
        raise UsageError(f"output {out} is not {_a(kind)} results file ({what}): give another {option}, or remove it "
                         "first")


def _imports_every_key(args: argparse.Namespace) -> bool:
    """`algorithms import` of every key of an npz: its --out is a folder (FILE.txt|FOLDER)."""
    if args.command != "algorithms" or getattr(args, "action", None) != "import" or args.key is not None:
        return False
    return (args.format or {".npz": "npz"}.get(Path(args.path).suffix.lower())) == "npz"


def check_outputs(args: argparse.Namespace) -> None:
    """Every command's --out, checked before it does any work."""
    out = getattr(args, "out", None)
    if out is None:
        return
    if Path(out).name in ("", ".", ".."):  # "" would be the current folder; a lock is named after its output
        raise UsageError(f"--out {out!r} names no file or folder of its own: give one by its name")
    if args.command in FOLDER_OUTPUTS or _imports_every_key(args):
        if Path(out).exists() and not Path(out).is_dir():
            raise UsageError(f"output folder {out} is a file")
        check_output(Path(out) / "probe")  # its folder (or the nearest existing one) writable
    else:
        check_output(out)
    from ..samples import samples_path

    check_names(out, *([samples_path(out)] if args.command in ("bench", "collect") else []))  # its lock, ...
    kind = _RESULT_KIND.get(args.command)
    if kind and getattr(args, "format", "csv") == "csv" and Path(out).is_file():
        _check_results_file(out, kind)
    if args.command == "bench":  # the files a sweep writes beside its table, and the table it publishes
        from ..bench.runner import check_sweep_files

        check_sweep_files(Path(out))
        if args.publish is not None:  # "" is a bad name too, never "no --publish"
            if Path(args.publish).resolve() == Path(out).resolve():
                raise UsageError(f"--publish {args.publish} is --out itself: publish to another file")
            check_output(args.publish)
            check_names(args.publish, samples_path(args.publish))
            if Path(args.publish).is_file():  # it replaces only a sweep's table
                _check_results_file(args.publish, "bench", "--publish")
    if args.command == "build":  # its table of kernels replaces only a build's
        from ..fused.modules import RESOURCE_COLUMNS

        check_replace(Path(out) / "resources.csv", ",".join(RESOURCE_COLUMNS))


def check_memory(m: int, n: int, k: int, copies: float = 3.0) -> None:
    """A problem that cannot fit in this machine's memory is refused before anything is allocated: A, B and
    C, in float64 for the reference, ``copies`` times over (operands, the result and its reference)."""
    need = (m * k + k * n + m * n) * 8 * copies
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return
    if need > total:
        raise UsageError(f"{m}x{n}x{k} needs about {need / 2**30:,.1f} GiB of host memory; this machine has "
                         f"{total / 2**30:,.1f} GiB")


def outside_inputs(out: Path, inputs: list[Path]) -> None:
    """A report or comparison is never written into (or over) one of the result folders it reads."""
    for folder in inputs:
        if out.resolve() == folder.resolve() or folder.resolve() in out.resolve().parents:
            raise UsageError(f"--out {out} is inside the results folder {folder} it reads: give another folder")
