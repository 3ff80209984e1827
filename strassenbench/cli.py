"""The ``strassenbench`` command line.

Bad input (an argument, a shape, a dtype) prints one line on stderr and exits 2, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from . import __version__
from .algebra.algorithm import ALGORITHMS
from .algebra.primitives import variants
from .algebra.schedule import makespan_lower_bound, schedule
from .engines import ENGINES
from .gemm import DTYPES, GemmError
from .io import write_atomic, write_table
from .plan import PlanError
from .verify import verify

EXIT_FAIL = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input found after parsing; reported as one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _integer(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below the minimum {minimum}")
        return value

    parse.__name__ = "integer"
    return parse


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"'{text}' is not finite")
    return value


def _cmd_variants(args: argparse.Namespace) -> int:
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


def _cmd_schedule(args: argparse.Namespace) -> int:
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


def _cmd_verify(args: argparse.Namespace) -> int:
    result = verify(
        engine=args.engine,
        algorithm=args.algorithm,
        levels=args.levels,
        m=args.m,
        n=args.n,
        k=args.k,
        dtype=args.dtype,
        alpha=args.alpha,
        beta=args.beta,
        seed=args.seed,
    )
    print(" ".join(f"{key}={value}" for key, value in result.items()))
    if args.out:
        write_atomic(args.out, pd.DataFrame([result]).to_csv(index=False))
    return 0 if result["status"] == "ok" else EXIT_FAIL


def _cmd_collect(args: argparse.Namespace) -> int:
    """Concatenate one-row-per-job CSVs into one table (the workflow's collect step)."""
    missing = [path for path in args.inputs if not Path(path).is_file()]
    if missing:
        raise UsageError(f"input file not found: {missing[0]}")
    frame = pd.concat((pd.read_csv(path) for path in args.inputs), ignore_index=True)
    write_atomic(args.out, frame.to_csv(index=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="strassenbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    algorithms = sorted(ALGORITHMS)

    def common(p: argparse.ArgumentParser, fmt: bool = True) -> None:
        p.add_argument("--levels", type=_integer(0), required=True, help="Strassen levels L (0 = plain GEMM)")
        p.add_argument("--algorithm", choices=algorithms, default="strassen", help="one-level algorithm")
        if fmt:
            p.add_argument("--format", choices=("csv", "markdown"), default="csv", help="output format")
        p.add_argument("--out", metavar="FILE", help="write to FILE (atomically) instead of standard output")

    p = sub.add_parser("variants", help="the variant table (paper, figure tab:perfeq_level2)")
    common(p)
    p.set_defaults(func=_cmd_variants)

    p = sub.add_parser("schedule", help="stages and streams (paper, figure tab:gpu_streaming)")
    common(p)
    p.add_argument("--streams", type=_integer(1), default=2, help="number of CUDA streams S")
    p.set_defaults(func=_cmd_schedule)

    p = sub.add_parser("verify", help="one multiplication on random inputs against a float64 reference")
    common(p, fmt=False)
    p.add_argument("--engine", choices=sorted(ENGINES), default="numpy", help="engine that runs the plan")
    for dim in ("m", "n", "k"):
        p.add_argument(f"--{dim}", type=_integer(1), required=True, help=f"problem dimension {dim}")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--alpha", type=_finite, default=1.0)
    p.add_argument("--beta", type=_finite, default=0.0)
    p.add_argument("--seed", type=_integer(0), default=0, help="seed of the uniform [-1, 1] inputs")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("collect", help="concatenate one-row CSVs into one table")
    p.add_argument("inputs", nargs="+", metavar="CSV")
    p.add_argument("--out", metavar="FILE", required=True)
    p.set_defaults(func=_cmd_collect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # usage errors, --help and --version: return their status
        return int(stop.code or 0)
    try:
        return args.func(args)
    except (PlanError, GemmError, UsageError) as err:
        print(f"strassenbench: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("strassenbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
