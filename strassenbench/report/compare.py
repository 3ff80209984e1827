"""`strassenbench compare`: results of several GPUs side by side.

Each folder after the first is compared with the first point by point (same sweep, implementation, shape,
dtype): ratio = median time / median time(first). Each point names the commit each run measured it with
(``commit_base``, ``commit_other``): where they differ, the ratio holds the code's changes as well as the GPUs'.

Where both runs kept their samples (``<sweep>.samples.jsonl``, strassenbench.samples), the difference is
tested statistically: the ratio of medians gets a 95% bootstrap interval (both sample sets resampled), and the
verdict is FAST or SLOW only when the whole interval lies below or above 1 by more than the runs' larger
relative standard deviation, SAME otherwise (``method`` bootstrap): thousands of samples make a difference of
0.05% significant, but not one worth a verdict when each run's own times spread by 0.5%. Without samples, the verdict is FAST or SLOW only when |ratio - 1| is larger than both runs'
relative standard deviations, as nvbench's compare does (``method`` noise).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..io import markdown, publish, staging, write_atomic
from ..results import ResultsError, bad_times, timing_modes
from ..samples import kept_times, median_ratio_interval, read_samples, samples_path
from .analysis import left_out, ok_rows
from .inputs import gpu_name, load_run
from .figures import fig_compare
from .render import Table, render, table_of

__all__ = ["compare_runs", "verdict", "interval_verdict"]

KEYS = ["sweep", "impl", "m", "n", "k", "dtype"]
SWEEP_FILES = ("square", "rankk", "panel")


def verdict(ratio: float, noise_a: float, noise_b: float) -> str:
    noise = max(noise_a, noise_b)
    if abs(ratio - 1.0) <= noise:
        return "SAME"
    return "FAST" if ratio < 1.0 else "SLOW"


def interval_verdict(low: float, high: float, spread: float = 0.0) -> str:
    """FAST when the ratio's whole interval lies below 1 - spread, SLOW when above 1 + spread, SAME otherwise."""
    if high < 1.0 - spread:
        return "FAST"
    return "SLOW" if low > 1.0 + spread else "SAME"


def _samples(folder: Path) -> dict[tuple, object]:
    """The kept sample times of a run's sweeps by (sweep, impl, m, n, k, dtype); a time that is not positive is
    refused (ResultsError), as the ratios divide by them."""
    out: dict[tuple, object] = {}
    for name in SWEEP_FILES:
        path = samples_path(folder / f"{name}.csv")
        for line in read_samples(path).values():
            key = (line["sweep"], line["impl"], int(line["m"]), int(line["n"]), int(line["k"]), line["dtype"])
            times = kept_times(line)
            if bad_times(times, positive=True).any():
                raise ResultsError(f"{path}: {_point(key)} has a sample time of {min(times)}: compared times are "
                                   "finite and above 0")
            out[key] = times
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
    parts = [(name, left_out(run["sweeps"])) for name, run, _ in runs]
    return [(name, table_of(out)) for name, out in parts if not out.empty]


def _page(runs: list, table: pd.DataFrame, folders: list[Path]) -> str:
    """index.html from its template, every value (run and folder names, cells) escaped."""
    summary = table.groupby(["other", "verdict"]).size().unstack(fill_value=0) if not table.empty else None
    return render("compare.html.j2", runs=len(runs), baseline=runs[0][0],
                  summary=None if summary is None else table_of(summary.reset_index()), left_out=_left_out(runs),
                  points=None if table.empty else table_of(table, lambda v: f"{v:.4g}"),
                  sources=json.dumps([str(f) for f in folders]))


def _name(folder: Path, run: dict) -> str:
    return f"{gpu_name(run['system'], run['sweeps']) or folder.name} ({folder.name})"


def compare_runs(folders: list[Path], out: Path) -> pd.DataFrame:
    if len(folders) < 2:
        raise ValueError("compare needs at least two result folders")
    runs = []
    for folder in folders:
        if not folder.is_dir():
            raise ValueError(f"not a folder: {folder}")
        run = load_run(folder)
        if run["sweeps"].empty:
            raise ValueError(f"no sweep results (square.csv, rankk.csv, panel.csv) in {folder}")
        _check_times(folder, run["sweeps"])
        runs.append((_name(folder, run), run, _samples(folder)))
    base_name, base, base_samples = runs[0]
    base_modes = timing_modes(base["sweeps"])
    for name, run, _ in runs[1:]:
        modes = timing_modes(run["sweeps"])
        if base_modes and modes and modes != base_modes:
            raise ValueError(f"{name} was timed by {', '.join(sorted(modes))} and {base_name} by "
                             f"{', '.join(sorted(base_modes))}: times of different methods are not compared")
    columns = [*KEYS, "time_median_s", "time_rel_stdev", "commit"]
    base_frame = ok_rows(base["sweeps"])[columns]
    rows = []
    for name, run, samples in runs[1:]:
        other = ok_rows(run["sweeps"])[columns]
        joined = base_frame.merge(other, on=KEYS, suffixes=("_base", "_other"))
        for r in joined.itertuples(index=False):
            key = tuple(getattr(r, k) for k in KEYS)
            ratio = r.time_median_s_other / r.time_median_s_base
            low = high = float("nan")
            if key in base_samples and key in samples:
                ratio, low, high = median_ratio_interval(base_samples[key], samples[key])
                spread = max(r.time_rel_stdev_base, r.time_rel_stdev_other)
                method, judged = "bootstrap", interval_verdict(low, high, spread)
            else:
                method, judged = "noise", verdict(ratio, r.time_rel_stdev_base, r.time_rel_stdev_other)
            rows.append({"baseline": base_name, "other": name, **{k: getattr(r, k) for k in KEYS},
                         "time_base_s": r.time_median_s_base, "time_other_s": r.time_median_s_other,
                         "ratio": ratio, "ratio_low": low, "ratio_high": high, "method": method,
                         "noise_base": r.time_rel_stdev_base, "noise_other": r.time_rel_stdev_other,
                         "verdict": judged, "commit_base": r.commit_base, "commit_other": r.commit_other})
    table = pd.DataFrame(rows)
    with staging(out) as stage:  # made beside out, then published all or nothing (strassenbench.io.publish)
        write_atomic(stage / "compare.csv", table.to_csv(index=False))
        write_atomic(stage / "compare.md", markdown(table) if not table.empty else "_no common points_\n")
        fig_compare({name: run["sweeps"] for name, run, _ in runs}, stage)
        write_atomic(stage / "index.html", _page(runs, table, folders))
        publish(stage, out)
    return table
