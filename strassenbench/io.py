"""Result files: written atomically, so an interrupted run or a full disk never leaves a truncated file behind;
an existing file of another kind is never replaced; one process at a time writes an output (``output_lock``);
a folder of outputs is published all or nothing (``staging`` and ``publish``).

Every file made beside an output (its lock, a temporary file, a staging folder) is created exclusively and never
through a symbolic link, and every name built from an output's name fits the file system (``check_names``). A
write that fails (a full disk, any OSError) is an OutputError naming the file, with nothing half-written.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import html
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

from .limits import MAX_PATH_BYTES

__all__ = ["OutputError", "write_atomic", "render", "csv_text", "neutral", "markdown", "write_table", "first_line", "check_replace",
           "output_lock",
           "check_names", "side_names", "staging", "publish", "write_error"]

class OutputError(ValueError):
    """An output that must not be written: another kind of file is there, or another process writes it."""


def write_error(path: str | os.PathLike[str], err: OSError) -> OutputError:
    """An OSError of writing ``path`` (a full disk, a read-only or missing folder, a name too long) as one line."""
    return OutputError(f"cannot write {path}: {err.strerror or err}")


def first_line(path: str | os.PathLike[str]) -> bytes:
    """The first line of a file (at most 4 KiB of it), as bytes: what tells one kind of output from another."""
    with open(path, "rb") as handle:
        return handle.readline(4096)


def _head(path: str | os.PathLike[str]) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(4096)


_PNG = b"\x89PNG\r\n\x1a\n"
_TITLE = re.compile(rb"<title>([^<]{0,200})</title>", re.IGNORECASE)
_FIRST_KEY = re.compile(rb'\A\s*\{\s*"((?:[^"\\]|\\.){0,200})"\s*:')


def signature(head: bytes, any_table: bool = False) -> str | None:
    """What kind of output a file is, from its first bytes: an image, a PDF, a page (by its title), JSON (by its
    first key: a system description, a samples file), else its first line (a table's header); None when it is
    not text. With ``any_table`` every Markdown table is one kind (a report's tables change columns with the
    data)."""
    if head.startswith(_PNG):
        return "a PNG image"
    if head.startswith(b"%PDF-"):
        return "a PDF document"
    if head.lstrip()[:14].lower() == b"<!doctype html":
        title = _TITLE.search(head)
        return f"an HTML page titled {title.group(1).decode(errors='replace').strip()!r}" if title else "an HTML page"
    if key := _FIRST_KEY.match(head):
        return f"JSON beginning with {key.group(1).decode(errors='replace')!r}"
    line = head.split(b"\n", 1)[0].rstrip(b"\r")
    if any_table and (line.startswith(b"|") or (len(line) > 1 and line[:1] == line[-1:] == b"_")):
        return "a Markdown table"
    try:
        return repr(line.decode("utf-8")[:40]) if b"\0" not in line else None
    except UnicodeDecodeError:
        return None


def check_replace(path: str | os.PathLike[str], header: str | bytes, any_table: bool = False) -> None:
    """OutputError unless ``path`` is absent, empty, or a regular file of the kind that ``header`` (the first
    line, or the first bytes, of what is written) begins (signature): a rerun may replace its own output, never
    another command's file, a folder or a device."""
    target = Path(path)
    if not os.path.lexists(target):
        return
    if not target.is_file():
        raise OutputError(f"output {target} is {_what(target)}, not a regular file: give another --out, or remove "
                          "it first")
    new = signature(header.encode() if isinstance(header, str) else header, any_table)
    try:
        old = signature(_head(target), any_table)
    except OSError as err:
        raise OutputError(f"output {target} cannot be read ({err.strerror}): give another --out") from None
    if old != new and target.stat().st_size > 0:
        raise OutputError(f"output {target} holds something else ({_describe(old)}, and this writes "
                          f"{_describe(new)}): give another --out, or remove it first")


def _describe(kind: str | None) -> str:
    if kind is None:
        return "not text"
    return f"it begins {kind}" if kind.startswith("'") else kind


def side_names(path: str | os.PathLike[str]) -> list[str]:
    """Every name made beside an output: itself, its lock, a temporary file and a staging folder (tempfile's
    random part is 8 characters)."""
    name = Path(path).name
    return [name, _lock_path(Path(path)).name, f".{name}.xxxxxxxx.tmp", f".{name}.partial.xxxxxxxx"]


def check_names(path: str | os.PathLike[str], *others: str | os.PathLike[str]) -> None:
    """OutputError, before any work, when a part of ``path`` or a name made beside it or beside ``others``
    (the samples file of a table) is longer than the file system takes (MAX_PATH_BYTES)."""
    names = [*Path(path).parts[:-1], *(n for p in (path, *others) for n in side_names(p))]
    long = max(names, key=lambda n: len(os.fsencode(n)), default="")
    if len(os.fsencode(long)) > MAX_PATH_BYTES:
        raise OutputError(f"output name too long: {str(path)[:60]}... needs the name {long[:40]}... of "
                          f"{len(os.fsencode(long))} bytes, and a file name has at most {MAX_PATH_BYTES}")


def _lock_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.lock")


@contextlib.contextmanager
def output_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold ``.<name>.lock`` beside ``path`` (an advisory lock with the holder's PID) while writing ``path``;
    OutputError at once when a live process holds it: two runs on one output would lose each other's rows. The
    lock file is created exclusively and opened without following a symbolic link: a link (or anything but a
    lock file) planted there is refused, never written through. A lock left by a process that died is taken
    over."""
    target = Path(path)
    lock = _lock_path(target)
    made = [f for f in (lock.parent, *lock.parent.parents) if not os.path.lexists(f)]  # deepest first
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = _take_lock(lock, target)
    except OSError as err:
        _remove_empty(made)
        raise OutputError(f"cannot take the lock {lock} of {target}: {err.strerror or err}") from None
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if _same_file(lock, fd):
                lock.unlink()
        os.close(fd)
        _remove_empty(made)  # a refused or failed command leaves no folder of its --out behind


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders this process made (deepest first) that are still empty."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _take_lock(lock: Path, target: Path) -> int:
    """The locked descriptor of ``lock`` with this process's PID in it; OutputError naming a live holder."""
    for _ in range(16):
        fd = _open_lock(lock)
        if fd is None:  # removed between two calls by a holder that finished: try again
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            if holder is None or _alive(holder):
                os.close(fd)
                raise OutputError(f"another strassenbench (PID {holder or '?'}) is writing {target}: wait for it to "
                                  "finish, or give another --out") from None
            # still held by what a dead holder left running (a forked worker): a new lock file replaces it
            with contextlib.suppress(OSError):
                if _same_file(lock, fd):
                    lock.unlink()
            os.close(fd)
            continue
        if not _same_file(lock, fd):  # replaced since it was opened (a holder finished, another began)
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError:
            with contextlib.suppress(OSError):
                lock.unlink()
            os.close(fd)
            raise
        return fd
    raise OutputError(f"cannot take the lock {lock} of {target}: other processes keep taking it")


def _open_lock(lock: Path) -> int | None:
    """A descriptor of the lock file, created exclusively when absent; None when it vanished meanwhile."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(lock, flags | os.O_CREAT | os.O_EXCL, 0o666 & ~_UMASK)
    except FileExistsError:
        try:
            fd = os.open(lock, flags)
        except FileNotFoundError:
            return None
        except OSError as err:
            if err.errno != errno.ELOOP:
                raise
            raise OutputError(f"{lock} is a symbolic link, not a lock: remove it (a lock is never written "
                              "through a link)") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        what = "a second name of another file" if stat.S_ISREG(info.st_mode) else "not a regular file"
        raise OutputError(f"{lock} is not a lock file ({what}): remove it")
    return fd


def _same_file(path: Path, fd: int) -> bool:
    """Whether ``path`` (not followed) is still the file open as ``fd``."""
    try:
        here = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def _holder(fd: int) -> int | None:
    """The PID written in a lock file, None when there is none (yet)."""
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isascii() and text.isdigit() and 0 < int(text) < 2**31 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it; done once, at import, before any thread writes
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def write_atomic(path: str | os.PathLike[str], text: str | bytes) -> None:
    """Write ``text`` (UTF-8) to a new temporary file beside ``path``, flush it to disk and rename it into
    place; OutputError naming ``path`` when any step fails (a full disk), with the temporary file removed."""
    target = Path(path)
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)  # O_EXCL, no link
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; a result file is as readable as any other
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
            handle.flush()
            os.fsync(fd)
        os.replace(tmp, target)
        tmp = None
    except OSError as err:
        raise write_error(target, err) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


@contextlib.contextmanager
def staging(out: str | os.PathLike[str], dest: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """A new private folder (``.<name>.partial.XXXXXXXX``, made exclusively) to make the outputs of ``out`` in
    before ``publish`` moves them into ``dest`` (``out`` itself, or the folder of an output file); removed
    afterwards with whatever is left in it. It is made beside ``out``, or inside ``out`` when that folder is on
    another file system (a mount point): a rename does not cross file systems. A write that fails in it is an
    OutputError naming the file in ``dest`` it was for."""
    out = Path(out)
    dest = out if dest is None else Path(dest)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        mounted = out.is_dir() and not out.is_symlink() and os.stat(out).st_dev != os.stat(out.parent).st_dev
        where = out if mounted else out.parent
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial.", dir=where))
    except OSError as err:
        raise write_error(out, err) from None
    try:
        yield stage
    except OutputError as err:  # a file of the folder (write_atomic): named where it was to be published
        raise OutputError(str(err).replace(f"{stage}{os.sep}", f"{dest}{os.sep}")) from None
    except OSError as err:  # a file made in the folder otherwise (a figure): a full disk
        made = Path(os.fsdecode(err.filename)) if isinstance(err.filename, (str, bytes, os.PathLike)) else None
        if made is not None and stage in made.parents:
            raise write_error(dest / made.relative_to(stage), err) from None
        if made is None and err.errno in _WRITE_ERRORS:
            raise write_error(dest, err) from None
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)


_WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS)


def publish(stage: Path, dest: Path, remove: Iterable[Path] = ()) -> list[Path]:
    """Move every file made under ``stage`` to the same place under ``dest``, and remove the files ``remove``
    (outputs this run no longer has), all or nothing: every destination is checked first (a folder, a link or
    another kind of file where a file goes, a file or a link where a folder goes: OutputError before anything
    is replaced); then each file is replaced whole, and when a step fails the files already replaced are put
    back (OutputError naming the file). The published paths, in order."""
    files = sorted(p for p in stage.rglob("*") if p.is_file() and not p.is_symlink())
    remove = list(remove)
    if os.path.lexists(dest) and not dest.is_dir():
        raise OutputError(f"output folder {dest} is {_what(dest)}: give another --out (nothing was written)")
    pairs = [(src, dest / src.relative_to(stage)) for src in files]
    for target in [t for _, t in pairs] + remove:
        _check_destination(dest, target)
    for src, target in pairs:
        check_replace(target, _head(src), any_table=True)
    gone = [t for t in remove if os.path.lexists(t)]
    undo: list[tuple[Path, Path | None]] = []  # (published path, its former file's copy or None)
    made: list[Path] = []  # folders made
    kept = stage / ".replaced"  # in the private staging folder, on the file system of dest
    current = dest
    try:
        for src, target in [*pairs, *((None, t) for t in gone)]:
            current = target
            made += _make_folders(dest, target.parent)
            former = None
            if os.path.lexists(target):
                former = kept / target.relative_to(dest)
                former.parent.mkdir(parents=True, exist_ok=True)
                _keep(target, former)
            undo.append((target, former))
            if src is None:
                os.unlink(target)
            else:
                os.replace(src, target)
    except OSError as err:
        _roll_back(undo, made)
        raise write_error(current, err) from None
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    return [t for _, t in pairs]


def _check_destination(dest: Path, target: Path) -> None:
    """OutputError unless ``target`` can be replaced by a file: every folder on the way from ``dest`` a real
    folder (or absent), and ``target`` itself absent or a regular file (not a folder, a link or a device)."""
    for folder in [*reversed(target.relative_to(dest).parents)][1:]:
        here = dest / folder
        if os.path.lexists(here) and (here.is_symlink() or not here.is_dir()):
            raise OutputError(f"{here} is {_what(here)} where the output has a folder: remove it, or give another "
                              "--out (nothing was written)")
    if os.path.lexists(target) and (target.is_symlink() or not target.is_file()):
        raise OutputError(f"{target} is {_what(target)} where the output has a file: remove it, or give another "
                          "--out (nothing was written)")


def _what(path: Path) -> str:
    if path.is_symlink():
        return "a symbolic link"
    if path.is_dir() or path.is_file():
        return "a folder" if path.is_dir() else "a file"
    return "something else (a FIFO, a device or a socket)"


def _make_folders(dest: Path, folder: Path) -> list[Path]:
    """Make ``folder`` (under ``dest``) and the folders above it that are missing; those made, outermost first."""
    missing = [f for f in [folder, *folder.parents] if f == dest or dest in f.parents][::-1]
    missing = [f for f in missing if not os.path.lexists(f)]
    for f in missing:
        f.mkdir()
    return missing


def _keep(target: Path, former: Path) -> None:
    """A second name for ``target`` (a copy where the file system has no hard links): the file stays in place
    until it is replaced, and can be put back."""
    try:
        os.link(target, former, follow_symlinks=False)
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        shutil.copy2(target, former, follow_symlinks=False)


def _roll_back(undo: list[tuple[Path, Path | None]], made: list[Path]) -> None:
    """Put back what ``publish`` replaced, and remove the folders it made."""
    for target, former in reversed(undo):
        with contextlib.suppress(OSError):
            if former is not None:
                os.replace(former, target)
            else:
                os.unlink(target)
    _remove_empty(made[::-1])


def render(frame: pd.DataFrame, fmt: str) -> str:
    """A table as CSV (csv_text) or markdown text (markdown)."""
    return csv_text(frame) if fmt == "csv" else markdown(frame)


def neutral(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula (it begins with = + - @, a tab or a carriage
    return, and is not a number) behind a ' (OWASP's CSV injection advice); anything else as it is."""
    if isinstance(value, str) and value.startswith(("=", "+", "-", "@", "\t", "\r")):
        try:
            float(value)
        except ValueError:
            return "'" + value
    return value


def csv_text(frame: pd.DataFrame) -> str:
    """A table as CSV, every text cell and column name neutral (values and extra columns from a results folder
    never become formulas)."""
    text = frame.select_dtypes(include=["object", "string"]).columns
    if len(text):
        frame = frame.copy()
        frame[text] = frame[text].map(neutral)
    return frame.rename(columns=neutral).to_csv(index=False)


def markdown(frame: pd.DataFrame, **options: object) -> str:
    """A table as markdown, each text cell's HTML special characters (&, <, >) escaped, so that no cell becomes
    markup where the markdown is rendered, its '|' escaped and line breaks made spaces (a value from a results
    folder must not split a row or a column)."""
    def safe(value: object) -> object:
        if not isinstance(value, str):
            return value
        return html.escape(value, quote=False).replace("|", "\\|").replace("\r", " ").replace("\n", " ")

    return frame.map(safe).rename(columns=safe).to_markdown(index=False, **options) + "\n"


def write_table(frame: pd.DataFrame, fmt: str, out: str | None, footer: str = "") -> None:
    """Print the table, or write it atomically to ``out``."""
    text = render(frame, fmt) + (f"\n{footer}\n" if footer and fmt == "markdown" else "")
    if out:
        check_replace(out, text.split("\n", 1)[0])
        write_atomic(out, text)
    else:
        print(text, end="")
