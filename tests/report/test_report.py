"""The report and compare code, on committed synthetic GPU-shaped fixtures (tests/fixtures/make_fixtures.py:
model-derived, not measured) and on a real CPU run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.bench.backends import NumpyBackend
from strassenbench.bench.runner import Point, run_sweep
from strassenbench.bench.timers import Criterion
from strassenbench.cli import main
from strassenbench.report.analysis import claims, measured_crossover, speedups
from strassenbench.report.page import REPORT_FIGURES, REPORT_TABLES, build_report, load_run
from strassenbench.report.compare import compare_runs, interval_verdict
from strassenbench.report.noise import row_interval

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_fixture_report_has_every_figure_and_table(tmp_path, modeled) -> None:  # noqa: ANN001
    out = tmp_path / "report"
    build_report(modeled("gpu_a"), out)
    page = (out / "index.html").read_text()
    for fig in REPORT_FIGURES:
        assert (out / "figures" / f"{fig}.png").stat().st_size > 10_000
        assert (out / "figures" / f"{fig}.pdf").is_file()
        assert f"figures/{fig}.png" in page
    for table in REPORT_TABLES:
        assert (out / "tables" / f"{table}.md").is_file()
        assert f'id="{table}"' in page
    assert "synthetic-fixture-A100-model" in page and "CPU run" not in page
    assert "SM clock" in page and "low-clock samples" in page
    claims_md = (out / "tables" / "claims.md").read_text()
    for paper in ("1,536", "1.11x", "7,680", "1.19x", "7,168", "13,312", "36,000", "22,500"):
        assert paper in claims_md


def test_claims_and_crossover_from_results() -> None:
    run = load_run(FIXTURES / "gpu_a")
    sweeps = run.sweeps
    s = speedups(sweeps)
    assert set(s["impl"]) == {"cutlass", "gemm", "strassen1", "strassen1-ref", "strassen2-ref", "strassen2-hybrid",
                              "strassen2-direct"}
    cross = measured_crossover(sweeps, "strassen1")
    square = sweeps[(sweeps["sweep"] == "square")].pivot_table(index="x", columns="impl", values="time_median_s")
    ratio = square["cublas"] / square["strassen1"]
    assert cross["max_speedup"] == pytest.approx(ratio.max(), rel=1e-3)
    if cross["stable"] is not None:
        assert (ratio[ratio.index >= cross["stable"]] > 1).all()
    table = claims(sweeps, run.memlimit, "the fixture")
    assert list(table.columns) == ["claim", "paper (V100)", "this run", "status", "how it is computed"]
    assert list(table["paper (V100)"]) == ["1,536", "1.11x", "7,680", "1.19x", "1.22x", "7,168", "13,312", "36,000",
                                           "22,500"]
    assert set(table["status"]) == {"measured on the fixture"}
    over_cutlass = table[table["paper (V100)"] == "1.22x"]["this run"].item()
    ratio = square["cutlass"] / square["strassen2-hybrid"]
    assert over_cutlass == f"{ratio.max():.2f}x at {int(ratio.idxmax()):,}"
    # Sec. s:gpu_exp sets 22,500 beside "the 1-level reference implementation consumes much more memory"
    assert "1-level reference" in table[table["paper (V100)"] == "22,500"]["claim"].item()
    memlimit = run.memlimit.assign(predicted_n=[20480 + 512 * i for i in range(len(run.memlimit))])
    by_impl = memlimit.set_index("impl")["predicted_n"]
    table = claims(sweeps, memlimit, "the fixture").set_index("paper (V100)")["this run"]
    assert table["36,000"] == f"{by_impl['strassen1']:,} (confirmed)"
    assert table["22,500"] == f"{by_impl['strassen1-ref']:,} (confirmed)"


def test_cpu_report_has_the_banner(tmp_path) -> None:  # noqa: ANN001
    data = tmp_path / "cpu"
    criterion = Criterion(min_samples=2, min_time=0.0, max_time=0.05, warmup=0, warmup_time=0.0)
    points = [Point(i, x, x, x, sweep="square", x=x) for x in (32, 64) for i in ("cublas", "strassen1")]
    run_sweep(points, NumpyBackend(), data / "square.csv", criterion, progress=False)
    build_report(data, tmp_path / "report")
    page = (tmp_path / "report" / "index.html").read_text()
    assert "CPU run: no GPU was used" in page
    assert "no rankk results in this run" not in page  # that note is drawn into the figure, not the page
    assert (tmp_path / "report" / "figures" / "fig_stra_square.png").is_file()


def test_row_interval_and_the_floor() -> None:
    """Without samples a ratio's interval comes from the rows' spreads and counts: symmetric on a log scale,
    wider with fewer samples, NaN (so SAME) without a spread; a verdict needs the interval beyond the floor."""
    low, high = row_interval(1.0, 0.01, 100, 0.01, 100)
    assert low * high == pytest.approx(1.0)
    assert high == pytest.approx(1.0 + 1.96 * 1.2533 * 0.01 * 2 ** 0.5 / 10, rel=1e-2)  # z sqrt(pi/2) s sqrt(2/n)
    assert row_interval(1.0, 0.01, 4, 0.01, 4)[1] > high and row_interval(0.9, 0.01, 100, 0.01, 100)[0] < 0.9
    nan = row_interval(0.5, float("nan"), 100, 0.01, 100)
    assert interval_verdict(*nan, 0.02) == "SAME"
    assert interval_verdict(0.95, 0.97, 0.02) == "FAST" and interval_verdict(0.95, 0.985, 0.02) == "SAME"
    assert interval_verdict(1.03, 1.05, 0.02) == "SLOW" and interval_verdict(1.015, 1.05, 0.02) == "SAME"


def test_compare_fixtures(tmp_path) -> None:  # noqa: ANN001
    table = compare_runs([FIXTURES / "gpu_a", FIXTURES / "gpu_b"], tmp_path / "cmp")
    assert len(table) == 3 * 4 * 8  # sweeps x sizes x implementations
    assert set(table["verdict"]) <= {"FAST", "SLOW", "SAME"}
    assert (table["verdict"] == "FAST").any()  # the H100-like fixture is faster on the large sizes
    # no samples: the rows' intervals; the floor learned from the points strategies.csv and square.csv share
    assert (table["method"] == "noise").all() and (table["noise_floor_from"] == "16 repeated points").all()
    assert 0.005 < table["noise_floor"].iloc[0] < 0.02
    for r in table.itertuples():
        assert r.ratio == pytest.approx(r.time_other_s / r.time_base_s) and r.ratio_low < r.ratio < r.ratio_high
        assert r.verdict == interval_verdict(r.ratio_low, r.ratio_high, r.noise_floor)
    assert (tmp_path / "cmp" / "fig_compare_speedup.png").is_file() and (tmp_path / "cmp" / "index.html").is_file()
    assert pd.read_csv(tmp_path / "cmp" / "compare.csv").shape[0] == len(table)


def test_compare_names_the_commits_and_counts_points_of_different_code(tmp_path, capsys) -> None:  # noqa: ANN001
    """Each point carries both runs' commits; the command says how many points compare different code."""
    other = tmp_path / "gpu_b_later"
    shutil.copytree(FIXTURES / "gpu_b", other)
    square = pd.read_csv(other / "square.csv", dtype=str, keep_default_na=False)
    square["commit"] = "0123456789ab"
    square.to_csv(other / "square.csv", index=False)
    assert main(["compare", str(FIXTURES / "gpu_a"), str(FIXTURES / "gpu_b"), "--out", str(tmp_path / "c1")]) == 0
    assert "different code" not in capsys.readouterr().err
    assert main(["compare", str(FIXTURES / "gpu_a"), str(other), "--out", str(tmp_path / "c2")]) == 0
    table = pd.read_csv(tmp_path / "c2" / "compare.csv", dtype={"commit_base": str, "commit_other": str})
    changed = table["commit_other"] == "0123456789ab"
    assert (changed == (table["sweep"] == "square")).all() and (table["commit_base"] == "fixture").all()
    assert ((table["code"] == "other commit") == changed).all()
    err = capsys.readouterr().err
    assert f"warning: {changed.sum()} of {len(table)} points were measured with different code ({changed.sum()} by " \
           "their commits" in err and len(err.strip().splitlines()) == 2


def test_report_and_compare_cli(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    assert main(["report", "--data", str(FIXTURES / "gpu_b"), "--out", str(tmp_path / "r")]) == 0
    assert main(["compare", str(FIXTURES / "gpu_a"), str(FIXTURES / "gpu_b"), "--out", str(tmp_path / "c")]) == 0
    assert main(["report", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "r2")]) == 2
    assert main(["compare", str(FIXTURES / "gpu_a"), "--out", str(tmp_path / "c2")]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["compare", str(FIXTURES / "gpu_a"), str(empty), "--out", str(tmp_path / "c3")]) == 2
    err = capsys.readouterr().err
    assert "no results folder" in err and "at least two" in err and ": no results (square.csv" in err
    assert not (tmp_path / "r2").exists()


def test_fixtures_are_labelled_synthetic() -> None:
    for folder in ("gpu_a", "gpu_b"):
        frame = pd.read_csv(FIXTURES / folder / "square.csv")
        assert frame["gpu"].str.startswith("synthetic-fixture").all()
        assert (frame["driver"] == "fixture").all()
    shutil.rmtree(FIXTURES / "__pycache__", ignore_errors=True)


def test_the_model_gpu_is_the_model_spec_file(tmp_path) -> None:  # noqa: ANN001
    """The report's model GPU is model_spec.csv's last row as `model spec` wrote it: this GPU's (its peaks drawn)
    when the run measured it (a built-in spec its name holds, or the queried device), the paper's otherwise."""
    from dataclasses import replace

    from strassenbench.report.inputs import RunData, model_gpu

    assert main(["model", "spec", "--gpu", "V100", "--gpu", "H100", "--out", str(tmp_path / "model_spec.csv")]) == 0
    spec = pd.read_csv(tmp_path / "model_spec.csv")
    h100 = spec.iloc[-1]
    run = RunData(pd.DataFrame(), None, None, None, None, None, {"gpu": {"gpu": "NVIDIA H100 80GB HBM3"}},
                  {"model_spec.csv": spec})
    model = model_gpu(run, cpu_run=False)
    assert model.this_gpu and model.name == h100["gpu"] and "this GPU" in model.title
    assert model.peaks["FP32 peak"] == pytest.approx(h100["tau_flop_float32"] / 1e12)
    future = replace(run, system={"gpu": {"gpu": "NVIDIA Future GPU"}})
    assert not model_gpu(future, cpu_run=False).this_gpu  # an H100 spec is not a Future GPU's
    queried = spec.assign(key=["V100", "device"], gpu=["Tesla V100 SXM2 16GB", "NVIDIA Future GPU"])
    model = model_gpu(replace(future, models={"model_spec.csv": queried}), cpu_run=False)
    assert model.this_gpu and model.name == "NVIDIA Future GPU"
    cpu = model_gpu(replace(run, system={}), cpu_run=True)
    assert not cpu.this_gpu and not cpu.peaks and "the paper" in cpu.title
    assert model_gpu(replace(run, models={}), cpu_run=False).name == ""


def _captured(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The figures as drawn (matplotlib objects), captured at save time."""
    import strassenbench.report.figures as figures

    drawn: dict = {}
    real = figures.save

    def keep(fig, out, stem):  # noqa: ANN001, ANN202
        drawn[stem] = {"suptitle": fig._suptitle.get_text() if fig._suptitle else "",
                       "titles": [ax.get_title() for ax in fig.axes],
                       "xlabels": [ax.get_xlabel() for ax in fig.axes], "ylabels": [ax.get_ylabel() for ax in fig.axes],
                       "legend": [t.get_text() for legend in fig.legends for t in legend.get_texts()],
                       "axis_legends": [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]}
        return real(fig, out, stem)

    monkeypatch.setattr(figures, "save", keep)
    return drawn


def test_figures_carry_the_papers_titles_axes_device_and_legends_outside(tmp_path, monkeypatch,  # noqa: ANN001
                                                                         modeled) -> None:  # noqa: ANN001
    drawn = _captured(monkeypatch)
    build_report(modeled("gpu_a"), tmp_path / "report")
    assert set(drawn) == set(REPORT_FIGURES)
    device = "synthetic-fixture-A100-model (cuda engine)"
    stra = drawn["fig_stra_square"]
    assert stra["suptitle"] == f"Performance of Strassen implementations, single precision: {device}"
    assert stra["titles"] == ["m = k = n", "k = 4,096, m = n vary", "m = n = 8,192, k vary"]
    assert stra["xlabels"] == ["m = k = n", "m = n (k = 4,096)", "k (m = n = 8,192)"]
    assert set(stra["ylabels"]) == {"effective TFLOPS = 2mnk / time"}
    assert "cuBLAS" in stra["legend"] and "1-level (ours)" in stra["legend"]
    for stem, fig in drawn.items():
        assert not fig["axis_legends"], stem  # every legend is the figure's, outside the data
        assert all(x for x in fig["xlabels"] if x != "x") and "x" not in fig["xlabels"], stem
    assert device in drawn["fig_intro_comparison"]["titles"][0] and device in drawn["fig_memlimit"]["titles"][0]
    assert "prediction" in drawn["fig_model_square"]["suptitle"] and "prediction" in drawn["fig_model_sweeps"]["suptitle"]


def test_cpu_figures_say_cpu_stand_ins(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    data = tmp_path / "cpu"
    criterion = Criterion(min_samples=2, min_time=0.0, max_time=0.05, warmup=0, warmup_time=0.0)
    points = [Point(i, x, x, x, sweep="square", x=x) for x in (32, 64) for i in ("cublas", "strassen1")]
    run_sweep(points, NumpyBackend(), data / "square.csv", criterion, progress=False)
    drawn = _captured(monkeypatch)
    build_report(data, tmp_path / "report")
    assert "CPU stand-ins (numpy engine)" in drawn["fig_stra_square"]["suptitle"]
    assert "cuBLAS [numpy stand-in]" in drawn["fig_stra_square"]["legend"]
    claims_md = (tmp_path / "report" / "tables" / "claims.md").read_text()
    assert "measured on" in claims_md and "CPU stand-ins (numpy engine)" in claims_md


def test_every_report_file_is_reachable_from_the_index(tmp_path) -> None:  # noqa: ANN001
    import re

    out = tmp_path / "report"
    (out / "tables").mkdir(parents=True)
    (out / "tables" / "schedule_L1_S2.md").write_text("written by the workflow's tables rule\n")
    (out / "README.md").write_text("the folder's description, as in the repository\n")
    build_report(FIXTURES / "gpu_a", out)  # a folder without the model's files: its figures and tables say so
    page = (out / "index.html").read_text()
    assert "no model_spec.csv in the run&#39;s folder: `strassenbench model spec` writes it" in page
    linked = set(re.findall(r'(?:href|src)="([^"#]+)"', page))
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != "index.html"}
    assert files <= linked, sorted(files - linked)
    for fig in REPORT_FIGURES:
        assert f'<figure id="{fig}">' in page and "Data: " in page or "no measurement" in page


def test_the_report_shows_the_model_files_as_written(tmp_path, modeled, capsys) -> None:  # noqa: ANN001
    """The report's model numbers are the model's files' (it computes none): a crossover, a bound and a spec
    value changed in the files are what its tables show; a broken model file is refused in one line naming
    it, and no report is written."""
    data = tmp_path / "run"
    shutil.copytree(modeled("gpu_a"), data)
    speedup = pd.read_csv(data / "model_speedup.csv", dtype=str, keep_default_na=False)
    at = (speedup["sweep"] == "square") & (speedup["impl"] == "strassen1")
    speedup.loc[at, "stable"] = "12345"
    speedup.to_csv(data / "model_speedup.csv", index=False)
    spec = pd.read_csv(data / "model_spec.csv")
    spec.loc[spec.index[-1], "tau_gmop"] = 9.87e12
    spec.to_csv(data / "model_spec.csv", index=False)
    issue = pd.read_csv(data / "model_issue_bounds.csv")
    issue["paper_model"] = 1.2345
    issue.to_csv(data / "model_issue_bounds.csv", index=False)
    assert main(["report", "--data", str(data), "--out", str(tmp_path / "r")]) == 0
    tables = tmp_path / "r" / "tables"
    crossover = [line for line in (tables / "model_crossover.md").read_text().splitlines() if "| square" in line]
    assert "12,345" in next(line for line in crossover if "| strassen1 " in line)
    assert "| 12,345 " in (tables / "algorithms.md").read_text()  # the algorithms table's crossover too
    header = (tables / "algorithms.md").read_text().splitlines()[0]
    assert "additions" in header and "omega" in header and "| 2.8074 " in (tables / "algorithms.md").read_text()
    assert "9.87 TMOPS" in (tables / "model_notation.md").read_text()
    assert (tables / "issue_bounds.md").read_text().count("1.234") == len(issue)
    capsys.readouterr()
    square = pd.read_csv(data / "model_square.csv", dtype=str, keep_default_na=False)
    square.loc[0, "time_s"] = "fast"
    square.to_csv(data / "model_square.csv", index=False)
    assert main(["report", "--data", str(data), "--out", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model_square.csv: line 2: column 'time_s'" in err, err
    assert not (tmp_path / "r2").exists()
