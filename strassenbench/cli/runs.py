"""Commands that run multiplications: `strassenbench verify`, `accuracy`, `bench`, `memlimit` and `sysinfo`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ..bench.timers import GPU_TIMING
from ..engines import ENGINES, FUSED_ENGINES
from ..fused.arch import CudaError
from ..fused.launch import FusedError
from ..gemm import DTYPES
from ..impls import ImplError, get_impl
from ..io import check_replace, csv_text, write_atomic, write_table
from ..limits import MAX_DIMENSION, MAX_STREAMS
from ..options import MAX_SPLIT, SCHEMES, RunOptions
from ..results import check_folder_device
from ..families import ALL_STRATEGIES, FAMILIES
from ..strategies import STRATEGIES
from ..sweeps import SWEEPS, parse_sizes, shape
from ..verify import verify
from . import types
from .checks import EXIT_FAIL, UsageError, check_memory
from .tables import plan_arguments

__all__ = ["add_parser", "run"]

EXPECT_HELP = ("refuse to run unless the GPU measured is this device (its data/<device> folder name, e.g. "
               "nvidia-h100-80gb-hbm3; cpu on numpy)")


def _verify_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="one multiplication on random inputs, checked against the bench's reference "
                                      "(C along random directions in double-double) within its tolerance")
    p.add_argument("--impl", type=types.impl, help="an implementation of `strassenbench impls`, or <algorithm>x<L> "
                                                   "(instead of --levels)")
    plan_arguments(p, fmt=False, levels_required=False)
    p.add_argument("--engine", choices=sorted(ENGINES), default="numpy", help="engine that runs the plan")
    for dim in ("m", "n", "k"):
        p.add_argument(f"--{dim}", type=types.integer(1, MAX_DIMENSION),
                       help=f"problem dimension {dim} (or --shape)")
    p.add_argument("--shape", action="append", type=types.shape, metavar="MxKxN",
                   help="repeat, instead of --m --k --n: one multiplication per shape, each a row of --out")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--alpha", type=types.finite, default=1.0)
    p.add_argument("--beta", type=types.finite, default=0.0)
    p.add_argument("--seed", type=types.integer(0), default=0, help="seed of the uniform [-1, 1] inputs")
    p.add_argument("--strategy", type=types.any_case(list(ALL_STRATEGIES)), choices=list(ALL_STRATEGIES),
                   help="block-size strategy (fused engines; "
                        f"{'; '.join(', '.join(f.strategies) + ' for the ' + f.hardware for f in FAMILIES.values() if f.tensor)})")
    p.add_argument("--scheme", choices=SCHEMES,
                   help="task parallelism (paper, Sec. s:task): sequential, streams, atomic; or splitk, atomic with "
                        "each product's k split in parts (fused engines)")
    p.add_argument("--streams", type=types.bounded(1, MAX_STREAMS, "one per product of a 2-level plan"),
                   help="CUDA streams of the streams/atomic/splitk schemes (2 / 4 / 4)")
    p.add_argument("--split-k", type=types.bounded(1, MAX_SPLIT, "parts of a product's k"),
                   help="the splitk scheme's parts of each product's k (default: the model's fastest for the shape)")
    p.add_argument("--build-dir", default="build", help="where `strassenbench build` put the cubins (cuda)")
    p.set_defaults(func=run)

    p = sub.add_parser("accuracy", help="relative error of implementations (SIMT FP32, 1xTF32, 3xTF32 against "
                                        "the bench's reference; SIMT FP64 and DMMA against an exact product) on "
                                        "uniform and wide-range inputs")
    p.add_argument("--impl", required=True, type=types.impl_list,
                   help="comma-separated implementations (`strassenbench impls`)")
    p.add_argument("--engine", choices=sorted(ENGINES), default="numpy",
                   help="engine of the implementations that have it (the others run on numpy)")
    p.add_argument("--sizes", type=types.sizes, default=[256], help="square sizes, e.g. 256 or 1024,4096")
    p.add_argument("--dtype", choices=DTYPES, action="append",
                   help="repeat; default float32. Each implementation runs in those it computes")
    p.add_argument("--inputs", type=types.inputs, default="uniform,wide", help="input distributions: uniform, wide")
    p.add_argument("--seed", type=types.integer(0), default=0)
    p.add_argument("--build-dir", default="build", help="where `strassenbench build` put the cubins (cuda)")
    p.add_argument("--no-progress", action="store_true", help="no line per measurement on stderr")
    p.add_argument("--out", required=True, help="the table (CSV)")
    p.set_defaults(func=run)


def _bench_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="time implementations over a sweep (behind a blocking kernel on a GPU, "
                                      "host timers on numpy)")
    p.add_argument("--impl", type=types.impl_list, required=True, help="comma-separated, see `strassenbench impls`")
    p.add_argument("--sweep", choices=[*SWEEPS, "custom"], default="square")
    p.add_argument("--sizes", type=types.sizes, default=parse_sizes("1024:4096:1024"), help="e.g. 512:20480:512")
    p.add_argument("--shapes", type=types.shapes, help="--sweep custom: MxNxK[,MxNxK...]")
    p.add_argument("--fixed", type=types.integer(1),
                   help="the sweep's fixed size: k of rankk (4096), m = n of panel (8192)")
    p.add_argument("--strategy", type=types.strategy_request, metavar="{best," + ",".join(STRATEGIES) + "}",
                   help="fused kernels: a strategy, or best (the paper's tuning: the fastest of every strategy up to "
                   "4,096, of the model's top three above); best+Huge+Small times those two always too")
    p.add_argument("--scheme", choices=SCHEMES, help="fused Strassen: task-parallel scheme (default sequential)")
    p.add_argument("--dtype", choices=DTYPES, action="append", help="repeat; default float32")
    p.add_argument("--engine", choices=("cuda", "numpy"), default="numpy")
    p.add_argument("--out", required=True, metavar="FILE.csv", help="results; an existing file is resumed")
    p.add_argument("--publish", metavar="FILE.csv",
                   help="once the sweep is done, also write --out's table and samples to FILE.csv as `collect` "
                   "would (the workflow's part of a job: written only by a run that finished)")
    p.add_argument("--seed", type=types.integer(0), default=0)
    p.add_argument("--order", choices=("shuffle", "fixed"), default="shuffle",
                   help="the implementations' order at each size: shuffled (default; the seed is in each row's "
                   "order_seed, its place in order), so that none always runs right after another's power-capped "
                   "kernels, or as given")
    p.add_argument("--order-seed", type=types.integer(0), help="the shuffle's seed (default: --seed)")
    p.add_argument("--min-samples", type=types.integer(1), default=10)
    p.add_argument("--min-time", type=types.seconds, default=0.5, help="seconds of samples before the noise test")
    p.add_argument("--precision", "--max-noise", dest="precision", type=types.positive, default=0.005,
                   help="stop once the 95%% confidence interval of the median is within this fraction of it (and "
                   "the SM clock has settled), or at --max-time")
    p.add_argument("--max-time", type=types.duration, default=15.0, help="cap per measurement, seconds")
    p.add_argument("--warmup-time", type=types.seconds, default=0.2, help="seconds of warm-up calls (clocks ramp up)")
    p.add_argument("--throttle-threshold", type=types.fraction, default=0.75,
                   help="discard samples below this fraction of the maximum SM clock (nvbench's rule)")
    p.add_argument("--timing", choices=[*GPU_TIMING, "auto"],
                   help="cuda: blocking (nvbench's blocking kernel holds the stream while the call is enqueued), "
                        "graph (every implementation captured into a CUDA graph and replayed) or auto (default: "
                        "blocking unless a call queues more than the 32 operations a GPU holds behind the "
                        "blocking kernel, then graph for every implementation)")
    p.add_argument("--retry-faults", action="store_true",
                   help="measure again the points an earlier run recorded as fault (a sticky CUDA error or a "
                        "worker that died)")
    p.add_argument("--build-dir", default="build")
    p.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    p.add_argument("--expect-device", metavar="NAME", help=EXPECT_HELP)
    p.set_defaults(func=run)


def add_parser(sub: argparse._SubParsersAction) -> None:
    _verify_parser(sub)
    _bench_parser(sub)
    p = sub.add_parser("memlimit", help="largest square n per implementation: predicted, then confirmed by runs")
    p.add_argument("--impl", type=types.impl_list, required=True)
    p.add_argument("--engine", choices=("cuda", "numpy"), default="numpy")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--step", type=types.integer(1), default=512)
    p.add_argument("--memory-budget", type=types.memory_bytes,
                   help="free memory to assume (numpy: required, e.g. 256MiB)")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    p.add_argument("--build-dir", default="build")
    p.add_argument("--expect-device", metavar="NAME", help=EXPECT_HELP)
    p.set_defaults(func=run)

    p = sub.add_parser("sysinfo", help="the system description (pynvml, CUDA, cuBLAS, host) as JSON")
    p.add_argument("--engine", choices=("cuda", "numpy"), default="numpy")
    p.add_argument("--out", metavar="FILE")
    p.add_argument("--expect-device", metavar="NAME", help=EXPECT_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    commands = {"verify": _verify, "accuracy": _accuracy, "bench": _bench, "memlimit": _memlimit,
                "sysinfo": _sysinfo}
    if args.command in ("verify", "accuracy") and args.engine == "cuda":
        _backend("cuda")  # no visible GPU (or a driver older than CuPy's CUDA): one line before any work, as bench
    return commands[args.command](args)


def _fused_options(args: argparse.Namespace) -> RunOptions:
    """--strategy/--scheme/--streams of a --levels plan, which only the fused engines take."""
    given = {"strategy": args.strategy, "scheme": args.scheme, "streams": args.streams, "split_k": args.split_k}
    given = {key: value for key, value in given.items() if value is not None}
    if args.engine not in FUSED_ENGINES:
        if given:
            flag = "--" + next(iter(given)).replace("_", "-")
            raise UsageError(f"{flag} applies to the fused engines ({', '.join(FUSED_ENGINES)}), not {args.engine}")
        return RunOptions()
    return RunOptions(**given, build_dir=args.build_dir)


def _verify_shapes(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    """(m, k, n) of each multiplication: the --shape list, or --m --k --n."""
    given = [args.m, args.k, args.n]
    if args.shape and any(x is not None for x in given):
        raise UsageError("give --shape or --m --k --n, not both")
    if not args.shape and any(x is None for x in given):
        raise UsageError("give --m, --k and --n (or --shape MxKxN)")
    shapes = args.shape or [tuple(given)]
    for m, k, n in shapes:
        check_memory(m, n, k)
    return shapes


def _verify(args: argparse.Namespace) -> int:
    shapes = _verify_shapes(args)
    if (args.levels is None) == (args.impl is None):
        raise UsageError("give exactly one of --levels (a plan on --engine) or --impl (an implementation)")
    if args.impl is not None:
        if args.algorithm != "strassen":
            raise UsageError("--algorithm applies to --levels plans, not to --impl")
        if args.streams is not None:
            raise UsageError("--streams applies to --levels plans; an implementation uses its scheme's streams")
        options = get_impl(args.impl).run_options(args.engine, args.strategy, args.scheme, args.build_dir,
                                                   args.split_k)
    else:
        options = _fused_options(args)
    results = []
    for m, k, n in shapes:
        _check_scalars(args.alpha, args.beta, k, args.dtype)
    for m, k, n in shapes:
        results.append(verify(impl=args.impl, engine=args.engine, algorithm=args.algorithm, levels=args.levels,
                              m=m, n=n, k=k, dtype=args.dtype, alpha=args.alpha, beta=args.beta, seed=args.seed,
                              options=options))
        print(" ".join(f"{key}={value}" for key, value in results[-1].items()))
    if args.out:
        text = csv_text(pd.DataFrame(results))
        check_replace(args.out, text.split("\n", 1)[0])
        write_atomic(args.out, text)
    return 0 if all(r["status"] == "ok" for r in results) else EXIT_FAIL


def _check_scalars(alpha: float, beta: float, k: int, dtype: str) -> None:
    """alpha and beta whose C = alpha A B + beta C fits the dtype: verify's inputs are in [-1, 1), so |A B| <= k and
    |C| < 1; a larger scale overflows to inf, which no check could call right or wrong."""
    import numpy as np

    largest = float(np.finfo(dtype).max) / 2
    for name, value, bound in (("alpha", alpha, largest / k), ("beta", beta, largest)):
        if abs(value) > bound:
            raise UsageError(f"--{name} {value:g} overflows {dtype} here (at most {bound:.3g} in magnitude with "
                             f"k = {k:,} and inputs in [-1, 1))")


def _accuracy(args: argparse.Namespace) -> int:
    from ..verify import ACCURACY_COLUMNS, accuracy_rows

    for n in args.sizes:
        check_memory(n, n, n)
    impls, dtypes = args.impl, tuple(dict.fromkeys(args.dtype or ["float32"]))
    for name in impls:  # every implementation checked before any runs: where it runs, what it computes
        impl = get_impl(name)
        if args.engine not in impl.engines and "numpy" not in impl.engines:
            raise UsageError(f"{name} runs on {', '.join(impl.engines)} only, not {args.engine} (nor numpy)")
        if not set(dtypes) & set(impl.dtypes):
            raise UsageError(f"{name} computes {', '.join(impl.dtypes)} only, not {', '.join(dtypes)} (--dtype)")
    say = None if args.no_progress else \
        (lambda row: print(" ".join(f"{key}={row[key]}" for key in ACCURACY_COLUMNS), file=sys.stderr))
    rows = accuracy_rows(impls, args.sizes, tuple(args.inputs.split(",")), args.engine, args.seed, args.build_dir,
                         say, dtypes)
    frame = pd.DataFrame(rows, columns=ACCURACY_COLUMNS)
    write_atomic(args.out, csv_text(frame))
    failed = frame[frame["status"] != "ok"]
    for row in failed.itertuples():
        limit = f"the tolerance {row.tolerance}" if row.tolerance else f"the bound {row.bound:.3e}"
        print(f"strassenbench: {row.impl} {row.dtype} {row.inputs} n={row.m}: relative error {row.rel_error:.3e} "
              f"above {limit}", file=sys.stderr)
    return EXIT_FAIL if len(failed) else 0


def _points(args: argparse.Namespace) -> list:
    from ..bench.runner import Point, shuffled

    points = []
    if args.sweep == "custom":
        if not args.shapes:
            raise UsageError("--sweep custom needs --shapes MxNxK[,MxNxK...]")
        shapes = [(m, n, k, None) for m, n, k in args.shapes]
    else:
        if args.shapes:
            raise UsageError("--shapes goes with --sweep custom; the paper's sweeps take --sizes")
        shapes = []
        for x in args.sizes:
            m, k, n = shape(args.sweep, x, args.fixed)
            shapes.append((m, n, k, x))
    dtypes = args.dtype or ["float32"]
    for impl in args.impl:  # a dtype an implementation does not compute is no point of it (refused if it is every one)
        if not set(dtypes) & set(get_impl(impl).dtypes):
            raise UsageError(f"{impl} computes {', '.join(get_impl(impl).dtypes)} only, not {', '.join(dtypes)}")
    for m, n, k, x in shapes:
        for impl in args.impl:
            for dtype in dtypes:
                if dtype in get_impl(impl).dtypes:
                    points.append(Point(impl, m, n, k, dtype, args.strategy, args.scheme, args.sweep, x))
    return shuffled(points, args.seed if args.order_seed is None else args.order_seed) \
        if args.order == "shuffle" else points


def _criterion(args: argparse.Namespace):  # noqa: ANN202
    from ..bench.timers import Criterion

    return Criterion(min_samples=args.min_samples, min_time=args.min_time, precision=args.precision,
                     max_time=args.max_time, warmup_time=args.warmup_time,
                     throttle_threshold=args.throttle_threshold)


def _backend(engine: str, expect_device: str | None = None, timing: str | None = None,  # noqa: ANN202
             out: str | None = None):
    """The engine's backend (timing by ``timing``); with ``expect_device`` (a data/<device> folder name), refused
    unless it measures that device: on a cluster, a job given another GPU model than its folder is for writes
    nothing. With ``out``, refused when its folder holds another device's results (one device per folder)."""
    from ..bench.backends import make_backend
    from ..device import slug

    try:
        backend = make_backend(engine, timing)
    except ValueError as err:
        raise UsageError(str(err)) from None
    measured = slug(str(backend.tags()["gpu"]))
    if expect_device is not None and measured != expect_device:
        raise UsageError(f"this job measures {measured}, but its results are for data/{expect_device}: "
                         "the scheduler gave it another GPU (check the gpus config and gpu_model)")
    if out:
        check_folder_device(Path(out).parent, str(backend.tags()["gpu"]))
    return backend


def _bench(args: argparse.Namespace) -> int:
    from ..bench.runner import injection, run_sweep

    for name in args.impl:
        get_impl(name).check(args.engine)
    try:
        hook = injection()
    except ValueError as err:
        raise UsageError(str(err)) from None
    if hook and hook.kind == "fault" and args.engine != "cuda":
        raise UsageError(f"{hook.impl}:...:fault poisons a CUDA context: it needs --engine cuda")
    points = _points(args)
    if args.engine == "numpy":  # host memory; on a GPU an out-of-memory point is recorded and the sweep goes on
        biggest = max(points, key=lambda p: p.m * p.k + p.k * p.n + p.m * p.n)
        check_memory(biggest.m, biggest.n, biggest.k)
    timing = _sweep_timing(args, points)
    backend = _backend(args.engine, args.expect_device, timing, args.out)
    try:
        backend.check_timing(args.build_dir)
        if args.engine == "numpy":
            print("strassenbench: engine numpy: CPU stand-ins timed with host timers; these are not GPU numbers",
                  file=sys.stderr)
        frame = run_sweep(points, backend, Path(args.out), _criterion(args), seed=args.seed,
                          build_dir=args.build_dir, progress=False if args.no_progress else None,
                          retry_faults=args.retry_faults, announce=lambda todo: _announce(args, todo))
    except (ValueError, CudaError) as err:  # an --out that is not a results file, or of another timing; no build
        raise UsageError(str(err)) from None
    bad = frame[frame["status"] != "ok"] if len(frame) else frame
    faults = int((frame["status"] == "fault").sum()) if len(frame) else 0
    print(f"strassenbench: {len(frame)} points in {args.out} ({len(bad)} not ok"
          f"{f', {faults} faults' if faults else ''})", file=sys.stderr)
    if args.publish:
        from .results import collect

        collect([args.out], args.publish)
    return 0


def _announce(args: argparse.Namespace, todo: list) -> None:
    """The run's forecast before it starts (strassenbench.bench.forecast): on a GPU predicted by its model."""
    from ..bench.forecast import describe, forecast
    from ..model.perf import ModelError, load_resources
    from ..model.pick import auto_spec

    spec = resources = None
    if args.engine == "cuda":
        try:
            spec, resources = auto_spec("cuda"), load_resources(Path(args.build_dir) / "resources.csv")
        except (ImplError, ModelError) as err:
            print(f"strassenbench: no predicted wall time ({err})", file=sys.stderr)
    found = forecast(todo, _criterion(args), args.engine, spec, resources)
    print(f"strassenbench: {describe(found, spec.name if spec else None)}", file=sys.stderr)


def _sweep_timing(args: argparse.Namespace, points: list) -> str | None:
    """The GPU timing method of this sweep (strassenbench.bench.queue.plan_timing, with the rows ``--out``
    already holds), said once when auto chose graph."""
    from ..bench.queue import plan_timing

    if args.engine != "cuda":
        return None if args.timing in (None, "auto") else args.timing
    try:
        choice = plan_timing(args.timing, points, _timings_of(args.out))
    except (ValueError, ImplError, FusedError) as err:
        raise UsageError(str(err)) from None
    if choice.reason:
        print(f"strassenbench: {choice.reason}", file=sys.stderr)
    return choice.method


def _timings_of(out: str) -> set[str]:
    """How the rows of an earlier run's ``out`` were timed (a last row cut short by an interruption left out, as
    the run resumes it); nothing for a file that is not there or not a results file (the run refuses that one)."""
    from ..results import ResultsError, read_results, timing_modes

    try:
        return timing_modes(read_results(out, "bench", on_cut=lambda line: None)) if Path(out).is_file() else set()
    except (OSError, ResultsError):
        return set()


def _memlimit(args: argparse.Namespace) -> int:
    from ..bench.memlimit import COLUMNS, memlimit

    for name in args.impl:  # an implementation this engine does not run is a mistake, not an empty row
        get_impl(name).check(args.engine)
    backend = _backend(args.engine, args.expect_device, out=args.out)
    try:
        rows = memlimit(args.impl, backend, args.dtype, args.step, args.memory_budget, args.build_dir)
    except ValueError as err:
        raise UsageError(str(err)) from None
    write_table(pd.DataFrame(rows, columns=COLUMNS), args.format, args.out)
    return 0


def _sysinfo(args: argparse.Namespace) -> int:
    from ..bench.runner import SYSTEM_HEAD, system_json

    if args.out:  # a system description replaces only a system description
        check_replace(args.out, SYSTEM_HEAD)
    text = system_json(_backend(args.engine, args.expect_device, out=args.out))
    if args.out:
        write_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    return 0
