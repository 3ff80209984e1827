"""Every timed sample of a sweep, kept beside its CSV: ``<name>.samples.jsonl``, one JSON line per point.

A line holds the point's key (sweep, impl, m, n, k, dtype, strategy_request, scheme_request), how it was
timed (strassenbench.bench.timing: graph, events or host) and its samples as [seconds, SM clock in MHz or
null, throttle reasons set, kept]. The bench appends a point's line before it rewrites the CSV, so a point in
the CSV always has its samples; a point measured again (a resumed sweep) appends a new line, and the last line
of a key wins. A last line cut short by an interruption is skipped.

`compare` uses them to test a difference statistically (median_ratio_interval), and `collect` carries them
from the sweep's parts to data/.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from .io import write_atomic
from .results import ResultsError

__all__ = ["KEY", "samples_path", "append_samples", "read_samples", "collect_samples", "median_ratio_interval"]

KEY = ("sweep", "impl", "m", "n", "k", "dtype", "strategy_request", "scheme_request")


def samples_path(csv: str | os.PathLike[str]) -> Path:
    """The samples file beside a results CSV: square.csv -> square.samples.jsonl."""
    csv = Path(csv)
    return csv.with_name(f"{csv.stem}.samples.jsonl")


def _key(row: dict) -> tuple:
    return tuple(str(row.get(name, "")) for name in KEY)


def append_samples(path: Path, row: dict, timing: str, records: Sequence[tuple]) -> None:
    """Append one point's line (and flush it to disk before the CSV that lists the point is rewritten)."""
    line = {**{name: row.get(name, "") for name in KEY}, "timing": timing,
            "samples": [[float(t), clock, bool(flag), bool(kept)] for t, clock, flag, kept in records]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line, separators=(",", ":")) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_samples(path: str | os.PathLike[str], allow_cut: bool = False) -> dict[tuple, dict]:
    """The last line of every key in ``path`` ({} when there is no such file). A broken line, a time that is
    not a finite non-negative number, or a last line cut short (no newline after it) is refused (ResultsError
    naming the line); ``allow_cut`` skips a cut last line (the file a running sweep appends to)."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (UnicodeDecodeError, OSError) as err:
        raise ResultsError(f"{path}: not a samples file ({type(err).__name__})") from None
    out: dict[tuple, dict] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
            line["samples"] = [[float(t), c, bool(f), bool(k)] for t, c, f, k in line["samples"]]
            _key(line)
        except (ValueError, KeyError, TypeError):
            if number == len(lines) and allow_cut:
                continue
            cut = " (cut short: no newline after it)" if number == len(lines) else ""
            raise ResultsError(f"{path}: line {number} is not a samples record{cut}") from None
        if number == len(lines) and not allow_cut:
            raise ResultsError(f"{path}: line {number} was cut short (no newline after it)")
        bad = next((t for t, *_ in line["samples"] if not (math.isfinite(t) and t >= 0)), None)
        if bad is not None:
            raise ResultsError(f"{path}: line {number} has a sample time of {bad}: times are finite and >= 0")
        out[_key(line)] = line
    return out


def merge_samples(inputs: Iterable[str | os.PathLike[str]]) -> dict[tuple, dict]:
    """The samples of every input CSV that has them, each file checked (read_samples)."""
    merged: dict[tuple, dict] = {}
    for csv in inputs:
        merged.update(read_samples(samples_path(csv)))
    return merged


def collect_samples(inputs: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str],
                    merged: dict[tuple, dict] | None = None) -> int:
    """The samples of every input CSV that has them (or ``merged``, read before any file was written), into
    the samples file of ``out``; how many points."""
    merged = merge_samples(inputs) if merged is None else merged
    target = samples_path(out)
    if merged:
        write_atomic(target, "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in merged.values()))
    else:
        target.unlink(missing_ok=True)
    return len(merged)


def kept_times(line: dict) -> np.ndarray:
    return np.array([t for t, _, _, kept in line["samples"] if kept] or [t for t, *_ in line["samples"]])


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
