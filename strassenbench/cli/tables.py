"""Tables of what the harness knows, computed without running anything: `strassenbench algorithms`,
`variants`, `schedule` and `impls`."""

from __future__ import annotations

import argparse

import pandas as pd

from ..algebra.algorithm import catalogue_rows
from ..algebra.primitives import variants
from ..algebra.schedule import makespan_lower_bound, schedule
from ..gemm import DTYPES
from ..impls import table as impls_table
from ..io import write_table
from ..limits import MAX_LEVELS, MAX_STREAMS
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
                                           "stability factor")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    p.set_defaults(func=run)

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
        p.add_argument(f"--{dim}", type=types.integer(1), help="with --m --n --k: add extra_bytes for that shape")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    commands = {"algorithms": _algorithms, "variants": _variants, "schedule": _schedule, "impls": _impls}
    return commands[args.command](args)


def _algorithms(args: argparse.Namespace) -> int:
    write_table(pd.DataFrame(catalogue_rows()), args.format, args.out)
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
