"""Every timed sample of a sweep, kept beside its CSV: ``<name>.samples.jsonl``, one JSON line per point.

A line holds the point's key (sweep, impl, m, n, k, dtype, strategy_request, scheme_request), how it was
timed (strassenbench.bench.timers: graph, events or host) and its samples as [seconds, SM clock in MHz or
null, throttle reasons (NVML's bit mask), kept, power in W or null]; a file written before the reasons' mask
and the power holds [seconds, clock, a slowing reason set (true/false), kept], read as it is. The bench appends a point's line before it rewrites the CSV, so a point in
the CSV always has its samples; a point measured again (a resumed sweep) appends a new line, and the last line
of a key wins. A last line cut short by an interruption is skipped, and a resumed sweep first drops it and the
lines of points its CSV does not list (``keep_samples``); a line whose row could not be written (a full disk) is
taken back (``take_back``).

`compare` uses them to test a difference statistically (median_ratio_interval), and `collect` carries them
from the sweep's parts to data/.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .io import OutputError, check_replace, publish, staging, write_atomic, write_error
from .readers import MAX_SAMPLES_BYTES, check_depth, read_text
from .results import MAX_PLAUSIBLE_TIME, ResultsError

__all__ = ["KEY", "samples_path", "append_samples", "read_samples", "collect_samples", "median_ratio_interval",
           "check_samples_file", "keep_samples", "take_back", "SAMPLES_HEAD", "checked_samples", "check_samples"]

KEY = ("sweep", "impl", "m", "n", "k", "dtype", "strategy_request", "scheme_request")
SAMPLES_HEAD = f'{{"{KEY[0]}":'  # how every samples file begins (strassenbench.io.signature: its kind)


def samples_path(csv: str | os.PathLike[str]) -> Path:
    """The samples file beside a results CSV: square.csv -> square.samples.jsonl."""
    csv = Path(csv)
    return csv.with_name(f"{csv.stem}.samples.jsonl")


def _key(row: dict) -> tuple:
    return tuple(str(row.get(name, "")) for name in KEY)


def append_samples(path: Path, row: dict, timing: str, records: Sequence[tuple]) -> int:
    """Append one point's line (flushed to disk before the CSV that lists the point is rewritten), never
    through a symbolic link; the file's size before it, for ``take_back``. OutputError naming the file when the
    line cannot be written whole (a full disk), and the file is as it was."""
    line = {**{name: row.get(name, "") for name in KEY}, "timing": timing,
            "samples": [[float(t), clock, int(reasons), bool(kept), power]
                        for t, clock, reasons, kept, power in records]}
    data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as err:
        raise write_error(path, err) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OutputError(f"{path} is not a regular file: remove it, or give another --out")
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise write_error(path, err) from None
    finally:
        os.close(fd)
    return size


def take_back(path: Path, size: int) -> None:
    """Cut the samples file back to ``size`` bytes: the line of a point whose row could not be written."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)


def check_samples_file(path: Path) -> None:
    """OutputError unless ``path`` is absent or a samples file (not a link, a folder or another kind of file):
    checked before a sweep measures anything."""
    if path.is_symlink():
        raise OutputError(f"{path} is a symbolic link: a samples file is written only where it is (remove it)")
    check_replace(path, SAMPLES_HEAD)


def keep_samples(path: Path, keys: set[tuple]) -> None:
    """Before a sweep resumes: drop a last line cut short and the lines of points the CSV does not list (a run
    stopped between a point's samples and its row), so that every line has its row and new lines start on a
    line of their own. ``keys``: the rows' KEY values as text."""
    if not path.is_file():
        return
    lines = read_samples(path, allow_cut=True)
    kept = {key: line for key, line in lines.items() if key in keys}
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        cut = size > 0 and handle.seek(size - 1) >= 0 and handle.read(1) != b"\n"
    if len(kept) != len(lines) or cut:
        write_atomic(path, "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in kept.values()))


def read_samples(path: str | os.PathLike[str], allow_cut: bool = False) -> dict[tuple, dict]:
    """The last line of every key in ``path`` ({} when there is no such file). A broken line, a time that is
    not a finite non-negative number, or a last line cut short (no newline after it) is refused (ResultsError
    naming the line); ``allow_cut`` skips a cut last line (the file a running sweep appends to)."""
    path = Path(path)
    if not os.path.lexists(path):
        return {}
    # a regular file (never a FIFO or a device) of at most MAX_SAMPLES_BYTES; each line's nesting bounded
    lines = read_text(path, limit=MAX_SAMPLES_BYTES, what="a samples file", error=ResultsError).split("\n")
    out: dict[tuple, dict] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        check_depth(text, f"{path}: line {number}", ResultsError)
        try:
            line = json.loads(text)
            line["samples"] = [_sample(record) for record in line["samples"]]
            _key(line)
        except (ValueError, KeyError, TypeError):
            if number == len(lines) and allow_cut:
                continue
            cut = " (cut short: no newline after it)" if number == len(lines) else ""
            raise ResultsError(f"{path}: line {number} is not a samples record{cut}") from None
        if number == len(lines) and not allow_cut:
            raise ResultsError(f"{path}: line {number} was cut short (no newline after it)")
        bad = next((t for t, *_ in line["samples"] if not (math.isfinite(t) and 0 <= t <= MAX_PLAUSIBLE_TIME)), None)
        if bad is not None:
            raise ResultsError(f"{path}: line {number} has a sample time of {bad}: times are finite, >= 0 and at "
                               f"most {MAX_PLAUSIBLE_TIME:,.0f} s")
        out[_key(line)] = line
    return out


def _sample(record: list) -> list:
    """One sample as written ([t, clock, reasons, kept, power]), or as an older file wrote it ([t, clock,
    throttled, kept]: the flag kept as a bool); ValueError or TypeError for anything else."""
    if not isinstance(record, list) or not record or isinstance(record[0], bool):  # JSON's true is no time
        raise TypeError("a sample is a list that begins with its time")
    if len(record) == 4:
        t, clock, flag, kept = record
        return [float(t), clock, bool(flag), bool(kept)]
    t, clock, reasons, kept, power = record
    if isinstance(reasons, bool) or not isinstance(reasons, int) or not 0 <= reasons < 2**64:
        raise ValueError("throttle reasons are a bit mask")
    return [float(t), clock, reasons, bool(kept), None if power is None else float(power)]


def merge_samples(inputs: Iterable[str | os.PathLike[str]]) -> dict[tuple, dict]:
    """The samples of every input CSV that has them, each file checked (read_samples)."""
    merged: dict[tuple, dict] = {}
    for csv in inputs:
        merged.update(read_samples(samples_path(csv)))
    return merged


def checked_samples(inputs: Sequence[str | os.PathLike[str]], frames: Sequence[pd.DataFrame]) -> dict[tuple, dict]:
    """The samples of every input CSV that has them (read_samples), each file checked against the rows of its
    own CSV (``frames``: check_samples), a table collected before included."""
    merged: dict[tuple, dict] = {}
    for csv, frame in zip(inputs, frames):
        lines = read_samples(samples_path(csv))
        check_samples(samples_path(csv), frame, lines)
        merged.update(lines)
    return merged


def check_samples(path: Path, frame: pd.DataFrame, lines: dict[tuple, dict]) -> None:
    """ResultsError naming the samples file and the point unless every line of it is of a row of its CSV
    (``frame``): the same key, the same timing, and as many kept samples as the row's ``samples`` count. A table
    without the request columns (written before them) has them blank, as the bench writes its lines."""
    rows = {tuple(str(r.get(k, "")) for k in KEY): r for r in frame.to_dict("records")} if lines else {}
    for key, line in lines.items():
        row, point = rows.get(key), ", ".join(map(str, key))
        timing = str(row.get("timing", "")) if row is not None else ""
        if row is None or (timing and str(line.get("timing", "")) not in ("", timing)):
            raise ResultsError(f"{path}: samples of a point its rows do not measure ({point}): samples and rows "
                               "must come from the same run")
        count = pd.to_numeric(pd.Series([row.get("samples")]), errors="coerce").iloc[0]
        if count == count and int(count) != len(kept_times(line)):
            raise ResultsError(f"{path}: {len(kept_times(line))} samples of the point {point}, and its row counts "
                               f"{int(count)}: samples and rows must come from the same run")


def collect_samples(inputs: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str],
                    merged: dict[tuple, dict] | None = None, table: str | None = None) -> int:
    """The samples of every input CSV that has them (or ``merged``, read before any file was written), into
    the samples file of ``out``, published together with ``table`` (the text of ``out``, when given): both or
    neither (strassenbench.io.publish); how many points."""
    merged = merge_samples(inputs) if merged is None else merged
    out = Path(out)
    target = samples_path(out)
    check_samples_file(target)
    with staging(out, out.parent) as stage:
        if table is not None:
            write_atomic(stage / out.name, table)
        if merged:
            write_atomic(stage / target.name,
                         "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in merged.values()))
        publish(stage, out.parent, remove=[] if merged else [target])
    return len(merged)


def kept_times(line: dict) -> np.ndarray:
    return np.array([s[0] for s in line["samples"] if s[3]] or [s[0] for s in line["samples"]])


def median_ratio_interval(base: np.ndarray, other: np.ndarray, *, confidence: float = 0.95,
                          resamples: int = 1000, seed: int = 0) -> tuple[float, float, float]:
    """median(other) / median(base) and its bootstrap percentile interval: both sample sets resampled with
    replacement ``resamples`` times (a fixed seed, so a comparison is reproducible)."""
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(len(base), len(other), 1))  # bound the resampling matrices' memory
    for start in range(0, resamples, chunk):
        count = min(chunk, resamples - start)
        b = np.median(base[rng.integers(0, len(base), (count, len(base)))], axis=1)
        o = np.median(other[rng.integers(0, len(other), (count, len(other)))], axis=1)
        ratios[start:start + count] = o / b
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(other) / np.median(base)), float(low), float(high)
