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
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .readers import MAX_CELL_BYTES, MAX_TABLE_BYTES, check_schema, read_json, read_text
from .limits import MAX_DIMENSION

__all__ = ["ResultsError", "Kind", "KINDS", "BENCH_COLUMNS", "MEMLIMIT_COLUMNS", "VERIFY_COLUMNS", "ACCURACY_COLUMNS",
           "read_results", "read_system", "bad_times", "collect_rows", "point_columns", "POINT_COLUMNS",
           "kind_of", "timing_modes", "folder_devices", "check_folder_device", "leaves_the_folder", "by_strategy"]

# CUTLASS profiler order: tags, problem, configuration, status, timing, TFLOPS, memory, error, telemetry.
BENCH_COLUMNS = [
    "gpu", "engine", "driver", "cuda", "cublas", "commit", "source",
    "m", "n", "k", "dtype", "alpha", "beta", "seed", "sweep", "x", "order", "order_seed",
    "impl", "label", "strategy", "strategy_times", "scheme", "split_k", "levels",
    "status", "message",
    "time_min_s", "time_median_s", "time_mean_s", "time_rel_stdev", "median_ci_rel", "samples", "converged", "stop",
    "timing", "blocking_timeouts", "host_enqueue_s", "tflops",
    "extra_bytes", "measured_extra_bytes", "memory_check", "nvml_process_bytes",
    "rel_error", "tolerance", "expected_error", "reference", "error_bound",
    "sm_clock_start_mhz", "sm_clock_end_mhz", "mem_clock_start_mhz", "mem_clock_end_mhz", "temperature_c",
    "power_w", "energy_pj_per_flop", "throttle_reasons", "capped_share", "low_clock_discards",
    "sm_clock_median_mhz",
]
# Columns added after the first release: a file written before them is read with them blank.
BENCH_LATER = ("timing", "host_enqueue_s", "sm_clock_median_mhz", "blocking_timeouts", "source", "order",
               "order_seed", "strategy_times", "median_ci_rel", "stop", "tolerance", "expected_error", "reference",
               "energy_pj_per_flop", "capped_share", "low_clock_discards", "split_k")
# Columns renamed since: an older file's name is read as the new one.
RENAMED = {"throttled_samples": "low_clock_discards"}
MEMLIMIT_COLUMNS = ["gpu", "engine", "impl", "label", "dtype", "free_bytes", "step", "predicted_n",
                    "predicted_bytes", "run_at_n", "run_above", "confirmed", "message"]
VERIFY_COLUMNS = ["engine", "algorithm", "levels", "m", "n", "k", "dtype", "alpha", "beta", "seed", "rel_error",
                  "tolerance", "reference", "bound", "status"]
ACCURACY_COLUMNS = ["impl", "label", "mode", "levels", "engine", "inputs", "dtype", "m", "n", "k", "seed", "rel_error",
                    "tolerance", "reference", "bound", "status"]  # strassenbench accuracy (dtype: blank in a file
# that predates it, float32; tolerance and reference: blank in a file that predates the check's tolerance)


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
                   "sm_clock_median_mhz", "blocking_timeouts", "order", "order_seed", "median_ci_rel", "tolerance",
                   "expected_error", "split_k",
                   "energy_pj_per_flop", "capped_share", "low_clock_discards", "x"),
                  ("gpu", "engine", "driver", "cuda", "cublas", "commit", "dtype", "sweep", "impl", "label",
                   "strategy", "scheme", "status", "message", "memory_check", "throttle_reasons",
                   "strategy_request", "scheme_request", "timing", "source", "stop", "reference", "strategy_times"),
                  BENCH_LATER,
                  ("time_min_s", "time_median_s", "time_mean_s", "time_rel_stdev", "host_enqueue_s")),
    "memlimit": Kind("memlimit", tuple(MEMLIMIT_COLUMNS), ("free_bytes",), ("step", "predicted_n", "predicted_bytes"),
                     ("gpu", "engine", "impl", "label", "dtype", "run_at_n", "run_above", "message"),
                     booleans=("confirmed",)),
    "verify": Kind("verify", tuple(VERIFY_COLUMNS), ("m", "n", "k", "seed"),
                   ("alpha", "beta", "rel_error", "tolerance", "bound"),
                   ("impl", "engine", "algorithm", "dtype", "status", "strategy", "scheme", "reference"),
                   ("tolerance", "reference")),
    "accuracy": Kind("accuracy", tuple(ACCURACY_COLUMNS), ("levels", "m", "n", "k", "seed"),
                     ("rel_error", "tolerance", "bound"),
                     ("impl", "label", "mode", "engine", "inputs", "dtype", "status", "reference"),
                     ("dtype", "tolerance", "reference")),
}


def kind_of(header: list[str]) -> Kind | None:
    """The kind whose columns the header holds (bench before verify: a bench row has every verify key but one)."""
    for kind in KINDS.values():
        if set(kind.required) <= set(header):
            return kind
    return None


def _text(path: Path) -> str:
    """The file's text (readers.read_text: a regular UTF-8 file of at most MAX_TABLE_BYTES)."""
    return read_text(path, limit=MAX_TABLE_BYTES, what="a CSV file", error=ResultsError)


def bad_times(values: pd.Series | Sequence[float], *, positive: bool = False) -> pd.Series:
    """True where a duration cannot be right: not a finite number (NaN, inf, blank), negative, or zero where
    ``positive`` (a time something is divided by, as in compare's ratios)."""
    numbers = pd.to_numeric(pd.Series(values), errors="coerce")
    return ~(numbers.abs() < float("inf")) | ((numbers <= 0) if positive else (numbers < 0))


def _rows(path: Path, text: str) -> list[list[str]]:
    """The CSV rows of ``text``, every cell at most MAX_CELL_BYTES (ResultsError naming the line)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = []
    try:
        for row in reader:
            if row and max(map(len, row)) > MAX_CELL_BYTES // 4 and \
                    (size := max(len(cell.encode()) for cell in row)) > MAX_CELL_BYTES:
                raise ResultsError(f"{path}: line {reader.line_num} has a cell of {size:,} bytes, above the limit "
                                   f"of {MAX_CELL_BYTES:,}")
            rows.append(row)
    except csv.Error as err:
        too_long = "field limit" in str(err)
        raise ResultsError(f"{path}: line {reader.line_num} has a cell above the limit of "
                           f"{MAX_CELL_BYTES:,} bytes" if too_long else f"{path}: line {reader.line_num}: not CSV "
                           f"({err})") from None
    return rows


def read_results(path: str | Path, kind: str | Kind | None = None, *,
                 on_cut: Callable[[int], None] | None = None) -> pd.DataFrame:
    """The rows of a result file, checked (see the module docstring). ``kind`` ('bench', 'memlimit', 'verify'),
    a Kind of another command's table (strassenbench.model.files), or None: whichever kind the header matches.
    ``on_cut``: a cut last row is dropped instead of refused, and on_cut(its line number) is called."""
    path = Path(path)
    text = _text(path)
    if not text.strip():
        raise ResultsError(f"{path}: empty file (no header)")
    rows = _rows(path, text)
    header = rows[0]
    expected = (KINDS[kind] if isinstance(kind, str) else kind) if kind else kind_of(header)
    if expected is None or not set(expected.required) <= set(header):
        name = getattr(kind, "name", kind)
        what = f"a strassenbench {name} results file" if kind else "a strassenbench results file"
        want = expected.required if expected else KINDS["bench"].required
        missing = next((c for c in want if c not in header), header[0] if header else "")
        raise ResultsError(f"{path}: not {what} (line 1 has no column {missing!r})")
    if len(set(header)) != len(header):
        raise ResultsError(f"{path}: line 1 names a column twice")
    header = [RENAMED.get(c, c) if RENAMED.get(c) not in header else c for c in header]
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
            value = frame[column][bad].iloc[0]
            shown = repr(value) if isinstance(value, str) else str(value)
            raise ResultsError(f"{path}: line {line}: column {column!r} is not {what}: {shown}")

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
                refuse(column, (frame[column].str.strip() != "") & bad_times(parsed), "a finite non-negative time")
            elif column not in ERROR_MEASURES:  # no count, rate or clock is infinite
                refuse(column, parsed.abs() == float("inf"), "a finite number")
            frame[column] = parsed
        elif not not_number.any():  # other columns: numbers where every value is one (blanks missing), as pandas
            frame[column] = parsed
    _check_plausible(frame, expected, refuse)
    for column in expected.later:
        if column not in frame:
            frame[column] = float("nan") if column in expected.numbers else ""
    return frame


def _check_plausible(frame: pd.DataFrame, expected: Kind, refuse: Callable[[str, pd.Series, str], None]) -> None:
    """What no run writes, refused by read_results (``refuse``: the column, where it is bad, what it must be):
    sides past MAX_DIMENSION, times below MIN_PLAUSIBLE_TIME, names that leave the working folder or are not
    of NAME_GRAMMAR."""
    for column in (c for c in ("m", "n", "k") if c in frame and c in expected.integers):
        refuse(column, (frame[column] < 1) | (frame[column] > MAX_DIMENSION), f"a side of 1 to {MAX_DIMENSION:,}")
    if "x" in frame and "x" in expected.numbers:  # a sweep's size where it has one (a custom sweep's is blank)
        x = frame["x"]
        refuse("x", x.notna() & ((x % 1 != 0) | (x < 1) | (x > MAX_DIMENSION)), f"a size of 1 to {MAX_DIMENSION:,}")
    for column in (c for c in MEASURED_TIMES if c in frame):  # blank for a failed point; else a plausible time
        times = frame[column]
        refuse(column, (times < MIN_PLAUSIBLE_TIME) | (times > MAX_PLAUSIBLE_TIME), f"a time of at least "
               f"{MIN_PLAUSIBLE_TIME:g} s (the timers' resolution) and at most {MAX_PLAUSIBLE_TIME:,.0f} s (a day)")
    for column in (c for c in NAMED_CODE if c in frame):  # names the package may read a coefficient file by
        refuse(column, frame[column].map(leaves_the_folder), "a name inside the working folder")
    for column, (pattern, what) in ((c, g) for c, g in NAME_GRAMMAR.items() if c in frame):
        refuse(column, ~frame[column].map(lambda v, p=pattern: not v or p.fullmatch(v) is not None), what)


# Numbers that measure an error, which a failed point may give as infinite; every other number is finite.
ERROR_MEASURES = ("rel_error", "error_bound", "expected_error", "tolerance", "bound")
# Columns whose values the package looks up as implementations or algorithms, which may name a coefficient
# file's path (strassenbench.algebra.algorithm.get_algorithm): a results folder from another machine must not
# make it open a file outside the working folder.
NAMED_CODE = ("impl", "algorithm")
# A measured time below a tenth of a microsecond is no measurement: CUDA events resolve about half a microsecond
# and no kernel launch, graph replay or NumPy call takes less; nor is one call of more than a day.
MIN_PLAUSIBLE_TIME, MAX_PLAUSIBLE_TIME = 1e-7, 86_400.0
MEASURED_TIMES = ("time_min_s", "time_median_s", "time_mean_s")


# The names the project itself makes, which a value read from data must match (or be blank): no markup, no
# spreadsheet formula, no quote or shell character ever comes from a results folder. An implementation or
# algorithm: strassen2-direct, perminov-3x3x3-23x1, a mixed spec a+b, a coefficient file's relative path; a GPU
# as NVML or CUDA names it (NVIDIA H100 80GB HBM3, Tesla V100-SXM2-16GB) or cpu. (pattern, what it is)
_NAME = (re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:/-]{0,199}"),
         "a name of letters, digits and . _ + : / - (starting with a letter or digit)")
NAME_GRAMMAR = {
    "impl": _NAME,
    "algorithm": _NAME,
    "gpu": (re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._()+/@:-]{0,99}"),
            "a GPU name of letters, digits, spaces and . _ ( ) + / @ : - (starting with a letter or digit)"),
}


def leaves_the_folder(value: object) -> bool:
    """Whether a name, read as a path (each part of a mixed spec `a+b`), leaves the working folder: absolute,
    from a home folder or a drive, or with a '..' part."""
    for piece in str(value).strip().split("+"):
        parts = piece.replace("\\", "/").split("/")
        if piece.startswith(("/", "\\", "~")) or (len(piece) > 1 and piece[1] == ":") or ".." in parts:
            return True
    return False


def timing_modes(frame: pd.DataFrame) -> set[str]:
    """How the measured rows of bench results were timed (strassenbench.bench.timers: blocking, graph, host, or
    an older file's events); rows without a time (failed points, files before the column) say nothing."""
    if frame is None or frame.empty or "timing" not in frame:
        return set()
    return {str(t) for t in frame["timing"] if str(t) not in ("", "nan")}


def read_system(path: str | Path) -> dict | None:
    """A run's system.json (readers.read_json: bounded in size and nesting), checked against the package's
    schema (schemas/system.schema.json, derived from what bench and sysinfo write): a malformed one is one line
    naming the key (ResultsError); None without the file."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    system = read_json(path, what="a system description", error=ResultsError)
    check_schema(system, "system", str(path), "a system description", ResultsError)
    gpu, (pattern, what) = (system.get("gpu") or {}).get("gpu"), NAME_GRAMMAR["gpu"]  # an object: the schema's
    if isinstance(gpu, str) and gpu and not pattern.fullmatch(gpu):
        raise ResultsError(f"{path}: gpu.gpu is not {what}: {gpu[:80]!r}")
    arch = (system.get("model_spec") or {}).get("arch")
    if arch is not None:
        from .occupancy import ARCHS

        if arch not in ARCHS:
            raise ResultsError(f"{path}: key 'model_spec.arch' is {arch!r}, not one of {', '.join(ARCHS)}")
    return system


def _system_device(path: Path) -> str | None:
    """The device a system.json describes: its GPU's name, 'cpu' for a CPU run; None without the file."""
    system = read_system(path)
    if system is None:
        return None
    gpu = system["gpu"].get("gpu")
    return str(gpu) if gpu else "cpu"


# The files of a results folder the package reads (tables, samples, system.json).
READ_SUFFIXES = (".csv", ".jsonl", ".json")


def check_no_links(folder: str | Path) -> None:
    """A results folder holds the files the package reads themselves: a symbolic link among them (which a folder
    from another machine may carry, to a file anywhere or to nothing) is refused, so that no file outside the
    folder is read through one and no dangling link hides a sweep."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return  # no such folder, or not one: each reader names what is wrong with the file it wants
    for entry in entries:
        if entry.name.endswith(READ_SUFFIXES) and entry.is_symlink():
            raise ResultsError(f"{Path(folder) / entry.name}: a symbolic link; a results folder holds its files "
                               "themselves (a link could read a file outside it)")


def folder_devices(folder: str | Path) -> dict[str, str]:
    """Every device a results folder speaks of, with the file that names it: system.json's, and the ``gpu``
    column of its CSVs (a CSV that is not a results file says nothing, nor does a link: report and compare refuse
    one, check_no_links)."""
    folder = Path(folder)
    found: dict[str, str] = {}
    system = _system_device(folder / "system.json")
    if system is not None:
        found.setdefault(system, "system.json")
    for path in sorted(p for p in folder.glob("*.csv") if not p.is_symlink()):
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


# The columns that name a point (what one job measures) of each kind: a collected table holds each point once.
# bench: the sweep's key (samples.KEY), or the strategy and scheme run where a table predates the request
# columns; verify: every column but its results (the options a check was given are columns of their own).
POINT_COLUMNS = {
    "bench": ("sweep", "impl", "m", "n", "k", "dtype", "strategy_request", "scheme_request"),
    "memlimit": ("engine", "impl", "dtype"),
    "accuracy": ("impl", "mode", "levels", "engine", "inputs", "m", "n", "k", "seed"),
}
VERIFY_RESULTS = ("rel_error", "tolerance", "reference", "bound", "status")


def point_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of ``frame`` (a result table of one kind) that name its points (POINT_COLUMNS)."""
    kind = kind_of(list(frame.columns))
    if kind is None or kind.name not in POINT_COLUMNS:
        return [c for c in frame.columns if c not in VERIFY_RESULTS]
    named = (c if c in frame else c.removesuffix("_request") for c in POINT_COLUMNS[kind.name])
    return [c for c in named if c in frame]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def collect_rows(inputs: Sequence[str | Path]) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """The rows of ``collect``'s inputs joined, and each input's own rows (read_results). ResultsError, one line
    naming the files, for a file given twice, inputs of other kinds or timing methods, rows of two devices (the
    ``gpu`` column), or one point in two rows (within an input or across them)."""
    paths = [Path(p) for p in inputs]
    for i, path in enumerate(paths):
        if any(_same_file(path, other) for other in paths[:i]):
            raise ResultsError(f"{path} is given twice: its rows would be counted twice")
    frames = [read_results(path) for path in paths]  # each checked; a broken one names itself
    first = list(frames[0].columns)
    for path, frame in zip(paths, frames):
        if set(frame.columns) != set(first):
            raise ResultsError(f"{path} has other columns than {paths[0]}; collect joins files of one kind")
    joined = pd.concat([f[first] for f in frames], ignore_index=True)
    if len(modes := timing_modes(joined)) > 1:
        raise ResultsError(f"the inputs were timed by different methods ({', '.join(sorted(modes))}): one sweep "
                           "is timed alike")
    where = pd.DataFrame({"file": [str(p) for p, f in zip(paths, frames) for _ in range(len(f))],
                          "row": [i + 1 for f in frames for i in range(len(f))]})
    _check_one_device(joined, where)
    _check_points_once(joined, where)
    return joined, frames


def _check_one_device(joined: pd.DataFrame, where: pd.DataFrame) -> None:
    if "gpu" not in joined:
        return
    devices = where.assign(gpu=joined["gpu"].astype(str).str.strip()).query("gpu != ''").drop_duplicates("gpu")
    if len(devices) > 1:
        (a, file_a), (b, file_b) = devices[["gpu", "file"]].head(2).itertuples(index=False)
        raise ResultsError(f"the inputs hold rows of two devices, {a} ({file_a}) and {b} ({file_b}): a collected "
                           "table is of one device (one device per folder)")


def _check_points_once(joined: pd.DataFrame, where: pd.DataFrame) -> None:
    columns = point_columns(joined)
    keys = joined[columns].astype(str)
    twice = keys.duplicated(keep=False)
    if not twice.any():
        return
    first = keys[twice].iloc[0]
    rows = where[(keys == first).all(axis=1)].head(2)
    at = " and ".join(f"row {r.row} of {r.file}" for r in rows.itertuples())
    point = ", ".join(f"{c}={v}" for c, v in first.items())
    raise ResultsError(f"the point {point} is given twice ({at}): a collected table holds each point once")


# The columns of a point's kept strategy that the other strategies it timed have no value for (by_strategy).
_KEPT_ONLY = ("time_min_s", "time_mean_s", "time_rel_stdev", "median_ci_rel", "samples", "converged", "stop",
              "low_clock_discards", "capped_share", "power_w", "energy_pj_per_flop", "sm_clock_median_mhz")


def by_strategy(frame: pd.DataFrame) -> pd.DataFrame:
    """Bench rows one per strategy each point timed (its ``strategy_times``, ``--strategy best``): the median
    time and TFLOPS of each, ``best`` True on the strategy the row kept (whose other statistics stay; the others'
    are blank), ``strategy_request`` the strategy itself. A row that timed one strategy is itself, best."""
    rows = []
    for row in frame.to_dict("records"):
        times = str(row.get("strategy_times", "") or "").split()
        if not times or str(row.get("status")) != "ok":
            rows.append({**row, "best": True})
            continue
        for item in times:
            name, _, seconds = item.partition("=")
            t = float(seconds)
            if not name or not t > 0:
                raise ResultsError(f"strategy_times of {row['impl']} {row['m']}x{row['n']}x{row['k']} holds {item!r}")
            kept = name == row["strategy"]
            rows.append({**row, **({} if kept else dict.fromkeys(_KEPT_ONLY, "")), "strategy": name,
                         "strategy_request": name, "time_median_s": t,
                         "tflops": 2.0 * row["m"] * row["n"] * row["k"] / t / 1e12, "best": kept})
    return pd.DataFrame(rows, columns=[*frame.columns, "best"])
