# Helpers shared by the rules: the resolved backend, the effective profile and the target list.
import sys

from strassenbench.device import resolve_backend, slug, visible_gpus

BACKEND, BACKEND_REASON = resolve_backend(config["backend"])
PROFILE = config["profile"] if BACKEND == "cuda" else "smoke"
GRID = config["profiles"][PROFILE]
DEVICE = slug(visible_gpus()[0]) if BACKEND == "cuda" else "cpu"

if BACKEND != "cuda":
    print(
        f"strassenbench: CPU run ({BACKEND_REASON}): the {BACKEND} engine at smoke sizes; "
        "no GPU number will be produced.",
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


def table_targets():
    levels = sorted({1, 2, *GRID["verify"]["levels"]} - {0})
    variants = [f"report/tables/variants_L{lv}.md" for lv in levels]
    schedules = [f"report/tables/schedule_L{lv}_S{s}.md" for lv in levels for s in config["streams"]]
    return variants + schedules


def all_outputs():
    return [f"data/{DEVICE}/verify.csv", *table_targets()]
