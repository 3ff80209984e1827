"""Tables of what the harness knows, computed without running anything: `strassenbench algorithms`,
`variants`, `schedule` and `impls`."""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from ..algebra.algorithm import catalogue_rows
from ..algebra.primitives import variants
from ..algebra.forms import FORMS
from ..algebra.records import FORMATS
from ..algebra.schedule import makespan_lower_bound, schedule
from ..gemm import DTYPES
from ..impls import table as impls_table
from ..io import write_table
from ..limits import MAX_DIMENSION, MAX_LEVELS, MAX_STREAMS
from . import types
from .checks import UsageError

__all__ = ["add_parser", "run", "plan_arguments"]


def plan_arguments(p: argparse.ArgumentParser, fmt: bool = True, levels_required: bool = True) -> None:
    """--levels and --algorithm of a plan; with ``fmt`` --format; and --out."""
    p.add_argument("--levels", type=types.bounded(0, MAX_LEVELS, "7^L products per plan"), required=levels_required,
                   help="levels L (0 = plain GEMM)")
    p.add_argument("--algorithm", type=types.algorithm, default="strassen", metavar="NAME",
                   help="a name of `strassenbench algorithms`, a coefficient file's path, or mixed levels "
                        "A+B (A on top, B inside its blocks; --levels 2)")
    if fmt:
        p.add_argument("--format", choices=("csv", "markdown"), default="csv", help="output format")
    p.add_argument("--out", metavar="FILE", help="write to FILE (atomically) instead of standard output")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("algorithms", help="the fast matrix multiplication algorithms: shape, rank, nonzeros, "
                                           "stability factor; `algorithms import` reads a record collection's file")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    p.set_defaults(func=run, action=None)
    actions = p.add_subparsers(dest="action", metavar="{import}")
    i = actions.add_parser("import", help="a record algorithm from its publisher's format into a coefficient file")
    i.add_argument("path", metavar="PATH", help="an fmm JSON scheme, one file of an SMS triple (_L/_R/_P.sms) or an "
                                              "npz archive of AlphaTensor's")
    i.add_argument("--out", required=True, metavar="FILE.txt|FOLDER",
                   help="the coefficient file (algorithms/NAME.txt); a folder for every key of an npz")
    i.add_argument("--format", choices=FORMATS, help="the input's format, where its name does not say it")
    i.add_argument("--key", metavar="A,B,C", help="npz: the format to import (default: every one, into a folder)")
    i.add_argument("--prefix", help="npz, every key: the files' name before -<a>x<b>x<c>-<rank> (alphatensor)")
    i.add_argument("--form", choices=FORMS, default="mkn",
                   help="the scheme for another order of the sides: knm rotates <m,k,n>, nkm transposes it, ...")
    i.add_argument("--source", help="the header's source (default: the collection that publishes the format)")
    i.add_argument("--licence", help="the header's licence (default: that collection's)")
    i.set_defaults(func=run)

    p = sub.add_parser("variants", help="the variant table (paper, figure tab:perfeq_level2)")
    plan_arguments(p)
    p.set_defaults(func=run)

    p = sub.add_parser("schedule", help="stages and streams (paper, figure tab:gpu_streaming)")
    plan_arguments(p)
    p.add_argument("--streams", type=types.bounded(1, MAX_STREAMS, "one per product of a 2-level plan"), default=2,
                   help="number of CUDA streams S")
    p.set_defaults(func=run)

    p = sub.add_parser("impls", help="the implementations: identifier, label, engines, extra memory")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    for dim in ("m", "n", "k"):
        p.add_argument(f"--{dim}", type=types.integer(1, MAX_DIMENSION),
                       help="with --m --n --k: add extra_bytes for that shape")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    commands = {"algorithms": _algorithms, "variants": _variants, "schedule": _schedule, "impls": _impls}
    return commands[args.command](args)


def _algorithms(args: argparse.Namespace) -> int:
    if args.action == "import":
        return _import(args)
    write_table(pd.DataFrame(catalogue_rows()), args.format, args.out)
    return 0


def _import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..algebra.importer import import_algorithms
    from ..algebra.records import guess_format

    fmt = args.format or guess_format(Path(args.path))
    if fmt is None:
        raise UsageError(f"{args.path}: its name does not say its format (.json, .sms, .npz): give --format")

    def show(item) -> None:  # noqa: ANN001
        print(f"strassenbench: {item.name} {item.algorithm.label}: C {item.convention} in the original, "
              f"Brent-checked -> {item.target}", file=sys.stderr)

    done = import_algorithms(args.path, fmt, args.out, args.key, args.prefix, args.source, args.licence, args.form,
                             show)
    print(f"strassenbench: {len(done)} algorithm{'s' * (len(done) != 1)} imported into {args.out}", file=sys.stderr)
    return 0


def _variants(args: argparse.Namespace) -> int:
    rows = [
        {
            "variant": v.number,
            "W_A": v.W_A,
            "W_B": v.W_B,
            "W_C": v.W_C,
            "count": v.count,
            "products": " ".join(p.name for p in v.products),
        }
        for v in variants(args.algorithm, args.levels)
    ]
    write_table(pd.DataFrame(rows), args.format, args.out)
    return 0


def _schedule(args: argparse.Namespace) -> int:
    sched = schedule(args.algorithm, args.levels, args.streams)
    variant = {p.name: v.number for v in variants(args.algorithm, args.levels) for p in v.products}
    rows = [
        {
            "stage": r["stage"],
            "stream": r["stream"],
            "position": r["position"],
            "product": r["product"].name,
            "variant": variant[r["product"].name],
            "operation": r["product"].describe(),
        }
        for r in sched.rows()
    ]
    footer = (
        f"{len(sched.stages)} stages on {args.streams} streams; makespan {sched.makespan} products "
        f"(lower bound {makespan_lower_bound(args.algorithm, args.levels)}, sequential {len(rows)})"
    )
    write_table(pd.DataFrame(rows), args.format, args.out, footer)
    return 0


def _impls(args: argparse.Namespace) -> int:
    dims = (args.m, args.n, args.k)
    if any(d is not None for d in dims) and not all(d is not None for d in dims):
        raise UsageError("--m, --n and --k go together (they add the extra_bytes column)")
    rows = impls_table(args.m, args.n, args.k, args.dtype)
    write_table(pd.DataFrame(rows), args.format, args.out)
    return 0
