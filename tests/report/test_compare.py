"""`strassenbench compare`: verdicts beyond a noise floor learned from repeated points (two runs of one GPU and
one commit come out SAME), the clock and power beside each ratio, source stamps, one figure panel per precision
each against its own cuBLAS, and what compare writes escaped."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.cli import main
from strassenbench.impls import get_impl
from strassenbench.report.analysis import precision_of, precision_speedups
from strassenbench.report.compare import compare_runs, interval_verdict
from strassenbench.report.figures import COMPARE_PANELS, fig_compare
from strassenbench.results import ResultsError, read_results

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "data" / "nvidia-h100-80gb-hbm3"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _edit(path: Path, **columns: object) -> None:
    """Set ``columns`` (a value, or a function of the row) in every row of the CSV ``path``, as text."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for name, value in columns.items():
        frame[name] = [value(r) if callable(value) else value for r in frame.to_dict("records")]
    frame.to_csv(path, index=False)


def _without_repeats(source: Path, target: Path) -> Path:
    """A copy of a fixture run without strategies.csv (whose points square.csv measures again)."""
    shutil.copytree(source, target)
    (target / "strategies.csv").unlink()
    return target


def test_two_runs_of_one_gpu_and_commit_come_out_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The H100's folder against a copy of itself in which algorithms.csv (its samples too) takes the place of
    square.csv: the square points are measured again (another run, the same GPU and commit), the rest are the
    same rows. SAME at 95% of the common points or more; the floor comes from the points the H100's folder
    measured twice, and without it the repeated points' own intervals would exclude 1."""
    again = tmp_path / "h100-again"
    shutil.copytree(H100, again)
    for suffix in (".csv", ".samples.jsonl"):
        (again / f"algorithms{suffix}").replace(again / f"square{suffix}")
    out = tmp_path / "cmp"
    assert main(["compare", str(H100), str(again), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    table = pd.read_csv(out / "compare.csv")
    same = (table["verdict"] == "SAME").mean()
    assert len(table) >= 80 and same >= 0.95, (len(table), same)
    square = table[table["sweep"] == "square"]
    assert len(square) == 4 and (square["verdict"] == "SAME").all() and (square["method"] == "bootstrap").all()
    assert any(interval_verdict(low, high) != "SAME" for low, high in zip(square["ratio_low"], square["ratio_high"]))
    floor = table["noise_floor"].iloc[0]
    assert 0.01 < floor < 0.05 and (table["noise_floor_from"] == "4 repeated points").all()
    assert (table["code"] == "same commit").all() and "warning" not in err and len(err.strip().splitlines()) == 1
    sentence = f"noise floor {floor:.2%}: learned from 4 points measured twice in one folder ({H100})"
    assert sentence in err
    for page in ("compare.md", "index.html"):
        assert f"N{sentence[1:]}" in (out / page).read_text(), page


def test_the_default_floor_and_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without repeated points the floor is --noise-floor (2% unless given), written into the outputs; a bad
    value is one line on stderr and exit 2, with nothing written."""
    a = _without_repeats(FIXTURES / "gpu_a", tmp_path / "a")
    b = _without_repeats(FIXTURES / "gpu_b", tmp_path / "b")
    shutil.copy(b / "square.csv", b / "square_copy.csv")  # the same rows again: copies, not repeats
    table = compare_runs([a, b], tmp_path / "c1")
    assert (table["noise_floor"] == 0.02).all() and (table["noise_floor_from"] == "default (--noise-floor)").all()
    assert (table["verdict"] == "FAST").all()  # the H100-like fixture is 2.6x faster
    assert "Noise floor 2.00%: the default (--noise-floor)" in (tmp_path / "c1" / "compare.md").read_text()
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "c2"), "--noise-floor", "0.9"]) == 0
    on_disk = pd.read_csv(tmp_path / "c2" / "compare.csv")
    assert (on_disk["noise_floor"] == 0.9).all() and (on_disk["verdict"] == "SAME").all()
    capsys.readouterr()
    for bad in ("-0.01", "1", "nan", "inf", "two", ""):
        assert main(["compare", str(a), str(b), "--out", str(tmp_path / "c3"), "--noise-floor", bad]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--noise-floor" in err and "Traceback" not in err, err
    assert not (tmp_path / "c3").exists()


def test_help_says_what_the_ratio_is(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "ratio = median time of the other run / median time of the baseline: below 1 the other run is faster" in text
    assert "FAST: the other run is faster beyond the noise floor" in text and "SLOW: slower beyond it" in text
    assert "--noise-floor F" in text and "default: 0.02" in text


def test_clock_power_and_capped_share_beside_each_ratio(tmp_path: Path) -> None:
    """Each run's SM clock and power from its rows; capped_share where a run has it (blank for the run without
    it), no capped_share columns where no run has it."""
    b = tmp_path / "b"
    shutil.copytree(FIXTURES / "gpu_b", b)
    _edit(b / "square.csv", sm_clock_median_mhz=1755, capped_share=lambda r: "0.25" if r["impl"] == "gemm" else "")
    _edit(b / "rankk.csv", power_w=lambda r: str(float(r["x"]) / 10))
    table = compare_runs([FIXTURES / "gpu_a", b], tmp_path / "cmp")
    square, rankk = table[table["sweep"] == "square"], table[table["sweep"] == "rankk"]
    assert (square["sm_clock_median_mhz_other"] == 1755).all() and square["sm_clock_median_mhz_base"].isna().all()
    assert (rankk["power_w_other"] == rankk["m"] / 10).all() and (rankk["power_w_base"] == 250.0).all()
    capped = square["capped_share_other"]
    assert (capped[square["impl"] == "gemm"] == 0.25).all() and capped[square["impl"] != "gemm"].isna().all()
    assert table["capped_share_base"].isna().all() and rankk["capped_share_other"].isna().all()
    columns = list(table.columns)
    assert columns.index("verdict") < columns.index("sm_clock_median_mhz_base") < columns.index("capped_share_other")
    plain = compare_runs([FIXTURES / "gpu_a", FIXTURES / "gpu_b"], tmp_path / "plain")
    assert not any(c.startswith("capped_share") for c in plain.columns) and "power_w_other" in plain.columns


def test_source_stamps_decide_where_both_runs_have_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs whose rows carry the same source stamp ran the same code, whatever their commits; a different
    stamp is a warning (one stderr line, a note in the outputs); a run without stamps falls back to commits."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(FIXTURES / "gpu_a", a)
    shutil.copytree(FIXTURES / "gpu_b", b)
    _edit(a / "square.csv", source="5e1f0c2a9b7d")
    _edit(b / "square.csv", source="5e1f0c2a9b7d", commit="0123456789ab")
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "c1")]) == 0
    table = pd.read_csv(tmp_path / "c1" / "compare.csv", dtype={"source_base": str, "source_other": str})
    assert set(table.loc[table["sweep"] == "square", "code"]) == {"same source"}
    assert set(table.loc[table["sweep"] != "square", "code"]) == {"same commit"}
    assert "warning" not in capsys.readouterr().err and 'id="code"' not in (tmp_path / "c1" / "index.html").read_text()
    _edit(b / "square.csv", source=lambda r: "5e1f0c2a9b7d+dirty" if r["impl"] == "strassen1" else "5e1f0c2a9b7d")
    _edit(b / "rankk.csv", commit="0123456789ab")
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "c2")]) == 0
    table = pd.read_csv(tmp_path / "c2" / "compare.csv")
    other_source = (table["sweep"] == "square") & (table["impl"] == "strassen1")
    assert ((table["code"] == "other source") == other_source).all()
    assert ((table["code"] == "other commit") == (table["sweep"] == "rankk")).all()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    note = (f"{other_source.sum() + 32} of 96 points were measured with different code ({other_source.sum()} by their "
            "source stamps and 32 by their commits, where a run has no source stamp)")
    assert len(warnings) == 1 and note in warnings[0], warnings
    assert note in (tmp_path / "c2" / "compare.md").read_text() and note in (tmp_path / "c2" / "index.html").read_text()


def _precisions(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (a fixture's square sweep) with tensor-core rows (cuBLAS TF32 at half cuBLAS's time, our
    3xTF32 GEMM at our GEMM's) and float64 rows (cuBLAS's DGEMM at twice cuBLAS's, our DMMA GEMM at our GEMM's)."""
    base = frame[frame["impl"].isin(["cublas", "gemm"])]
    tf32 = base.assign(impl=base["impl"].map({"cublas": "cublas-tf32", "gemm": "gemm-3xtf32"}),
                       time_median_s=base["time_median_s"] * base["impl"].map({"cublas": 0.5, "gemm": 1.0}))
    fp64 = base.assign(impl=base["impl"].map({"cublas": "cublas", "gemm": "gemm-dmma"}), dtype="float64",
                       time_median_s=base["time_median_s"] * base["impl"].map({"cublas": 2.0, "gemm": 1.0}))
    added = pd.concat([tf32, fp64], ignore_index=True)
    return pd.concat([frame, added.assign(label=[get_impl(i).label for i in added["impl"]])], ignore_index=True)


def test_one_panel_per_precision_each_against_its_own_cublas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frame = read_results(FIXTURES / "gpu_a" / "square.csv", "bench")
    both = _precisions(frame)
    assert [precision_of(i, d) for i, d in [("strassen1", "float32"), ("cublas-tf32", "float32"),
            ("strassen1-3xtf32", "float32"), ("cublas", "float64"), ("gemm-dmma", "float64"),
            ("grey322-11-50x1", "float32"), ("no-such-impl", "float32")]] == \
        ["FP32", "TF32/3xTF32", "TF32/3xTF32", "FP64", "FP64", "FP32", None]
    time = both.set_index(["impl", "dtype", "x"])["time_median_s"]
    tf32 = precision_speedups(both, "TF32/3xTF32")
    assert set(tf32["impl"]) == {"gemm-3xtf32"}
    for r in tf32.itertuples():
        assert r.speedup == pytest.approx(time["cublas-tf32", "float32", r.x] / time["gemm-3xtf32", "float32", r.x])
    fp64 = precision_speedups(both, "FP64")
    assert set(fp64["impl"]) == {"gemm-dmma"} and set(fp64["dtype"]) == {"float64"}
    assert fp64["speedup"].to_numpy() == pytest.approx(4 * tf32["speedup"].to_numpy())
    fp32 = precision_speedups(both, "FP32")
    assert "gemm-3xtf32" not in set(fp32["impl"]) and set(fp32["dtype"]) == {"float32"} and len(fp32) == 7 * 4
    drawn = fig_compare({"A (a)": both, "B (b)": frame}, tmp_path)
    assert drawn.panels == list(COMPARE_PANELS.values())
    assert "GEMM 3xTF32 (ours)" in drawn.lines and "GEMM DMMA (ours)" in drawn.lines and "B (b)" in drawn.lines
    drawn = fig_compare({"A (a)": frame[frame["impl"] != "strassen1"], "B (b)": _precisions(frame)[lambda f:
                         f["dtype"] == "float32"]}, tmp_path)
    assert drawn.panels == [COMPARE_PANELS["FP32"], COMPARE_PANELS["TF32/3xTF32"]]  # no FP64 data: no panel
    drawn = fig_compare({"A (a)": frame[frame["impl"] != "cublas"]}, tmp_path)
    assert drawn.panels == [""] and drawn.lines == []  # nothing to draw: one note


def test_compare_markdown_escapes_html(tmp_path: Path) -> None:
    """Values from the results folders are text in compare.md: HTML's special characters and '|' escaped."""
    gpu = '<img src=x onerror="alert(1)"> & | co'
    a = tmp_path / gpu  # a folder name: any text but '/'
    shutil.copytree(FIXTURES / "gpu_a", a)
    _edit(a / "square.csv", source="<b>stamp</b>")
    compare_runs([a, FIXTURES / "gpu_b"], tmp_path / "cmp")
    text = (tmp_path / "cmp" / "compare.md").read_text()
    assert "<img" not in text and "<b>" not in text and "&lt;img src=x onerror=" in text
    assert "&lt;b&gt;stamp&lt;/b&gt;" in text and "&amp; \\| co" in text
    _edit(a / "square.csv", gpu=gpu)  # a GPU or implementation name outside the names' grammar: refused on read
    with pytest.raises(ResultsError, match=r"square.csv: line 2: column 'gpu' is not a GPU name"):
        compare_runs([a, FIXTURES / "gpu_b"], tmp_path / "cmp2")
    assert not (tmp_path / "cmp2").exists()
