# The run's predicted wall time (strassenbench.bench.forecast), said before any job runs on a GPU run, and as
# the last line of a dry run (`snakemake -n --config profile=paper assume_gpu="NAME@sm_XY"`): the timed jobs,
# the sweeps and the strategies rule, by the model of the report's GPU. A prediction, and labelled one.
import atexit
from types import SimpleNamespace

from strassenbench.bench.forecast import duration


def run_forecast():
    """(the line that says the forecast, the predicted seconds or None) of the timed jobs; None on the CPU."""
    from strassenbench.bench.forecast import describe, forecast
    from strassenbench.bench.timers import Criterion
    from strassenbench.model.gpus import get_gpu
    from strassenbench.model.perf import ModelError, load_resources

    if BACKEND != "cuda":
        return None
    t = GRID["timing"]
    criterion = Criterion(min_samples=t["min_samples"], min_time=t["min_time"], max_time=t["max_time"],
                          warmup_time=t.get("warmup_time", 0.2))
    try:
        spec = get_gpu(model_gpu(SimpleNamespace(device=DEVICE)))
        resources = load_resources("build/resources.csv")
    except (ModelError, RuntimeError, ValueError) as err:  # "device" queried without a GPU, a broken build
        spec, resources = None, None
        print(f"strassenbench: no predicted wall time ({err})", file=sys.stderr)
    found = forecast(timed_points(), criterion, "cuda", spec, resources)
    return f"the timed jobs of {GPUS[DEVICE]['name']}: {describe(found, spec.name if spec else None)}", \
        found.predicted_s


FORECAST = run_forecast()
if FORECAST:
    print(f"strassenbench: {FORECAST[0]}", file=sys.stderr)

    def _dry_run_forecast():
        """A dry run ends with the forecast: Snakemake has printed its plan by then."""
        if workflow.dryrun and FORECAST[1] is not None:
            print(f"strassenbench: profile {PROFILE} on {GPUS[DEVICE]['name']}: predicted wall time "
                  f"{duration(FORECAST[1])}", file=sys.stderr)

    atexit.register(_dry_run_forecast)
