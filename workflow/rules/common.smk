# Helpers shared by the rules: the resolved backend, the effective profile, the device folder and targets.
import os
import sys

from snakemake.exceptions import WorkflowError

from strassenbench.device import gpu_arch, resolve_backend, slug, visible_gpus
from strassenbench.fused.cuda import build_arch
from strassenbench.strategies import STRATEGIES
from strassenbench.sweeps import SWEEPS

# Names accepted in any case by the schema, used as spelled in the project from here on.
config["profile"] = config["profile"].lower()
config["strategy"] = {s.lower(): s for s in ["best", *STRATEGIES]}[config["strategy"].lower()]

if config["assume_gpu"]:  # plan as if this GPU were visible (dry runs: `-n --config assume_gpu=NAME@sm_XY`)
    _name, _, _arch = config["assume_gpu"].partition("@")
    BACKEND, BACKEND_REASON = "cuda", f"assumed GPU {_name}"
    DEVICE, DEVICE_ARCH = slug(_name), (build_arch(_arch[len("sm_"):]) if _arch else None)
else:
    BACKEND, BACKEND_REASON = resolve_backend(config["backend"])
    DEVICE = slug(visible_gpus()[0]) if BACKEND == "cuda" else "cpu"
    DEVICE_ARCH = build_arch(gpu_arch()[len("sm_"):]) if BACKEND == "cuda" else None  # sm_86 runs the sm_80 build
PROFILE = config["profile"] if BACKEND == "cuda" else "smoke"
GRID = config["profiles"][PROFILE]


def _check_config():
    """What the schema cannot say, checked before any job runs: every size range of every profile parses
    (start <= stop, step > 0) and every compare folder exists."""
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
    for folder in config["compare"]:
        if not os.path.isdir(folder):
            raise WorkflowError(f"config: compare folder {folder!r} does not exist")


_check_config()
ARCHS = sorted(set(config["archs"]) | ({DEVICE_ARCH} if DEVICE_ARCH else set()))
MODEL_GPU = config["model_gpu"] if config["model_gpu"] != "auto" else ("device" if BACKEND == "cuda" else "V100")
SWEEP_NAMES = list(SWEEPS)

if BACKEND != "cuda":
    print(
        f"strassenbench: CPU run ({BACKEND_REASON}): the {BACKEND} engine (and the CUDA kernels on the CPU "
        "emulator for the implementation checks) at smoke sizes; no GPU number will be produced.",
        file=sys.stderr,
    )


def verify_cases():
    """One case per (levels, dtype, shape): ALG_L{levels}_{M}x{K}x{N}_{dtype}."""
    return [
        f"{config['algorithm']}_L{levels}_{shape}_{dtype}"
        for levels in GRID["verify"]["levels"]
        for dtype in GRID["verify"]["dtypes"]
        for shape in GRID["verify"]["shapes"]
    ]


def run_impls():
    """The configured implementations this backend runs: the CUTLASS baseline only on a GPU (it has no CPU
    stand-in), every other one everywhere."""
    from strassenbench.impls import get_impl

    return [i for i in config["impls"] if BACKEND == "cuda" or set(get_impl(i).engines) - {"cuda"}]


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
    return f"--m {m} --k {k} --n {n}"


def sweep_fixed(sweep):
    fixed = GRID["sweeps"][sweep].get("fixed")
    return f"--fixed {fixed}" if fixed else ""


def timing_args():
    t = GRID["timing"]
    return f"--min-samples {t['min_samples']} --min-time {t['min_time']} --max-time {t['max_time']}"


def fused_args(impl):
    """--strategy/--scheme where the implementation takes them, on the GPU (the numpy stand-ins take none)."""
    from strassenbench.impls import get_impl

    options = get_impl(impl).options if BACKEND == "cuda" else ()
    return " ".join(f"--{option} {config[option]}" for option in options)


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
    return inputs


def all_outputs():
    data = f"data/{DEVICE}"
    outputs = [
        "report/index.html",
        *schedule_targets(),
        *[f"{data}/model_{s}.csv" for s in SWEEP_NAMES],
        f"{data}/model_crossover.csv",
    ]
    if config["compare"]:
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
