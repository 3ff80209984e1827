# How the run times: the points every GPU job times, the timing method chosen once for all of them (so that every
# row is timed alike), and the sampling rule's words.
# The strategies rule: the best per size, and fig:model_square's pair (strassenbench.sweeps).
STRATEGIES_REQUEST = "+".join(["best", *MODEL_SQUARE_STRATEGIES])


def strategy_impls():
    """The strategies rule's implementations: our GEMM and every fused SIMT Strassen this run times."""
    from strassenbench.impls import get_impl

    fused = [i for i in run_impls() if get_impl(i).kind in ("fused", "hybrid") and not get_impl(i).tensor]
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
    strassenbench.bench.queue.plan_timing (what `bench` plans a sweep by) over every point the sweeps and the
    strategies job time (auto is blocking unless a call queues more than the blocking kernel may hold)."""
    from strassenbench.bench.queue import plan_timing
    from strassenbench.impls import ImplError

    if BACKEND != "cuda":
        return None
    try:
        choice = plan_timing(GRID["timing"].get("method", "auto"), timed_points())
    except (ValueError, ImplError) as err:
        refuse(f"config: profiles.{PROFILE}.timing.method: {err}")
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
