"""The ``strassenbench`` command line.

Bad input (an argument, a shape, a dtype) prints one line on stderr and exits 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from .algebra.algorithm import AlgorithmError, algorithm_names, get_algorithm
from .algebra.levels import plan_products, spec_levels, split_spec
from .algebra.primitives import variants
from .algebra.schedule import makespan_lower_bound, schedule
from .engines import ENGINES, FUSED_ENGINES
from .env import EnvError
from .fused.build import SUPPORTED_ARCHS, BuildError
from .bench.timing import GPU_TIMING
from .fused.arch import CudaError
from .fused.emu import EmuError
from .fused.launch import SCHEMES, FusedError
from .fused.toolchain import ToolchainError
from .gemm import DTYPES, GemmError
from .impls import ImplError, get_impl, table as impls_table
from .io import OutputError, check_names, check_replace, first_line, output_lock, write_atomic, write_table
from .model.bounds import bounds_rows
from .model.gpus import SPECS, GPUSpec, get_gpu
from .model.perf import MODELED_IMPLS, ModelError, load_resources, modeled
from .model.predict import crossover, predict
from .strategies import ALL_STRATEGIES, STRATEGIES
from .sweeps import PAPER_SIZES, SWEEPS, parse_sizes, shape
from .plan import PlanError
from .limits import MAX_LEVELS, MAX_PATH_BYTES, MAX_SCHEDULE_PRODUCTS, MAX_STREAMS, LimitError, check_products, decimal
from .readers import ReadError, check_name
from .results import ResultsError, check_folder_device
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
            value = decimal(text)
        except LimitError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer (plain decimal digits, e.g. 1024)") from None
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


def _any_case(options: Sequence[str]) -> Callable[[str], str]:
    """One of ``options``, matched in any case (huge, HUGE, Huge), returned as spelled in ``options``."""
    canonical = {o.lower(): o for o in options}

    def parse(text: str) -> str:
        try:
            return canonical[text.lower()]
        except KeyError:
            raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(options)})") from None

    parse.__name__ = "choice"
    return parse


def _seconds(text: str) -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value:g} s is negative")
    return value


def _positive(text: str) -> float:
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value:g} is not positive")
    return value


def _fraction(text: str) -> float:
    value = _finite(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{value:g} is not a fraction in (0, 1]")
    return value


def _bounded(minimum: int, maximum: int, why: str) -> Callable[[str], int]:
    """An integer in [minimum, maximum]; ``why`` says where the maximum comes from."""
    base = _integer(minimum)

    def parse(text: str) -> int:
        value = base(text)
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{value} is above the maximum {maximum} ({why})")
        return value

    parse.__name__ = "integer"
    return parse


def _check_output(path: str | Path) -> None:
    """An output file checked before any work is done: not a folder, and its folder a folder (created when
    missing) that can be written to."""
    target = Path(path)
    if any(len(part.encode()) > MAX_PATH_BYTES for part in target.parts):
        raise UsageError(f"output name too long (a part of more than {MAX_PATH_BYTES} bytes): {str(target)[:60]}...")
    if target.is_dir():
        raise UsageError(f"output {target} is a folder; give a file name")
    for folder in (target.parent, *target.parent.parents):
        if folder.exists():
            if not folder.is_dir():
                raise UsageError(f"output {target}: {folder} is a file, not a folder")
            if not os.access(folder, os.W_OK | os.X_OK):
                raise UsageError(f"output {target}: cannot write in {folder}")
            break


def _check_work(args: argparse.Namespace) -> None:
    """The work a command asks for, bounded before it starts (strassenbench.limits): a mixed spec has as many
    parts as levels, a plan's products and a schedule's are within their limits."""
    levels = getattr(args, "levels", None)
    if levels is None or not hasattr(args, "algorithm"):
        return
    _check_spec_levels(args.algorithm, levels)
    if args.command == "schedule":
        check_products(plan_products(args.algorithm, levels), f"the schedule of {levels} levels of {args.algorithm}",
                       MAX_SCHEDULE_PRODUCTS,
                       "3 levels of Strassen: the scheduler's search grows with the square of the products")


FOLDER_OUTPUTS = ("build", "report", "compare")  # commands whose --out is a folder
_RESULT_KIND = {"memlimit": "memlimit", "verify": "verify", "bench": "bench", "accuracy": "accuracy"}  # the results a command writes


def _a(word: str) -> str:
    """``word`` with its indefinite article: a bench, an accuracy."""
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _check_outputs(args: argparse.Namespace) -> None:
    """Every command's --out, checked before it does any work."""
    out = getattr(args, "out", None)
    if not out:
        return
    if args.command in FOLDER_OUTPUTS:
        if Path(out).exists() and not Path(out).is_dir():
            raise UsageError(f"output folder {out} is a file")
        _check_output(Path(out) / "probe")  # its folder (or the nearest existing one) writable
    else:
        _check_output(out)
    from .samples import samples_path

    check_names(out, *([samples_path(out)] if args.command in ("bench", "collect") else []))  # its lock, ...
    kind = _RESULT_KIND.get(args.command)
    if kind and getattr(args, "format", "csv") == "csv" and Path(out).is_file():
        from .results import kind_of

        head = first_line(out)
        header = head.decode("utf-8", errors="replace").strip().split(",")
        found = kind_of(header)
        if found is None or found.name != kind:
            what = f"{_a(found.name)} results file" if found else f"it begins {','.join(header)[:30]!r}"
            if not head.strip() or b"\0" in head:
                what = "an empty file" if not head.strip() else "not a CSV file: binary data"
            raise UsageError(f"output {out} is not {_a(kind)} results file ({what}): give another --out, or remove it "
                             "first")
    if args.command == "bench":  # the files a sweep writes beside its table
        from .bench.runner import check_sweep_files

        check_sweep_files(Path(out))
    if args.command == "build":  # its table of kernels replaces only a build's
        from .fused.modules import RESOURCE_COLUMNS

        check_replace(Path(out) / "resources.csv", ",".join(RESOURCE_COLUMNS))


def _check_memory(m: int, n: int, k: int, copies: float = 3.0) -> None:
    """A problem that cannot fit in this machine's memory is refused before anything is allocated: A, B and
    C, in float64 for the reference, ``copies`` times over (operands, the result and its reference)."""
    need = (m * k + k * n + m * n) * 8 * copies
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return
    if need > total:
        raise UsageError(f"{m}x{n}x{k} needs about {need / 2**30:,.1f} GiB of host memory; this machine has "
                         f"{total / 2**30:,.1f} GiB")


def _cmd_algorithms(args: argparse.Namespace) -> int:
    rows = []
    for name in algorithm_names():
        alg = get_algorithm(name)
        mt, kt, nt = alg.dims
        rows.append({
            "algorithm": name, "shape": f"{mt}x{kt}x{nt}", "rank": alg.rank, "classical": mt * kt * nt,
            "speedup": round(mt * kt * nt / alg.rank, 4),
            "nonzeros": int(np.count_nonzero(alg.U) + np.count_nonzero(alg.V) + np.count_nonzero(alg.W)),
            "stability_factor": str(alg.stability_factor), "source": alg.source or "built in",
        })
    write_table(pd.DataFrame(rows), args.format, args.out)
    return 0


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
    _check_memory(args.m, args.n, args.k)
    if (args.levels is None) == (args.impl is None):
        raise UsageError("give exactly one of --levels (a plan on --engine) or --impl (an implementation)")
    if args.impl is not None:
        if args.algorithm != "strassen":
            raise UsageError("--algorithm applies to --levels plans, not to --impl")
        options = {key: value for key, value in (("strategy", args.strategy), ("scheme", args.scheme)) if value}
        if args.streams is not None:
            raise UsageError("--streams applies to --levels plans; an implementation uses its scheme's streams")
        if args.engine == "cuda":
            options["build_dir"] = args.build_dir
    else:
        options = _fused_options(args)
    result = verify(
        impl=args.impl,
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
        options=options,
    )
    print(" ".join(f"{key}={value}" for key, value in result.items()))
    if args.out:
        text = pd.DataFrame([result]).to_csv(index=False)
        check_replace(args.out, text.split("\n", 1)[0])
        write_atomic(args.out, text)
    return 0 if result["status"] == "ok" else EXIT_FAIL


def _cmd_accuracy(args: argparse.Namespace) -> int:
    from .accuracy import ACCURACY_COLUMNS, accuracy_rows

    for n in args.sizes:
        _check_memory(n, n, n)
    impls = args.impl
    for name in impls:  # every implementation checked before any runs: where it runs, what it computes
        impl = get_impl(name)
        if args.engine not in impl.engines and "numpy" not in impl.engines:
            raise UsageError(f"{name} runs on {', '.join(impl.engines)} only, not {args.engine} (nor numpy)")
        if "float32" not in impl.dtypes:
            raise UsageError(f"{name} does not compute float32, which the accuracy table compares")
    options = {"build_dir": args.build_dir} if args.engine == "cuda" else {}
    say = None if args.no_progress else \
        (lambda row: print(" ".join(f"{key}={row[key]}" for key in ACCURACY_COLUMNS), file=sys.stderr))
    rows = accuracy_rows(impls, args.sizes, tuple(args.inputs.split(",")), args.engine, args.seed, options, say)
    frame = pd.DataFrame(rows, columns=ACCURACY_COLUMNS)
    write_atomic(args.out, frame.to_csv(index=False))
    failed = frame[frame["status"] != "ok"]
    for row in failed.itertuples():
        print(f"strassenbench: {row.impl} {row.inputs} n={row.m}: relative error {row.rel_error:.3e} above the "
              f"bound {row.bound:.3e}", file=sys.stderr)
    return EXIT_FAIL if len(failed) else 0


def _inputs(text: str) -> str:
    from .verify import INPUTS

    unknown = [d for d in text.split(",") if d not in INPUTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown inputs {unknown[0]!r} (choose from {', '.join(INPUTS)})")
    return text


def _fused_options(args: argparse.Namespace) -> dict[str, object]:
    """--strategy/--scheme/--streams, which only the fused engines take."""
    given = {"strategy": args.strategy, "scheme": args.scheme, "streams": args.streams}
    given = {key: value for key, value in given.items() if value is not None}
    if args.engine not in FUSED_ENGINES:
        if given:
            flag = "--" + next(iter(given))
            raise UsageError(f"{flag} applies to the fused engines ({', '.join(FUSED_ENGINES)}), not {args.engine}")
        return {}
    if args.engine == "cuda":
        given["build_dir"] = args.build_dir
    return given


def _cuda_version(text: str) -> tuple[int, int]:
    from .fused.toolchain import parse_cuda_version

    try:
        return parse_cuda_version(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _cmd_build(args: argparse.Namespace) -> int:
    from .fused.build import build, check_counts, toolchain_for
    from .fused.instances import operand_counts, plan_counts

    def report(what: str, rebuilt: bool | None) -> None:
        state = "" if rebuilt is None else f": {'compiled' if rebuilt else 'up to date'}"
        print(f"strassenbench: {what}{state}", file=sys.stderr)

    dtypes = tuple(args.dtype or DTYPES)
    strategies = tuple(args.strategy) if args.strategy else None
    counts = tuple(dict.fromkeys(args.counts)) if args.counts else None
    check_counts(counts, dtypes)  # before anything is printed: a bad request is one line
    if args.plan:  # the plans' kernels beside those asked for (default: the GEMM and Strassen's)
        planned = [c for spec, levels in args.plan for c in plan_counts(spec, levels)]
        counts = tuple(dict.fromkeys([*(counts or operand_counts()), *planned]))
    for arch in args.arch:  # so is an architecture no toolchain here builds for this driver
        toolchain_for(arch, args.driver_cuda)
    print(f"strassenbench: building {', '.join(args.arch)} into {args.out} (minutes per arch)", file=sys.stderr)
    table = build(args.arch, Path(args.out), dtypes=dtypes, strategies=strategies, counts=counts,
                  force=args.force, cutlass=args.cutlass, driver=args.driver_cuda, progress=report)
    spills = table[(table["spill_stores"] > 0) | (table["spill_loads"] > 0)]
    print(f"strassenbench: {len(table)} kernels, {len(spills)} with spills; resources in "
          f"{Path(args.out) / 'resources.csv'}", file=sys.stderr)
    return 0


def _cmd_impls(args: argparse.Namespace) -> int:
    dims = (args.m, args.n, args.k)
    if any(d is not None for d in dims) and not all(d is not None for d in dims):
        raise UsageError("--m, --n and --k go together (they add the extra_bytes column)")
    rows = impls_table(args.m, args.n, args.k, args.dtype)
    write_table(pd.DataFrame(rows), args.format, args.out)
    return 0


def _points(args: argparse.Namespace) -> list:
    from .bench.runner import Point

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
    for m, n, k, x in shapes:
        for impl in args.impl:
            for dtype in args.dtype or ["float32"]:
                points.append(Point(impl, m, n, k, dtype, args.strategy, args.scheme, args.sweep, x))
    return points


def _criterion(args: argparse.Namespace):  # noqa: ANN202
    from .bench.timing import Criterion

    return Criterion(min_samples=args.min_samples, min_time=args.min_time, max_noise=args.max_noise,
                     max_time=args.max_time, warmup_time=args.warmup_time,
                     throttle_threshold=args.throttle_threshold)


def _backend(engine: str, expect_device: str | None = None, timing: str | None = None,  # noqa: ANN202
             out: str | None = None):
    """The engine's backend (timing by ``timing``); with ``expect_device`` (a data/<device> folder name), refused
    unless it measures that device: on a cluster, a job given another GPU model than its folder is for writes
    nothing. With ``out``, refused when its folder holds another device's results (one device per folder)."""
    from .bench.backends import make_backend
    from .device import slug

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


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench.runner import injection, run_sweep

    for name in args.impl:
        get_impl(name).check(args.engine, None, None)
    try:
        hook = injection()
    except ValueError as err:
        raise UsageError(str(err)) from None
    if hook and hook[1] == "fault" and args.engine != "cuda":
        raise UsageError(f"{hook[0][0]}:...:fault poisons a CUDA context: it needs --engine cuda")
    points = _points(args)
    if args.engine == "numpy":  # host memory; on a GPU an out-of-memory point is recorded and the sweep goes on
        biggest = max(points, key=lambda p: p.m * p.k + p.k * p.n + p.m * p.n)
        _check_memory(biggest.m, biggest.n, biggest.k)
    timing = _sweep_timing(args, points)
    backend = _backend(args.engine, args.expect_device, timing, args.out)
    try:
        backend.check_timing(args.build_dir)
        if args.engine == "numpy":
            print("strassenbench: engine numpy: CPU stand-ins timed with host timers; these are not GPU numbers",
                  file=sys.stderr)
        frame = run_sweep(points, backend, Path(args.out), _criterion(args), seed=args.seed,
                          build_dir=args.build_dir, progress=False if args.no_progress else None,
                          retry_faults=args.retry_faults)
    except (ValueError, CudaError) as err:  # an --out that is not a results file, or of another timing; no build
        raise UsageError(str(err)) from None
    bad = frame[frame["status"] != "ok"] if len(frame) else frame
    faults = int((frame["status"] == "fault").sum()) if len(frame) else 0
    print(f"strassenbench: {len(frame)} points in {args.out} ({len(bad)} not ok"
          f"{f', {faults} faults' if faults else ''})", file=sys.stderr)
    return 0


def _sweep_timing(args: argparse.Namespace, points: list) -> str | None:
    """The GPU timing method of this sweep (strassenbench.bench.queue.choose_timing: ``auto`` is blocking
    unless a call queues more than the blocking kernel may hold), said once when auto chose graph."""
    from .bench.queue import choose_timing
    from .bench.runner import queue_points

    if args.engine != "cuda":
        return None if args.timing in (None, "auto") else args.timing
    try:
        choice = choose_timing(args.timing, (call for p in points for call in queue_points(p)))
    except (ValueError, ImplError, FusedError) as err:
        raise UsageError(str(err)) from None
    if choice.reason:
        print(f"strassenbench: {choice.reason}", file=sys.stderr)
    return choice.method


def _cmd_memlimit(args: argparse.Namespace) -> int:
    from .bench.memlimit import COLUMNS, memlimit

    for name in args.impl:  # an implementation this engine does not run is a mistake, not an empty row
        get_impl(name).check(args.engine, None, None)
    backend = _backend(args.engine, args.expect_device, out=args.out)
    try:
        rows = memlimit(args.impl, backend, args.dtype, args.step, args.memory_budget, args.build_dir)
    except ValueError as err:
        raise UsageError(str(err)) from None
    write_table(pd.DataFrame(rows, columns=COLUMNS), args.format, args.out)
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import Failed, diagnose

    try:
        for check, finding in diagnose():
            if args.arch:
                if check == "arch":
                    print(finding)
            else:
                print(f"ok  {check}: {finding}")
    except Failed as err:
        print(f"strassenbench: doctor: {err}", file=sys.stderr)
        return 2
    return 0


def _cmd_sysinfo(args: argparse.Namespace) -> int:
    from .bench.runner import SYSTEM_HEAD, system_json

    if args.out:  # a system description replaces only a system description
        check_replace(args.out, SYSTEM_HEAD)
    text = system_json(_backend(args.engine, args.expect_device, out=args.out))
    if args.out:
        write_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


def _counts(text: str) -> tuple[int, int, int]:
    """W_A x W_B x W_C, e.g. 2x2x2."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(_plain_positive(p) for p in parts):
        raise argparse.ArgumentTypeError(f"operand counts are W_AxW_BxW_C, e.g. 2x2x2: {text!r}")
    return tuple(int(p) for p in parts)  # type: ignore[return-value]


def _plain_positive(text: str) -> bool:
    """A positive integer in plain ASCII digits (strassenbench.limits.decimal: not ' 64', '1_024' or another
    script's digits)."""
    try:
        return decimal(text) > 0
    except LimitError:
        return False


def _shapes(text: str) -> list[tuple[int, int, int]]:
    out = []
    for part in _names(text):
        fields = part.lower().split("x")
        if len(fields) != 3 or not all(_plain_positive(f) for f in fields):
            raise argparse.ArgumentTypeError(f"bad shape '{part}': use MxNxK with positive integers, e.g. 1024x1024x512")
        out.append(tuple(int(f) for f in fields))
    if not out:
        raise argparse.ArgumentTypeError("no shapes given")
    return out


def _bytes(text: str) -> int:
    from .bench.memlimit import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _names(text: str) -> list[str]:
    """A comma-separated list; an empty item (a stray comma) is a mistake, not nothing."""
    names = [n.strip() for n in text.split(",")]
    if "" in names:
        raise argparse.ArgumentTypeError(f"empty item in {text!r} (a stray comma?)")
    return names


def _checked_names(text: str, check: Callable[[str], object], error: type[Exception]) -> list[str]:
    """The comma-separated names of ``text``, each accepted by ``check`` (its ``error`` is the message)."""
    names = _names(text)
    for name in names:
        try:
            check(name)
        except error as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return list(dict.fromkeys(names))


def _impl_list(text: str) -> list[str]:
    return _checked_names(text, get_impl, ImplError)


def _cmd_report(args: argparse.Namespace) -> int:
    from .report.build import build_report

    data = Path(args.data)
    if not data.is_dir():
        raise UsageError(f"no results folder {data}")
    _outside_inputs(Path(args.out), [data])
    if args.resources:
        load_resources(args.resources, required=True)  # a named file must be a resources table: before any work
    written = build_report(data, Path(args.out), Path(args.resources) if args.resources else None)
    print(f"strassenbench: report in {written[0]} ({len(written) - 1} figures and tables)", file=sys.stderr)
    return 0


def _outside_inputs(out: Path, inputs: list[Path]) -> None:
    """A report or comparison is never written into (or over) one of the result folders it reads."""
    for folder in inputs:
        if out.resolve() == folder.resolve() or folder.resolve() in out.resolve().parents:
            raise UsageError(f"--out {out} is inside the results folder {folder} it reads: give another folder")


def _cmd_compare(args: argparse.Namespace) -> int:
    from .report.compare import compare_runs

    folders = [Path(f) for f in args.folders]
    same = [f for i, f in enumerate(folders) if any(f.resolve() == g.resolve() for g in folders[:i])]
    if same:
        raise UsageError(f"{same[0]} is given twice: compare sets different runs against each other")
    _outside_inputs(Path(args.out), folders)
    try:
        table = compare_runs(folders, Path(args.out))
    except ValueError as err:
        raise UsageError(str(err)) from None
    counts = table["verdict"].value_counts().to_dict() if not table.empty else {}
    print(f"strassenbench: {len(table)} points compared {counts} -> {Path(args.out) / 'index.html'}", file=sys.stderr)
    return 0


def _input_name(text: str) -> str:
    """A file or folder to read, its name one the system takes (readers.check_name), checked before it is used."""
    try:
        check_name(text, "input")
    except ReadError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _cmd_collect(args: argparse.Namespace) -> int:
    """Concatenate one-row-per-job CSVs into one table (the workflow's collect step), and their samples files."""
    from .results import collect_rows
    from .samples import checked_samples, collect_samples

    # every input checked (kinds, timing, one device, each point once), and every samples file against its own
    # CSV's rows, before anything is written
    joined, frames = collect_rows(args.inputs)
    merged = checked_samples(args.inputs, frames)
    text = joined.to_csv(index=False)
    check_replace(args.out, text.split("\n", 1)[0])
    collect_samples(args.inputs, args.out, merged, table=text)  # the table and its samples: both or neither
    return 0


def _sizes(text: str) -> list[int]:
    try:
        return parse_sizes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _impls(text: str) -> list[str]:
    """Implementations the model has a formula for: the paper's, and fused ones of any algorithm."""
    return _checked_names(text, modeled, ModelError)


def _impl(text: str) -> str:
    """One implementation (`strassenbench impls`, or <algorithm>x<L>)."""
    if "," in text:
        raise argparse.ArgumentTypeError(f"one implementation, not a list: {text!r}")
    return _impl_list(text)[0]


def _algorithm(text: str) -> str:
    """An algorithm: a name of `strassenbench algorithms`, a coefficient file's path, or mixed levels a+b."""
    try:
        for name in split_spec(text):
            get_algorithm(name)
    except AlgorithmError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _plan(text: str) -> tuple[str, int]:
    """SPEC:L, e.g. grey322-11-50:1 or grey322-11-50+strassen:2."""
    spec, sep, levels = text.rpartition(":")
    if not sep or not (_plain_positive(levels) or levels == "0"):
        raise argparse.ArgumentTypeError(f"a plan is ALGORITHM:LEVELS, e.g. grey322-11-50:1: {text!r}")
    if int(levels) > MAX_LEVELS:
        raise argparse.ArgumentTypeError(f"{text}: {levels} levels is above the maximum {MAX_LEVELS}")
    try:
        _check_spec_levels(_algorithm(spec), int(levels))
    except (AlgorithmError, LimitError) as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return spec, int(levels)


def _check_spec_levels(spec: str, levels: int) -> None:
    """A mixed spec names every level: as many parts as levels. And the plan's products within the limit."""
    fixed = spec_levels(spec)
    if fixed is not None and fixed != levels:
        raise LimitError(f"algorithm spec '{spec}' has {fixed} levels, not {levels} (give --levels {fixed}, or as "
                         "many parts as levels)")
    check_products(plan_products(spec, levels), f"{levels} levels of {spec}")


def _gpu(name: str) -> GPUSpec:
    try:
        return get_gpu(name)
    except (ValueError, RuntimeError) as err:
        raise UsageError(str(err)) from None


def _cmd_model_predict(args: argparse.Namespace) -> int:
    spec = _gpu(args.gpu)
    resources = load_resources(args.resources or DEFAULT_RESOURCES, required=args.resources is not None)
    frame = predict(spec, args.impl, args.sweep, args.sizes, args.strategy, args.dtype, resources)
    write_table(frame, "csv", args.out)
    if args.out:
        print(f"predicted {len(frame)} points for {spec.name} (model, not a measurement) -> {args.out}",
              file=sys.stderr)
    return 0


def _cmd_model_bounds(args: argparse.Namespace) -> int:
    write_table(pd.DataFrame(bounds_rows(_gpu(args.gpu), args.dtype)), args.format, args.out)
    return 0


def _cmd_model_crossover(args: argparse.Namespace) -> int:
    rows = []
    for name in args.gpu:
        spec = _gpu(name)
        for impl in args.impl:
            frame = predict(spec, ["gemm", impl], args.sweep, args.sizes, "best", args.dtype, None)
            rows.append({"gpu": spec.name, "source": "model", "sweep": args.sweep, **crossover(frame, impl, "gemm")})
    write_table(pd.DataFrame(rows).astype({"first": "Int64", "stable": "Int64"}), args.format, args.out)
    return 0


DEFAULT_RESOURCES = "build/resources.csv"
EXPECT_HELP = ("refuse to run unless the GPU measured is this device (its data/<device> folder name, e.g. "
               "nvidia-h100-80gb-hbm3; cpu on numpy)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="strassenbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    def common(p: argparse.ArgumentParser, fmt: bool = True, levels_required: bool = True) -> None:
        p.add_argument("--levels", type=_bounded(0, MAX_LEVELS, "7^L products per plan"), required=levels_required,
                       help="levels L (0 = plain GEMM)")
        p.add_argument("--algorithm", type=_algorithm, default="strassen", metavar="NAME",
                       help="a name of `strassenbench algorithms`, a coefficient file's path, or mixed levels "
                            "A+B (A on top, B inside its blocks; --levels 2)")
        if fmt:
            p.add_argument("--format", choices=("csv", "markdown"), default="csv", help="output format")
        p.add_argument("--out", metavar="FILE", help="write to FILE (atomically) instead of standard output")

    p = sub.add_parser("algorithms", help="the fast matrix multiplication algorithms: shape, rank, nonzeros, "
                                           "stability factor")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    p.set_defaults(func=_cmd_algorithms)

    p = sub.add_parser("variants", help="the variant table (paper, figure tab:perfeq_level2)")
    common(p)
    p.set_defaults(func=_cmd_variants)

    p = sub.add_parser("schedule", help="stages and streams (paper, figure tab:gpu_streaming)")
    common(p)
    p.add_argument("--streams", type=_bounded(1, MAX_STREAMS, "one per product of a 2-level plan"), default=2,
                   help="number of CUDA streams S")
    p.set_defaults(func=_cmd_schedule)

    p = sub.add_parser("verify", help="one multiplication on random inputs against a float64 reference")
    p.add_argument("--impl", type=_impl, help="an implementation of `strassenbench impls`, or <algorithm>x<L> "
                                              "(instead of --levels)")
    common(p, fmt=False, levels_required=False)
    p.add_argument("--engine", choices=sorted(ENGINES), default="numpy", help="engine that runs the plan")
    for dim in ("m", "n", "k"):
        p.add_argument(f"--{dim}", type=_integer(1), required=True, help=f"problem dimension {dim}")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--alpha", type=_finite, default=1.0)
    p.add_argument("--beta", type=_finite, default=0.0)
    p.add_argument("--seed", type=_integer(0), default=0, help="seed of the uniform [-1, 1] inputs")
    p.add_argument("--strategy", type=_any_case(list(ALL_STRATEGIES)), choices=list(ALL_STRATEGIES),
                   help="block-size strategy (fused engines; TcSmall, TcLarge, TcHuge for the tensor-core ones)")
    p.add_argument("--scheme", choices=SCHEMES,
                   help="task parallelism (paper, Sec. s:task): sequential, streams, atomic (fused engines)")
    p.add_argument("--streams", type=_bounded(1, MAX_STREAMS, "one per product of a 2-level plan"),
                   help="CUDA streams of the streams/atomic schemes (2 / 4)")
    p.add_argument("--build-dir", default="build", help="where `strassenbench build` put the cubins (cuda)")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("accuracy", help="relative error against float64 of implementations (SIMT FP32, 1xTF32, "
                                        "3xTF32) on uniform and wide-range float32 inputs")
    p.add_argument("--impl", required=True, type=_impl_list,
                   help="comma-separated implementations (`strassenbench impls`)")
    p.add_argument("--engine", choices=sorted(ENGINES), default="numpy",
                   help="engine of the implementations that have it (the others run on numpy)")
    p.add_argument("--sizes", type=_sizes, default=[256], help="square sizes, e.g. 256 or 1024,4096")
    p.add_argument("--inputs", type=_inputs, default="uniform,wide", help="input distributions: uniform, wide")
    p.add_argument("--seed", type=_integer(0), default=0)
    p.add_argument("--build-dir", default="build", help="where `strassenbench build` put the cubins (cuda)")
    p.add_argument("--no-progress", action="store_true", help="no line per measurement on stderr")
    p.add_argument("--out", required=True, help="the table (CSV)")
    p.set_defaults(func=_cmd_accuracy)

    p = sub.add_parser("impls", help="the implementations: identifier, label, engines, extra memory")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    for dim in ("m", "n", "k"):
        p.add_argument(f"--{dim}", type=_integer(1), help="with --m --n --k: add extra_bytes for that shape")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.set_defaults(func=_cmd_impls)

    p = sub.add_parser("bench", help="time implementations over a sweep (behind a blocking kernel on a GPU, "
                                      "host timers on numpy)")
    p.add_argument("--impl", type=_impl_list, required=True, help="comma-separated, see `strassenbench impls`")
    p.add_argument("--sweep", choices=[*SWEEPS, "custom"], default="square")
    p.add_argument("--sizes", type=_sizes, default=parse_sizes("1024:4096:1024"), help="e.g. 512:20480:512")
    p.add_argument("--shapes", type=_shapes, help="--sweep custom: MxNxK[,MxNxK...]")
    p.add_argument("--fixed", type=_integer(1), help="the sweep's fixed size: k of rankk (4096), m = n of panel (8192)")
    p.add_argument("--strategy", type=_any_case(["best", *STRATEGIES]), choices=["best", *STRATEGIES],
                   help="fused kernels: a strategy or best of six")
    p.add_argument("--scheme", choices=SCHEMES, help="fused Strassen: task-parallel scheme (default sequential)")
    p.add_argument("--dtype", choices=DTYPES, action="append", help="repeat; default float32")
    p.add_argument("--engine", choices=("cuda", "numpy"), default="numpy")
    p.add_argument("--out", required=True, metavar="FILE.csv", help="results; an existing file is resumed")
    p.add_argument("--seed", type=_integer(0), default=0)
    p.add_argument("--min-samples", type=_integer(1), default=10)
    p.add_argument("--min-time", type=_seconds, default=0.5, help="seconds of samples before the noise test")
    p.add_argument("--max-noise", type=_positive, default=0.005, help="relative stdev to stop at (nvbench stdrel)")
    p.add_argument("--max-time", type=_positive, default=15.0, help="cap per measurement, seconds")
    p.add_argument("--warmup-time", type=_seconds, default=0.2, help="seconds of warm-up calls (clocks ramp up)")
    p.add_argument("--throttle-threshold", type=_fraction, default=0.75,
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
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("memlimit", help="largest square n per implementation: predicted, then confirmed by runs")
    p.add_argument("--impl", type=_impl_list, required=True)
    p.add_argument("--engine", choices=("cuda", "numpy"), default="numpy")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--step", type=_integer(1), default=512)
    p.add_argument("--memory-budget", type=_bytes, help="free memory to assume (numpy: required, e.g. 256MiB)")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    p.add_argument("--build-dir", default="build")
    p.add_argument("--expect-device", metavar="NAME", help=EXPECT_HELP)
    p.set_defaults(func=_cmd_memlimit)

    p = sub.add_parser("doctor", help="is this machine ready to measure: GPU, driver, CuPy, libraries, build "
                                       "arch and toolchain (exit 2 naming the fix at the first problem)")
    p.add_argument("--arch", action="store_true", help="print only the build the GPU runs (sm_70, sm_80, sm_90)")
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser("sysinfo", help="the system description (pynvml, CUDA, cuBLAS, host) as JSON")
    p.add_argument("--engine", choices=("cuda", "numpy"), default="numpy")
    p.add_argument("--out", metavar="FILE")
    p.add_argument("--expect-device", metavar="NAME", help=EXPECT_HELP)
    p.set_defaults(func=_cmd_sysinfo)

    p = sub.add_parser("report", help="the HTML report with every figure and table of the paper")
    p.add_argument("--data", required=True, type=_input_name, metavar="DIR",
                   help="a run's results, e.g. data/nvidia-h100-80gb-hbm3")
    p.add_argument("--out", default="report", metavar="DIR")
    p.add_argument("--resources", type=_input_name, metavar="FILE",
                   help="build/resources.csv for the kernel table and the model")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("compare", help="results of several GPUs side by side (FAST/SLOW beyond the noise)")
    p.add_argument("folders", nargs="+", type=_input_name, metavar="DIR",
                   help="data/<gpu> folders; the first is the baseline")
    p.add_argument("--out", required=True, metavar="DIR")
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("build", help="compile the fused kernels (nvcc or NVRTC, then ptxas); write fatbins "
                                      "(SASS and PTX) and resources.csv")
    p.add_argument("--arch", action="append", choices=SUPPORTED_ARCHS, required=True,
                   help="repeat: sm_70 (needs the cu12 extra), sm_80, sm_90")
    p.add_argument("--driver-cuda", type=_cuda_version, metavar="X.Y",
                   help="the CUDA version the GPU's driver runs (nvidia-smi's 'CUDA Version'); picks the "
                        "toolchain. Default: this machine's driver, or the newest toolchain without one")
    p.add_argument("--out", default="build", metavar="DIR")
    p.add_argument("--dtype", action="append", choices=DTYPES, help="repeat; default: all")
    p.add_argument("--strategy", action="append", type=_any_case(list(ALL_STRATEGIES)), choices=list(ALL_STRATEGIES),
                   help="repeat; default: the paper's six (the tensor-core TcSmall, TcLarge, TcHuge, sm_80 and "
                        "later, when named)")
    p.add_argument("--counts", action="append", type=_counts, metavar="AxBxC",
                   help="repeat: W_A x W_B x W_C of the kernels to build, powers of two (default: the GEMM 1x1x1 "
                        "and every variant of 1- and 2-level Strassen)")
    p.add_argument("--plan", action="append", type=_plan, metavar="ALGORITHM:L",
                   help="repeat: also the kernels that L levels of ALGORITHM run on, e.g. grey322-11-50:1")
    p.add_argument("--force", action="store_true", help="recompile even when the stamp is unchanged")
    p.add_argument("--cutlass", action=argparse.BooleanOptionalAction, default=None,
                   help="also build the CUTLASS baseline (default: when float32 Huge is built)")
    p.set_defaults(func=_cmd_build)

    model = sub.add_parser("model", help="the paper's performance model (predictions, not measurements)")
    msub = model.add_subparsers(dest="model_command", required=True, metavar="MODEL_COMMAND")
    gpus = [*SPECS, "device"]
    p = msub.add_parser("predict", help="predicted time and effective TFLOPS per implementation and size")
    p.add_argument("--gpu", choices=gpus, required=True)
    p.add_argument("--impl", type=_impls, default=list(MODELED_IMPLS), help="comma-separated implementations")
    p.add_argument("--sweep", choices=sorted(SWEEPS), default="square")
    p.add_argument("--sizes", type=_sizes, default=parse_sizes(PAPER_SIZES), help="e.g. 1024,2048 or 512:20480:512")
    p.add_argument("--strategy", type=_any_case(["best", *STRATEGIES]), choices=["best", *STRATEGIES],
                   default="best")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--resources", metavar="FILE",
                   help=f"kernel resources for occupancy (default {DEFAULT_RESOURCES} when it exists, else the "
                        "register formula)")
    p.add_argument("--out", metavar="FILE", help="write the CSV (atomically) instead of standard output")
    p.set_defaults(func=_cmd_model_predict)

    p = msub.add_parser("bounds", help="blocking-parameter bounds (paper, Sec. s:blocking_choose)")
    p.add_argument("--gpu", choices=gpus, required=True)
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    p.set_defaults(func=_cmd_model_bounds)

    p = msub.add_parser("crossover", help="predicted size where 1-level Strassen (or another fused "
                                          "implementation) overtakes GEMM, per GPU")
    p.add_argument("--gpu", choices=gpus, action="append", required=True, help="repeat for several GPUs")
    p.add_argument("--impl", type=_impls, default=["strassen1"],
                   help="comma-separated fused implementations, e.g. strassen1,grey322-11-50x1")
    p.add_argument("--sweep", choices=sorted(SWEEPS), default="square")
    p.add_argument("--sizes", type=_sizes, default=parse_sizes("256:20480:256"))
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--format", choices=("csv", "markdown"), default="csv")
    p.add_argument("--out", metavar="FILE")
    p.set_defaults(func=_cmd_model_crossover)

    p = sub.add_parser("collect", help="concatenate one-row CSVs into one table")
    p.add_argument("inputs", nargs="+", type=_input_name, metavar="CSV")
    p.add_argument("--out", metavar="FILE", required=True)
    p.set_defaults(func=_cmd_collect)
    return parser


# Options whose value may begin with '-' (-inf, -1e5): argparse would take such a value for an option.
_SIGNED_OPTIONS = ("--alpha", "--beta")


def _join_signed(argv: Sequence[str]) -> list[str]:
    """``--alpha -1e5`` as ``--alpha=-1e5``, so that every number reaches its parser (and its message)."""
    out, i = [], 0
    while i < len(argv):
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if argv[i] in _SIGNED_OPTIONS and value.startswith("-") and value not in ("-", "--"):
            out.append(f"{argv[i]}={value}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(_join_signed(sys.argv[1:] if argv is None else argv))
    except SystemExit as stop:  # usage errors, --help and --version: return their status
        return int(stop.code or 0)
    except EnvError as err:  # a variable read to check an argument (STRASSENBENCH_ALGORITHMS for --algorithm)
        print(f"strassenbench: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        _check_work(args)
        _check_outputs(args)
        out = getattr(args, "out", None)
        with output_lock(out) if out else contextlib.nullcontext():
            return args.func(args)
    except (PlanError, GemmError, UsageError, ImplError, FusedError, BuildError, ToolchainError, EmuError, CudaError,
            ResultsError, AlgorithmError, ModelError, LimitError, OutputError, EnvError) as err:
        print(f"strassenbench: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("strassenbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
