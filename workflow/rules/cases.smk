# What each step runs: the architectures, the implementations of the run and of each sweep, the dtypes each
# is timed in, the verification cases and the kernels' plans, and the words their jobs take.
from strassenbench.families import DMMA
from strassenbench.sweeps import MODEL_SQUARE_IMPLS, MODEL_SQUARE_STRATEGIES, SWEEPS

ARCHS = sorted(set(GRID["build"].get("archs", config["archs"])) | {g["arch"] for g in GPUS.values() if g["arch"]})
SWEEP_NAMES = list(SWEEPS)
# The tensor-core implementations and the accuracy table (beyond the paper): where the profile turns them on and
# every GPU of the run has TF32 tensor cores (sm_80 and later; the CPU emulator runs them too).
TENSORCORE = bool(GRID.get("tensorcore", False)) and all(
    int(g["arch"][len("sm_"):]) >= 80 for g in GPUS.values() if g["arch"])
def runs_on(impl, arch):
    """Whether an implementation's kernels exist for ``arch`` (its family's architectures)."""
    from strassenbench.impls import get_impl

    return get_impl(impl).family.builds_for(arch)


# The profile's tensor-core implementations: tensor_impls, or its own list; on GPUs, those every GPU of the run has
# (wgmma's: sm_90 only; strassenbench.families).
TENSOR_RUN = (config["tensor_impls"] if GRID.get("tensorcore") is True else GRID.get("tensorcore") or []) \
    if TENSORCORE else []
TENSOR_RUN = [impl for impl in TENSOR_RUN if all(runs_on(impl, g["arch"]) for g in GPUS.values() if g["arch"])]
# The accuracy table's implementations: accuracy_impls, those every GPU of the run has.
ACCURACY_RUN = [impl for impl in config["accuracy_impls"]
                if all(runs_on(impl, g["arch"]) for g in GPUS.values() if g["arch"])]
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
    """One case per (algorithm, levels, dtype), ALG_L{levels}_{dtype}, each job verifying every shape of the
    profile; the algorithms list at the configured levels from 1 up where their fused kernels exist (two levels
    of a 4x4x4 algorithm do not)."""
    from strassenbench.fused.build import plan_fits

    cases = [(config["algorithm"], levels) for levels in GRID["verify"]["levels"]]
    cases += [(alg, levels) for alg in ALGORITHMS for levels in GRID["verify"]["levels"]
              if levels and plan_fits(alg, levels)]  # levels whose fused kernels exist (docs/pick.md)
    return [f"{alg}_L{levels}_{dtype}" for alg, levels in dict.fromkeys(cases) for dtype in GRID["verify"]["dtypes"]]


def kernel_plans():
    """--plan ALG:L for the kernels beyond the default build (GEMM and Strassen): the fused implementations of
    other algorithms, and the verified algorithms where the verify jobs run them on a GPU (the records profile
    builds those everywhere: building them is what it checks). On the CPU backend nothing runs the verified
    plans' kernels, so they are not compiled. --presum when a presum implementation is timed."""
    from strassenbench.impls import get_impl

    from strassenbench.fused.build import plan_fits

    verified = BACKEND == "cuda" or PROFILE == "records"
    plans = [(alg, levels) for alg in [config["algorithm"], *ALGORITHMS]
             for levels in GRID["verify"]["levels"] if verified and levels and plan_fits(alg, levels)]
    timed = [*config["impls"], *(config["controls"] if BACKEND == "cuda" else [])]  # on a CPU the controls run
    fused = [impl for impl in map(get_impl, timed) if impl.kind == "fused"]  # on numpy
    plans += [(impl.algorithm, impl.levels) for impl in fused]
    presum = ["--presum"] if any(impl.scheme for impl in fused) else []  # the presum scheme's kernels too
    return presum + [word for alg, levels in dict.fromkeys(plans) if alg != "strassen"
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


def sweep_dtype_args(wc):
    """--dtype words of a sweep job (swept_dtypes; none for bench's default, float32 alone)."""
    dtypes = swept_dtypes(wc.sweep, wc.impl)
    return [] if dtypes == ["float32"] else [word for dtype in dtypes for word in ("--dtype", dtype)]


def fused_args(impl):
    """--strategy/--scheme where the implementation takes them, on the GPU (the numpy stand-ins take none)."""
    from strassenbench.impls import get_impl

    options = get_impl(impl).options if BACKEND == "cuda" else ()
    values = {"strategy": SWEEP_STRATEGY, "scheme": config["scheme"]}
    return [word for option in options for word in (f"--{option}", values[option])]
