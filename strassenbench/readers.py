"""The one checked reader of every file a command is given: coefficient files (``--algorithm``), result tables
(``collect``, ``report``, ``compare``, bench resume), samples files, ``system.json`` and ``--resources``.

A file is read only when it is a regular file: a folder, a named pipe (FIFO), a device such as ``/dev/zero``
or a socket is refused before a byte of it is read, and a FIFO never blocks (it is opened with O_NONBLOCK,
and only after ``os.stat`` said it is a regular file). A name with a component over 255 bytes is refused
before the operating system is asked. Each kind of file has a bound on its size, checked before it is read
and again while reading (a file that grows meanwhile is refused too); CSV cells and JSON nesting are bounded
as well (below the limits at which the csv module and Python's JSON parser fail on their own). Every refusal
is one line naming the file, raised as the caller's own error type.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import numpy as np

from .limits import MAX_PATH_BYTES

__all__ = ["ReadError", "MAX_TABLE_BYTES", "MAX_CELL_BYTES", "MAX_SAMPLES_BYTES", "MAX_JSON_BYTES", "MAX_JSON_DEPTH",
           "MAX_PATH_CHARS", "check_name", "read_bytes", "read_text", "read_json", "json_depth", "check_depth",
           "check_schema"]

MAX_TABLE_BYTES = 256 << 20
"""A result table (CSV): a sweep of the most points (limits.MAX_SWEEP_POINTS, 10,000) takes about 10 MiB, a
collected table of every sweep of a run some tens of MiB; 256 MiB leaves room and still fits in memory."""

MAX_CELL_BYTES = 64 << 10
"""One CSV cell: every writer keeps its cells short (a message is cut to 200 characters); 64 KiB stays below
the csv module's own limit (128 KiB), at which it fails with an error of its own."""

MAX_SAMPLES_BYTES = 1 << 30
"""A samples file (``<name>.samples.jsonl``): a point keeps at most 10,000 samples of some 40 bytes each, and
a sweep's points are usually far fewer; 1 GiB is the most read into memory."""

MAX_JSON_BYTES = 1 << 20
"""A JSON description (``system.json``): a few hundred bytes are written; 1 MiB is far beyond any."""

MAX_JSON_DEPTH = 32
"""Nesting of a JSON document (objects and arrays inside each other): system.json nests 3 deep, a samples line
3; Python's parser fails with a RecursionError near 1,000."""

MAX_PATH_CHARS = 4096
"""A whole path (PATH_MAX of Linux); each of its components may have at most limits.MAX_PATH_BYTES (255)."""


class ReadError(ValueError):
    """A file that is not read: not a regular file, too large, too deeply nested, or not of its kind."""


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_name(path: str | os.PathLike[str], what: str = "file", error: type[Exception] = ReadError) -> Path:
    """``path`` as a Path, unless the operating system cannot take its name: a component over
    limits.MAX_PATH_BYTES bytes, a path over MAX_PATH_CHARS, or a NUL character (``error``, one line)."""
    text = os.fspath(path)
    short = f"{text[:60]}..." if len(text) > 60 else text
    if "\0" in text:
        raise error(f"{what} {short!r}: a name cannot hold a NUL character")
    longest = max((len(part.encode("utf-8", "surrogateescape")) for part in text.split("/")), default=0)
    if longest > MAX_PATH_BYTES:
        raise error(f"{what} {short}: a name in it is too long ({longest:,} bytes, at most {MAX_PATH_BYTES})")
    if len(text.encode("utf-8", "surrogateescape")) > MAX_PATH_CHARS:
        raise error(f"{what} {short}: the path is too long (at most {MAX_PATH_CHARS:,} bytes)")
    return Path(text)


def _refuse_kind(path: Path, mode: int, what: str, error: type[Exception]) -> None:
    if not stat.S_ISREG(mode):
        raise error(f"{path}: is {_kind(mode)}, not {what}" if stat.S_ISDIR(mode) else
                    f"{path}: is {_kind(mode)}, not a regular file: give {what}")


def read_bytes(path: str | os.PathLike[str], *, limit: int, what: str = "a file",
               error: type[Exception] = ReadError) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; anything else is refused (``error``,
    one line naming the file): a missing file, a folder, a FIFO or device (never opened in a way that blocks
    or reads without end), a file over ``limit`` bytes."""
    path = check_name(path, what, error)
    try:
        _refuse_kind(path, os.stat(path).st_mode, what, error)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as err:
        raise error(f"{path}: cannot read it ({err.strerror or err})") from None
    try:
        info = os.fstat(fd)  # the file opened is the one checked (not swapped for a FIFO in between)
        _refuse_kind(path, info.st_mode, what, error)
        if info.st_size > limit:
            raise error(f"{path}: {info.st_size:,} bytes, above the limit of {limit:,} for {what}")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise error(f"{path}: above the limit of {limit:,} bytes for {what} (it grew while being read)")
        return b"".join(chunks)
    except OSError as err:
        raise error(f"{path}: cannot read it ({err.strerror or err})") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], *, limit: int, what: str = "a file",
              error: type[Exception] = ReadError) -> str:
    """The UTF-8 text of ``path`` (read_bytes), a leading byte-order mark dropped (as spreadsheets save a CSV);
    refused when it is binary (a NUL byte) or not UTF-8."""
    data = read_bytes(path, limit=limit, what=what, error=error)
    if b"\0" in data:
        raise error(f"{path}: not {what} (binary data)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise error(f"{path}: not {what} (not UTF-8 text at byte {err.start})") from None


# A JSON string, closed or running to the end of the text (so that no start is tried twice: linear time).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in JSON ``text`` (brackets inside strings do not count), found
    without parsing it: 0 for a plain value, 1 for [1, 2], 2 for {"a": [1]}."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).encode("ascii")
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max(initial=0))


def check_depth(text: str, where: str, error: type[Exception] = ReadError) -> None:
    """``error`` naming ``where`` when ``text`` nests deeper than MAX_JSON_DEPTH (before json parses it: a deep
    document makes Python's parser fail with a RecursionError)."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and (depth := json_depth(text)) > MAX_JSON_DEPTH:
        raise error(f"{where}: JSON nested {depth:,} deep, above the limit of {MAX_JSON_DEPTH}")


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def read_json(path: str | os.PathLike[str], *, what: str, limit: int = MAX_JSON_BYTES,
              error: type[Exception] = ReadError) -> object:
    """The JSON document of ``path`` (read_text), its nesting bounded (check_depth); a document that does not
    parse is one line naming the file, the line and the column."""
    text = read_text(path, limit=limit, what=what, error=error)
    check_depth(text, str(path), error)
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise error(f"{path}: not {what} (JSON: {err.msg} at line {err.lineno}, column {err.colno})") from None
    except (ValueError, RecursionError) as err:
        raise error(f"{path}: not {what} (JSON: {str(err).splitlines()[0][:80]})") from None


_JSON_TYPES = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
               float: "a number", type(None): "null"}


def check_schema(document: object, schema: str, where: str, what: str, error: type[Exception] = ReadError) -> None:
    """``error`` (one line naming ``where`` and the key, e.g. 'gpu.gpu') unless ``document`` is valid against
    the package's JSON schema ``schemas/<schema>.schema.json``; ``what`` names the document (a system
    description)."""
    import jsonschema

    found = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(_schema(schema)).iter_errors(document))
    if found is None:
        return
    path, value = [str(part) for part in found.absolute_path], found.instance
    if found.validator == "required" and isinstance(value, dict):
        missing = next(k for k in found.validator_value if k not in value)
        raise error(f"{where}: key {'.'.join([*path, missing])!r} is missing: not {what}")
    shown = _JSON_TYPES.get(type(value), "a value") if isinstance(value, (dict, list)) else json.dumps(value)[:40]
    if not path:
        raise error(f"{where}: not {what} ({shown}, not a JSON object)" if found.validator == "type" else
                    f"{where}: not {what} ({found.message[:100]})")
    key = ".".join(path)
    if found.validator == "type":
        want = found.validator_value if isinstance(found.validator_value, list) else [found.validator_value]
        raise error(f"{where}: key {key!r} is {shown}, not {' or '.join(want)}")
    if found.validator == "additionalProperties":
        raise error(f"{where}: key {key!r}: {found.message[:120]}")
    raise error(f"{where}: key {key!r} is {shown}: {found.message.split(' is ', 1)[-1][:100]}")


def _schema(name: str) -> dict:
    from importlib import resources

    return json.loads(resources.files(__package__).joinpath("schemas", f"{name}.schema.json").read_text("utf-8"))
