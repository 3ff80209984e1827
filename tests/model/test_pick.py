"""`strassenbench pick` and the `auto` implementations (strassenbench.model.pick): candidates ranked by the model,
measured points in place of predictions, and auto's choice run by verify and bench."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from strassenbench.cli import main
from strassenbench.impls import ImplError, get_impl
from strassenbench.model.gpus import SPECS
from strassenbench.model.pick import AUTO, candidates, error_bound, rank, resolve
from strassenbench.sweeps import shape

ROOT = Path(__file__).resolve().parents[2]
H100_DATA = ROOT / "data" / "nvidia-h100-80gb-hbm3"


@pytest.mark.parametrize("gpu", ["V100", "A100", "H100"])
def test_pick_answers_for_every_family_at_three_sizes(gpu: str) -> None:
    """Square, rank-k (k = 4,096) and panel (m = n = 8,192) at three sizes: fastest first, cuBLAS among them,
    tensor-core modes only where the GPU has them, and every fused candidate one whose kernels exist."""
    spec = SPECS[gpu]
    for sweep in ("square", "rankk", "panel"):
        for x in (2048, 8192, 16384):
            m, k, n = shape(sweep, x)
            ranked = rank(spec, m, k, n)
            times = [c.seconds for c in ranked]
            assert times == sorted(times) and all(t > 0 for t in times), (gpu, sweep, x)
            names = {c.impl for c in ranked}
            assert {"cublas", "cutlass", "gemm", "strassen1", "plinopt-4x4x4-48-rationalx1"} <= names
            assert any(get_impl(c).tensor for c in names) == (gpu != "V100"), (gpu, names)
            assert all(c.source == "model" for c in ranked)


def test_candidates_follow_the_dtype_the_architecture_and_the_kernels() -> None:
    f32, f64, old = candidates("float32", "sm_90"), candidates("float64", "sm_90"), candidates("float32", "sm_70")
    assert "strassen1-3xtf32" in f32 and "strassen1-3xtf32" not in f64 and "strassen1-3xtf32" not in old
    assert "cutlass" not in f64 and "cublas" in f64
    # Two levels of a rank-48 4x4 algorithm need 256 blocks of C in one product: beyond a launch's parameters.
    assert "plinopt-4x4x4-48-rationalx1" in f32 and "plinopt-4x4x4-48-rationalx2" not in f32
    assert "grey322-11-50x2" in f32 and "grey322-11-50+strassen" in f32
    assert not set(AUTO) & set(f32)  # auto picks among the candidates; it is not one


def _pick(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[pd.DataFrame, str]:
    assert main(["pick", *argv, "--format", "csv"]) == 0
    captured = capsys.readouterr()
    return pd.read_csv(io.StringIO(captured.out), keep_default_na=False), captured.err


def test_pick_prints_each_candidates_costs_labelled_as_a_prediction(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    frame, footer = _pick(capsys, "--gpu", "V100", "--m", "8192", "--n", "8192", "--k", "8192", "--top", "7",
                          "--data", str(tmp_path))
    assert list(frame["rank"]) == list(range(1, 8)) and list(frame["time_s"]) == sorted(frame["time_s"])
    assert {"speedup_vs_cublas", "limiter", "extra_bytes", "error_bound", "source"} <= set(frame.columns)
    assert set(frame["source"]) == {"model"} and "model predictions" in footer and "V100" in footer
    whole = rank(SPECS["V100"], 8192, 8192, 8192)
    cublas = next(c.seconds for c in whole if c.impl == "cublas")
    first = frame.iloc[0]
    assert first["impl"] == whole[0].impl
    assert first["speedup_vs_cublas"] == pytest.approx(cublas / whole[0].seconds, rel=1e-3)
    assert float(first["error_bound"]) == pytest.approx(error_bound(first["impl"], 8192, 8192, 8192, "float32"),
                                                        rel=1e-2)
    reference = frame[frame["impl"] == "strassen1-ref"]
    assert reference.empty or (reference["extra_bytes"] > 0).all()


def test_measured_points_of_that_gpu_replace_predictions(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A folder that measured an H100 gives its times (source names the file); another GPU's folder gives none."""
    mine = tmp_path / "h100"
    mine.mkdir()
    shutil.copy(H100_DATA / "system.json", mine)
    square = pd.read_csv(H100_DATA / "square.csv", keep_default_na=False)
    square = square[square["m"] == 2048]
    square.loc[square["impl"] == "strassen1", "time_median_s"] = 1e-6  # planted: the fastest of all, above 1e-7 s
    square.to_csv(mine / "square.csv", index=False)
    other = tmp_path / "other"
    other.mkdir()
    system = json.loads((H100_DATA / "system.json").read_text())
    system["gpu"]["gpu"] = "NVIDIA A100-SXM4-80GB"
    (other / "system.json").write_text(json.dumps(system))
    shutil.copy(mine / "square.csv", other)
    frame, footer = _pick(capsys, "--gpu", "H100", "--m", "2048", "--n", "2048", "--k", "2048", "--top", "300",
                          "--data", str(tmp_path))
    first = frame.iloc[0]
    assert (first["impl"], first["source"]) == ("strassen1", f"measured: {mine / 'square.csv'}")
    cublas = frame[frame["impl"] == "cublas"].iloc[0]
    assert cublas["source"].startswith("measured") and float(cublas["time_s"]) == pytest.approx(
        float(square[square["impl"] == "cublas"]["time_median_s"].iloc[0]), rel=1e-3)
    assert not frame["source"].str.contains("other").any() and "measured file" in footer
    a100, _ = _pick(capsys, "--gpu", "A100", "--m", "2048", "--n", "2048", "--k", "2048", "--data", str(tmp_path))
    assert a100["source"].str.contains("other").any() and not a100["source"].str.contains("h100").any()


@pytest.mark.parametrize("argv, fragment", [
    (["--m", "0"], "--m: "),
    (["--top", "0"], "--top: "),
    (["--data", "/nonexistent/results"], "--data /nonexistent/results: no such folder"),
    (["--gpu", "device"], "cannot query GPU"),
    (["--gpu", "B200"], "invalid choice"),
])
def test_pick_refuses_bad_input_in_one_line(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    args = {"--gpu": "H100", "--m": "64", "--n": "64", "--k": "64"}
    for option, value in zip(argv[::2], argv[1::2]):
        args[option] = value
    out = tmp_path / "pick.csv"
    assert main(["pick", *(x for kv in args.items() for x in kv), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("engine", ["numpy", "emu"])
@pytest.mark.parametrize("auto", ["auto", "auto-3xtf32"])
def test_auto_verifies_and_says_what_it_chose(engine: str, auto: str, capsys: pytest.CaptureFixture[str]) -> None:
    for m, k, n in ((61, 37, 45), (130, 70, 96)):
        assert main(["verify", "--impl", auto, "--engine", engine, "--m", str(m), "--n", str(n), "--k", str(k)]) == 0
        out = capsys.readouterr().out
        chosen, _, _ = resolve(auto, m, k, n, "float32", engine)
        assert f"impl={auto} chose={chosen} " in out and "status=ok" in out, out
        assert get_impl(chosen).mode in ({"simt"} if auto == "auto" else {"simt", "3xtf32"})
        limit = error_bound(AUTO[auto][1], m, k, n, "float32")
        assert error_bound(chosen, m, k, n, "float32") <= limit * (1 + 1e-12)


def test_auto_chooses_strassen_where_the_model_says_it_wins() -> None:
    """On the H100's model (the CPU engines'), 8,192 cubed is Strassen's; a small shape is a GEMM's."""
    assert resolve("auto", 8192, 8192, 8192, "float32", "emu")[0] != "gemm"
    assert get_impl(resolve("auto", 8192, 8192, 8192, "float32", "emu")[0]).levels >= 1
    assert get_impl(resolve("auto", 64, 64, 64, "float32", "emu")[0]).levels == 0
    assert main(["verify", "--impl", "auto-3xtf32", "--engine", "emu", "--m", "9", "--n", "9", "--k", "9",
                 "--dtype", "float64"]) == 2


def test_auto_in_a_sweep_records_its_choice(tmp_path: Path) -> None:
    out = tmp_path / "square.csv"
    assert main(["bench", "--engine", "numpy", "--impl", "auto,gemm", "--sizes", "40,72", "--out", str(out),
                 "--min-time", "0", "--min-samples", "3", "--precision", "1", "--warmup-time", "0",
                 "--no-progress"]) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    auto = frame[frame["impl"] == "auto"]
    assert len(auto) == 2 and (auto["status"] == "ok").all(), auto[["status", "message"]]
    for _, row in auto.iterrows():
        chosen, _, _ = resolve("auto", int(row["m"]), int(row["k"]), int(row["n"]), "float32", "numpy")
        assert row["message"].startswith(f"auto chose {chosen} (H100"), row["message"]
        assert row["label"] == get_impl("auto").label
    assert main(["bench", "--engine", "numpy", "--impl", "auto,gemm", "--sizes", "40,72", "--out", str(out),
                 "--min-time", "0", "--min-samples", "3", "--precision", "1", "--warmup-time", "0",
                 "--no-progress"]) == 0  # a rerun finds every point done, auto's too
    assert len(pd.read_csv(out)) == 4


def test_winners_figure_and_table_leave_out_what_a_gpu_cannot_run(tmp_path: Path) -> None:
    """model winners for a V100 and an H100: the table has each GPU's best per precision at 2,048, 8,192 and
    16,384 and says the V100 has no tensor-core mode; the V100's figure draws float32 only and its caption says
    why. fig_algorithms leaves a tensor-core implementation out for the V100 instead of drawing it at 0."""
    from strassenbench.model.files import WINNERS, read_model
    from strassenbench.model.predict import predict
    from strassenbench.report.contents import checked_caption
    from strassenbench.report.figures_model import fig_algorithms
    from strassenbench.report.winners import fig_winners, winners_table

    out = tmp_path / "model_winners.csv"
    assert main(["model", "winners", "--gpu", "V100", "--gpu", "H100", "--sizes", "2048,8192,16384",
                 "--out", str(out)]) == 0
    winners = read_model(out, WINNERS)
    assert set(winners[winners["key"] == "V100"]["precision"]) == {"simt"}
    # the H100 has every mode, wgmma's too (sm_90a); the V100 no tensor-core mode of float32
    assert set(winners[winners["key"] == "H100"]["precision"]) == {"simt", "3xtf32", "1xtf32", "wg3xtf32", "wg1xtf32"}
    simt = winners["precision"] == "simt"
    assert (winners[simt]["speedup_vs_cublas"] >= 1 - 1e-9).all()  # cuBLAS is a candidate of the float32 rank
    # TcTallAsync's GEMM (two blocks per SM, its copies two slices ahead: strassenbench.model.latency) is bound by
    # the tensor cores, at mma.sync's TF32 rate on Hopper (half the dense peak: MMA_SYNC_TF32_SHARE), a third of
    # it for 3xTF32: above the 1.22x that CUTLASS's 3xTF32 measured on the H100 (at a power-capped clock, where
    # the model takes the boost clock), and never above that rate. A prediction (cutlass-3xtf32 is predicted as
    # our GEMM)
    h100_3x = winners[(winners["key"] == "H100") & (winners["precision"] == "3xtf32")]
    rate = SPECS["H100"].tau_tensor("3xtf32")
    assert rate == SPECS["H100"].tf32_flops / 2 / 3 and set(h100_3x["limiter"]) == {"flop"}
    ceiling = rate * h100_3x["cublas_s"] / (2.0 * h100_3x["m"] * h100_3x["n"] * h100_3x["k"])
    assert h100_3x["speedup_vs_cublas"].between(1.22, 1.4).all()
    assert (h100_3x["speedup_vs_cublas"] <= ceiling * (1 + 1e-9)).all()
    table = winners_table(winners)
    assert len(table) == 6 and list(table["n"]) == ["2,048", "8,192", "16,384"] * 2
    v100 = table[table["GPU model"].str.contains("V100")]
    assert (v100["best, 3xTF32"] == "(not on this GPU)").all() and (v100["speedup, float32"] != "").all()
    context = {"device": "DEV", "model": "MODEL", "data": "FOLDER", "sources": [], "missing": ""}
    drawn = fig_winners(winners, pd.DataFrame(), tmp_path, SPECS["V100"].name, "DEV", cpu=True)
    text = checked_caption(drawn, context)
    assert "left out" in text and "float32" in text and not any("TF32 winners" in x for x in drawn.lines)
    drawn = fig_winners(winners, pd.DataFrame(), tmp_path, SPECS["H100"].name, "DEV", cpu=True)
    assert "model, 3xTF32 winners" in drawn.lines and "left out" not in checked_caption(drawn, context)
    frames = [predict(SPECS["V100"], ["gemm", "strassen1", "strassen1-3xtf32"], sweep, [2048, 4096])
              for sweep in ("square", "rankk", "panel")]
    drawn = fig_algorithms(pd.concat(frames), None, tmp_path, "V100", "DEV")
    assert not any("3xTF32" in x for x in drawn.lines) and drawn.marks.get("left out")
    assert "Left out, as this GPU cannot run them" in checked_caption(drawn, context)


def test_pick_ranks_the_tensor_core_gemms_as_the_h100_ran_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the H100's build (the staged 3xTF32 kernels at one block per SM, strassenbench.model.latency), pick
    ranks the 1xTF32 GEMM, cuBLAS SGEMM and the 3xTF32 GEMM in the order the H100 timed them at 4,096 and 8,192,
    and the 3xTF32 GEMM's time over the 1xTF32 one's within 25% of the measured (2.2x, 2.3x). Without the
    latency term both were bound by the same T_gmop and ranked together, ahead of cuBLAS. Like for like: the
    model ranks only the strategy the H100 ran them on (TcHuge; its square.csv has no other)."""
    from strassenbench.model import perf
    from strassenbench.model.perf import load_resources
    from strassenbench.results import read_results

    ran = set(read_results(H100_DATA / "square.csv", "bench")["strategy"].dropna())
    assert "TcHuge" in ran and "TcTallAsync" not in ran
    family = perf.model_strategies

    def as_ran(impl: str) -> dict:
        return {name: s for name, s in family(impl).items() if name in ran or not name.startswith("Tc")}

    monkeypatch.setattr(perf, "model_strategies", as_ran)

    resources = load_resources(H100_DATA / "resources_sm_90.csv")
    measured = read_results(H100_DATA / "square.csv", "bench").set_index(["impl", "x"])["time_median_s"]
    names = ["cublas", "gemm-3xtf32", "gemm-tf32"]
    for n in (4096, 8192):
        ranked = rank(SPECS["H100"], n, n, n, "float32", resources, names=names)
        assert [c.impl for c in ranked] == sorted(names, key=lambda impl: measured[(impl, n)])
        assert [c.impl for c in ranked] == ["gemm-tf32", "cublas", "gemm-3xtf32"]
        seconds = {c.impl: c.seconds for c in ranked}
        ratio = seconds["gemm-3xtf32"] / seconds["gemm-tf32"]
        assert ratio == pytest.approx(measured[("gemm-3xtf32", n)] / measured[("gemm-tf32", n)], rel=0.25)


def test_auto_is_not_run_as_itself() -> None:
    """auto is chosen per call by bench and verify; asked to run directly, it refuses in one line."""
    A, B, C = (np.zeros((4, 4), dtype=np.float32) for _ in range(3))
    for name in AUTO:
        with pytest.raises(ImplError, match="chosen per shape by bench and verify"):
            get_impl(name)(A, B, C, engine="numpy")


@pytest.mark.parametrize(("gpu", "sweep", "x", "scheme"), [("H100", "square", 2048, "sequential"),
                                                          ("A100", "panel", 8192, "atomic")])
def test_the_winners_are_ranks_firsts_without_ranking_everything(gpu: str, sweep: str, x: int, scheme: str) -> None:
    """`model winners` takes each mode's first as `rank` would (firsts), skipping the candidates whose lower bound
    is above the best of their mode so far; the bound is below every prediction it is set against."""
    from strassenbench.model.perf import load_resources
    from strassenbench.model.pick import WINNER_MODES, firsts, lower_bound

    resources = load_resources(H100_DATA / "resources_sm_90.csv")
    m, k, n = shape(sweep, x)
    ranked = rank(SPECS[gpu], m, k, n, "float32", resources, scheme=scheme)
    want = {mode: first for mode in WINNER_MODES
            if (first := next((c for c in ranked if get_impl(c.impl).mode == mode), None)) is not None}
    found, cublas = firsts(SPECS[gpu], m, k, n, "float32", resources, scheme)
    wgmma = {"wg1xtf32", "wg3xtf32"} if SPECS[gpu].arch == "sm_90" else set()  # wgmma: sm_90a's only
    assert found == want and set(found) == {"simt", "1xtf32", "3xtf32", *wgmma}
    assert cublas == next(c.seconds for c in ranked if c.impl == "cublas")
    bounds = {c.impl: lower_bound(SPECS[gpu], c.impl, m, k, n, "float32") for c in ranked}
    assert all(bounds[c.impl] <= c.seconds for c in ranked)
    assert sum(b > 0 for b in bounds.values()) > len(bounds) / 2  # the fused ones have a bound that can prune
