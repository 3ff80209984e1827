"""The model of the paper's task-parallel schemes (strassenbench.model.schemes): a launch alone is the paper's
kernel time, concurrent launches share the waves, a stage takes at least its longest stream, the sequential
scheme is the earlier model, and on the H100's measured sweeps (all timed with the atomic scheme) the atomic
model predicts Strassen's speedup over the GEMM far closer than the sequential one."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from strassenbench.algebra.primitives import primitives, variant_counts
from strassenbench.cli import main
from strassenbench.model.files import PREDICTIONS, read_model
from strassenbench.model.gpus import SPECS
from strassenbench.fused.instances import kernel_counts
from strassenbench.fused.launch import plan_launches
from strassenbench.model.issue import write_mode_table
from strassenbench.model.perf import active_blocks, best_strategy, impl_time, kernel_load, kernel_time, load_resources
from strassenbench.model.schemes import Load, alone, scheme_launches, stage_time
from strassenbench.model.tensor import tensor_active_blocks
from strassenbench.model.terms import INFINITE
from strassenbench.plan import make_plan
from strassenbench.strategies import DMMA_STRATEGIES, STRATEGIES, TENSOR_STRATEGIES

ROOT = Path(__file__).resolve().parents[2]
H100_DATA = ROOT / "data" / "nvidia-h100-80gb-hbm3"
HUGE = STRATEGIES["Huge"]
H100 = SPECS["H100"]


def _load(blocks: int, resident: int, work: float = 1.0) -> Load:
    return Load(blocks, resident, (work, 2 * work, 0.5 * work), (1.0, 1.0, 1.0), (0.25, 0.125, 0.5))


# Predictions at 0bbab2b, before the schemes: (impl, n, model, best strategy, seconds) on the H100 with its
# committed resources.csv. The sequential scheme, the default, must give them still.
BEFORE_SCHEMES = [("strassen1", 4096, "issue", "Huge", 0.002098165656565657),
                  ("strassen2-hybrid", 3072, "issue", "Medium", 0.00266086219375848),
                  ("strassen2-direct", 2048, "l2", "Small", 0.00140525898989899),
                  ("grey322-11-50x1", 7168, "paper", "Huge", 0.016247466666666665)]


def test_the_sequential_default_predicts_what_the_model_did_before_the_schemes(monkeypatch) -> None:
    """Without what a block issues beyond its k (issue.BLOCK_SLICES, added since), exactly the numbers of then."""
    from strassenbench.model import issue

    monkeypatch.setattr(issue, "BLOCK_SLICES", 0)
    resources = load_resources(H100_DATA / "resources_sm_90.csv")
    for impl, n, model, strategy, seconds in BEFORE_SCHEMES:
        name, best = best_strategy(H100, impl, n, n, n, "float32", resources, model)
        assert name == strategy and best.seconds == pytest.approx(seconds, rel=1e-12)
        got = impl_time(H100, impl, STRATEGIES[strategy], n, n, n, "float32", resources, model, "sequential")
        assert got.seconds == pytest.approx(seconds, rel=1e-12) and got.t_stream == 0.0
    assert kernel_load(H100, HUGE, (1, 1, 1), 64, 64, 64, "float32", 0) is None
    assert alone("issue", None) == INFINITE


def test_concurrent_launches_share_whole_waves() -> None:
    # 100 + 100 blocks, 132 at once: together 200 / 132 of a wave, rounded to 2 waves; each alone takes 1 wave
    a = _load(100, 132)
    both = stage_time("paper", [[a], [a]])
    assert both.t_flop == pytest.approx(2 * 132 * 1.0)  # 2 full waves of 132 blocks
    assert both.t_flop == pytest.approx(alone("paper", a.batched(2)).t_flop)  # as one batch of both
    assert both.t_gmop == pytest.approx(2 * 0.25) and both.t_l2 == pytest.approx(2 * 0.5)
    assert both.t_stream == alone("paper", a).seconds  # each stream holds one launch
    # 66 blocks at 1 per SM beside 132 at 2 per SM fill exactly one wave: no rounding
    half, full = _load(66, 132, 3.0), _load(132, 264, 1.0)
    mixed = stage_time("paper", [[half], [full]])
    assert mixed.t_flop == pytest.approx(66 * 3.0 + 132 * 1.0)
    # one stream of both: its launches one after another, each alone
    serial = stage_time("paper", [[half, full]])
    assert serial.seconds == pytest.approx(alone("paper", half).seconds + alone("paper", full).seconds)
    assert stage_time("paper", [[a], [None]]) == INFINITE


def test_sharing_never_costs_more_than_one_launch_after_another() -> None:
    # A full wave of costly blocks beside one cheap block: 1 + 1/132 waves round to 2, and charging the idle
    # second wave at the blocks' average cost (T_smop: 264/133 (132 x 20 + 2) = 5,244) would take longer than
    # the two launches one after another (132 x 20 + 132 x 2 = 2,904).
    costly, cheap = _load(132, 132, 10.0), _load(1, 132, 1.0)
    serial = alone("paper", costly).seconds + alone("paper", cheap).seconds
    assert serial == pytest.approx(2904.0)
    assert stage_time("paper", [[costly], [cheap]]).seconds == pytest.approx(serial)


def _launched(algorithm: str, levels: int, scheme: str, dtype: str, mode: str = "simt") -> list:
    """The program strassenbench.fused.launch makes, as (variant, products) per launch, stages -> streams."""
    prims = {p.name: p.counts for p in primitives(algorithm, levels)}
    strategy = {"simt": STRATEGIES["Small"], "dmma": DMMA_STRATEGIES["DmmaSmall"]}[mode]
    side = 64 * 3**levels
    plan = make_plan(algorithm, levels, side, side, side)
    A, B, C = (np.zeros((side, side), dtype=dtype) for _ in range(3))
    program = plan_launches(plan, A, B, C, 1.0, 1.0, strategy=strategy, scheme=scheme, mode=mode)
    return [[[(prims[launch.products[0]], len(launch.products)) for launch in lane] for lane in stage]
            for stage in program.stages]


@pytest.mark.parametrize("algorithm, levels", [("strassen", 1), ("strassen", 2), ("grey322-11-50", 1),
                                               ("classical222-8-24", 2)])
def test_the_model_launches_what_the_kernels_launch(algorithm: str, levels: int) -> None:
    """The atomic and streams schemes' launches (variant, products per launch, streams, stages) as
    strassenbench.fused.launch makes them; the sequential scheme's as a multiset (its order is the variants')."""
    for dtype, mode in (("float32", "simt"), ("float64", "dmma")):
        for scheme in ("atomic", "streams"):
            assert scheme_launches(algorithm, levels, scheme, None, dtype) == \
                _launched(algorithm, levels, scheme, dtype, mode), (scheme, dtype)
        sequential = _launched(algorithm, levels, "sequential", dtype, mode)
        assert sorted(map(str, scheme_launches(algorithm, levels, "sequential", None, dtype))) == \
            sorted(str([[launch]]) for stage in sequential for lane in stage for launch in lane)
    # 64 products of one variant at 2 levels of the classical 2x2x2: Z (the batch) is the kernels' dtype's
    batches = {dtype: [z for _, z in scheme_launches("classical222-8-24", 2, "atomic", None, dtype)[0][0]]
               for dtype in ("float32", "float64")}
    assert batches["float32"] == [64] and batches["float64"] == [56, 8]


def test_the_atomic_scheme_times_the_atomic_kernels() -> None:
    """The atomic scheme launches the atomicAdd write-back kernels: where the build's table gives them other
    blocks per SM than the plain ones, the model takes theirs (TcHuge 3xTF32, variant 4x2x4: 1 plain, 2 atomic)."""
    resources = load_resources(H100_DATA / "resources_sm_90.csv")
    w = (4, 2, 4)
    table = write_mode_table(resources, "atomic")
    plain = tensor_active_blocks(H100, TENSOR_STRATEGIES["TcHuge"], w, "3xtf32", resources)
    atomic = tensor_active_blocks(H100, TENSOR_STRATEGIES["TcHuge"], w, "3xtf32", table)
    assert plain == (1, "resources.csv") and atomic == (2, "resources.csv")
    assert write_mode_table(resources, "plain") is resources and write_mode_table(resources, "atomic") is table
    assert len(table) == len(resources[resources["write_mode"] == "plain"])  # each kernel once: its atomic row


def test_variants_in_the_order_of_their_first_product() -> None:
    for algorithm, levels in (("strassen", 1), ("strassen", 2), ("grey322-11-50", 1), ("strassen+grey322-11-50", 2)):
        seen: list[tuple[int, int, int]] = []
        for p in primitives(algorithm, levels):
            if p.counts not in seen:
                seen.append(p.counts)
        assert list(variant_counts(algorithm, levels, ordered=True)) == seen
        assert variant_counts(algorithm, levels, ordered=True) == variant_counts(algorithm, levels)


def test_sequential_is_the_sum_of_every_product_alone() -> None:
    for impl, levels in (("strassen1", 1), ("strassen2-direct", 2)):
        for n in (1024, 3000, 8192):
            half = math.ceil(n / 2**levels)
            expected = 0.0
            for w, count in variant_counts("strassen", levels).items():
                active, _ = active_blocks(H100, HUGE, kernel_counts(w), "float32")
                expected += kernel_time(H100, HUGE, w, half, half, half, "float32", active).seconds * count
            got = impl_time(H100, impl, HUGE, n, n, n, "float32")
            assert got == impl_time(H100, impl, HUGE, n, n, n, "float32", scheme="sequential")
            assert got.seconds == pytest.approx(expected, rel=1e-12) and got.t_stream == 0.0


@pytest.mark.parametrize("gpu", sorted(SPECS))
def test_concurrency_never_slower_and_the_same_when_every_product_fills_the_gpu(gpu: str) -> None:
    spec = SPECS[gpu]
    for impl in ("strassen1", "strassen2-direct", "strassen2-hybrid", "grey322-11-50x1"):
        for n in (512, 1024, 1536, 2048, 4096, 8192, 16384):
            sequential = impl_time(spec, impl, HUGE, n, n, n, "float32").seconds
            for scheme in ("streams", "atomic"):
                assert impl_time(spec, impl, HUGE, n, n, n, "float32", scheme=scheme).seconds <= sequential * (
                    1 + 1e-12), (gpu, impl, n, scheme)
    # at 20,480 each of 1-level Strassen's products is many waves: sharing them saves under 3%
    big = 20480
    sequential = impl_time(spec, "strassen1", HUGE, big, big, big, "float32").seconds
    atomic = impl_time(spec, "strassen1", HUGE, big, big, big, "float32", scheme="atomic").seconds
    assert atomic >= 0.97 * sequential


def test_atomic_at_small_sizes_one_wave_of_every_product() -> None:
    # H100, 1,024: each of the 7 products is 16 Huge blocks, 112 together, under one wave of 132: one wave of
    # k = 512 against the GEMM's one wave of k = 1,024. Four variants on four streams, one launch each.
    n = 1024
    atomic = impl_time(H100, "strassen1", HUGE, n, n, n, "float32", scheme="atomic")
    gemm = impl_time(H100, "gemm", HUGE, n, n, n, "float32")
    assert 1.5 < gemm.seconds / atomic.seconds < 2.1
    one_stream = impl_time(H100, "strassen1", HUGE, n, n, n, "float32", scheme="atomic", streams=1)
    assert one_stream.limiter == "stream" and one_stream.seconds == pytest.approx(4 * atomic.seconds, rel=0.1)


def _speedup_errors(frame: pd.DataFrame, resources: pd.DataFrame, scheme: str) -> list[float]:
    """|log(predicted / measured)| of each fused implementation's speedup over our GEMM, per measured point."""
    errors = []
    timed = frame.pivot_table(index=["m", "k", "n"], columns="impl", values="time_min_s", aggfunc="min")
    for (m, k, n), row in timed.iterrows():
        gemm = impl_time(H100, "gemm", HUGE, m, k, n, "float32", resources).seconds
        for impl in ("strassen1", "strassen2-direct", "strassen2-hybrid"):
            if pd.notna(row.get(impl)):
                predicted = gemm / impl_time(H100, impl, HUGE, m, k, n, "float32", resources, scheme=scheme).seconds
                errors.append(abs(math.log(predicted / (row["gemm"] / row[impl]))))
    return errors


def test_the_atomic_model_predicts_the_h100_sweeps_speedups_closer() -> None:
    """Every fused point of the committed H100 square and rank-k sweeps ran the atomic scheme (Huge); against
    it, the sequential model's error in the speedup over GEMM is large at small sizes (it runs 7 or 49 products
    of one wave each one after another), and the atomic model's is less than half of it."""
    resources = load_resources(H100_DATA / "resources_sm_90.csv")
    for sweep in ("square", "rankk"):
        frame = pd.read_csv(H100_DATA / f"{sweep}.csv")
        frame = frame[(frame["status"] == "ok") & (frame["dtype"] == "float32")]
        fused = frame[frame["impl"].isin(["strassen1", "strassen2-direct", "strassen2-hybrid"])]
        assert set(fused["scheme"]) == {"atomic"} and set(fused["strategy"]) == {"Huge"}
        sequential = np.mean(_speedup_errors(frame, resources, "sequential"))
        atomic = np.mean(_speedup_errors(frame, resources, "atomic"))
        assert atomic < 0.5 * sequential, (sweep, sequential, atomic)
        assert atomic < 0.25, (sweep, atomic)  # within about 28% on the mean


def test_model_predict_takes_schemes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "model.csv"
    assert main(["model", "predict", "--gpu", "H100", "--impl", "gemm,strassen1", "--sizes", "1024",
                 "--strategy", "Huge", "--scheme", "Atomic", "--scheme", "sequential", "--out", str(out)]) == 0
    frame = read_model(out, PREDICTIONS)
    assert sorted(frame["scheme"]) == ["atomic", "atomic", "sequential", "sequential"]
    by = frame.set_index(["impl", "scheme"])
    assert by.loc[("strassen1", "atomic"), "time_s"] < by.loc[("strassen1", "sequential"), "time_s"]
    assert by.loc[("strassen1", "atomic"), "t_stream_s"] > 0 == by.loc[("strassen1", "sequential"), "t_stream_s"]
    assert by.loc[("gemm", "atomic"), "time_s"] == by.loc[("gemm", "sequential"), "time_s"]
    capsys.readouterr()
    assert main(["model", "predict", "--gpu", "H100", "--scheme", "batched", "--out", str(out)]) == 2
    assert "--scheme: invalid choice: 'batched'" in capsys.readouterr().err
    assert read_model(out, PREDICTIONS).equals(frame)


def test_the_sweeps_figure_says_which_scheme_its_predictions_ran(tmp_path: Path) -> None:
    from strassenbench.model.predict import predict
    from strassenbench.report.contents import caption
    from strassenbench.report.figures_model import fig_model_sweeps

    context = {"device": "d", "model": "H100", "data": "data/x", "sources": [], "missing": ""}
    atomic = predict(H100, ["gemm", "strassen1"], "square", [1024, 2048], "Huge", scheme="atomic")
    text = caption(fig_model_sweeps(atomic, tmp_path, "H100"), context)
    assert "run by the atomic scheme" in text
    older = atomic.drop(columns="scheme")  # a file from before the column: the sequential model
    assert "one after another (sequential)" in caption(fig_model_sweeps(older, tmp_path, "H100"), context)
    hostile = atomic.assign(scheme="<script>alert(1)</script>")  # a value from someone's results folder
    assert "script" not in caption(fig_model_sweeps(hostile, tmp_path, "H100"), context)
    both = pd.concat([atomic, predict(H100, ["gemm", "strassen1"], "square", [1024, 2048], "Huge")])
    drawn = fig_model_sweeps(both, tmp_path, "H100")  # a curve per scheme, each named
    assert {"1-level (ours) (model, atomic)", "1-level (ours) (model, sequential)"} <= set(drawn.lines)
    assert "run by the atomic and sequential schemes" in caption(drawn, context)


def test_the_report_tables_show_a_scheme_or_say_it_is_unknown() -> None:
    from strassenbench.report.analysis import scheme_name as _scheme
    from strassenbench.report.winners import _scheme_of

    assert [_scheme(v) for v in ("atomic", "", None, float("nan"), "a|b\n<i>")] == [
        "atomic", "sequential", "sequential", "sequential", "(unknown)"]
    assert _scheme_of(pd.DataFrame({"scheme": ["atomic", "x|y"]})) == "atomic, (unknown)"
    assert _scheme_of(pd.DataFrame({"impl": ["gemm"]})) == "sequential"


def test_pick_ranks_by_the_scheme_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from strassenbench.model.pick import rank

    names = ["cublas", "gemm", "strassen1", "strassen2-direct"]
    sequential = {c.impl: c.seconds for c in rank(H100, 1024, 1024, 1024, names=names)}
    atomic = {c.impl: c.seconds for c in rank(H100, 1024, 1024, 1024, names=names, scheme="atomic")}
    assert sequential["gemm"] == atomic["gemm"] and sequential["cublas"] == atomic["cublas"]
    assert sequential["strassen1"] > sequential["gemm"] > atomic["strassen1"]
    out = tmp_path / "pick.csv"
    assert main(["pick", "--gpu", "H100", "--m", "1024", "--n", "1024", "--k", "1024", "--data", str(tmp_path),
                 "--scheme", "ATOMIC", "--top", "300", "--format", "csv", "--out", str(out)]) == 0
    assert "scheme atomic" in capsys.readouterr().err
    picked = pd.read_csv(out).set_index("impl")
    assert picked.loc["strassen1", "time_s"] == pytest.approx(atomic["strassen1"], rel=1e-3)
    assert main(["pick", "--gpu", "H100", "--m", "8", "--n", "8", "--k", "8", "--scheme", "async"]) == 2
    assert "--scheme: invalid choice: 'async'" in capsys.readouterr().err


def test_model_speedup_carries_the_predictions_scheme(tmp_path: Path) -> None:
    from strassenbench.model.files import SPEEDUP

    atomic, sequential, out = tmp_path / "atomic.csv", tmp_path / "sequential.csv", tmp_path / "speedup.csv"
    for path, scheme in ((atomic, "atomic"), (sequential, "sequential")):
        assert main(["model", "predict", "--gpu", "V100", "--impl", "gemm,strassen1", "--sizes", "512:8192:512",
                     "--scheme", scheme, "--out", str(path)]) == 0
    old = pd.read_csv(sequential).drop(columns="scheme")  # a file from before the column
    old.to_csv(sequential, index=False)
    assert main(["model", "speedup", str(atomic), "--out", str(out)]) == 0
    fast = read_model(out, SPEEDUP).iloc[0]
    assert main(["model", "speedup", str(sequential), "--out", str(out)]) == 0
    slow = read_model(out, SPEEDUP).iloc[0]
    assert (fast["scheme"], slow["scheme"]) == ("atomic", "sequential")
    assert fast["stable"] < slow["stable"]  # sharing the GPU moves the crossover down (V100: 2,048 against 7,168)
    both = pd.concat([pd.read_csv(atomic), pd.read_csv(atomic).assign(scheme="sequential")])
    both.to_csv(tmp_path / "both.csv", index=False)
    assert main(["model", "speedup", str(tmp_path / "both.csv"), "--out", str(out)]) == 2


def test_model_winners_takes_a_scheme_and_the_figure_says_it(tmp_path: Path) -> None:
    from strassenbench.model.files import WINNERS
    from strassenbench.report.contents import caption
    from strassenbench.report.winners import fig_winners

    out = tmp_path / "winners.csv"
    context = {"device": "d", "model": "V100", "data": "data/x", "sources": [], "missing": ""}
    texts = {}
    for scheme in ("sequential", "atomic"):
        assert main(["model", "winners", "--gpu", "V100", "--sweep", "square", "--sizes", "1024,4096",
                     "--scheme", scheme, "--out", str(out)]) == 0
        winners = read_model(out, WINNERS)
        assert set(winners["scheme"]) == {scheme}
        texts[scheme] = caption(fig_winners(winners, pd.DataFrame(), tmp_path, winners["gpu"].iloc[0], "d", True),
                                context)
    assert "run by the atomic scheme" in texts["atomic"] and "one after another" in texts["sequential"]
    assert main(["model", "winners", "--gpu", "V100", "--scheme", "streams", "--out", str(out)]) == 2



def test_presum_is_its_sums_pass_then_each_product_on_one_term_per_operand(monkeypatch: pytest.MonkeyPatch) -> None:
    """The presum implementations run their own scheme whatever is asked: a pass over DRAM for the sums (each
    sum's terms read and the sum written: 5 sums of 2 terms per operand at 1 level, 15 blocks each), then the
    products one after another on (1, 1, W_C) kernels, as strassenbench.fused.launch launches them."""
    from strassenbench.model import perf
    from strassenbench.model.schemes import presum_words

    n = 8192
    assert presum_words("strassen", 1) == (15, 15)
    asked = {scheme: impl_time(H100, "strassen1-presum", HUGE, n, n, n, "float32", scheme=scheme)
             for scheme in ("sequential", "atomic")}
    assert asked["sequential"] == asked["atomic"]
    assert scheme_launches("strassen", 1, "presum", None, "float32") == \
        [[[((1, 1, w[2]), 1)]] for w, count in variant_counts("strassen", 1).items() for _ in range(count)]
    monkeypatch.setattr(perf, "presum_words", lambda algorithm, levels: (0, 0))
    products = impl_time(H100, "strassen1-presum", HUGE, n, n, n, "float32")
    sums = 4 * (15 * (n // 2) ** 2 * 2) / H100.dram_bandwidth
    assert asked["sequential"].seconds == pytest.approx(products.seconds + sums)
    assert asked["sequential"].t_dram == pytest.approx(products.t_dram + sums)
    # each product loads one tile per operand: fewer global words than the fused products' (3.43 tiles a slice)
    assert products.t_gmop < impl_time(H100, "strassen1", HUGE, n, n, n, "float32").t_gmop
