"""The model against measurements: `strassenbench model validate`. For every timed point of a sweep's result
files whose implementation the model has a formula for, the model's time at the point's shape, dtype and
strategy, by each model and scheme asked ("as-run": the scheme the point ran with), beside the measured median;
summed up per sweep, implementation, dtype, model and scheme:

    ratio          predicted / measured time: its median, smallest and largest over the points
    speedup error  mean over the points of |log(predicted speedup / measured speedup)|, each speedup over our
                   GEMM of the same mode timed at the same point (at the same strategy where the file has it;
                   the paper's own comparison, Sec. s:perf_predict); blank for the GEMMs and where the file has
                   no GEMM at the point

A ratio under 1 is a model faster than the GPU was. The paper's own model is a bound of that kind (peak rates);
where the ratio exceeds 1 the model missed something the GPU did (on the H100's atomic-timed sweeps, the
sequential scheme's ratio reaches 10 at 1,024, where the products shared the GPU). Every predicted number is a
prediction; the measured ones are the file's.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..gemm import DTYPES
from ..impls import ImplError, get_impl
from ..limits import MAX_DIMENSION
from ..options import MAX_SPLIT, RUN_SCHEMES, SPLITK
from ..families import MODES, counterpart
from ..strategies import STRATEGIES
from .files import VALIDATE, ModelError
from .gpus import GPUSpec
from .perf import impl_time, model_strategies, modeled

__all__ = ["AS_RUN", "BASELINE", "VALIDATE_COLUMNS", "validation_rows"]

AS_RUN = "as-run"  # the scheme each point ran with
BASELINE = {m.name: f"gemm-{m.suffix}" if m.suffix else "gemm" for m in MODES.values()}  # our GEMM per mode
VALIDATE_COLUMNS = list(VALIDATE.columns)  # model_validate.csv's (strassenbench.model.files)


def _model_strategy(impl: str, strategy: object) -> str | None:
    """The strategy the model takes for a point timed with ``strategy``: itself where the model ranks it for
    ``impl`` (strassenbench.model.perf.model_strategies: a tensor-core family's own), a SIMT strategy's
    counterpart in the family (as a sweep's --strategy stands for it), else None."""
    name = str(strategy)
    if name in model_strategies(impl):
        return name
    return counterpart(name, get_impl(impl).mode) if name in STRATEGIES else None


def _modeled(impl: str) -> bool:
    try:
        modeled(impl)
    except (ModelError, ImplError):
        return False
    return True


def _points(measured: pd.DataFrame) -> pd.DataFrame:
    """The timed points the model can predict: status ok, a modeled implementation, a strategy it knows."""
    ok = measured[(measured["status"] == "ok") & measured["impl"].astype(str).map(_modeled)].copy()
    ok["model_strategy"] = [_model_strategy(i, s) for i, s in zip(ok["impl"].astype(str), ok["strategy"])]
    return ok[ok["model_strategy"].notna()]


def _check(points: pd.DataFrame, gpu_key: str | None) -> None:
    """Refuse (ModelError naming the row: its ``where``, file and line, when the rows carry one) what no
    prediction can be set against: a time that is not positive, a side outside 1 to MAX_DIMENSION, a dtype the
    implementation does not compute, a scheme that is not one, a point twice (a file given twice?), rows of
    two GPUs, or of another GPU than the model's (``gpu_key``, e.g. H100, in the device's name)."""
    def refuse(bad: pd.Series, what: str) -> None:
        if bad.any():
            row = points[bad].iloc[0]
            raise ModelError(f"{row.get('where', 'the results')}: {what(row)}")

    times = pd.to_numeric(points["time_median_s"], errors="coerce")
    refuse(~(times > 0) | ~np.isfinite(times), lambda r: f"time_median_s {r['time_median_s']} of a timed point "
                                                         "is not a positive time")
    for side in ("m", "n", "k"):
        refuse(~points[side].between(1, MAX_DIMENSION), lambda r: f"{side} = {r[side]} is not from 1 to "
                                                                   f"{MAX_DIMENSION:,}")
    refuse(~points["dtype"].isin(DTYPES), lambda r: f"dtype {r['dtype']!r} is not one of {', '.join(DTYPES)}")
    if "split_k" in points:  # a splitk point's parts: what its prediction takes (_split_run)
        split = pd.to_numeric(points["split_k"], errors="coerce")  # a number or blank (strassenbench.results)
        refuse(split.notna() & ~(split.between(1, MAX_SPLIT) & (split == split.round())),
               lambda r: f"split_k {r['split_k']!r} is not an integer from 1 to {MAX_SPLIT}")
    refuse(pd.Series([d not in get_impl(str(i)).dtypes for i, d in zip(points["impl"], points["dtype"])],
                     index=points.index), lambda r: f"{r['impl']} does not compute {r['dtype']}")
    schemes = points["scheme"].fillna("").astype(str)
    refuse(~schemes.isin(["", *RUN_SCHEMES]),
           lambda r: f"scheme {r['scheme']!r} is not one of {', '.join(RUN_SCHEMES)}")
    refuse(points.duplicated(["sweep", "impl", "m", "n", "k", "dtype", "strategy", "scheme"]),
           lambda r: f"{r['impl']} at {r['m']} x {r['k']} x {r['n']} is there twice (a file given twice?)")
    gpus = sorted({str(g) for g in points["gpu"]})
    if len(gpus) > 1:
        raise ModelError(f"the results are of {len(gpus)} GPUs ({', '.join(map(repr, gpus))}): one GPU's at a time")
    if gpu_key is not None and gpu_key.lower() not in gpus[0].lower():
        raise ModelError(f"the results are of {gpus[0]!r}, not of the model's {gpu_key} (--gpu: the GPU they "
                         "were measured on)")


def _split_run(row, ran: str, run: str) -> int | None:  # noqa: ANN001 - a row of _points
    """The parts a splitk point ran its products' k in (its split_k), where it is predicted as it ran; None (the
    model's fastest split) for any other."""
    split = getattr(row, "split_k", "")
    if run != SPLITK or ran != SPLITK or split in ("", None) or pd.isna(split):
        return None
    return int(split)


def validation_rows(spec: GPUSpec, measured: pd.DataFrame, models: list[str], schemes: list[str],
                    resources: pd.DataFrame | None = None, gpu_key: str | None = None) -> pd.DataFrame:
    """The summary (VALIDATE_COLUMNS) of the model against ``measured`` (bench result rows of one GPU: of
    ``gpu_key``'s where given); its ``attrs["left_out"]``: the timed rows the model has no formula for."""
    points = _points(measured)
    if points.empty:
        raise ModelError("no timed point of an implementation the model has a formula for (the paper's, or a "
                         "fused one) in the results")
    _check(points, gpu_key)
    gemm: dict[tuple, float] = {}  # each mode's GEMM per point, at its strategy and at any
    for r in points[points["impl"].isin(list(BASELINE.values()))].itertuples():
        for key in ((r.impl, r.sweep, r.dtype, r.m, r.k, r.n, r.model_strategy), (r.impl, r.sweep, r.dtype, r.m, r.k,
                                                                                   r.n)):
            gemm[key] = min(gemm.get(key, math.inf), float(r.time_median_s))
    rows = []
    for (sweep, impl, dtype), part in points.groupby(["sweep", "impl", "dtype"], sort=False):
        for model in models:
            for scheme in schemes:
                ratios, errors = [], []
                for r in part.itertuples():
                    ran = str(r.scheme) if str(r.scheme) in RUN_SCHEMES else "sequential"
                    run = ran if scheme == AS_RUN else scheme
                    s = model_strategies(str(impl))[r.model_strategy]
                    shape = (int(r.m), int(r.k), int(r.n))
                    predicted = impl_time(spec, str(impl), s, *shape, str(dtype), resources, model, run,
                                          split=_split_run(r, ran, run)).seconds
                    ratios.append(predicted / float(r.time_median_s))
                    baseline = BASELINE[get_impl(str(impl)).mode]
                    key = (baseline, sweep, dtype, *shape)
                    base = gemm.get((*key, r.model_strategy), gemm.get(key))
                    if impl != baseline and base is not None:
                        predicted_gemm = impl_time(spec, baseline, s, *shape, str(dtype), resources, model).seconds
                        errors.append(abs(math.log((predicted_gemm / predicted) / (base / float(r.time_median_s)))))
                rows.append({"gpu": spec.name, "source": "model against measured", "sweep": sweep, "impl": impl,
                             "dtype": dtype, "model": model, "scheme": scheme, "points": len(ratios),
                             "median_ratio": float(np.median(ratios)), "min_ratio": min(ratios),
                             "max_ratio": max(ratios),
                             "speedup_error": float(np.mean(errors)) if errors else math.nan})
    frame = pd.DataFrame(rows, columns=VALIDATE_COLUMNS)
    frame.attrs["left_out"] = int((measured["status"] == "ok").sum()) - len(points)
    return frame
