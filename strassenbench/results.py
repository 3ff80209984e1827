"""One reader for every result file (bench sweeps, memory limits, verification), used by bench resume,
`report`, `collect` and `compare`.

A result file is checked before any of it is used: it must be UTF-8 text, not empty, with a header naming the
columns of one of the kinds below, every row with as many fields as the header, a newline after the last row
(every writer ends its rows with one and writes atomically, so a file without it was cut), and numbers where
numbers belong. A broken file is refused with one line naming the file and the line (ResultsError); only a
bench resume, which re-measures the cut point, reads past a cut last row (``on_cut``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

__all__ = ["ResultsError", "Kind", "KINDS", "BENCH_COLUMNS", "MEMLIMIT_COLUMNS", "VERIFY_COLUMNS", "ACCURACY_COLUMNS",
           "read_results",
           "kind_of", "timing_modes", "folder_devices", "check_folder_device"]

# CUTLASS profiler order: tags, problem, configuration, status, timing, TFLOPS, memory, error, telemetry.
BENCH_COLUMNS = [
    "gpu", "engine", "driver", "cuda", "cublas", "commit",
    "m", "n", "k", "dtype", "alpha", "beta", "seed", "sweep", "x",
    "impl", "label", "strategy", "scheme", "levels",
    "status", "message",
    "time_min_s", "time_median_s", "time_mean_s", "time_rel_stdev", "samples", "converged", "timing",
    "blocking_timeouts", "host_enqueue_s", "tflops",
    "extra_bytes", "measured_extra_bytes", "memory_check", "nvml_process_bytes",
    "rel_error", "error_bound",
    "sm_clock_start_mhz", "sm_clock_end_mhz", "mem_clock_start_mhz", "mem_clock_end_mhz", "temperature_c",
    "power_w", "throttle_reasons", "throttled_samples", "sm_clock_median_mhz",
]
# Columns added after the first release: a file written before them is read with them blank.
BENCH_LATER = ("timing", "host_enqueue_s", "sm_clock_median_mhz", "blocking_timeouts")
MEMLIMIT_COLUMNS = ["gpu", "engine", "impl", "label", "dtype", "free_bytes", "step", "predicted_n",
                    "predicted_bytes", "run_at_n", "run_above", "confirmed", "message"]
VERIFY_COLUMNS = ["engine", "algorithm", "levels", "m", "n", "k", "dtype", "alpha", "beta", "seed", "rel_error",
                  "bound", "status"]
ACCURACY_COLUMNS = ["impl", "label", "mode", "levels", "engine", "inputs", "m", "n", "k", "seed", "rel_error", "bound",
                    "status"]  # strassenbench accuracy


class ResultsError(ValueError):
    """A result file that cannot be trusted: the message names the file (and the line) and what is wrong."""


@dataclass(frozen=True)
class Kind:
    name: str
    columns: tuple[str, ...]  # required; a file may have more (bench: strategy_request, scheme_request)
    integers: tuple[str, ...]  # never blank
    numbers: tuple[str, ...]  # blank allowed (a failed point has no time)
    text: tuple[str, ...]  # read as strings, never as numbers
    later: tuple[str, ...] = ()  # in ``columns`` but not required: blank when a file predates them
    times: tuple[str, ...] = ()  # numbers that are durations: finite and non-negative where given
    booleans: tuple[str, ...] = ()  # True/False (as pandas writes them), read as bool: never as truthy strings

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(c for c in self.columns if c not in self.later)


KINDS = {
    "bench": Kind("bench", tuple(BENCH_COLUMNS), ("m", "n", "k", "seed"),
                  ("alpha", "beta", "time_min_s", "time_median_s", "time_mean_s", "time_rel_stdev", "samples",
                   "tflops", "extra_bytes", "measured_extra_bytes", "rel_error", "error_bound", "host_enqueue_s",
                   "sm_clock_median_mhz", "blocking_timeouts"),
                  ("gpu", "engine", "driver", "cuda", "cublas", "commit", "dtype", "sweep", "impl", "label",
                   "strategy", "scheme", "status", "message", "memory_check", "throttle_reasons",
                   "strategy_request", "scheme_request", "timing"), BENCH_LATER,
                  ("time_min_s", "time_median_s", "time_mean_s", "time_rel_stdev", "host_enqueue_s")),
    "memlimit": Kind("memlimit", tuple(MEMLIMIT_COLUMNS), ("free_bytes",), ("step", "predicted_n", "predicted_bytes"),
                     ("gpu", "engine", "impl", "label", "dtype", "run_at_n", "run_above", "message"),
                     booleans=("confirmed",)),
    "verify": Kind("verify", tuple(VERIFY_COLUMNS), ("m", "n", "k", "seed"), ("alpha", "beta", "rel_error", "bound"),
                   ("impl", "engine", "algorithm", "dtype", "status", "strategy", "scheme")),
    "accuracy": Kind("accuracy", tuple(ACCURACY_COLUMNS), ("levels", "m", "n", "k", "seed"), ("rel_error", "bound"),
                     ("impl", "label", "mode", "engine", "inputs", "status")),
}


def kind_of(header: list[str]) -> Kind | None:
    """The kind whose columns the header holds (bench before verify: a bench row has every verify key but one)."""
    for kind in KINDS.values():
        if set(kind.required) <= set(header):
            return kind
    return None


def _text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ResultsError(f"{path}: is a folder, not a results file") from None
    except OSError as err:
        raise ResultsError(f"{path}: cannot read it ({err.strerror})") from None
    if b"\0" in data:
        raise ResultsError(f"{path}: not a CSV file (binary data)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ResultsError(f"{path}: not a CSV file (not UTF-8 text at byte {err.start})") from None


def read_results(path: str | Path, kind: str | None = None, *,
                 on_cut: Callable[[int], None] | None = None) -> pd.DataFrame:
    """The rows of a result file, checked (see the module docstring). ``kind`` ('bench', 'memlimit', 'verify')
    or None: whichever kind the header matches. ``on_cut``: a cut last row is dropped instead of refused, and
    on_cut(its line number) is called."""
    path = Path(path)
    text = _text(path)
    if not text.strip():
        raise ResultsError(f"{path}: empty file (no header)")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header = rows[0]
    expected = KINDS[kind] if kind else kind_of(header)
    if expected is None or not set(expected.required) <= set(header):
        what = f"a strassenbench {kind} results file" if kind else "a strassenbench results file"
        want = expected.required if expected else KINDS["bench"].required
        missing = next((c for c in want if c not in header), header[0] if header else "")
        raise ResultsError(f"{path}: not {what} (line 1 has no column {missing!r})")
    if len(set(header)) != len(header):
        raise ResultsError(f"{path}: line 1 names a column twice")
    body = rows[1:]
    cut = not text.endswith("\n") or (body and len(body[-1]) < len(header))
    if cut and body:
        if on_cut is None:
            raise ResultsError(f"{path}: line {len(rows)} is cut short (an interrupted write); "
                               "rerun the step that wrote it")
        on_cut(len(rows))
        body = body[:-1]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ResultsError(f"{path}: line {number} has {len(row)} fields, the header {len(header)}")
    frame = pd.DataFrame(body, columns=header, dtype=str)

    def refuse(column: str, bad: pd.Series, what: str) -> None:
        if bad.any():
            line = int(bad.to_numpy().argmax()) + 2
            raise ResultsError(f"{path}: line {line}: column {column!r} is not {what}: {frame[column][bad].iloc[0]!r}")

    for column in (c for c in header if c in expected.booleans):
        words = frame[column].str.strip().str.lower()
        refuse(column, ~words.isin(["true", "false"]), "True or False")
        frame[column] = words == "true"
    for column in (c for c in header if c not in expected.text and c not in expected.booleans):
        parsed = pd.to_numeric(frame[column], errors="coerce")
        not_number = parsed.isna() & (frame[column].str.strip() != "")
        if column in expected.integers:
            refuse(column, parsed.isna() | (parsed % 1 != 0), "an integer")
            frame[column] = parsed.astype("int64")
        elif column in expected.numbers:
            refuse(column, not_number, "a number")
            if column in expected.times:  # a time is finite and non-negative: 'nan', 'inf', -1 cannot be right
                refuse(column, (frame[column].str.strip() != "") & ~(parsed.abs() < float("inf")) | (parsed < 0),
                       "a finite non-negative time")
            frame[column] = parsed
        elif not not_number.any():  # other columns: numbers where every value is one (blanks missing), as pandas
            frame[column] = parsed
    for column in expected.later:
        if column not in frame:
            frame[column] = float("nan") if column in expected.numbers else ""
    return frame


def timing_modes(frame: pd.DataFrame) -> set[str]:
    """How the measured rows of bench results were timed (strassenbench.bench.timing: blocking, graph, host, or
    an older file's events); rows without a time (failed points, files before the column) say nothing."""
    if frame is None or frame.empty or "timing" not in frame:
        return set()
    return {str(t) for t in frame["timing"] if str(t) not in ("", "nan")}


def _system_device(path: Path) -> str | None:
    """The device a system.json describes: its GPU's name, 'cpu' for a CPU run; None without the file."""
    import json

    if not path.is_file():
        return None
    try:
        system = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError, UnicodeDecodeError):
        raise ResultsError(f"{path}: not a system description (JSON)") from None
    gpu = (system.get("gpu") or {}).get("gpu") if isinstance(system, dict) else None
    return str(gpu) if gpu else "cpu"


def folder_devices(folder: str | Path) -> dict[str, str]:
    """Every device a results folder speaks of, with the file that names it: system.json's, and the ``gpu``
    column of its CSVs (a CSV that is not a results file says nothing)."""
    folder = Path(folder)
    found: dict[str, str] = {}
    system = _system_device(folder / "system.json")
    if system is not None:
        found.setdefault(system, "system.json")
    for path in sorted(folder.glob("*.csv")):
        try:
            frame = read_results(path)
        except ResultsError:
            continue
        if "gpu" in frame:
            for name in frame["gpu"].astype(str).unique():
                if name:
                    found.setdefault(name, path.name)
    return found


def check_folder_device(folder: str | Path, device: str) -> None:
    """ResultsError unless every result in ``folder`` is of ``device`` (one device per folder): a run never
    writes or merges its rows into another device's folder."""
    for name, where in folder_devices(folder).items():
        if name != device:
            raise ResultsError(f"{Path(folder) / where} is of {name}, and this run measures {device}: one device per "
                               "folder (give an --out in another folder)")
