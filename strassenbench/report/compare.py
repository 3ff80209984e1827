"""`strassenbench compare`: results of several GPUs side by side.

Each folder after the first is compared with the first, the baseline, point by point (same sweep,
implementation, shape, dtype): ratio = median time of the other run / median time of the baseline, so a ratio
below 1 means the other run is faster. The ratio's 95% interval comes from the samples where both runs kept them
(``<sweep>.samples.jsonl``, strassenbench.samples: both sample sets resampled, a fixed seed; ``method``
bootstrap), else from the rows' relative standard deviations and sample counts (``method`` noise). The verdict is
FAST (the other run is faster) only where the whole interval lies below 1 - floor, SLOW (slower) only where it
lies above 1 + floor, SAME otherwise: thousands of samples make a difference of 0.05% significant, but not one
that a second run of the same GPU and code would repeat. The noise floor is learned from points a folder measured
twice, else a stated default (strassenbench.report.noise); every output says which floor it used and where it
came from.

Beside each ratio: each run's median SM clock (``sm_clock_median_mhz``), its power (``power_w``) and, where a run's
rows have it, the share of samples under a power or thermal cap (``capped_share``, blank for a run without it).
Each point names the code each run measured it with (``commit_*``, and ``source_*``: a hash of the sources that
ran, ``+dirty`` where the tree differed from its commit, blank in older files); ``code`` says whether the two
differ, by the source stamps where both rows have one, else by the commits. Where they differ, the ratio holds
the code's changes as well as the GPUs'.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import csv_text, markdown, publish, staging, write_atomic
from ..results import ResultsError, bad_times, timing_modes
from ..samples import check_samples, kept_times, median_ratio_interval, read_samples, samples_path
from .analysis import left_out, ok_rows
from .figures import fig_compare
from .inputs import RunData, gpu_name, load_run
from .noise import DEFAULT_FLOOR, Floor, learn_floor, row_interval
from .render import Table, render, table_of

__all__ = ["compare_runs", "interval_verdict", "code_note", "RATIO"]

KEYS = ["sweep", "impl", "m", "n", "k", "dtype"]
SWEEP_FILES = ("square", "rankk", "panel")
# Beside each ratio, from each run's rows; capped_share only where a run's rows have it (a newer column).
TELEMETRY = ("sm_clock_median_mhz", "power_w", "capped_share")
OPTIONAL = ("capped_share",)
RATIO = ("ratio = median time of the other run / median time of the baseline (the first folder): below 1 the other "
         "run is faster. FAST: the other run is faster beyond the noise floor (the ratio's 95% interval lies wholly "
         "below 1 - floor); SLOW: slower beyond it (wholly above 1 + floor); SAME otherwise.")


def interval_verdict(low: float, high: float, floor: float = 0.0) -> str:
    """FAST when the ratio's whole interval lies below 1 - floor, SLOW when above 1 + floor, SAME otherwise (an
    interval that is not a number among them)."""
    if high < 1.0 - floor:
        return "FAST"
    return "SLOW" if low > 1.0 + floor else "SAME"


def _samples(folder: Path, sweeps: pd.DataFrame) -> dict[tuple, object]:
    """The kept sample times of a run's sweeps by (sweep, impl, m, n, k, dtype), each file checked against its
    sweep's rows (samples.check_samples: no samples of a point the rows do not hold, as many as they count); a
    time that is not positive is refused (ResultsError), as the ratios divide by them."""
    out: dict[tuple, object] = {}
    for name in SWEEP_FILES:
        path = samples_path(folder / f"{name}.csv")
        lines = read_samples(path)
        for line in lines.values():
            times = kept_times(line)
            if bad_times(times, positive=True).any():
                raise ResultsError(f"{path}: {_point(tuple(line[k] for k in KEYS))} has a sample time of "
                                   f"{min(times)}: compared times are finite and above 0")
        check_samples(path, sweeps[sweeps["sweep"] == name] if "sweep" in sweeps else sweeps, lines)
        for line in lines.values():
            key = (line["sweep"], line["impl"], int(line["m"]), int(line["n"]), int(line["k"]), line["dtype"])
            out[key] = kept_times(line)
    return out


def _point(key: tuple) -> str:
    sweep, impl, m, n, k, dtype = key
    return f"the {sweep} point {impl} {m}x{n}x{k} {dtype}"


def _check_times(folder: Path, sweeps: pd.DataFrame) -> None:
    """ResultsError naming the point unless every median time compare would divide by (status ok) is finite
    and above 0 (results.bad_times, the readers' check)."""
    good = ok_rows(sweeps)
    bad = bad_times(good["time_median_s"], positive=True).to_numpy()
    if bad.any():
        r = good[bad].iloc[0]
        raise ResultsError(f"{folder / (str(r['sweep']) + '.csv')}: {_point(tuple(r[k] for k in KEYS))} has a median "
                           f"time of {r['time_median_s']}: compared times are finite and above 0")


def _left_out(runs: list) -> list[tuple[str, Table]]:
    """The points each run has that no comparison uses (a status other than ok: fault, error, ...; samples that
    reached the blocking kernel's timeout), by run."""
    parts = [(name, left_out(run.sweeps)) for name, run, _ in runs]
    return [(name, table_of(out)) for name, out in parts if not out.empty]


def _name(folder: Path, run: RunData) -> str:
    return f"{gpu_name(run.system, run.sweeps) or folder.name} ({folder.name})"


def _load(folders: list[Path]) -> list[tuple[str, dict, dict]]:
    """(name, run, samples) of every folder, checked: a folder with sweeps, times compare can divide by, one
    timing method across the runs (ValueError or ResultsError naming what is wrong)."""
    runs = []
    for folder in folders:
        if not folder.is_dir():
            raise ValueError(f"not a folder: {folder}")
        run = load_run(folder)
        if run.sweeps.empty:
            raise ValueError(f"no sweep results (square.csv, rankk.csv, panel.csv) in {folder}")
        _check_times(folder, run.sweeps)
        runs.append((_name(folder, run), run, _samples(folder, run.sweeps)))
    base_name, base, _ = runs[0]
    base_modes = timing_modes(base.sweeps)
    for name, run, _ in runs[1:]:
        modes = timing_modes(run.sweeps)
        if base_modes and modes and modes != base_modes:
            raise ValueError(f"{name} was timed by {', '.join(sorted(modes))} and {base_name} by "
                             f"{', '.join(sorted(base_modes))}: times of different methods are not compared")
    return runs


def _judge(r: dict, base_samples: dict, samples: dict, floor: float) -> tuple:
    """(ratio, low, high, method, verdict) of one joined point."""
    key = tuple(r[k] for k in KEYS)
    if key in base_samples and key in samples:
        ratio, low, high = median_ratio_interval(base_samples[key], samples[key])
        method = "bootstrap"
    else:
        ratio = r["time_median_s_other"] / r["time_median_s_base"]
        low, high = row_interval(ratio, r["time_rel_stdev_base"], r["samples_base"], r["time_rel_stdev_other"],
                                 r["samples_other"])
        method = "noise"
    return ratio, low, high, method, interval_verdict(low, high, floor)


def _has(frame: pd.DataFrame, column: str) -> bool:
    """Whether any row of ``frame`` has a value in ``column`` (a file from before the column has it blank)."""
    return column in frame and bool(frame[column].astype(object).map(lambda v: str(v).strip() not in ("", "nan")).any())


def _text(values: pd.Series) -> pd.Series:
    """A column of stamps as text, blank where a row has none."""
    return values.astype(object).where(values.notna(), "").astype(str).str.strip()


def _code(joined: pd.DataFrame) -> np.ndarray:
    """Per point: same or other source (both rows stamped), else same or other commit."""
    source_base, source_other = _text(joined["source_base"]), _text(joined["source_other"])
    stamped = (source_base != "") & (source_other != "")
    other_commit = _text(joined["commit_base"]) != _text(joined["commit_other"])
    return np.select([stamped & (source_base != source_other), stamped, other_commit],
                     ["other source", "same source", "other commit"], "same commit")


def _pairs(base: tuple, other: tuple, columns: list[str], floor: Floor) -> pd.DataFrame:
    """The points ``other`` (name, run, samples) shares with the baseline ``base``, each judged."""
    (base_name, base_run, base_samples), (name, run, samples) = base, other
    joined = ok_rows(base_run.sweeps).reindex(columns=columns).merge(
        ok_rows(run.sweeps).reindex(columns=columns), on=KEYS, suffixes=("_base", "_other"))
    judged = pd.DataFrame([_judge(r, base_samples, samples, floor.value) for r in joined.to_dict("records")],
                          columns=["ratio", "ratio_low", "ratio_high", "method", "verdict"], index=joined.index)
    beside = [c for c in columns if c in TELEMETRY] + ["commit", "source"]
    return pd.DataFrame({
        "baseline": base_name, "other": name, **{k: joined[k] for k in KEYS},
        "time_base_s": joined["time_median_s_base"], "time_other_s": joined["time_median_s_other"],
        **{c: judged[c] for c in ("ratio", "ratio_low", "ratio_high", "method")},
        "noise_base": joined["time_rel_stdev_base"], "noise_other": joined["time_rel_stdev_other"],
        "noise_floor": floor.value, "noise_floor_from": floor.origin, "verdict": judged["verdict"],
        **{f"{c}_{side}": joined[f"{c}_{side}"] for c in beside for side in ("base", "other")},
        "code": _code(joined)}, index=joined.index)


def code_note(table: pd.DataFrame) -> str:
    """How many points the two runs measured with different code, and how that was told ('' when none)."""
    counts = table["code"].value_counts() if not table.empty else pd.Series(dtype=int)
    source, commit = int(counts.get("other source", 0)), int(counts.get("other commit", 0))
    if not source + commit:
        return ""
    how = " and ".join(f"{n} by {what}" for n, what in ((source, "their source stamps"),
                                                        (commit, "their commits, where a run has no source stamp"))
                       if n)
    return (f"{source + commit} of {len(table)} points were measured with different code ({how}): their ratios hold "
            "the code's changes as well as the GPUs' (columns code, source_base, source_other, commit_base, "
            "commit_other)")


def _page(runs: list, table: pd.DataFrame, folders: list[Path], floor: Floor) -> str:
    """index.html from its template, every value (run and folder names, cells) escaped."""
    summary = table.groupby(["other", "verdict"]).size().unstack(fill_value=0) if not table.empty else None
    return render("compare.html.j2", runs=len(runs), baseline=runs[0][0], ratio=RATIO, floor=floor.sentence,
                  code=code_note(table),
                  summary=None if summary is None else table_of(summary.reset_index()), left_out=_left_out(runs),
                  points=None if table.empty else table_of(table, lambda v: f"{v:.4g}"),
                  sources=json.dumps([str(f) for f in folders]))


def _markdown(runs: list, table: pd.DataFrame, floor: Floor) -> str:
    """compare.md: the baseline, what the ratio is, the floor, the code note, then the points; every text and
    cell with '|' and HTML's special characters escaped (io.markdown)."""
    note = code_note(table)
    lines = [f"Baseline: {runs[0][0]}.", RATIO, floor.sentence[0].upper() + floor.sentence[1:] + ".",
             note and f"{note}."]
    head = "\n\n".join(html.escape(line, quote=False) for line in lines if line) + "\n\n"
    if table.empty:
        return head + "_no common points_\n"
    cells = table.map(lambda v: ("" if v != v else f"{v:.4g}") if isinstance(v, float) else v)  # NaN: blank
    return head + markdown(cells, disable_numparse=True)


def compare_runs(folders: list[Path], out: Path, noise_floor: float = DEFAULT_FLOOR) -> pd.DataFrame:
    """Compare every folder after the first with the first, write compare.csv, compare.md, the figure and
    index.html into ``out`` (all or nothing), and return the points; ``table.attrs['noise_floor']`` says which
    floor was used and where it came from. ``noise_floor``: the floor where no folder holds a repeated point."""
    if len(folders) < 2:
        raise ValueError("compare needs at least two result folders")
    runs = _load(folders)
    floor = learn_floor(folders, noise_floor)
    telemetry = [c for c in TELEMETRY if c not in OPTIONAL or any(_has(run.sweeps, c) for _, run, _ in runs)]
    columns = [*KEYS, "time_median_s", "time_rel_stdev", "samples", *telemetry, "commit", "source"]
    parts = [_pairs(runs[0], other, columns, floor) for other in runs[1:]]
    table = pd.concat([p for p in parts if not p.empty] or parts[:1], ignore_index=True)
    with staging(out) as stage:  # made beside out, then published all or nothing (strassenbench.io.publish)
        write_atomic(stage / "compare.csv", csv_text(table))
        write_atomic(stage / "compare.md", _markdown(runs, table, floor))
        fig_compare({name: run.sweeps for name, run, _ in runs}, stage)
        write_atomic(stage / "index.html", _page(runs, table, folders, floor))
        publish(stage, out)
    table.attrs["noise_floor"] = floor.sentence
    return table
