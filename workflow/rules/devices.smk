# The run's configuration and devices: names as spelled in the project, the devices each data/<device>/ folder
# measures (backend, GPUs, architectures), the effective profile and its grid, the algorithms, and the checks the
# schema cannot make. Included first: every other rule file reads what it sets.
import os
import sys

from strassenbench.device import gpu_arch, resolve_backend, slug, spec_key, visible_gpus
from strassenbench.fused.arch import CudaError, build_arch
from strassenbench.strategies import STRATEGIES
from strassenbench.workflow_config import WorkflowConfigError, check_compare, check_names, listed_gpus, refuse

# Names accepted in any case by the schema, used as spelled in the project from here on.
config["profile"] = config["profile"].lower()
config["strategy"] = {s.lower(): s for s in ["best", *STRATEGIES]}[config["strategy"].lower()]


def _config_error(check, *args):
    """A check of strassenbench.workflow_config; its refusal stops the workflow (refuse), naming the key."""
    try:
        return check(*args)
    except WorkflowConfigError as err:
        refuse(str(err))


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
    try:
        BACKEND, BACKEND_REASON = resolve_backend(config["backend"])
    except ValueError as err:  # cuda asked for, and no GPU or no CuPy
        refuse(f"config: backend {config['backend']!r}: {err}")
    if BACKEND == "cuda":  # sm_86 runs the sm_80 build
        _name, _arch = visible_gpus()[0], gpu_arch()
        if _arch is None:
            refuse(f"config: backend {config['backend']!r}: GPU {_name}: its compute capability could not be read")
        try:
            GPUS = {slug(_name): {"name": _name, "arch": build_arch(_arch[len("sm_"):]), "model": ""}}
        except CudaError as err:  # a GPU older than every build (before the V100)
            refuse(f"config: backend {config['backend']!r}: GPU {_name}: {err}")
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
    return spec_key(GPUS[wildcards.device]["name"], SPECS) or "device"
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
                refuse(f"config: profiles.{name}.{where}.sizes {text!r}: {err}")
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
            refuse(f"config: {key} {value!r}: {err}")


_check_config()
