"""How far from 1 a ratio of median times must lie before `compare` calls it a difference: the noise floor, and
the ratio's interval where a point has no samples.

The floor is learned from the runs themselves where a results folder holds the same point measured twice: two
bench tables of one GPU's folder with a row of the same point (samples.KEY), run the same way (timing, strategy,
scheme) by the same code (commit, and source stamp where the rows have one), and not a copy of one row (the same
times and sample count), e.g. algorithms.csv and square.csv of data/nvidia-h100-80gb-hbm3. It is the 95th
percentile of those repeats' |ln ratio| (as a fraction, e^q - 1), so that two runs of one GPU and one commit
differ by less than the floor at 95% of points. Where no folder compared holds a repeated point, the floor is a
stated default (`compare --noise-floor`, 2%).

A point without samples on both sides gets its interval from the rows: each median's relative standard error
sqrt(pi/2) * time_rel_stdev / sqrt(samples) (the median of normal samples; one sample where the count is
missing), the two combined on a log scale, at the normal quantile of the confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd

from ..results import KINDS, ResultsError, bad_times, read_results
from ..samples import KEY
from .analysis import ok_rows

__all__ = ["DEFAULT_FLOOR", "CONFIDENCE", "Floor", "repeat_ratios", "learn_floor", "row_interval"]

DEFAULT_FLOOR = 0.02
CONFIDENCE = 0.95
# What makes two rows the same point measured twice: the point, how it was timed and run, and the code that ran.
REPEAT_KEY = (*KEY, "timing", "strategy", "scheme", "commit", "source")
# A row with the same point and these numbers as another is a copy of it, not the point measured again.
COPY_CHECK = ("time_min_s", "time_median_s", "time_mean_s", "time_rel_stdev", "samples")


@dataclass(frozen=True)
class Floor:
    """The floor a comparison used: its value (a fraction), the repeated points it was learned from (0: the
    default), and the folders that hold them."""

    value: float
    repeats: int = 0
    folders: tuple[str, ...] = ()

    @property
    def origin(self) -> str:
        """Where the floor came from, in a few words (compare.csv's ``noise_floor_from``)."""
        return f"{self.repeats} repeated points" if self.repeats else "default (--noise-floor)"

    @property
    def sentence(self) -> str:
        """The floor and where it came from, for the page, compare.md and the command's summary."""
        if not self.repeats:
            return (f"noise floor {self.value:.2%}: the default (--noise-floor), as no folder compared holds a "
                    "point measured twice")
        return (f"noise floor {self.value:.2%}: learned from {self.repeats} points measured twice in one folder "
                f"({', '.join(self.folders)}), the 95th percentile of the two measurements' |ln ratio|")


def _bench_tables(folder: Path) -> list[pd.DataFrame]:
    """Every bench table of ``folder`` (its CSVs whose header is a bench results header), each checked
    (results.read_results); a CSV that is not a results file says nothing, as in results.folder_devices."""
    frames = []
    for path in sorted(folder.glob("*.csv")):
        try:
            frame = read_results(path)
        except ResultsError:
            continue
        if set(KINDS["bench"].required) <= set(frame.columns):
            frames.append(frame)
    return frames


def repeat_ratios(folder: Path) -> pd.Series:
    """time / time of the point's first row, for every later row of a point ``folder`` measured more than
    once (REPEAT_KEY; rows with status ok and a time above 0 only)."""
    frames = _bench_tables(folder)
    rows = ok_rows(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame()
    if rows.empty:
        return pd.Series(dtype=float)
    rows = rows[~bad_times(rows["time_median_s"], positive=True).to_numpy()]
    keys = rows.reindex(columns=list(REPEAT_KEY)).astype(object).fillna("").astype(str)
    copied = keys.assign(**{c: rows[c] for c in COPY_CHECK if c in rows}).duplicated().to_numpy()
    rows, keys = rows[~copied], keys[~copied]  # a row copied into another table is no second measurement
    groups = rows.groupby([keys[c] for c in REPEAT_KEY], sort=False)["time_median_s"]
    later = groups.cumcount() > 0
    return (rows["time_median_s"] / groups.transform("first"))[later].astype(float)


def learn_floor(folders: list[Path], default: float = DEFAULT_FLOOR) -> Floor:
    """The noise floor of a comparison of ``folders``: learned from their repeated points where there are any
    (the 95th percentile of |ln ratio|, as e^q - 1), else ``default``."""
    found = {str(folder): repeat_ratios(folder) for folder in folders}
    ratios = np.concatenate([r.to_numpy() for r in found.values()])
    if not len(ratios):
        return Floor(default)
    value = float(np.expm1(np.quantile(np.abs(np.log(ratios)), CONFIDENCE)))
    return Floor(value, len(ratios), tuple(name for name, r in found.items() if len(r)))


def row_interval(ratio: float, rel_base: float, count_base: float, rel_other: float, count_other: float,
                 confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The interval of ``ratio`` (median time of the other run / median time of the baseline) from the rows'
    relative standard deviations and sample counts (see the module docstring); NaN where a row has no spread."""
    counts = np.array([count_base, count_other], dtype=float)
    counts = np.where(np.isfinite(counts) & (counts >= 1), counts, 1.0)
    errors = math.sqrt(math.pi / 2) * np.array([rel_base, rel_other], dtype=float) / np.sqrt(counts)
    half = NormalDist().inv_cdf(0.5 + confidence / 2) * float(np.hypot(*errors))
    return ratio * math.exp(-half), ratio * math.exp(half)
