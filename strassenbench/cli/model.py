"""`strassenbench model`: the paper's performance model (predictions, not measurements): `predict`, `bounds`,
`crossover`, and the tables the report reads: `spec`, `speedup`, `occupancy` and `issue-bounds`."""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from ..gemm import DTYPES
from ..io import write_table
from ..model.bounds import bounds_rows
from ..model.gpus import SPECS, GPUSpec, get_gpu
from ..model.perf import MODELED_IMPLS, load_resources
from ..model.pick import PICK_SCHEMES
from ..model.validate import AS_RUN
from ..model.predict import crossover, predict
from ..model.terms import DEFAULT_MODEL, MODELS
from ..options import SCHEMES
from ..strategies import STRATEGIES
from ..sweeps import PAPER_SIZES, SWEEPS, parse_sizes
from . import types
from .checks import UsageError

__all__ = ["add_parser", "run", "DEFAULT_RESOURCES", "gpu_spec", "resources_of"]

DEFAULT_RESOURCES = "build/resources.csv"


def add_parser(sub: argparse._SubParsersAction) -> None:
    model = sub.add_parser("model", help="the paper's performance model (predictions, not measurements)")
    msub = model.add_subparsers(dest="model_command", required=True, metavar="MODEL_COMMAND")
    gpus = [*SPECS, "device"]
    resources_help = (f"kernel resources for occupancy (default {DEFAULT_RESOURCES} when it exists, else the "
                      "register formula)")
    _predict_parser(msub, gpus, resources_help)
    _tables_parser(msub, gpus, resources_help)
    _validate_parser(msub, gpus, resources_help)
    p = msub.add_parser("bounds", help="blocking-parameter bounds (paper, Sec. s:blocking_choose)")
    p.add_argument("--gpu", choices=gpus, required=True)
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")

    p = msub.add_parser("winners", help="pick's first per size and precision mode on the three sweeps, per GPU "
                                        "model (the report's winners figure and table)")
    p.add_argument("--gpu", choices=gpus, action="append", required=True, help="repeat for several GPUs")
    p.add_argument("--sweep", choices=sorted(SWEEPS), action="append", help="repeat; default all three")
    p.add_argument("--sizes", type=types.sizes, default=parse_sizes("1024:20480:1024"))
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--scheme", type=types.any_case(list(PICK_SCHEMES)), choices=list(PICK_SCHEMES),
                   default="sequential", help="how the fused candidates' products run, as `pick --scheme`")
    p.add_argument("--resources", metavar="FILE", help=resources_help)
    p.add_argument("--out", metavar="FILE", help="write the CSV (atomically) instead of standard output")

    p = msub.add_parser("crossover", help="predicted size where 1-level Strassen (or another fused "
                                          "implementation) overtakes GEMM, per GPU")
    p.add_argument("--gpu", choices=gpus, action="append", required=True, help="repeat for several GPUs")
    p.add_argument("--impl", type=types.modeled_impls, default=["strassen1"],
                   help="comma-separated fused implementations, e.g. strassen1,grey322-11-50x1")
    p.add_argument("--sweep", choices=sorted(SWEEPS), default="square")
    p.add_argument("--sizes", type=types.sizes, default=parse_sizes("256:20480:256"))
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    model.set_defaults(func=run)


def _predict_parser(msub: argparse._SubParsersAction, gpus: list[str], resources_help: str) -> None:
    p = msub.add_parser("predict", help="predicted time and effective TFLOPS per implementation and size")
    p.add_argument("--gpu", choices=gpus, required=True)
    p.add_argument("--impl", type=types.modeled_impls, default=list(MODELED_IMPLS),
                   help="comma-separated implementations")
    p.add_argument("--sweep", choices=sorted(SWEEPS), default="square")
    p.add_argument("--sizes", type=types.sizes, default=parse_sizes(PAPER_SIZES),
                   help="e.g. 1024,2048 or 512:20480:512")
    p.add_argument("--strategy", type=types.any_case(["best", *STRATEGIES]), choices=["best", *STRATEGIES],
                   action="append", help="repeat for several (rows of each); default best, per point")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--model", type=types.any_case(list(MODELS)), choices=list(MODELS), action="append",
                   help=f"repeat for several (rows of each): {DEFAULT_MODEL} (default: the paper's model with the "
                        "main loop's issue slots), paper (the paper's model alone, Sec. s:analysis) or l2 (issue, "
                        "with global traffic through the L2 in place of T_gmop)")
    p.add_argument("--scheme", type=types.any_case(list(SCHEMES)), choices=list(SCHEMES), action="append",
                   help="repeat for several (rows of each): how the fused products run (paper, Sec. s:task): "
                        "sequential (default: one after another, as the paper's model), streams or atomic")
    p.add_argument("--resources", metavar="FILE", help=resources_help)
    p.add_argument("--out", metavar="FILE", help="write the CSV (atomically) instead of standard output")


def _validate_parser(msub: argparse._SubParsersAction, gpus: list[str], resources_help: str) -> None:
    p = msub.add_parser("validate", help="the model against a GPU's measured sweeps: predicted / measured time "
                                         "and the error in the speedup over GEMM, per implementation")
    p.add_argument("results", nargs="+", type=types.input_name, metavar="CSV",
                   help="bench's result files of one GPU (data/<gpu>/square.csv ...)")
    p.add_argument("--gpu", choices=gpus, required=True, help="the model GPU the results were measured on")
    p.add_argument("--model", type=types.any_case(list(MODELS)), choices=list(MODELS), action="append",
                   help=f"repeat for several (default {DEFAULT_MODEL})")
    p.add_argument("--scheme", type=types.any_case([AS_RUN, *SCHEMES]), choices=[AS_RUN, *SCHEMES],
                   action="append", help=f"repeat for several (default {AS_RUN}: each point's own, and sequential)")
    p.add_argument("--resources", metavar="FILE", help=resources_help)
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE", help="write the table (atomically) instead of standard output")


def _tables_parser(msub: argparse._SubParsersAction, gpus: list[str], resources_help: str) -> None:
    """model spec, speedup, occupancy and issue-bounds: the model's tables the report reads."""
    p = msub.add_parser("spec", help="the model's GPU parameters (tau_flop, tau_gmop, tau_smop, TF32 peak, tau_l2)")
    p.add_argument("--gpu", choices=gpus, action="append", required=True, help="repeat for several GPUs")
    p = msub.add_parser("speedup", help="where each implementation of `model predict`'s CSVs overtakes the GEMM, "
                                        "per sweep, and its largest speedup")
    p.add_argument("predictions", nargs="+", type=types.input_name, metavar="CSV", help="model predict's output "
                   "(one strategy per point: the default best)")
    p = msub.add_parser("occupancy", help="active blocks per SM of the paper's footnote kernels on every "
                                          "architecture (the build's, else the register formula)")
    p.add_argument("--resources", metavar="FILE", help=resources_help)
    p = msub.add_parser("issue-bounds", help="per GPU model, Strassen's speedup over the GEMM by the paper's "
                                             "model and by issue slots (Huge, float32)")
    p.add_argument("--resources", metavar="FILE", help=resources_help)
    p.add_argument("--size", type=types.integer(1), default=20480, metavar="N", help="m = k = n (default 20480)")
    for name in ("spec", "speedup", "occupancy", "issue-bounds"):
        p = msub.choices[name]
        p.add_argument("--format", choices=("csv", "markdown"), default="csv")
        p.add_argument("--out", metavar="FILE", help="write the table (atomically) instead of standard output")


def run(args: argparse.Namespace) -> int:
    commands = {"predict": _predict, "bounds": _bounds, "crossover": _crossover, "winners": _winners,
                "validate": _validate}
    return commands.get(args.model_command, _tables)(args)


def gpu_spec(name: str) -> GPUSpec:
    """A built-in GPU spec, or the visible device's; one line and exit 2 without one."""
    try:
        return get_gpu(name)
    except (ValueError, RuntimeError) as err:
        raise UsageError(str(err)) from None


def resources_of(path: str | None) -> pd.DataFrame | None:
    """--resources FILE (required to exist when given), else build/resources.csv where it exists."""
    return load_resources(path or DEFAULT_RESOURCES, required=path is not None)


def _resources(args: argparse.Namespace) -> pd.DataFrame | None:
    return resources_of(args.resources)


def check_runs(spec: GPUSpec, impls: list[str], dtype: str) -> list[str]:
    """The named implementations that run in ``dtype`` on ``spec``'s GPU (its tensor cores, where their math
    needs them); the others are left out with a note, and when none is left, UsageError naming the first's
    reason: never an infinite time in a table."""
    from ..impls import ImplError, get_impl

    kept, reasons = [], []
    for name in impls:
        try:
            impl = get_impl(name)
        except ImplError:
            kept.append(name)  # an unknown name is predict's own one-line error
            continue
        if dtype not in impl.dtypes:
            reasons.append(f"{name} runs in {' and '.join(impl.dtypes)}, not {dtype}: give --dtype {impl.dtypes[0]}")
        elif impl.tensor and not spec.tau_tensor(impl.mode):
            kind = impl.family.hardware
            reasons.append(f"{name} needs {kind}, which the {spec.name} ({spec.arch}) does not have")
        else:
            kept.append(name)
    if not kept:
        raise UsageError(reasons[0])
    for reason in reasons:
        print(f"strassenbench: left out: {reason}", file=sys.stderr)
    return kept


def _predict(args: argparse.Namespace) -> int:
    spec = gpu_spec(args.gpu)
    impls = check_runs(spec, list(args.impl), args.dtype)
    resources = _resources(args)
    frame = pd.concat([predict(spec, impls, args.sweep, args.sizes, strategy, args.dtype, resources,
                               model, scheme)
                       for model in dict.fromkeys(args.model or [DEFAULT_MODEL])
                       for scheme in dict.fromkeys(args.scheme or ["sequential"])
                       for strategy in dict.fromkeys(args.strategy or ["best"])], ignore_index=True)
    write_table(frame, "csv", args.out)
    if args.out:
        print(f"predicted {len(frame)} points for {spec.name} (model, not a measurement) -> {args.out}",
              file=sys.stderr)
    return 0


def _winners(args: argparse.Namespace) -> int:
    from ..model.pick import winner_rows

    from tqdm import tqdm

    from ..limits import MAX_WINNER_POINTS

    gpus, sweeps = list(dict.fromkeys(args.gpu)), list(dict.fromkeys(args.sweep or SWEEPS))
    points = len(gpus) * len(sweeps) * len(args.sizes)
    if points > MAX_WINNER_POINTS:
        raise UsageError(f"{len(gpus)} GPU(s) x {len(sweeps)} sweep(s) x {len(args.sizes):,} sizes = {points:,} "
                         f"rankings, above the limit of {MAX_WINNER_POINTS} (each ranks every candidate): give "
                         "fewer --sizes")
    resources = _resources(args)
    specs = {name: gpu_spec(name) for name in gpus}
    rows = []
    with tqdm(total=points, unit="size", desc="winners", file=sys.stderr, disable=None) as bar:
        for name in gpus:
            for sweep in sweeps:
                for size in args.sizes:
                    rows += winner_rows(specs[name], name, sweep, [size], args.dtype, resources, args.scheme)
                    bar.update()
    write_table(pd.DataFrame(rows), "csv", args.out)
    if args.out:
        print(f"{len(rows)} winners (model, not a measurement) -> {args.out}", file=sys.stderr)
    return 0


def _tables(args: argparse.Namespace) -> int:
    """model spec, occupancy, issue-bounds and speedup: the model's tables the report reads (model.spec_tables)."""
    from ..model import spec_tables as tables
    from ..model.files import PREDICTIONS, read_model

    if args.model_command == "spec":
        for name in args.gpu:
            gpu_spec(name)  # the visible device's, where named: one line without one
        frame = tables.spec_rows(args.gpu)
    elif args.model_command == "speedup":
        frame = tables.speedup_rows(pd.concat([read_model(p, PREDICTIONS) for p in args.predictions]))
    elif args.model_command == "occupancy":
        frame = tables.occupancy_rows(_resources(args))
    else:
        frame = tables.issue_bound_rows(_resources(args), args.size)
    write_table(frame, args.format, args.out)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from ..limits import MAX_VALIDATE_ROWS
    from ..model.validate import validation_rows
    from ..results import read_results

    files = [read_results(path, "bench").assign(where=lambda f, p=path: [f"{p}: line {i + 2}" for i in range(len(f))])
             for path in args.results]
    measured = pd.concat(files, ignore_index=True)
    if len(measured) > MAX_VALIDATE_ROWS:
        raise UsageError(f"{len(measured):,} measured rows, above the limit of {MAX_VALIDATE_ROWS:,} one validation "
                         "predicts (a GPU's sweeps hold a few hundred): give fewer files")
    models = list(dict.fromkeys(args.model or [DEFAULT_MODEL]))
    schemes = list(dict.fromkeys(args.scheme or [AS_RUN, "sequential"]))
    frame = validation_rows(gpu_spec(args.gpu), measured, models, schemes, _resources(args),
                            None if args.gpu == "device" else args.gpu)
    frame = frame.round({"median_ratio": 3, "min_ratio": 3, "max_ratio": 3, "speedup_error": 3})
    if args.format == "markdown":  # no speedup error (the GEMMs, or no GEMM at the points): a blank cell
        frame["speedup_error"] = frame["speedup_error"].map(lambda e: "" if pd.isna(e) else e)
    write_table(frame, args.format, args.out)
    left = f"; {frame.attrs['left_out']} timed rows left out (no formula: cuBLAS, CUTLASS, auto)" \
        if frame.attrs["left_out"] else ""
    print(f"{len(frame)} rows: the model for {args.gpu} against {len(measured)} measured rows{left}"
          + (f" -> {args.out}" if args.out else ""), file=sys.stderr)
    return 0


def _bounds(args: argparse.Namespace) -> int:
    write_table(pd.DataFrame(bounds_rows(gpu_spec(args.gpu), args.dtype)), args.format, args.out)
    return 0


def _crossover(args: argparse.Namespace) -> int:
    rows = []
    for name in args.gpu:
        spec = gpu_spec(name)
        for impl in check_runs(spec, list(args.impl), args.dtype):
            frame = predict(spec, ["gemm", impl], args.sweep, args.sizes, "best", args.dtype, None)
            rows.append({"gpu": spec.name, "source": "model", "sweep": args.sweep, **crossover(frame, impl, "gemm")})
    write_table(pd.DataFrame(rows).astype({"first": "Int64", "stable": "Int64"}), args.format, args.out)
    return 0
