"""Where one implementation overtakes another in a sweep: the arithmetic shared by the model's crossover
tables (strassenbench.model.predict, from predicted times) and the report's break-even marks (from measured
times). It computes nothing of the model: it reads a table of times."""

from __future__ import annotations

import pandas as pd

__all__ = ["break_even"]


def break_even(frame: pd.DataFrame, impl: str, baseline: str = "gemm") -> dict[str, object]:
    """Where ``impl`` overtakes ``baseline`` in a sweep (``frame``: columns x, impl and time_s).

    ``first``: the smallest size where it is faster; ``stable``: the smallest size from which it is faster
    at every larger size of the grid (None when it never is); plus the largest speedup and where.
    """
    pivot = frame.pivot_table(index="x", columns="impl", values="time_s").sort_index()
    speedup = pivot[baseline] / pivot[impl]
    faster = speedup > 1.0
    first = int(faster.idxmax()) if faster.any() else None
    stable = None
    for x in reversed(speedup.index):
        if not faster[x]:
            break
        stable = int(x)
    return {
        "impl": impl, "baseline": baseline, "first": first, "stable": stable,
        "max_speedup": round(float(speedup.max()), 4), "at": int(speedup.idxmax()),
    }
