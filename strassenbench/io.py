"""Result files: written atomically, so an interrupted run never leaves a truncated file behind; an existing file
of another kind is never replaced; one process at a time writes an output (``output_lock``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

__all__ = ["OutputError", "write_atomic", "render", "write_table", "first_line", "check_replace", "output_lock"]


class OutputError(ValueError):
    """An output that must not be written: another kind of file is there, or another process writes it."""


def first_line(path: str | os.PathLike[str]) -> bytes:
    """The first line of a file (at most 4 KiB of it), as bytes: what tells one kind of output from another."""
    with open(path, "rb") as handle:
        return handle.readline(4096)


def check_replace(path: str | os.PathLike[str], header: str) -> None:
    """OutputError unless ``path`` is absent or a file whose first line is ``header`` (the same kind of table: a
    rerun may replace its own output, never another command's file)."""
    target = Path(path)
    if not target.exists():
        return
    if not target.is_file():
        raise OutputError(f"output {target} is not a regular file")
    try:
        head = first_line(target).decode("utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        head = None
    if head != header.rstrip("\r\n") and target.stat().st_size > 0:
        raise OutputError(f"output {target} holds something else (it begins {head[:40]!r} and this writes "
                          f"{header[:40]!r}): give another --out, or remove it first" if head is not None else
                          f"output {target} holds something else (not text): give another --out, or remove it first")


@contextlib.contextmanager
def output_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold ``<path>.lock`` (an advisory lock with the holder's PID) while writing ``path``; OutputError at once
    when another process holds it: two runs on one output would lose each other's rows."""
    target = Path(path)
    lock = target.with_name(f".{target.name}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~_UMASK)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            raise OutputError(f"another strassenbench (PID {holder}) is writing {target}: wait for it to finish, or "
                              "give another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it; done once, at import, before any thread writes
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it into place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", newline="") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a result file is as readable as any other
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def render(frame: pd.DataFrame, fmt: str) -> str:
    """A table as CSV or markdown text."""
    return frame.to_csv(index=False) if fmt == "csv" else frame.to_markdown(index=False) + "\n"


def write_table(frame: pd.DataFrame, fmt: str, out: str | None, footer: str = "") -> None:
    """Print the table, or write it atomically to ``out``."""
    text = render(frame, fmt) + (f"\n{footer}\n" if footer and fmt == "markdown" else "")
    if out:
        check_replace(out, text.split("\n", 1)[0])
        write_atomic(out, text)
    else:
        print(text, end="")
