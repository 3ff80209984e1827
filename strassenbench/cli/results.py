"""Commands on results already measured: `strassenbench collect` (one table from the jobs' rows), `report`
(the HTML report) and `compare` (runs side by side)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..io import check_replace, csv_text
from ..model.perf import load_resources
from . import types
from .checks import UsageError, outside_inputs

__all__ = ["add_parser", "run"]

COMPARE = ("Each folder after the first is compared with the first, the baseline, point by point (sweep, "
           "implementation, shape, dtype). ratio = median time of the other run / median time of the baseline: "
           "below 1 the other run is faster. FAST: the other run is faster beyond the noise floor (the ratio's 95% "
           "interval lies wholly below 1 - floor); SLOW: slower beyond it (wholly above 1 + floor); SAME otherwise. "
           "The floor is learned from points a folder measured twice (the 95th percentile of their |ln ratio|), "
           "else it is --noise-floor. Writes compare.csv, compare.md, fig_compare_speedup.png/.pdf and index.html "
           "into --out, all or nothing.")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="the HTML report with every figure and table of the paper")
    p.add_argument("--data", required=True, type=types.input_name, metavar="DIR",
                   help="a run's results, e.g. data/nvidia-h100-80gb-hbm3, and beside them the model's files "
                        "that `strassenbench model` wrote (model_*.csv)")
    p.add_argument("--out", default="report", metavar="DIR")
    p.add_argument("--resources", type=types.input_name, metavar="FILE",
                   help="build/resources.csv for the kernel tables")
    p.set_defaults(func=run)

    p = sub.add_parser("compare", help="results of several GPUs side by side (FAST/SLOW beyond the noise)",
                       description=COMPARE)
    p.add_argument("folders", nargs="+", type=types.input_name, metavar="DIR",
                   help="data/<gpu> folders; the first is the baseline")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--noise-floor", type=types.share, default=0.02, metavar="F",
                   help="the noise floor (a fraction, 0 <= F < 1) where no folder holds a point measured twice "
                        "(default: %(default)s, 2%%); where one does, the floor is learned from those repeats")
    p.set_defaults(func=run)

    p = sub.add_parser("collect", help="concatenate one-row CSVs into one table")
    p.add_argument("inputs", nargs="+", type=types.input_name, metavar="CSV")
    p.add_argument("--out", metavar="FILE", required=True)
    p.add_argument("--by-strategy", action="store_true",
                   help="a row per strategy each point timed (--strategy best), best True on the fastest: "
                        "data/<gpu>/strategies.csv (without the samples: they are the kept strategy's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return {"report": _report, "compare": _compare, "collect": _collect}[args.command](args)


def _report(args: argparse.Namespace) -> int:
    from ..report.page import build_report

    data = Path(args.data)
    if not data.is_dir():
        raise UsageError(f"no results folder {data}")
    outside_inputs(Path(args.out), [data])
    if args.resources:
        load_resources(args.resources, required=True)  # a named file must be a resources table: before any work
    written = build_report(data, Path(args.out), Path(args.resources) if args.resources else None)
    print(f"strassenbench: report in {written[0]} ({len(written) - 1} figures and tables)", file=sys.stderr)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from ..report.compare import code_note, compare_runs

    folders = [Path(f) for f in args.folders]
    same = [f for i, f in enumerate(folders) if any(f.resolve() == g.resolve() for g in folders[:i])]
    if same:
        raise UsageError(f"{same[0]} is given twice: compare sets different runs against each other")
    outside_inputs(Path(args.out), folders)
    try:
        table = compare_runs(folders, Path(args.out), args.noise_floor)
    except ValueError as err:
        raise UsageError(str(err)) from None
    counts = table["verdict"].value_counts().to_dict() if not table.empty else {}
    print(f"strassenbench: {len(table)} points compared {counts}, {table.attrs['noise_floor']} -> "
          f"{Path(args.out) / 'index.html'}", file=sys.stderr)
    if note := code_note(table):
        print(f"strassenbench: warning: {note}", file=sys.stderr)
    return 0


def _collect(args: argparse.Namespace) -> int:
    """Concatenate one-row-per-job CSVs into one table (the workflow's collect step), and their samples files."""
    collect(args.inputs, args.out, args.by_strategy)
    return 0


def collect(inputs: list[str], out: str, by_strategy: bool = False) -> None:
    """`collect`'s work (also `bench --publish`'s): ``inputs``' rows into the table ``out``, and their samples."""
    from ..results import collect_rows
    from ..samples import checked_samples, collect_samples

    # every input checked (kinds, timing, one device, each point once), and every samples file against its own
    # CSV's rows, before anything is written
    joined, frames = collect_rows(inputs)
    merged = checked_samples(inputs, frames)
    if by_strategy:
        from ..results import by_strategy as per_strategy

        joined, merged = per_strategy(joined), {}
    text = csv_text(joined)
    check_replace(out, text.split("\n", 1)[0])
    collect_samples(inputs, out, merged, table=text)  # the table and its samples: both or neither
