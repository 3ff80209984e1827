# Helpers shared by the rules: the resolved backend, the effective profile, the device folder and targets.
import os
import sys

from snakemake.exceptions import WorkflowError

from strassenbench.device import gpu_arch, resolve_backend, slug, visible_gpus
from strassenbench.fused.cuda import build_arch
from strassenbench.families import DMMA
from strassenbench.strategies import STRATEGIES
from strassenbench.sweeps import SWEEPS
from strassenbench.workflow_config import WorkflowConfigError, check_compare, check_names, listed_gpus

# Names accepted in any case by the schema, used as spelled in the project from here on.
config["profile"] = config["profile"].lower()
config["strategy"] = {s.lower(): s for s in ["best", *STRATEGIES]}[config["strategy"].lower()]


def _config_error(check, *args):
    """A check of strassenbench.workflow_config, its refusal as one WorkflowError naming the key."""
    try:
        return check(*args)
    except WorkflowConfigError as err:
        raise WorkflowError(str(err)) from None


# Names that become file names, and compare folders, stay inside the project (checked before anything else).
_config_error(check_names, config)
_config_error(check_compare, config["compare"])

# The devices this run measures, each into data/<device>/: the GPUs listed in `gpus` (a cluster: each GPU job
# asks the scheduler for its model), the assumed one (dry runs: `-n --config assume_gpu=NAME@sm_XY`), or the
# visible GPU, or the CPU.
if config["gpus"] or config["assume_gpu"]:
    GPUS = _config_error(listed_gpus, *((config["gpus"], "gpus") if config["gpus"] else
                                       ([config["assume_gpu"]], "assume_gpu")))
    BACKEND = "cuda"
    BACKEND_REASON = f"listed GPUs {', '.join(g['name'] for g in GPUS.values())}"
else:
    BACKEND, BACKEND_REASON = resolve_backend(config["backend"])
    if BACKEND == "cuda":  # sm_86 runs the sm_80 build
        GPUS = {slug(visible_gpus()[0]): {"name": visible_gpus()[0], "arch": build_arch(gpu_arch()[len("sm_"):]),
                                          "model": ""}}
    else:
        GPUS = {"cpu": {"name": "cpu", "arch": None, "model": ""}}
DEVICES = list(GPUS)
DEVICE = DEVICES[0]  # the report's device; the others are compared with it
PROFILE = config["profile"] if BACKEND == "cuda" or config["profile"] == "records" else "smoke"
GPU_JOB = 1 if BACKEND == "cuda" else 0  # timing jobs hold a whole GPU; on the CPU backend they ask for none
TIMING_NODE = "--exclusive" if BACKEND == "cuda" else ""  # SLURM: a GPU timing job has its node to itself


def gpu_model(wildcards):
    """The scheduler's GPU type for a job of data/<device>/ ('' where none is listed: any GPU)."""
    return GPUS[wildcards.device]["model"]


def expect_device(wildcards):
    """A GPU job refuses to write data/<device>/ from another GPU (a cluster that gave it another model)."""
    return ["--expect-device", wildcards.device] if BACKEND == "cuda" else []


def model_gpu(wildcards):
    """The GPU of a device's model predictions: the config's, else the built-in spec its name holds (V100,
    A100, H100), else its own attributes (queried on it: the job then runs on that GPU), V100 on the CPU."""
    from strassenbench.model.gpus import SPECS

    if config["model_gpu"] != "auto":
        return config["model_gpu"]
    if BACKEND != "cuda":
        return "V100"
    name = GPUS[wildcards.device]["name"].lower()
    return next((key for key in SPECS if key.lower() in name), "device")
GRID = config["profiles"][PROFILE]
# The sweeps' strategy: the profile's where it names one, else the top-level one (best: the paper's tuning).
SWEEP_STRATEGY = {s.lower(): s for s in ["best", *STRATEGIES]}[GRID.get("strategy", config["strategy"]).lower()]


def _algorithms():
    """The algorithms this run verifies, builds and compares: the profile's (catalogue: every one `strassenbench
    algorithms` lists but the paper's own Strassen and the classical product), else the config's list."""
    from strassenbench.algebra.algorithm import algorithm_names

    if GRID.get("algorithms") == "catalogue":
        return [a for a in algorithm_names() if a not in ("strassen", "classical")]
    return config["algorithms"]


ALGORITHMS = _algorithms()


def winner_sizes(wildcards=None):
    """The sizes of the winners table: the strategies figure's, and 2,048, 8,192 and 16,384 (the report's table)."""
    from strassenbench.sweeps import parse_sizes

    sizes = {*parse_sizes(GRID["model_strategies"]["sizes"]), 2048, 8192, 16384}
    return ",".join(str(x) for x in sorted(sizes))


def _check_config():
    """What the schema cannot say, checked before any job runs: every size range of every profile parses
    (start <= stop, step > 0), and every algorithm and implementation is known (coefficient files are loaded
    and Brent-checked)."""
    from strassenbench.algebra.algorithm import AlgorithmError
    from strassenbench.impls import ImplError, algorithm_impl, get_impl
    from strassenbench.sweeps import parse_sizes

    for name, grid in config["profiles"].items():
        found = [(f"sweeps.{s}", g["sizes"]) for s, g in grid.get("sweeps", {}).items()]
        if "model_strategies" in grid:
            found.append(("model_strategies", grid["model_strategies"]["sizes"]))
        for where, text in found:
            try:
                parse_sizes(text)
            except ValueError as err:
                raise WorkflowError(f"config: profiles.{name}.{where}.sizes {text!r}: {err}") from None
    checks = [("algorithm", config["algorithm"], algorithm_impl)]
    checks += [("algorithms", alg, algorithm_impl) for alg in config["algorithms"]]
    checks += [("impls", impl, get_impl) for impl in config["impls"]]
    checks += [(key, impl, get_impl) for key in ("controls", "tensor_impls", "accuracy_impls") for impl in config[key]]
    checks += [(f"profiles.{name}.tensorcore", impl, get_impl) for name, grid in config["profiles"].items()
               if isinstance(grid.get("tensorcore"), list) for impl in grid["tensorcore"]]
    for key, value, check in checks:
        try:
            check(value)
        except (AlgorithmError, ImplError) as err:
            raise WorkflowError(f"config: {key} {value!r}: {err}") from None


_check_config()
ARCHS = sorted(set(GRID["build"].get("archs", config["archs"])) | {g["arch"] for g in GPUS.values() if g["arch"]})
SWEEP_NAMES = list(SWEEPS)
# The tensor-core implementations and the accuracy table (beyond the paper): where the profile turns them on and
# every GPU of the run has TF32 tensor cores (sm_80 and later; the CPU emulator runs them too).
TENSORCORE = bool(GRID.get("tensorcore", False)) and all(
    int(g["arch"][len("sm_"):]) >= 80 for g in GPUS.values() if g["arch"])
# The profile's tensor-core implementations: tensor_impls, or its own list.
TENSOR_RUN = (config["tensor_impls"] if GRID.get("tensorcore") is True else GRID.get("tensorcore") or []) \
    if TENSORCORE else []
if GRID.get("tensorcore", False) and not TENSORCORE:
    print("strassenbench: tensorcore is on but a GPU of this run is older than sm_80 (no TF32 tensor cores): "
          "the tensor-core implementations and the accuracy table are left out", file=sys.stderr)

if BACKEND != "cuda":
    print(
        f"strassenbench: CPU run ({BACKEND_REASON}): the {BACKEND} engine (and the CUDA kernels on the CPU "
        "emulator for the implementation checks) at smoke sizes; no GPU number will be produced.",
        file=sys.stderr,
    )
    if config["profile"] != PROFILE:  # said, not done silently
        print(f"strassenbench: profile {config['profile']} replaced by {PROFILE}: its sizes need a GPU; to plan "
              f"the {config['profile']} run without one: snakemake -n --config profile={config['profile']} "
              "assume_gpu=NAME@sm_XY", file=sys.stderr)


def verify_cases():
    """One case per (algorithm, levels, dtype, shape): ALG_L{levels}_{M}x{K}x{N}_{dtype}; the algorithms list
    at the configured levels from 1 up where their fused kernels exist (two levels of a 4x4x4 algorithm do not)."""
    from strassenbench.fused.build import plan_fits

    cases = [(config["algorithm"], levels) for levels in GRID["verify"]["levels"]]
    cases += [(alg, levels) for alg in ALGORITHMS for levels in GRID["verify"]["levels"]
              if levels and plan_fits(alg, levels)]  # levels whose fused kernels exist (docs/pick.md)
    return [
        f"{alg}_L{levels}_{shape}_{dtype}"
        for alg, levels in dict.fromkeys(cases)
        for dtype in GRID["verify"]["dtypes"]
        for shape in GRID["verify"]["shapes"]
    ]


def kernel_plans():
    """--plan ALG:L for the kernels beyond the default build (GEMM and Strassen): the fused implementations of
    other algorithms, and the verified algorithms where the verify jobs run them on a GPU (the records profile
    builds those everywhere: building them is what it checks). On the CPU backend nothing runs the verified
    plans' kernels, so they are not compiled."""
    from strassenbench.impls import get_impl

    from strassenbench.fused.build import plan_fits

    verified = BACKEND == "cuda" or PROFILE == "records"
    plans = [(alg, levels) for alg in [config["algorithm"], *ALGORITHMS]
             for levels in GRID["verify"]["levels"] if verified and levels and plan_fits(alg, levels)]
    timed = [*config["impls"], *(config["controls"] if BACKEND == "cuda" else [])]  # on a CPU the controls run
    plans += [(impl.algorithm, impl.levels) for impl in map(get_impl, timed) if impl.kind == "fused"]  # on numpy
    return [word for alg, levels in dict.fromkeys(plans) if alg != "strassen"
            for word in ("--plan", f"{alg}:{levels}")]


def crossover_impls():
    """1-level Strassen and one level of every configured algorithm, for the model's crossover table."""
    from strassenbench.impls import algorithm_impl

    return ",".join(dict.fromkeys(["strassen1", *(algorithm_impl(alg).name for alg in ALGORITHMS)]))


def model_impls():
    """The implementations of each sweep's predictions: the paper's, one level of every configured algorithm,
    and every fused implementation this run times (the report's model and algorithms figures)."""
    from strassenbench.impls import get_impl
    from strassenbench.model.perf import MODELED_IMPLS

    fused = [i for i in run_impls() if get_impl(i).kind == "fused"]
    return ",".join(dict.fromkeys([*MODELED_IMPLS, *crossover_impls().split(","), *fused]))


def run_impls():
    """The configured implementations this backend runs: the CUTLASS baseline only on a GPU (it has no CPU
    stand-in), every other one everywhere."""
    from strassenbench.impls import get_impl

    impls = [*config["impls"], *TENSOR_RUN]
    return [i for i in dict.fromkeys(impls) if BACKEND == "cuda" or set(get_impl(i).engines) - {"cuda"}]


def sweep_impls(sweep):
    """The implementations a sweep times: run_impls, and in the square sweep the controls."""
    return list(dict.fromkeys([*run_impls(), *(config["controls"] if sweep == "square" else [])]))


def impl_dtypes(impl):
    from strassenbench.impls import get_impl

    return get_impl(impl).dtypes


def impl_engine(impl):
    """cuda on a GPU; on the CPU the emulator (the real kernels) where the implementation has one, else numpy."""
    from strassenbench.impls import get_impl

    if BACKEND == "cuda":
        return "cuda"
    return "emu" if "emu" in get_impl(impl).engines else "numpy"


def impl_shape():
    """The implementations' check uses the profile's second verify shape (MxKxN): it does not divide into tiles."""
    shapes = GRID["verify"]["shapes"]
    m, k, n = shapes[min(1, len(shapes) - 1)].split("x")
    return ["--m", m, "--k", k, "--n", n]


def sweep_fixed(sweep):
    fixed = GRID["sweeps"][sweep].get("fixed")
    return ["--fixed", str(fixed)] if fixed else []


def swept_dtypes(sweep, impl):
    """The dtypes a sweep times an implementation in: float32, or those it computes when float32 is not one
    (the DMMA ones: float64); cuBLAS and our GEMM in both on the square sweep when the run times a DMMA
    implementation (the report's float64 figure sets them beside it)."""
    from strassenbench.impls import get_impl

    dtypes = get_impl(impl).dtypes
    if "float32" not in dtypes:
        return list(dtypes)
    if sweep == "square" and impl in ("cublas", "gemm") and any(get_impl(i).family.name == DMMA for i in run_impls()):
        return ["float32", "float64"]
    return ["float32"]


STRATEGIES_REQUEST = "best+Huge+Small"  # the strategies rule: the best per size, and fig:model_square's pair


def strategy_impls():
    """The strategies rule's implementations: our GEMM and every fused SIMT Strassen this run times."""
    from strassenbench.impls import get_impl

    fused = [i for i in run_impls() if get_impl(i).kind in ("fused", "hybrid") and get_impl(i).mode == "simt"]
    return list(dict.fromkeys(["gemm", *fused]))


def timed_points():
    """Every point the GPU jobs time: the sweeps (strassenbench.bench.runner.Point) and the strategies rule's."""
    from strassenbench.bench.runner import Point
    from strassenbench.sweeps import parse_sizes, shape

    points = []
    for sweep, grid in GRID["sweeps"].items():
        for x in parse_sizes(grid["sizes"]):
            m, k, n = shape(sweep, x, grid.get("fixed"))
            points += [Point(impl, m, n, k, dtype, SWEEP_STRATEGY, config["scheme"], sweep, x)
                       for impl in sweep_impls(sweep) for dtype in swept_dtypes(sweep, impl)]
    for x in parse_sizes(GRID["model_strategies"]["sizes"]):  # the strategies rule
        points += [Point(impl, x, x, x, "float32", STRATEGIES_REQUEST, "sequential", "square", x)
                   for impl in strategy_impls()]
    return points


def run_timing():
    """The GPU timing method of the whole run, said once when auto chose graph; None on the CPU backend. It is
    strassenbench.bench.queue.choose_timing over every call that the sweeps and the strategies job time (auto
    is blocking unless one queues more than the blocking kernel may hold)."""
    from strassenbench.bench.queue import choose_timing
    from strassenbench.bench.runner import queue_points
    from strassenbench.impls import ImplError

    if BACKEND != "cuda":
        return None
    points = timed_points()
    try:
        choice = choose_timing(GRID["timing"].get("method", "auto"),
                               (call for p in points for call in queue_points(p)))
    except (ValueError, ImplError) as err:
        raise WorkflowError(f"config: profiles.{PROFILE}.timing.method: {err}") from None
    if choice.reason:
        print(f"strassenbench: {choice.reason}", file=sys.stderr)
    return choice.method


RUN_TIMING = run_timing()


def timing_args():
    """The sampling rule, and on a GPU the run's timing method (one for every job, so every row is timed alike)."""
    t = GRID["timing"]
    warmup = ["--warmup-time", str(t["warmup_time"])] if "warmup_time" in t else []
    method = ["--timing", RUN_TIMING] if RUN_TIMING else []
    return ["--min-samples", str(t["min_samples"]), "--min-time", str(t["min_time"]), "--max-time",
            str(t["max_time"]), *warmup, *method]


def sweep_dtypes(wc):
    """--dtype words of a sweep job (swept_dtypes; none for bench's default, float32 alone)."""
    dtypes = swept_dtypes(wc.sweep, wc.impl)
    return [] if dtypes == ["float32"] else [word for dtype in dtypes for word in ("--dtype", dtype)]


def fused_args(impl):
    """--strategy/--scheme where the implementation takes them, on the GPU (the numpy stand-ins take none)."""
    from strassenbench.impls import get_impl

    options = get_impl(impl).options if BACKEND == "cuda" else ()
    values = {"strategy": SWEEP_STRATEGY, "scheme": config["scheme"]}
    return [word for option in options for word in (f"--{option}", values[option])]


def schedule_targets():
    return [f"report/tables/schedule_L{lv}_S{s}.md" for lv in (1, 2) for s in config["streams"]]


def report_inputs():
    data = f"data/{DEVICE}"
    inputs = {
        "sweeps": [f"{data}/{s}.csv" for s in SWEEP_NAMES],
        "memlimit": f"{data}/memlimit.csv",
        "verify": f"{data}/verify.csv",
        "verify_impls": f"{data}/verify_impls.csv",
        "system": f"{data}/system.json",
        "resources": "build/resources.csv",
    }
    if BACKEND == "cuda":
        inputs["strategies"] = f"{data}/strategies.csv"
        inputs["validate"] = f"{data}/model_validate.csv"
    if TENSORCORE:
        inputs["accuracy"] = f"{data}/accuracy.csv"
    return inputs


def all_outputs():
    """The report (of the first device), every device's results and model, and the comparison of the devices
    with each other and with the compare folders when there is more than one run."""
    outputs = ["report/index.html", *schedule_targets()]
    for device in DEVICES:
        data = f"data/{device}"
        outputs += [f"{data}/model_{s}.csv" for s in SWEEP_NAMES] + [f"{data}/model_crossover.csv"]
        outputs += [f"{data}/{s}.csv" for s in SWEEP_NAMES] + [f"{data}/memlimit.csv", f"{data}/system.json"]
        outputs += [f"{data}/verify.csv", f"{data}/verify_impls.csv"]
        outputs += [f"{data}/accuracy.csv"] if TENSORCORE else []
    if config["compare"] or len(DEVICES) > 1:
        outputs.append("report/compare/index.html")
    return outputs


def finish_message():
    """The main command's last words: where the report is, and on a CPU run what was run and why."""
    lines = [f"strassenbench: report in {os.path.abspath('report/index.html')}"]
    if BACKEND != "cuda":
        lines.append(f"strassenbench: CPU run ({BACKEND_REASON}): the smoke profile on the {BACKEND} engine; "
                     "no GPU number was produced")
    return "\n".join(lines)


onsuccess:
    print(finish_message(), file=sys.stderr)
