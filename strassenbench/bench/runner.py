"""`strassenbench bench`: one row per (implementation, shape) with timing, memory, error and telemetry.

Per point: operands uniform in [-1, 1) from a recorded seed; one call whose result is checked against a BLAS
reference (float64 for small problems) within the documented error bound; one call under a memory counter
(its peak beyond the operands is compared with the implementation's declared extra memory); then timed
samples (timing.sample), the reference implementations reusing one workspace allocated for the point.
``--strategy best`` times every strategy and keeps the fastest, recording which won (as the paper did).

Results are rewritten atomically after every point, so an interrupted sweep keeps every finished point and a
rerun skips them. Every timed sample goes to ``<name>.samples.jsonl`` beside the CSV (strassenbench.samples),
written before the CSV lists the point. A point that fails (out of memory, a failed check, any error) is recorded in ``status``
and the sweep goes on. Points are measured in a worker process (strassenbench.bench.isolate): a point that
ends in a sticky CUDA error, or whose worker dies, is recorded as ``fault`` and the rest of the sweep goes on
in a fresh worker; a rerun counts fault rows as done unless asked to measure them again (``retry_faults``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from .. import env, inject
from ..accuracy import bound_from_norms, expected_error, tolerance
from ..freivalds import REFERENCE, Reference
from ..impls import Impl, ImplError, get_impl
from ..model.pick import PickError, resolve, split_options
from ..options import RunOptions
from ..io import OutputError, check_replace, csv_text, write_atomic
from ..results import BENCH_COLUMNS, ResultsError, read_results, timing_modes
from ..samples import KEY, append_samples, check_samples_file, keep_samples, samples_path, take_back
from .backends import Backend, is_oom, sticky_error
from .forecast import SMALL_SIDE, candidates
from .isolate import WorkerConfig, Workers
from .telemetry import git_commit, host_description, source_hash
from .timers import Criterion, TimingError, sample

__all__ = ["COLUMNS", "Point", "run_point", "run_sweep", "shuffled", "system_description", "system_json",
           "MEMORY_GRANULARITY",
           "INJECT_VARIABLE", "INJECT_KINDS", "injection", "queue_points", "SYSTEM_HEAD",
           "check_sweep_files"]

COLUMNS = BENCH_COLUMNS  # strassenbench.results: one schema for every reader
MEMORY_GRANULARITY = 512  # bytes: CuPy's pool rounds every allocation up to this
ALPHA, BETA = 1.0, 1.0  # C += A B: the fused kernels' native form; cuBLAS is timed with the same beta


@dataclass(frozen=True)
class Point:
    impl: str
    m: int
    n: int
    k: int
    dtype: str = "float32"
    strategy: str | None = None  # None (the engine's default), a strategy name, or "best"
    scheme: str | None = None
    sweep: str = "custom"
    x: int | None = None
    order: int | None = None  # its place among the implementations of its size (strassenbench.sweeps.order)
    order_seed: int | None = None  # the seed that shuffled them

    def key(self) -> tuple:
        return (self.impl, self.m, self.n, self.k, self.dtype, self.strategy or "", self.scheme or "", self.sweep)


INJECT_VARIABLE = inject.VARIABLE
INJECT_KINDS = inject.KINDS


def injection() -> inject.Hook | None:
    """The test hook STRASSENBENCH_INJECT_FAILURE (strassenbench.inject), or None when unset or empty;
    ValueError naming the variable when it is malformed, names no implementation, or plants 1xTF32 in one that
    does not compute in 3xTF32."""
    hook = inject.hook()
    if hook is None:
        return None
    text = env.value(INJECT_VARIABLE)
    try:
        impl = get_impl(hook.impl)
    except ValueError as err:
        raise ValueError(f"{INJECT_VARIABLE}={text!r}: {err}") from None
    if hook.kind == "tf32" and not impl.run_mode.staged:
        raise ValueError(f"{INJECT_VARIABLE}={text!r}: tf32 makes a 3xTF32 implementation compute in 1xTF32, and "
                         f"{impl.name} computes in {impl.mode}")
    return hook


def _inject(point: Point, backend: Backend, build_dir: str) -> None:
    """The test hook at ``point``: an error, a crash of this process (SIGKILL, as a poisoned context leaves it
    useless), or a sticky fault (Backend.inject_fault). A wrong result (zero, drop, tf32) is planted by the
    implementation itself (strassenbench.impls), on every engine."""
    hook = injection()
    if hook is None or hook.kind in inject.RESULT_KINDS or not hook.matches(point.impl, point.m, point.n, point.k):
        return
    if hook.kind == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if hook.kind == "fault":
        backend.inject_fault(build_dir)
    raise RuntimeError(f"injected failure ({INJECT_VARIABLE})")


def shuffled(points: list[Point], seed: int) -> list[Point]:
    """``points`` with the points of each shape (its implementations and dtypes) in an order drawn from
    ``seed`` and the shape, shapes in their order; each point knows its place and the seed (the ``order`` and
    ``order_seed`` columns). Drawn per shape, the order of a shape is the same whatever else the sweep holds, so a
    resumed sweep runs what is left in the order it would have."""
    import numpy as np

    groups: dict[tuple, list[Point]] = {}
    for point in points:
        groups.setdefault((point.m, point.n, point.k), []).append(point)
    out = []
    for (m, n, k), group in groups.items():
        rng = np.random.default_rng([seed, m, n, k])
        out += [replace(group[i], order=place, order_seed=seed) for place, i in enumerate(rng.permutation(len(group)))]
    return out


def _options(point: Point, engine: str, strategy: str | None, build_dir: str = "build") -> RunOptions:
    """The --strategy/--scheme of a sweep apply to the implementations that take them on this engine
    (Impl.takes); the others (cuBLAS, the references, every implementation on the numpy engine) run without."""
    impl = get_impl(point.impl)
    return impl.run_options(engine, strategy if impl.takes("strategy", engine) else None,
                            point.scheme if impl.takes("scheme", engine) else None, build_dir)


def _strategies(point: Point, engine: str, build_dir: str = "build") -> list[str | None]:
    """The strategies a point times on ``engine`` (the fastest is kept; strassenbench.bench.forecast.candidates):
    on a GPU, ``best`` above 4,096 ranks them by the device's model with the build's resources."""
    spec = resources = None
    impl = get_impl(point.impl)
    if engine == "cuda" and point.strategy and point.strategy.startswith("best") and not impl.tensor \
            and impl.takes("strategy", engine) and max(point.m, point.n, point.k) > SMALL_SIDE:
        from ..model.perf import load_resources
        from ..model.pick import auto_spec

        spec, resources = auto_spec(engine), load_resources(Path(build_dir) / "resources.csv")
    return candidates(point.impl, point.m, point.k, point.n, point.dtype, point.strategy, engine, spec, resources,
                      point.scheme)


def queue_points(point: Point) -> list[tuple]:
    """What each timed call of ``point`` on the GPU is, for strassenbench.bench.queue.call_ops: (impl, m, n, k,
    dtype, strategy, scheme) per strategy it may time (for ``best`` every one: no GPU is asked for its model)."""
    point, _ = resolve_auto(point, "cuda")
    strategies = candidates(point.impl, point.m, point.k, point.n, point.dtype, point.strategy, "cuda")
    return [(point.impl, point.m, point.n, point.k, point.dtype, strategy,
             _options(point, "cuda", strategy).scheme) for strategy in strategies]


def resolve_auto(point: Point, engine: str) -> tuple[Point, str]:
    """An `auto` point as the implementation `strassenbench pick` ranks first for its shape on ``engine``, with
    pick's strategy unless the point asks for one, and the note its row keeps; any other point as itself."""
    chosen, strategy, note = resolve(point.impl, point.m, point.k, point.n, point.dtype, engine)
    if not note:
        return point, ""
    return replace(point, impl=chosen, strategy=point.strategy or strategy or None), note


def run_point(point: Point, backend: Backend, criterion: Criterion, seed: int = 0,
              build_dir: str = "build", records: list | None = None) -> dict[str, object]:
    """One point's row; ``records`` (a list) receives every sample of the kept strategy (timing.Samples). An
    `auto` point runs what pick chose (resolve_auto): its row keeps the name auto and says what ran."""
    asked = point
    try:
        point, note = resolve_auto(point, backend.engine)
    except (ImplError, PickError) as err:
        return {**_base_row(asked, backend, seed), "status": "error", "message": str(err)[:200]}
    row = _run_point(point, backend, criterion, seed, build_dir, records)
    if note:
        row.update({"impl": asked.impl, "label": get_impl(asked.impl).label, "strategy_request": asked.strategy or "",
                    "message": "; ".join(x for x in (note, row.get("message") or "") if x)[:200]})
    return row


def _run_point(point: Point, backend: Backend, criterion: Criterion, seed: int, build_dir: str,
               records: list | None) -> dict[str, object]:
    impl = get_impl(point.impl)
    engine = backend.engine
    m, n, k = point.m, point.n, point.k
    row = _base_row(point, backend, seed)
    device = backend.device()
    start = end = device.snapshot() if device else {}  # replaced by readings taken in the timed loop
    clocks: list[float] = []
    fault = None
    try:
        _inject(point, backend, build_dir)
        impl.check(engine)
        strategies = _strategies(point, engine, build_dir)
        A, B, C0 = backend.operands(m, n, k, point.dtype, seed)
        reference = Reference(A, B, C0, ALPHA, BETA, backend.xp, seed)  # strassenbench.freivalds
        norms = (backend.max_abs(A), backend.max_abs(B), backend.max_abs(C0))
        check = _check_limits(impl, point, row["levels"], norms, reference.norm)
        results = {}
        for strategy in strategies:  # the splitk scheme's S: the model's for the shape and strategy
            options = split_options(_options(point, engine, strategy, build_dir), point.impl, m, k, n, point.dtype,
                                    engine)
            results[strategy] = (*_measure(impl, options, backend, device, criterion, (A, B, C0), reference),
                                 options.scheme or "", options.split_k or "")
            if device:
                end = results[strategy][3]
        medians = {s: results[s][0].summary()["time_median_s"] for s in results}
        best = min(results, key=medians.__getitem__)
        samples, err, measured, _, scheme, split = results[best]
        summary = samples.summary()
        if records is not None:
            records.extend(samples.records)
        clocks = samples.clocks
        row.update(summary)
        flops = 2.0 * m * n * k
        row.update({
            "strategy": best or "", "scheme": scheme, "split_k": split, "rel_error": err, **check,
            "strategy_times": " ".join(f"{s}={t:.6e}" for s, t in medians.items()) if len(medians) > 1 else "",
            "tflops": flops / summary["time_median_s"] / 1e12,  # paper Eq. e:gpu_etflops
            "energy_pj_per_flop": summary["power_w"] * summary["time_median_s"] / flops * 1e12
            if summary["power_w"] != "" else "",
            "measured_extra_bytes": measured, "memory_check": _memory_check(engine, row["extra_bytes"], measured),
            "status": "ok" if err <= check["tolerance"] else "check_failed",
            "message": "" if err <= check["tolerance"] else
            f"relative error {err:.3e} above the tolerance {check['tolerance']:.3e}",
        })
    except Exception as err:  # noqa: BLE001 - recorded, and the sweep goes on
        first = (str(err).splitlines() or [""])[0][:160]
        fault = sticky_error(err) or backend.sticky_error()
        if fault:
            row.update({"status": "fault", "message": f"{fault} ({type(err).__name__}: {first})"[:200]})
        elif is_oom(err):
            row.update({"status": "oom", "message": f"out of memory: {first}"})
        else:
            row.update({"status": "error", "message": f"{type(err).__name__}: {first}"})
    finally:
        if not fault:
            try:
                backend.free()
            except Exception as err:  # noqa: BLE001 - a fault that surfaced only when the work was waited for
                fault = sticky_error(err) or backend.sticky_error()
                if not fault:
                    raise
                row.update({"status": "fault", "message": fault})
    if fault:
        return row  # nothing more can be read from a poisoned context
    if device:
        row.update(_telemetry(device, clocks, start, end))
    return row


def _check_limits(impl: Impl, point: Point, levels: int, norms: tuple, ref_norm: float) -> dict[str, object]:
    """The check's columns known before a result: its reference, the tolerance (the expected error's
    strassenbench.accuracy.TOLERANCE_FACTOR times), the expected error itself, and the paper's bound."""
    m, n, k = point.m, point.n, point.k
    args = (point.dtype, impl.bound_algorithm, levels)
    return {"reference": REFERENCE, "tolerance": tolerance(*args, k, impl.mode),
            "expected_error": expected_error(*args, k, impl.mode),
            "error_bound": bound_from_norms(*args, (m, n, k), norms, ALPHA, BETA, ref_norm, 0.0, impl.mode)}


def _telemetry(device, clocks: list[float], start: dict, end: dict) -> dict[str, object]:  # noqa: ANN001
    """A point's device readings beyond its samples' (Samples.summary: median clock and power, throttle reasons
    over every sample, the capped share): the SM clock of the first and last kept sample (read right after
    each), the memory clock as the timed loop began and ended, and the temperature as it ended."""
    return {
        "sm_clock_start_mhz": clocks[0] if clocks else start.get("sm_clock_mhz", ""),
        "sm_clock_end_mhz": clocks[-1] if clocks else end.get("sm_clock_mhz", ""),
        "mem_clock_start_mhz": start.get("mem_clock_mhz", ""), "mem_clock_end_mhz": end.get("mem_clock_mhz", ""),
        "temperature_c": end.get("temperature_c", ""), "nvml_process_bytes": device.process_bytes() or "",
    }


def _measure(impl: Impl, options: RunOptions, backend: Backend, device, criterion: Criterion,  # noqa: ANN001
             operands: tuple, reference: Reference) -> tuple:
    """One strategy of a point: its result checked against ``reference`` (strassenbench.freivalds), its extra
    memory measured, then its prepared call timed. (samples, relative error, measured extra bytes, the device's
    readings as the timed loop ended)."""
    engine = backend.engine
    A, B, C0 = operands
    C = C0.copy()
    impl.run(A, B, C, ALPHA, BETA, engine, options)
    backend.synchronize()
    err = reference.check(C).rel_error
    measured = backend.measure_extra(lambda: impl.run(A, B, C, ALPHA, BETA, engine, options))
    # Timed calls replay prepared work: launches and parameter arrays built once, workspace allocated once.
    call = impl.prepare_run(A, B, C, ALPHA, BETA, engine, options)
    end: dict = {}
    try:
        if device:
            samples = sample(call, backend.timer(options.build_dir), criterion, device.probe,
                             device.max_sm_clock_mhz())
            end = device.snapshot()  # temperature, power and clocks as the timed loop ends, before freeing
        else:
            samples = sample(call, backend.timer(options.build_dir), criterion)
    except TimingError as err:
        raise TimingError(f"{impl.name}: {err}") from None
    return samples, err, measured, end


def _base_row(point: Point, backend: Backend, seed: int) -> dict[str, object]:
    """The columns of a point's row known before it runs (the row of a point whose worker died is this)."""
    impl = get_impl(point.impl)
    m, n, k = point.m, point.n, point.k
    return {
        "engine": backend.engine, "commit": git_commit(), "source": source_hash(), "m": m, "n": n, "k": k,
        "dtype": point.dtype, "order": point.order if point.order is not None else "",
        "order_seed": point.order_seed if point.order_seed is not None else "",
        "alpha": ALPHA, "beta": BETA, "seed": seed, "sweep": point.sweep, "x": point.x if point.x is not None else "",
        "impl": impl.name, "label": impl.label, "strategy": "", "scheme": "", "strategy_request": point.strategy or "",
        "levels": impl.effective_levels(m, k, n), "extra_bytes": impl.extra_bytes(m, n, k, point.dtype),
        **backend.tags(),
    }


def _memory_check(engine: str, declared: int, measured: int) -> str:
    """cuda: the measured peak must equal the declaration within the pool's granularity per allocation.
    numpy: the CPU stand-ins allocate host temporaries of their own, so only "at least declared" is checked."""
    if engine == "numpy":
        return "ok" if measured >= declared else "under"
    slack = MEMORY_GRANULARITY * 16
    if measured > declared + slack:
        return "over"
    return "ok" if measured + slack >= declared else "under"


SYSTEM_HEAD = '{"engine":'  # how a system description begins (strassenbench.io.signature: its kind)


def system_json(backend: Backend) -> str:
    """The system description as the JSON text written beside the results (system.json)."""
    return json.dumps(system_description(backend), indent=2, default=str) + "\n"


def system_description(backend: Backend) -> dict[str, object]:
    """Host, GPU (pynvml, CUDA, cuBLAS) and the model's device attributes (for the report's peak and model)."""
    device = backend.device()
    gpu = (device.describe() or {"gpu": backend.tags()["gpu"]}) if device else {}  # CUDA's name without NVML
    out: dict[str, object] = {"engine": backend.engine, "commit": git_commit(), "host": host_description(),
                              "gpu": gpu}
    if backend.engine == "cuda":  # pragma: no cover - needs a GPU
        try:
            from ..device import query_device

            figures = query_device()  # the device's hardware figures, which the model's spec is made from
            out["model_spec"] = {key: figures[key] for key in ("name", "arch", "sm_count", "fp32_cores_per_sm",
                                                               "fp64_cores_per_sm", "boost_clock_hz",
                                                               "dram_bandwidth", "source")}
        except (RuntimeError, ValueError) as err:
            out["model_spec_error"] = str(err)
    return out


def check_sweep_files(out: Path) -> None:
    """The files a sweep writes beside its table, checked before anything is measured: its samples file and
    system.json are absent or of their kind (never a link, a folder or another command's file)."""
    check_samples_file(samples_path(out))
    check_replace(out.parent / "system.json", SYSTEM_HEAD)


def _load(out: Path) -> pd.DataFrame:
    """The finished points of an earlier run of this sweep (checked by strassenbench.results); a last row cut
    short by an interruption is dropped, so that its point is measured again."""
    if not out.exists():
        return pd.DataFrame(columns=[*COLUMNS, "strategy_request"])
    def cut(line: int) -> None:
        print(f"strassenbench: {out} line {line} was cut short; that point is measured again", file=sys.stderr)

    frame = read_results(out, "bench", on_cut=cut)  # strategy_request, scheme_request: text, "" when blank
    for column in ("strategy_request", "scheme_request"):  # a file written without them (a collected table)
        if column not in frame:
            frame[column] = ""
    _check_resumable(out, frame)
    return frame


def _check_resumable(out: Path, frame: pd.DataFrame) -> None:
    """ResultsError (the file left as it is) for what no sweep writes: a point twice, or an ok row without a
    median time."""
    keys = [_key_of(row) for row in frame.to_dict("records")]
    seen: dict[tuple, int] = {}
    for line, key in enumerate(keys, start=2):
        if key in seen:
            raise ResultsError(f"{out}: lines {seen[key]} and {line} hold one point ({key[0]} at {key[1]} x {key[3]} "
                               f"x {key[2]}, {key[4]}): a sweep measures each point once; remove one to resume")
        seen[key] = line
    untimed = (frame["status"].astype(str) == "ok") & frame["time_median_s"].isna()
    if untimed.any():
        raise ResultsError(f"{out}: line {int(untimed.to_numpy().argmax()) + 2} is an ok row without a time: no "
                           "sweep writes one; remove it to resume")


def _key_of(row: dict | pd.Series) -> tuple:
    return (str(row["impl"]), int(row["m"]), int(row["n"]), int(row["k"]), str(row["dtype"]),
            str(row["strategy_request"]), str(row["scheme_request"]) if "scheme_request" in row else "",
            str(row["sweep"]))


def run_sweep(
    points: Iterable[Point], backend: Backend, out: Path, criterion: Criterion, *, seed: int = 0,
    build_dir: str = "build", progress: bool | None = None, on_point: Callable[[dict], None] | None = None,
    retry_faults: bool = False, announce: Callable[[list[Point]], None] | None = None,
) -> pd.DataFrame:
    """Run every point not already in ``out`` (fault rows too with ``retry_faults``) in worker processes;
    rewrite ``out`` atomically after each one. ``announce`` is given the points to run before any runs."""
    from tqdm import tqdm

    out = Path(out)
    frame = _load(out)
    modes = sorted(timing_modes(frame) - {backend.timing})
    if modes:
        raise ValueError(f"{out} holds rows timed by {', '.join(modes)}; this run times by {backend.timing}: every "
                         f"row of a sweep is timed alike (another --out, or --timing {modes[0]})")
    records_of = frame.to_dict("records")
    rows = [r for r in records_of if not (retry_faults and r.get("status") == "fault")]
    done = {_key_of(r) for r in rows}
    todo = [p for p in points if p.key() not in done]
    if announce:
        announce(todo)
    samples, system = samples_path(out), out.parent / "system.json"
    check_sweep_files(out)
    keep_samples(samples, {tuple(str(r.get(name, "")) for name in KEY) for r in records_of})
    write_atomic(system, system_json(backend))
    bar = tqdm(todo, desc=f"bench {backend.engine}", unit="point", disable=None if progress is None else not progress)
    config = WorkerConfig(backend.engine, backend.timing, criterion, seed, build_dir, run_point)
    with Workers(config, backend) as workers:
        for point in bar:
            bar.set_postfix_str(f"{point.impl} {point.m}x{point.n}x{point.k}")
            row, records = workers.measure(point)
            if row is None:  # the worker died measuring it (records: how)
                row = {**_base_row(point, backend, seed), "status": "fault",
                       "message": f"the worker process died: {records}"}
                records = []
            row["scheme_request"] = point.scheme or ""
            size = append_samples(samples, row, str(row.get("timing", "")), records) if records else None
            rows.append(row)
            frame = pd.DataFrame(rows)
            frame = frame.reindex(columns=[*COLUMNS, *[c for c in frame.columns if c not in COLUMNS]], fill_value="")
            try:
                write_atomic(out, csv_text(frame))
            except OutputError:  # the row could not be written (a full disk): nor are its samples kept
                if size is not None:
                    take_back(samples, size)
                raise
            if on_point:
                on_point(row)
    return frame
