"""The check can fail at every size: its reference (strassenbench.freivalds), its tolerance (the expected error,
strassenbench.accuracy), and the planted wrong results of the test hook (strassenbench.inject) caught on the
numpy engine, the emulator and the CPU device, while no correct implementation fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from strassenbench.accuracy import exact_reference, expected_error, relative_error, tolerance
from strassenbench.bench.backends import NumpyBackend
from strassenbench.bench.runner import Point, run_point
from strassenbench.bench.timers import Criterion
from strassenbench.freivalds import REFERENCE, Reference, freivalds
from strassenbench.impls import get_impl
from strassenbench.results import read_results
from strassenbench.verify import verify

ROOT = Path(__file__).resolve().parents[2]
ONCE = Criterion(min_samples=1, min_time=0.0, precision=1.0, max_time=0.0, warmup=0, warmup_time=0.0)
HOOK = "STRASSENBENCH_INJECT_FAILURE"
SIMT = ("cublas", "gemm", "strassen1", "strassen2-direct", "strassen1-ref", "strassen2-ref", "strassen2-hybrid",
        "grey322-11-50x1")


def _operands(m: int, n: int, k: int, dtype: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1, 1, s).astype(dtype) for s in ((m, k), (k, n), (m, n)))


@pytest.mark.parametrize(("shape", "dtype"), [((64, 64, 64), "float32"), ((301, 97, 1030), "float32"),
                                              ((1, 200, 130), "float32"), ((256, 256, 256), "float64")])
def test_the_reference_estimates_the_exact_error(shape, dtype) -> None:  # noqa: ANN001
    """Along 8 sign directions the relative error is within 15% of the exact one (an exact product,
    accuracy.exact_reference), for float32 and float64 results alike: the reference is good far below float64."""
    m, n, k = shape
    A, B, C0 = _operands(m, n, k, dtype)
    C = (A.astype(np.float64) @ B + C0).astype(dtype)
    exact = relative_error(C, exact_reference(A, B, C0, 1.0, 1.0))
    assert exact > 0
    assert freivalds(A, B, C0, C, 1.0, 1.0).rel_error == pytest.approx(exact, rel=0.15 if m > 1 else 0.6)


def test_the_reference_is_exact_on_integers_and_shares_no_product() -> None:
    """Integer operands: the check finds no error at all (every slice product exact); one unit wrong in one entry
    of C is seen; the reference never calls a GEMM of the operands (it multiplies them by 8 columns only)."""
    rng = np.random.default_rng(3)
    A, B, C0 = (rng.integers(-64, 64, s).astype(np.float32) for s in ((90, 70), (70, 80), (90, 80)))
    C = A @ B + C0
    reference = Reference(A, B, C0, 1.0, 1.0)
    assert reference.check(C).rel_error == 0.0
    C[17, 33] += 1
    assert reference.check(C).rel_error > 0
    assert reference.X.shape == (80, 8) and set(np.unique(reference.X)) == {-1.0, 1.0}


def test_the_expected_error_matches_every_correct_measured_row() -> None:
    """On the H100's and H200's sweeps (rows with a float64 reference: m n k <= 8,192^3), the measured error of
    every SIMT and 1xTF32 implementation is within 0.5x to 1.2x of the expected error, and within the tolerance;
    the staged 3xTF32 kernels are below it (staged accumulation)."""
    seen = 0
    for folder in ("nvidia-h100-80gb-hbm3", "nvidia-h200"):
        for name in ("square", "rankk", "panel", "algorithms"):
            path = ROOT / "data" / folder / f"{name}.csv"
            if not path.exists():
                continue
            rows = read_results(path, "bench")
            rows = rows[(rows["status"] == "ok") & (rows["m"] * rows["n"] * rows["k"] <= 8192**3)]
            for r in rows.itertuples():
                impl = get_impl(r.impl)
                levels = impl.effective_levels(r.m, r.k, r.n)
                expected = expected_error(r.dtype, impl.bound_algorithm, levels, r.k, impl.mode)
                ratio = r.rel_error / expected
                if impl.mode == "3xtf32" and folder == "nvidia-h200":
                    continue  # measured before staged accumulation: see the next test
                if impl.mode == "3xtf32":
                    assert 0.2 < ratio < 1.0, (folder, name, r.impl, r.k, ratio)
                elif impl.kind in ("reference", "blas") and impl.mode == "simt":
                    assert 0.35 < ratio < 1.2, (folder, name, r.impl, r.k, ratio)  # cuBLAS's own choices inside
                else:
                    assert 0.75 < ratio < 1.2, (folder, name, r.impl, r.k, ratio)
                seen += 1
    assert seen > 200


def test_the_h200s_unstaged_3xtf32_gemm_fails_the_check() -> None:
    """The H200's 3xTF32 GEMM before staged accumulation (35x cuBLAS SGEMM's error at 8,192) passed the paper's
    bound as ok; against the tolerance it fails at every size, and the staged kernels measured on the H100 pass."""
    h200 = read_results(ROOT / "data" / "nvidia-h200" / "square.csv", "bench")
    h100 = read_results(ROOT / "data" / "nvidia-h100-80gb-hbm3" / "square.csv", "bench")
    for frame, fails in ((h200, True), (h100, False)):
        rows = frame[(frame["impl"] == "gemm-3xtf32") & (frame["status"] == "ok")]
        assert len(rows) >= 5
        for r in rows.itertuples():
            assert (r.rel_error > tolerance("float32", "strassen", 0, r.k, "3xtf32")) == fails, (r.k, r.rel_error)
            assert r.rel_error < r.error_bound  # the paper's bound passes both


@pytest.mark.parametrize("size", [256, 512, 1024])
def test_planted_wrong_results_fail_the_check_on_the_numpy_engine(size, monkeypatch) -> None:  # noqa: ANN001
    """Every SIMT implementation passes with a tolerance under 1, a named reference and a stop reason; C left as
    beta C0 (zero) and one product left out (drop) are check_failed, at every size from 256 to 1,024."""
    for impl in SIMT:
        monkeypatch.delenv(HOOK, raising=False)
        row = run_point(Point(impl, size, size, size), NumpyBackend(), ONCE)
        assert row["status"] == "ok" and row["tolerance"] < 1e-4, (impl, row["message"])
        assert row["reference"] == REFERENCE and row["stop"] == "precision" and row["error_bound"] > row["tolerance"]
        for kind in ("zero", "drop"):
            monkeypatch.setenv(HOOK, f"{impl}:*:*:*:{kind}")
            row = run_point(Point(impl, size, size, size), NumpyBackend(), ONCE)
            assert row["status"] == "check_failed" and row["rel_error"] > 0.3, (impl, kind, row["rel_error"])


@pytest.mark.parametrize(("impl", "kinds"), [("gemm-3xtf32", (None, "zero", "drop", "tf32")),
                                             ("strassen1-3xtf32", (None, "tf32")), ("strassen2-3xtf32", ("tf32",)),
                                             ("cublas-tf32", (None, "zero")), ("strassen1-tf32", (None, "drop"))])
def test_planted_wrong_results_fail_the_check_in_tf32(impl, kinds, monkeypatch) -> None:  # noqa: ANN001
    """In TF32: a 3xTF32 implementation computing in 1xTF32 (tf32) is check_failed, as are zero and drop; the
    correct ones pass."""
    for kind in kinds:
        if kind:
            monkeypatch.setenv(HOOK, f"{impl}:256:256:256:{kind}")
        else:
            monkeypatch.delenv(HOOK, raising=False)
        row = run_point(Point(impl, 256, 256, 256), NumpyBackend(), ONCE)
        assert row["status"] == ("ok" if kind is None else "check_failed"), (impl, kind, row["rel_error"])
        assert row["tolerance"] < (1e-5 if "3xtf32" in impl else 1e-2)


def test_planted_wrong_results_fail_verify_on_the_emulator(monkeypatch) -> None:  # noqa: ANN001
    """The CUDA kernels on the emulator: an odd shape passes; each planted wrong result FAILs, the fused
    kernels computing it themselves (a plan without its first product, a 3xTF32 kernel in 1xTF32 mode)."""
    shape = {"m": 37, "n": 29, "k": 41}
    cases = [("strassen1", "drop", "Small"), ("strassen2-direct", "zero", "Small"), ("gemm", "drop", "Small"),
             ("strassen1-3xtf32", "tf32", "TcSmall")]
    for impl, kind, strategy in cases:
        monkeypatch.delenv(HOOK, raising=False)
        options = {"strategy": strategy, "scheme": "atomic"} if impl != "gemm" else {"strategy": strategy}
        good = verify(impl=impl, engine="emu", beta=1.0, options=options, **shape)
        assert good["status"] == "ok" and good["reference"] == REFERENCE, good
        monkeypatch.setenv(HOOK, f"{impl}:*:*:*:{kind}")
        bad = verify(impl=impl, engine="emu", beta=1.0, options=options, **shape)
        assert bad["status"] == "FAIL" and float(bad["rel_error"]) > 100 * float(bad["tolerance"]), (impl, kind, bad)


@pytest.mark.cudasim
def test_planted_wrong_results_fail_the_check_on_the_cpu_device(cpu_device, sim_build, tmp_path,  # noqa: ANN001
                                                                   monkeypatch) -> None:
    """The cuda engine's own code (the CPU device): a sweep with drop planted in 1-level Strassen at one size and
    zero in cuBLAS at another records those two points as check_failed, every other point ok."""
    from strassenbench.cli import main

    out = tmp_path / "square.csv"
    argv = ["bench", "--engine", "cuda", "--impl", "cublas,strassen1,strassen1-3xtf32", "--sizes", "40,57",
            "--out", str(out), "--build-dir", sim_build, "--strategy", "Small", "--scheme", "atomic",
            "--min-time", "0", "--min-samples", "2", "--precision", "1", "--warmup-time", "0", "--no-progress"]
    monkeypatch.setenv(HOOK, "strassen1:57:57:57:drop")
    assert main(argv) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    failed = {(r.impl, r.m) for r in frame.itertuples() if r.status == "check_failed"}
    assert failed == {("strassen1", 57)}, frame[["impl", "m", "status", "rel_error", "tolerance"]]
    assert (frame["reference"] == REFERENCE).all() and (frame["tolerance"] < 1e-3).all()
    out.unlink()
    monkeypatch.setenv(HOOK, "strassen1-3xtf32:40:40:40:tf32")
    assert main(argv) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    assert {(r.impl, r.m) for r in frame.itertuples() if r.status == "check_failed"} == {("strassen1-3xtf32", 40)}


def test_best_times_every_strategy_up_to_4096_and_the_models_top_three_above() -> None:
    """The paper's tuning: every strategy where the largest side is at most 4,096, the model's three fastest
    above (by the GPU's model), named ones always; three per tensor-core family; none where none is taken."""
    from strassenbench.bench.forecast import candidates
    from strassenbench.model.gpus import SPECS
    from strassenbench.model.perf import ranked_strategies
    from strassenbench.strategies import STRATEGIES, TENSOR_STRATEGIES

    h100 = SPECS["H100"]
    assert candidates("strassen1", 4096, 4096, 4096, "float32", "best", "cuda", h100) == list(STRATEGIES)
    top = candidates("strassen1", 8192, 8192, 8192, "float32", "best", "cuda", h100, scheme="atomic")
    ranked = [name for name, _ in ranked_strategies(h100, "strassen1", 8192, 8192, 8192, "float32", scheme="atomic")]
    assert len(top) == 3 and set(top) == set(ranked[:3])
    named = candidates("strassen1", 8192, 8192, 8192, "float32", "best+Huge+Small", "cuda", h100)
    assert {"Huge", "Small"} <= set(named) and len(named) <= 5
    assert candidates("gemm-3xtf32", 8192, 8192, 8192, "float32", "best", "cuda", h100) == list(TENSOR_STRATEGIES)
    assert candidates("gemm-3xtf32", 64, 64, 64, "float32", "Small", "cuda") == ["TcSmall"]
    assert candidates("cublas", 64, 64, 64, "float32", "best", "cuda") == [None]
    assert candidates("strassen1", 64, 64, 64, "float32", None, "numpy") == [None]


def test_the_forecast_is_a_labelled_prediction_under_the_caps() -> None:
    from strassenbench.bench.forecast import describe, forecast
    from strassenbench.model.gpus import SPECS

    points = [Point(i, x, x, x, strategy="best", scheme="atomic") for x in (2048, 8192) for i in ("gemm", "strassen1",
                                                                                                   "cublas")]
    criterion = Criterion()
    found = forecast(points, criterion, "cuda", SPECS["H100"])
    assert found.points == 6 and found.calls == (6 + 6 + 1) + (3 + 3 + 1) and 0 < found.predicted_s < found.cap_s
    assert found.cap_s == pytest.approx(found.calls * (0.3 + criterion.warmup_time + criterion.max_time))
    assert "predicted wall time" in describe(found, "H100") and "prediction" in describe(found, "H100")
    blind = forecast(points, criterion, "numpy")
    assert blind.predicted_s is None and "predicted" not in describe(blind)


def test_the_order_is_shuffled_per_size_from_a_recorded_seed() -> None:
    """No implementation always follows another: each size's order is drawn from the seed and the size, the
    same whatever else the sweep holds (a resumed sweep keeps it), and each point knows its place and seed."""
    from strassenbench.bench.runner import shuffled

    impls = ("cublas", "gemm", "strassen1", "strassen2-direct", "strassen1-ref", "cutlass")
    points = [Point(i, x, x, x) for x in (1024, 2048, 4096, 8192) for i in impls]
    once = shuffled(points, 7)
    assert shuffled(points, 7) == once and shuffled(points, 8) != once
    for x in (1024, 2048, 4096, 8192):
        group = [p for p in once if p.m == x]
        assert sorted(p.impl for p in group) == sorted(impls) and [p.order for p in group] == list(range(6))
        assert all(p.order_seed == 7 for p in group)
        alone = shuffled([p for p in points if p.m == x], 7)
        assert [p.impl for p in alone] == [p.impl for p in group]
    firsts = {next(p.impl for p in once if p.m == x) for x in (1024, 2048, 4096, 8192)}
    assert len(firsts) > 1


def test_strategies_table_has_a_row_per_strategy_and_marks_the_best(tmp_path) -> None:  # noqa: ANN001
    """--strategy best records every strategy's median (strategy_times); collect --by-strategy makes
    strategies.csv of it: a row each, best on the kept one, its other statistics blank."""
    from strassenbench.cli import main
    from strassenbench.results import by_strategy

    frame = pd.DataFrame([{"impl": "strassen1", "m": 1000, "n": 1000, "k": 1000, "status": "ok", "strategy": "Large",
                           "strategy_request": "best", "time_median_s": 2e-3, "tflops": 1.0, "samples": 40,
                           "strategy_times": "Small=3e-3 Large=2e-3 Huge=2.5e-3"}])
    rows = by_strategy(frame)
    assert list(rows["strategy"]) == ["Small", "Large", "Huge"] and list(rows["best"]) == [False, True, False]
    assert list(rows["samples"]) == ["", 40, ""] and rows["tflops"].iloc[0] == pytest.approx(2e9 / 3e-3 / 1e12)
    assert list(rows["strategy_request"]) == ["Small", "Large", "Huge"]
    from strassenbench.bench.runner import COLUMNS

    class EmulatorTiming(NumpyBackend):  # the emulator timed by host clocks: --strategy best without a GPU
        engine = "emu"

    part = tmp_path / "best.csv"
    run = run_point(Point("strassen1", 40, 40, 40, strategy="best", scheme="atomic", sweep="square", x=40),
                    EmulatorTiming(), ONCE)
    assert run["status"] == "ok" and len(run["strategy_times"].split()) == 6
    row = {**run, "strategy_request": "best", "scheme_request": "atomic"}
    pd.DataFrame([row]).reindex(columns=[*COLUMNS, "strategy_request", "scheme_request"]).to_csv(part, index=False)
    assert main(["collect", str(part), "--by-strategy", "--out", str(tmp_path / "strategies.csv")]) == 0
    table = read_results(tmp_path / "strategies.csv", "bench")
    assert len(table) == 6 and table["best"].astype(str).eq("True").sum() == 1
    assert table.loc[table["best"].astype(str) == "True", "strategy"].item() == run["strategy"]
