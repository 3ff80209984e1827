"""The performance model: the paper's numbers (Sec. s:blocking_choose), occupancy, monotonicity, waves."""

import io
import math

import pandas as pd
import pytest

from strassenbench.cli import main
from strassenbench.model.bounds import bounds_rows
from strassenbench.model.gpus import SPECS, spec_from_attributes
from strassenbench.model.perf import (
    MODELED_IMPLS,
    active_blocks,
    block_counts,
    effective_tflops,
    impl_time,
    kernel_time,
    registers,
)
from strassenbench.model.predict import crossover, predict
from strassenbench.occupancy import ARCHS, blocks_per_sm
from strassenbench.strategies import STRATEGIES
from strassenbench.sweeps import parse_sizes, shape

V100 = SPECS["V100"]
HUGE, SMALL = STRATEGIES["Huge"], STRATEGIES["Small"]


def _bound(rows, bound, scope):
    return next(r["value"] for r in rows if r["bound"] == bound and r["scope"] == scope)


def test_v100_parameters_are_the_papers():
    """15.67 TFLOPS, 1.08 TMOPS, 15.30 TMOPS (Sec. s:blocking_choose)."""
    assert round(V100.tau_flop() / 1e12, 2) == 15.67
    assert round(V100.tau_gmop / 1e12, 2) == 1.08
    assert round(V100.tau_smop / 1e12, 2) == 15.30
    assert round(V100.tau_flop("float64") / 1e12, 2) == 7.83


def test_spec_sheet_peaks():
    assert round(SPECS["A100"].tau_flop() / 1e12, 1) == 19.5
    assert round(SPECS["H100"].tau_flop() / 1e12, 0) == 67
    assert round(SPECS["H100"].tau_flop("float64") / 1e12, 0) == 33


def test_paper_bounds_for_v100():
    rows = bounds_rows(V100)
    assert _bound(rows, "m_S = n_S >=", "GEMM") == pytest.approx(58.2, abs=0.3)  # "m_S = n_S >= 58.2"
    assert round(_bound(rows, "m_R = n_R >=", "all"), 1) == 4.1  # "m_R = n_R >= 4.1"
    assert math.floor(_bound(rows, "m_R = n_R <", "1-level Var#0")) == 12  # "m_R = n_R < 12"
    assert _bound(rows, "registers (Huge)", "2-level Var#0") == 160  # "up to 160 registers per thread"
    assert _bound(rows, "bandwidth needed (Huge)", "2-level Var#0") == pytest.approx(1900, rel=0.02)  # 1,900 GB/s
    # 1-level Var#0/#1 double the reads and need m_S >= 116: only Huge qualifies; 2-level needs 232: none does.
    assert 64 < _bound(rows, "m_S = n_S >=", "1-level Var#0") <= 128
    assert _bound(rows, "m_S = n_S >=", "2-level Var#0") > 128


def test_prefetch_and_capacity_bounds():
    """Every strategy fits in shared memory; all but Small meet the prefetch precondition k_S <= m_S / m_R."""
    rows = bounds_rows(V100)
    holds = {r["scope"]: r["holds"] for r in rows if r["bound"] == "prefetch k_S <="}
    assert holds == {name: "no" if name == "Small" else "yes" for name in STRATEGIES}
    for s in STRATEGIES.values():
        assert (s.k_S <= _bound(rows, "prefetch k_S <=", s.name)) == (s.name != "Small")
        assert _bound(rows, "shared memory", s.name) < V100.limits.max_smem_per_sm


def test_register_formula():
    assert registers(HUGE, (1, 1, 1)) == 112
    assert registers(HUGE, (2, 2, 2)) == 128
    assert registers(HUGE, (4, 4, 4)) == 160
    assert registers(HUGE, (2, 2, 2), footnote=True) == 128 + 9


@pytest.mark.parametrize(
    "arch, threads, regs, smem, expected",
    [
        ("sm_70", 256, 128, 8192, 2),
        ("sm_70", 256, 112, 8192, 2),
        ("sm_80", 256, 160, 8192, 1),
        ("sm_80", 256, 255, 8192, 1),
        ("sm_80", 256, 256, 0, 0),
        ("sm_90", 64, 16, 2048, 32),
        ("sm_90", 1024, 32, 0, 2),
        ("sm_80", 128, 32, 100 * 1024, 1),
        ("sm_70", 128, 32, 40 * 1024, 2),
    ],
)
def test_occupancy(arch, threads, regs, smem, expected):
    assert blocks_per_sm(ARCHS[arch], threads, regs, smem) == expected


def test_huge_fits_two_blocks_for_gemm_and_every_one_level_variant():
    """The paper's footnote: for Huge, GEMM and all variants run 2 active blocks per SM."""
    for w in [(1, 1, 1), (2, 2, 2), (2, 2, 1), (1, 2, 2), (2, 1, 2)]:
        assert active_blocks(V100, HUGE, w, "float32") == (2, "register formula")


def test_resources_csv_overrides_the_formula():
    resources = pd.DataFrame([{
        "arch": "sm_70", "strategy": "Huge", "dtype": "float32", "W_A": 1, "W_B": 1, "W_C": 1,
        "write_mode": "plain", "blocks_per_sm": 1,
    }])
    assert active_blocks(V100, HUGE, (1, 1, 1), "float32", resources) == (1, "resources.csv")
    modeled = impl_time(V100, "gemm", HUGE, 4096, 4096, 4096, "float32", resources)
    assert modeled == kernel_time(V100, HUGE, (1, 1, 1), 4096, 4096, 4096, "float32", 1)
    assert modeled != impl_time(V100, "gemm", HUGE, 4096, 4096, 4096, "float32")
    # Rows for another architecture or write mode are ignored.
    assert active_blocks(SPECS["A100"], HUGE, (1, 1, 1), "float32", resources)[1] == "register formula"


def test_counts_match_equations():
    c = block_counts(HUGE, (2, 2, 1), 1000)
    k = 1000  # already a multiple of k_S = 8
    assert c.n_flop == 2 * 128 * 128 * k + 128 * k + 128 * k
    assert c.n_gmop == 2 * 128 * k + 2 * 128 * k + 128 * 128
    assert c.n_smop == 256 * (8 + 8) * k + 256 * k


@pytest.mark.parametrize("impl", list(MODELED_IMPLS))
@pytest.mark.parametrize("gpu", list(SPECS))
def test_time_grows_with_size_and_tflops_below_ideal(impl, gpu):
    spec = SPECS[gpu]
    sizes = parse_sizes("256:8192:256")
    times = [impl_time(spec, impl, HUGE, n, n, n, "float32").seconds for n in sizes]
    assert all(b >= a for a, b in zip(times, times[1:])), "modeled time must not fall as the problem grows"
    ideal = spec.tau_flop() * (8 / 7) ** 2 * 1e-12
    assert all(effective_tflops(n, n, n, t) <= ideal for n, t in zip(sizes, times))


def test_gemm_never_exceeds_peak_and_approaches_it():
    for n in (1024, 4096, 20480):
        t = impl_time(V100, "gemm", HUGE, n, n, n, "float32").seconds
        assert effective_tflops(n, n, n, t) <= V100.tau_flop() * 1e-12 + 1e-9
    big = impl_time(V100, "gemm", HUGE, 20480, 20480, 20480, "float32").seconds
    assert effective_tflops(20480, 20480, 20480, big) > 0.95 * V100.tau_flop() * 1e-12


def test_wave_quantisation():
    """160 Huge tiles fill one wave of 80 SMs x 2 blocks; one more tile column needs a second wave."""
    one_wave = kernel_time(V100, HUGE, (1, 1, 1), 2048, 8192, 1280, "float32", 2)
    two_waves = kernel_time(V100, HUGE, (1, 1, 1), 2048, 8192, 1281, "float32", 2)
    assert two_waves.t_flop == pytest.approx(2 * one_wave.t_flop)
    assert two_waves.seconds > 1.8 * one_wave.seconds


def test_strassen_speedup_tends_to_eight_sevenths():
    n = 20480
    gemm = impl_time(V100, "gemm", HUGE, n, n, n, "float32").seconds
    one = impl_time(V100, "strassen1", HUGE, n, n, n, "float32").seconds
    assert 1.10 < gemm / one <= 8 / 7 + 1e-9


def test_small_strategy_is_bandwidth_bound_at_large_sizes():
    t = impl_time(V100, "gemm", SMALL, 8192, 8192, 8192, "float32")
    assert t.limiter in ("gmop", "smop")


def test_predict_labels_rows_as_model_and_crossover():
    frame = predict(V100, ["gemm", "strassen1"], "square", parse_sizes("1024:20480:1024"))
    assert (frame["source"] == "model").all()
    assert set(frame["strategy"]) <= set(STRATEGIES)
    result = crossover(frame, "strassen1")
    assert result["stable"] is not None and result["first"] <= result["stable"]
    assert 1.0 < result["max_speedup"] <= 8 / 7 + 1e-9


def test_crossover_on_synthetic_data():
    frame = pd.DataFrame(
        [{"x": x, "impl": "gemm", "time_s": 1.0} for x in (1, 2, 3, 4)]
        + [{"x": x, "impl": "s", "time_s": t} for x, t in zip((1, 2, 3, 4), (0.9, 1.2, 0.8, 0.5))]
    )
    assert crossover(frame, "s") == {"impl": "s", "baseline": "gemm", "first": 1, "stable": 3,
                                     "max_speedup": 2.0, "at": 4}


def test_spec_from_live_attributes():
    """The conversion behind --gpu device, fed the attributes an A100 80GB reports."""
    spec = spec_from_attributes({"name": "NVIDIA A100-SXM4-80GB", "cc_major": 8, "cc_minor": 0, "sm_count": 108,
                                 "bus_width_bits": 5120, "max_sm_clock_mhz": 1410, "max_mem_clock_mhz": 1593})
    assert spec.arch == "sm_80"
    assert spec.tau_flop() == pytest.approx(SPECS["A100"].tau_flop())
    assert spec.dram_bandwidth == pytest.approx(2039e9, rel=0.01)
    with pytest.raises(ValueError, match="compute capability 6.1"):
        spec_from_attributes({"name": "x", "cc_major": 6, "cc_minor": 1})


@pytest.mark.parametrize("sweep, expected", [("square", (5, 5, 5)), ("rankk", (5, 4096, 5)), ("panel", (8192, 5, 8192))])
def test_sweep_shapes(sweep, expected):
    assert shape(sweep, 5) == expected


def test_parse_sizes():
    assert parse_sizes("512:2048:512") == [512, 1024, 1536, 2048]
    assert parse_sizes("3,1,2,2") == [1, 2, 3]
    for bad in ("", "0", "a", "10:1:1", "1:10:0", "1:2"):
        with pytest.raises(ValueError):
            parse_sizes(bad)


def test_cli_bounds_markdown(capsys):
    assert main(["model", "bounds", "--gpu", "V100", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "1913.6" in out and "4.096" in out and "58.027" in out


@pytest.mark.parametrize("gpu", ["V100", "A100", "H100"])
def test_cli_predict_writes_curves(tmp_path, gpu):
    out = tmp_path / f"{gpu}.csv"
    assert main(["model", "predict", "--gpu", gpu, "--sizes", "1024:8192:1024", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert set(frame["impl"]) == set(MODELED_IMPLS)
    assert len(frame) == 8 * len(MODELED_IMPLS)
    assert (frame["tflops"] > 0).all() and (frame["source"] == "model").all()


def test_cli_crossover(capsys):
    assert main(["model", "crossover", "--gpu", "V100", "--gpu", "H100", "--sizes", "1024:20480:1024"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(frame["gpu"]) == [SPECS["V100"].name, SPECS["H100"].name]
    assert (frame["source"] == "model").all()


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["model", "predict", "--gpu", "P100"], "invalid choice"),
        (["model", "predict", "--gpu", "V100", "--sizes", "0"], "sizes must be >= 1"),
        (["model", "predict", "--gpu", "V100", "--strategy", "Giant"], "invalid choice"),
        (["model", "bounds"], "required: --gpu"),
        (["model"], "required: MODEL_COMMAND"),
    ],
)
def test_cli_model_bad_input(capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1


# --- issue slots (strassenbench.model.issue): this project's extension of the paper's model -------------------

def test_issue_fraction_is_the_ffma_share_on_32_lanes_and_free_shadow_slots_on_16():
    from strassenbench.model.issue import lanes, peak_fraction, slice_clocks

    assert lanes(SPECS["H100"].fp32_cores_per_sm) == 32 and lanes(V100.fp32_cores_per_sm) == 16
    assert lanes(SPECS["A100"].fp32_cores_per_sm) == 16
    # H100: every instruction takes an FFMA's slot
    assert peak_fraction(560, 512, 512, 32) == pytest.approx(512 / 560)
    # V100/A100: an FFMA holds the pipe two clocks, one other instruction per FFMA issues in its shadow
    assert slice_clocks(560, 512, 16) == 1024 and peak_fraction(560, 512, 512, 16) == 1.0
    assert slice_clocks(1100, 512, 16) == 1100 and peak_fraction(1100, 512, 512, 16) == pytest.approx(1024 / 1100)


def test_the_model_derives_issue_fractions_from_the_counts_the_build_read():
    """resources.csv holds the main loop's counts; the model derives the fractions per family of sub-partitions,
    from each row's own counts and strategy, and none for rows that are not float32 SIMT loops it read."""
    from strassenbench.fused.modules import RESOURCE_COLUMNS
    from strassenbench.model.issue import ISSUE_FAMILIES, issue_fractions, peak_fraction

    assert not set(ISSUE_FAMILIES) & set(RESOURCE_COLUMNS)  # the build records no derived rate
    rows = pd.DataFrame([
        {"strategy": "Huge", "dtype": "float32", "mode": "simt", "loop_instructions": 560.0, "loop_fp32": 512},
        {"strategy": "Small", "dtype": "float32", "mode": "simt", "loop_instructions": 300.0, "loop_fp32": 140},
        {"strategy": "Huge", "dtype": "float64", "mode": "simt", "loop_instructions": 560.0, "loop_fp32": 512},
        {"strategy": "TcHuge", "dtype": "float32", "mode": "1xtf32", "loop_instructions": 90.0, "loop_fp32": 0},
        {"strategy": "Huge", "dtype": "float32", "mode": "simt", "loop_instructions": None, "loop_fp32": None},
    ], index=[10, 11, 12, 13, 14])
    fractions = issue_fractions(rows)
    assert list(fractions.columns) == list(ISSUE_FAMILIES) and list(fractions.index) == [10, 11, 12, 13, 14]
    assert fractions.loc[10].tolist() == [1.0, round(512 / 560, 4)]
    small = STRATEGIES["Small"]
    math_ops = small.m_R * small.n_R * small.k_S
    assert fractions.loc[11].tolist() == [round(peak_fraction(300, 140, math_ops, w), 4) for w in (16, 32)]
    assert fractions.loc[[12, 13, 14]].isna().all().all()


def test_default_slice_counts_count_the_loop_the_kernel_runs():
    """The per-kernel default (no machine code read): math FFMA, sums, fragment loads, global loads and their
    address adds, stores, pointer steps, barrier and loop control, per thread and k_S slice."""
    from strassenbench.model.issue import default_slice_counts

    assert default_slice_counts(HUGE, (1, 1, 1), "float32") == (563.0, 512.0)
    # one level more per operand: 4 FFMA (one per element and term), one LDG.128 and its 64-bit address add
    assert default_slice_counts(HUGE, (2, 2, 2), "float32") == (563.0 + 2 * (4 + 1 + 2), 520.0)
    assert default_slice_counts(HUGE, (4, 4, 4), "float32") == (563.0 + 6 * (4 + 1 + 2), 536.0)


def test_predict_has_t_issue_and_h100_strassen_speedup_uses_it():
    sizes = [8192, 16384]
    h100 = predict(SPECS["H100"], ["gemm", "strassen1"], "square", sizes, "Huge")
    assert "t_issue_s" in h100 and (h100["t_issue_s"] > 0).all()
    assert (h100["limiter"] == "issue").all()  # H100: the loop's issue slots, not the FP32 pipe, bound it
    assert (h100["time_s"] == h100["t_issue_s"]).all()
    t = h100.set_index(["impl", "x"])["time_s"]
    speedup = t["gemm"] / t["strassen1"]
    flop = h100.set_index(["impl", "x"])["t_flop_s"]
    assert (speedup < flop["gemm"] / flop["strassen1"]).all()  # the sums' and loads' slots eat into 8/7


def test_v100_predictions_change_by_at_most_two_percent(monkeypatch):
    """Issue slots are not a V100's limit: with the term switched off the predictions move by <= 2%."""
    from strassenbench.model import issue

    sizes = parse_sizes("512:20480:512")
    frames = {}
    for on in (True, False):
        if not on:
            monkeypatch.setattr(issue, "block_clocks", lambda *args: 0.0)
        frames[on] = pd.concat([predict(V100, list(MODELED_IMPLS), sweep, sizes, strategy)
                                for sweep in ("square", "rankk", "panel") for strategy in ("best", "Huge", "Small")])
    change = frames[True]["time_s"].to_numpy() / frames[False]["time_s"].to_numpy() - 1
    assert change.min() >= 0 and change.max() <= 0.02
    assert (frames[False]["t_issue_s"] == 0).all() and (frames[True]["t_issue_s"] > 0).all()


def test_issue_counts_come_from_the_build_when_it_read_them():
    from strassenbench.model.issue import slice_counts

    resources = pd.DataFrame([{"kernel": "k", "arch": "sm_90", "source": "strassenbench", "strategy": "Huge",
                               "dtype": "float32", "W_A": 1, "W_B": 1, "W_C": 1, "write_mode": "plain",
                               "loads": "vector", "registers": 128, "blocks_per_sm": 2, "loop_instructions": 600.0,
                               "loop_ffma_share": 0.85, "loop_fp32": 512.0}])
    assert slice_counts("sm_90", HUGE, (1, 1, 1), "float32", resources) == ((600.0, 512.0), "resources.csv")
    assert slice_counts("sm_80", HUGE, (1, 1, 1), "float32", resources)[1] == "default"
    slower = impl_time(SPECS["H100"], "gemm", HUGE, 16384, 16384, 16384, "float32", resources)
    faster = impl_time(SPECS["H100"], "gemm", HUGE, 16384, 16384, 16384, "float32")
    assert slower.t_issue == pytest.approx(faster.t_issue * 600 / 563)


def test_model_tables_the_report_reads(tmp_path, capsys, monkeypatch):
    """`model spec`, `speedup`, `occupancy` and `issue-bounds` write the model's tables the report reads: each
    what the model computes, as CSV; speedup refuses predictions that hold a point twice in one line, writing
    nothing. Run where no build/resources.csv is (the commands' default), so the register formula applies."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "m"
    spec_out = str(out / "spec.csv")
    assert main(["model", "spec", "--gpu", "V100", "--gpu", "H100", "--gpu", "V100", "--out", spec_out]) == 0
    spec = pd.read_csv(out / "spec.csv").set_index("key")
    assert list(spec.index) == ["V100", "H100"] and spec.loc["H100", "gpu"] == SPECS["H100"].name
    assert spec.loc["V100", "tau_smop"] == SPECS["V100"].tau_smop
    assert spec.loc["H100", "tau_flop_float32"] == SPECS["H100"].tau_flop()
    sizes = "1024:20480:1024"
    for sweep in ("square", "panel"):
        assert main(["model", "predict", "--gpu", "A100", "--sweep", sweep, "--sizes", sizes,
                     "--out", str(out / f"{sweep}.csv")]) == 0
    assert main(["model", "speedup", str(out / "square.csv"), str(out / "panel.csv"), "--out", str(out / "s.csv")]) == 0
    speedup = pd.read_csv(out / "s.csv").set_index(["sweep", "impl"])
    assert set(speedup.index.get_level_values("sweep")) == {"square", "panel"} and "gemm" not in speedup.index.levels[1]
    square = predict(SPECS["A100"], ["gemm", "strassen2-hybrid"], "square", parse_sizes(sizes))
    expected = crossover(square, "strassen2-hybrid")
    row = speedup.loc[("square", "strassen2-hybrid")]
    assert [row[k] for k in ("stable", "max_speedup", "at")] == [expected[k] for k in ("stable", "max_speedup", "at")]
    assert main(["model", "predict", "--gpu", "A100", "--sizes", sizes, "--strategy", "Huge", "--strategy", "small",
                 "--out", str(out / "both.csv")]) == 0
    both = pd.read_csv(out / "both.csv")
    assert set(both["strategy"]) == {"Huge", "Small"} and len(both) == 2 * len(MODELED_IMPLS) * 20
    capsys.readouterr()
    assert main(["model", "speedup", str(out / "both.csv"), "--out", str(out / "refused.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "twice" in err and not (out / "refused.csv").exists()
    assert main(["model", "occupancy", "--out", str(out / "occupancy.csv")]) == 0
    occupancy = pd.read_csv(out / "occupancy.csv")
    assert len(occupancy) == 6 * len(ARCHS) and set(occupancy["occupancy"]) == {"register formula"}
    small = occupancy[(occupancy["strategy"] == "Small") & (occupancy["kernel"] == "GEMM")]
    assert list(small["blocks_per_sm"]) == [active_blocks(next(s for s in SPECS.values() if s.arch == arch),
                                                          STRATEGIES["Small"], (1, 1, 1), "float32")[0]
                                            for arch in small["arch"]]
    assert main(["model", "issue-bounds", "--size", "4096", "--out", str(out / "issue.csv")]) == 0
    issue = pd.read_csv(out / "issue.csv")
    assert set(issue["n"]) == {4096} and set(issue["gpu"]) == set(SPECS) and len(issue) == 3 * len(SPECS)


@pytest.mark.parametrize(("impl", "dtype"), [("gemm-3xtf32", "float32"), ("strassen1-tf32", "float32"),
                                             ("strassen1-dmma", "float64")])
def test_the_model_ranks_a_tensor_core_familys_own_strategies(impl: str, dtype: str) -> None:
    """For a tensor-core implementation the model ranks its family's strategies (TcTall among the TF32 ones,
    which no SIMT strategy maps to by area), and predict's rows name the one it chose and its occupancy."""
    from strassenbench.families import family_of
    from strassenbench.impls import get_impl
    from strassenbench.model.perf import ranked_strategies

    table = family_of(get_impl(impl).mode).strategies
    ranked = ranked_strategies(SPECS["H100"], impl, 4096, 4096, 4096, dtype)
    assert sorted(name for name, _ in ranked) == sorted(table)
    assert [t.seconds for _, t in ranked] == sorted(t.seconds for _, t in ranked)
    row = predict(SPECS["H100"], [impl], "square", [4096], dtype=dtype).iloc[0]
    assert row["strategy"] == ranked[0][0] and row["occupancy"] in ("register count", "resources.csv")
