"""`strassenbench pick`: for one GPU and one m x k x n product, the implementations ranked by predicted time, with
measured points of that GPU in place of predictions where a result folder holds them (strassenbench.model.pick)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ..gemm import DTYPES
from ..io import write_table
from ..limits import MAX_DIMENSION
from ..model.gpus import SPECS
from ..model.pick import PICK_SCHEMES, measured_points, rank
from ..model.terms import DEFAULT_MODEL, MODELS
from . import types
from .checks import UsageError
from .model import gpu_spec, resources_of

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pick", help="the implementations of one shape on one GPU, fastest first (a prediction, "
                                    "measured where data/<gpu>/ has the point)")
    p.add_argument("--gpu", choices=[*SPECS, "device"], required=True)
    for dim in ("m", "n", "k"):
        p.add_argument(f"--{dim}", type=types.integer(1, MAX_DIMENSION), required=True,
                       help=f"problem dimension {dim}")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--top", type=types.integer(1), default=10, help="how many to list (default 10)")
    p.add_argument("--data", metavar="FOLDER", help="the result folders' parent (default data, when it exists): "
                   "the folders that measured this GPU give measured times")
    p.add_argument("--resources", metavar="FILE", help="kernel resources for occupancy (default "
                   "build/resources.csv when it exists, else the register formula)")
    p.add_argument("--model", type=types.any_case(list(MODELS)), choices=list(MODELS), default=DEFAULT_MODEL,
                   help=f"the model of the predictions (default {DEFAULT_MODEL}; l2: global traffic through the L2 "
                        "in place of the paper's T_gmop, docs/pick.md)")
    p.add_argument("--scheme", type=types.any_case(list(PICK_SCHEMES)), choices=list(PICK_SCHEMES),
                   default="sequential", help="how the fused products run, as `bench --scheme` (default sequential: "
                   "one after another, as the paper's model; atomic: concurrent launches share the GPU, docs/pick.md)")
    p.add_argument("--format", choices=("csv", "markdown"), default="markdown")
    p.add_argument("--out", metavar="FILE", help="write the table (atomically) instead of standard output")
    p.set_defaults(func=run)


def _folders(data: str | None) -> list[Path]:
    root = Path(data or "data")
    if not root.is_dir():
        if data is not None:
            raise UsageError(f"--data {data}: no such folder")
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())


def run(args: argparse.Namespace) -> int:
    spec = gpu_spec(args.gpu)
    measured = measured_points(_folders(args.data), spec)
    ranked = rank(spec, args.m, args.k, args.n, args.dtype, resources_of(args.resources), measured,
                  model=args.model, scheme=args.scheme)
    cublas = next(c for c in ranked if c.impl == "cublas")
    frame = pd.DataFrame([c.row(args.m, args.k, args.n, args.dtype, cublas.seconds) for c in ranked[: args.top]])
    frame.insert(0, "rank", range(1, len(frame) + 1))
    frame["time_s"] = frame["time_s"].map(lambda t: f"{t:.4g}")
    for column, digits in (("tflops", 1), ("speedup_vs_cublas", 3)):
        frame[column] = frame[column].round(digits)
    frame["error_bound"] = frame["error_bound"].map(lambda e: f"{e:.2e}")
    sources = {c.source for c in ranked}
    by = f"{args.model}, scheme {args.scheme}"
    what = (f"model predictions ({by})" if sources == {"model"} else
            f"model predictions ({by}), and {len(sources - {'model'})} measured file(s) where they have the point")
    footer = (f"{spec.name}, {args.m} x {args.k} x {args.n} (m x k x n), {args.dtype}: {len(ranked)} candidates, "
              f"{what}. cuBLAS and CUTLASS are predicted as the model's GEMM"
              f"{' (cuBLAS DGEMM as the DMMA GEMM: FP64 tensor cores)' if args.dtype == 'float64' and spec.fp64_tensor_flops > 0 else ''}"
              "; error bounds for inputs uniform on [0, 1) (docs/pick.md).")
    write_table(frame, args.format, args.out, footer)
    if args.format == "csv" or args.out:  # a markdown table on the terminal has it as its footer
        print(footer, file=sys.stderr)
    return 0
