"""The report's figures as the paper drew them, read back from the matplotlib objects; captions held to what the
figures show; tables as the paper has them (tests/fixtures: synthetic GPU-shaped results, not measurements)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.colors import to_hex

import strassenbench.report.figures as figures
from strassenbench.bench.backends import NumpyBackend
from strassenbench.bench.runner import Point, run_sweep
from strassenbench.bench.timers import Criterion
from strassenbench.impls import get_impl
from strassenbench.report.analysis import measured_crossover
from support.figures import kept_figures
from strassenbench.report.page import REPORT_FIGURES, build_report
from strassenbench.report.contents import caption
from strassenbench.report.figures import CaptionError, Drawn, check_caption
from strassenbench.report.palette import INTRO_LINES, PAPER_LINES, style
from strassenbench.report.page_tables import cell

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PAPER_LABELS = [get_impl(i).label for i in PAPER_LINES]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, modeled) -> tuple[dict, Path]:  # noqa: ANN001
    """The fixture run's report (its model's files written by `strassenbench model`), with every figure object as
    it was saved."""
    with kept_figures() as figs:
        out = tmp_path_factory.mktemp("report")
        build_report(modeled("gpu_a"), out)
    return figs, out


def _legend(fig) -> list[str]:  # noqa: ANN001
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def _curves(ax) -> dict[str, object]:  # noqa: ANN001
    return {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}


def test_stra_square_has_the_papers_six_lines_in_tflops(report) -> None:  # noqa: ANN001
    figs, _ = report
    fig = figs["fig_stra_square"]
    assert _legend(fig) == PAPER_LABELS  # the paper's legend, in its order, CUTLASS included
    assert len(fig.axes) == 3 and {ax.get_ylabel() for ax in fig.axes} == {figures.Y_TFLOPS}
    square = pd.read_csv(FIXTURES / "gpu_a" / "square.csv")
    for ax in fig.axes:
        assert set(_curves(ax)) == set(PAPER_LABELS)
        assert [line for line in ax.lines if line.get_gid() == figures.PEAK]  # the FP32 peak, dotted
    cutlass = _curves(fig.axes[0])["CUTLASS"]
    expected = square[square["impl"] == "cutlass"].sort_values("x")
    assert list(cutlass.get_xdata()) == list(expected["x"])
    assert list(cutlass.get_ydata()) == pytest.approx(list(expected["tflops"]))
    more = figs["fig_stra_square_more"]
    assert _legend(more) == ["cuBLAS", "GEMM (ours)", "2-level direct (ours)"]  # extras apart, cuBLAS as yardstick


def test_intro_comparison_is_tflops_with_the_break_evens_marked(report) -> None:  # noqa: ANN001
    figs, _ = report
    fig = figs["fig_intro_comparison"]
    (ax,) = fig.axes
    assert ax.get_ylabel() == figures.Y_TFLOPS
    assert _legend(fig) == [get_impl(i).label for i in INTRO_LINES]
    frame = pd.read_csv(FIXTURES / "gpu_a" / "square.csv")
    marks = sorted(line.get_xdata()[0] for line in ax.lines if line.get_gid() == figures.BREAK_EVEN)
    expected = sorted(c["stable"] for i in ("strassen1", "strassen1-ref")
                      if (c := measured_crossover(frame, i)) and c["stable"])
    assert marks == expected and marks


def test_model_square_has_cutlass_and_direct_strassen_measured_solid_and_model_dashed(report) -> None:  # noqa: ANN001
    """Measured solid, the model dashed, the model with global traffic through the L2 dotted; on the Small
    strategy (an A100's model here) 2-level Strassen's L2 curve is above the model's, as the paper's Sec.
    s:perf_discuss ('Cache effects') finds the measured one for that strategy."""
    figs, _ = report
    huge, small = figs["fig_model_square"].axes
    assert huge.get_title() == "Huge strategy" and small.get_title() == "Small strategy"
    for ax in (huge, small):
        curves = _curves(ax)
        for impl in ("gemm", "strassen1", "strassen2-direct"):
            label = get_impl(impl).label
            measured, model = curves[f"{label} (measured)"], curves[f"{label} (model)"]
            l2 = curves[f"{label} (model with L2)"]
            assert measured.get_linestyle() == "-" and model.get_linestyle() == "--" and l2.get_linestyle() == ":"
            assert to_hex(measured.get_color()) == to_hex(model.get_color()) == style(impl)["color"]
            assert (l2.get_ydata() >= model.get_ydata() - 1e-9).all()  # l2 never predicts a kernel slower
    direct, small_curves = get_impl("strassen2-direct").label, _curves(small)
    assert (small_curves[f"{direct} (model with L2)"].get_ydata() > small_curves[f"{direct} (model)"].get_ydata()).any()
    assert "CUTLASS (measured)" in _curves(huge) and "CUTLASS (measured)" not in _curves(small)
    strategies = pd.read_csv(FIXTURES / "gpu_a" / "strategies.csv", keep_default_na=False)
    assert set(strategies[strategies["impl"] != "gemm"]["scheme"]) - {""} == {"sequential"}


def test_one_palette_across_every_figure(report) -> None:  # noqa: ANN001
    """Each implementation keeps its colour in every figure (its model line too)."""
    figs, _ = report
    labels = {get_impl(i).label: i for i in (*PAPER_LINES, "gemm", "strassen2-direct")}
    seen = 0
    for stem, fig in figs.items():
        for ax in fig.axes:
            for name, line in _curves(ax).items():
                base = re.sub(r" \((model|measured)[^)]*\)$", "", name)
                if base in labels:
                    assert to_hex(line.get_color()) == style(labels[base])["color"], (stem, name)
                    seen += 1
    assert seen > 30
    assert len({style(i)["color"] for i in labels.values()}) == len(labels)  # no two share a colour


def test_captions_say_what_the_figures_show(report) -> None:  # noqa: ANN001
    figs, out = report
    page = (out / "index.html").read_text()
    for stem in REPORT_FIGURES:
        text = html.unescape(re.search(rf'<figure id="{stem}">.*?<figcaption>(.*?)</figcaption>', page, re.S).group(1))
        assert f"Lines: {'; '.join(_legend(figs[stem]))}." in text or not _legend(figs[stem])
        for name in re.findall(r"\b[\w-]+\.csv\b", text):
            assert (FIXTURES / "gpu_a" / name).is_file(), (stem, name)


def _drawn(**kw) -> Drawn:  # noqa: ANN003
    base = {"stem": "fig_x", "paths": [], "lines": ["cuBLAS", "1-level (ours)"], "solid": True, "dashed": False,
            "marks": {}}
    return Drawn(**{**base, **kw})


@pytest.mark.parametrize(("text", "sources", "drawn", "complaint"), [
    ("Data: square.csv, strategies.csv. Lines: cuBLAS; 1-level (ours).", ["square.csv"], {}, "strategies.csv"),
    ("Lines: cuBLAS; 1-level (ours); CUTLASS.", [], {}, "CUTLASS"),
    ("Effective TFLOPS.", [], {}, "does not list"),
    ("The dotted line is the FP32 peak. Lines: cuBLAS; 1-level (ours).", [], {}, "peak"),
    ("Measured (solid) and modeled (dashed). Lines: cuBLAS; 1-level (ours).", [], {}, "dashed"),
    ("Measured (solid). Lines: cuBLAS; 1-level (ours).", [], {"solid": False, "dashed": True}, "solid"),
    ("Vertical marks: the break-even with cuBLAS. Lines: cuBLAS; 1-level (ours).", [], {}, "break-even"),
])
def test_a_caption_naming_what_is_not_drawn_is_refused(text: str, sources: list, drawn: dict, complaint: str) -> None:
    with pytest.raises(CaptionError, match=re.escape(complaint)):
        check_caption(text, _drawn(**drawn), sources)
    check_caption("Measured (solid). Lines: cuBLAS; 1-level (ours).", _drawn(), [])  # a true one passes


def test_each_caption_follows_its_figure() -> None:
    """The same figure kind without the peak, the break-evens or a measurement: its caption stops saying so."""
    context = {"device": "d", "model": "V100", "data": "data/x", "sources": [], "missing": ""}
    bare = caption(_drawn(stem="fig_stra_square"), context)
    assert "dotted" not in bare and "peak" not in bare
    intro = caption(_drawn(stem="fig_intro_comparison"), context)
    assert "break-even" not in intro.lower()
    model_only = _drawn(stem="fig_model_square", lines=["GEMM (ours) (model)"], solid=False, dashed=True)
    text = caption(model_only, context)
    assert "No measurement" in text and "solid" not in text
    check_caption(text, model_only, [])


def test_tables_as_the_paper_has_them(report) -> None:  # noqa: ANN001
    _, out = report
    notation = (out / "tables" / "model_notation.md").read_text()
    rows = [line for line in notation.splitlines()[2:] if line.startswith("|")]
    assert len(rows) == 17 and "15.67 TFLOPS" in notation and "15.30 TMOPS" in notation
    blocks = (out / "tables" / "block_sizes.md").read_text()
    assert "m_W / m_R" in blocks and re.search(r"\| Small +\| 16 +\| 16 +\| 16 +\| 2 +\| 2 +\| 4 +\| 8 ", blocks)
    occupancy = (out / "tables" / "occupancy.md").read_text()
    assert all(arch in occupancy.splitlines()[0] for arch in ("sm_70", "sm_80", "sm_90", "paper (V100)"))
    assert [r.split("|")[4].strip() for r in occupancy.splitlines()[2:5]] == ["24", "20", "18"]
    claims = (out / "tables" / "claims.md").read_text()
    for paper in ("1,536", "1.11x", "7,680", "1.19x", "1.22x", "7,168", "13,312", "36,000", "22,500"):
        assert paper in claims
    for table in (out / "tables").glob("*.md"):
        assert not re.search(r"\d\.\d+e\+\d", table.read_text()), table.name  # never 1.178e+04
    page = (out / "index.html").read_text()
    assert page.count("<table") == page.count('<div class="scroll"><table') > 10  # wide tables scroll in a box


def test_numbers_in_tables_have_thousands_separators() -> None:
    assert [cell(v) for v in (11780.0, 11780, 1.2734, 3.2e-07, 20480.5, "1,536", True)] == [
        "11,780", "11,780", "1.273", "3.2e-07", "20,480.5", "1,536", True]


def test_smoke_shaped_report_says_numpy_stand_in(tmp_path: Path) -> None:
    data = tmp_path / "cpu"
    criterion = Criterion(min_samples=2, min_time=0.0, max_time=0.05, warmup=0, warmup_time=0.0)
    points = [Point(i, x, x, x, sweep="square", x=x) for x in (32, 64) for i in ("cublas", "strassen1", "gemm")]
    run_sweep(points, NumpyBackend(), data / "square.csv", criterion, progress=False)
    figs: dict = {}
    real = figures.save
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "save", lambda fig, out, stem: figs.setdefault(stem, fig) and real(fig, out, stem))
        build_report(data, tmp_path / "report")
    assert _legend(figs["fig_stra_square"]) == ["cuBLAS [numpy stand-in]", "1-level (ours) [numpy stand-in]"]
    assert _legend(figs["fig_stra_square_more"]) == ["cuBLAS [numpy stand-in]", "GEMM (ours) [numpy stand-in]"]
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Not timed in this run: CUTLASS, 1-level reference, 2-level hybrid (ours), 2-level reference." in page
    assert "dotted line" not in page  # no GPU, no peak line


def test_issue_bounds_beside_the_papers_model(report) -> None:  # noqa: ANN001
    """Per GPU model, the speedup over GEMM by the paper's model and by issue slots: on an H100 the issue slots
    lower 1-level Strassen's bound; on a V100 they move the prediction by at most 2%."""
    from strassenbench.model.spec_tables import issue_bound_rows

    bounds = issue_bound_rows(None).set_index(["gpu", "impl"])
    assert set(bounds.index.get_level_values("gpu")) == {"V100", "A100", "H100", "H200"}
    h100 = bounds.loc[("H100", "strassen1")]
    assert h100["issue_slots"] < h100["paper_model"] and h100["with_issue_slots"] < h100["paper_model"]
    v100 = bounds.xs("V100", level="gpu")
    assert ((v100["with_issue_slots"] / v100["paper_model"] - 1).abs() <= 0.02).all()
    figs, _ = report
    fig = figs["fig_issue_bounds"]
    legend = _legend(fig)
    assert "1-level (ours): paper's model" in legend and "1-level (ours): issue slots" in legend
    bars = [p for p in fig.axes[0].patches]
    assert len(bars) == 4 * 3 * 2  # GPUs (V100, A100, H100, H200) x implementations x (model, issue slots)


def test_dmma_square_draws_the_float64_rows_with_the_fp64_peaks(tmp_path: Path) -> None:
    """fig_dmma_square: the square sweep's float64 rows only (cuBLAS, our GEMM and the DMMA implementations),
    each its own colour, with the FP64 and FP64 tensor peaks; a run without DMMA rows says so instead."""
    square = pd.read_csv(FIXTURES / "gpu_a" / "square.csv")
    base = square[square["impl"].isin(["cublas", "gemm"])]
    doubles = base.assign(dtype="float64", tflops=base["tflops"] / 2)
    dmma = base[base["impl"] == "gemm"].assign(impl="strassen1-dmma", dtype="float64", tflops=base["tflops"].max())
    with kept_figures() as kept:
        drawn = figures.fig_dmma_square(pd.concat([square, doubles, dmma]), tmp_path, {"FP64 peak": 9.7,
                                        "FP64 tensor peak": 19.5}, "gpu_a")
        fig = kept["fig_dmma_square"]
        curves = _curves(fig.axes[0])
        assert set(curves) == {get_impl(i).label for i in ("cublas", "gemm", "strassen1-dmma")}
        cublas = curves["cuBLAS"]
        assert list(cublas.get_ydata()) == pytest.approx(list(doubles[doubles["impl"] == "cublas"].sort_values("x")["tflops"]))
        assert to_hex(curves["1-level DMMA (ours)"].get_color()) == style("strassen1-dmma")["color"]
        assert len([line for line in fig.axes[0].lines if line.get_gid() == figures.PEAK]) == 2
        assert "float64" in caption(drawn, {"device": "gpu_a", "model": "", "data": "", "sources": [], "missing": ""})
        figures.fig_dmma_square(square, tmp_path, {}, "gpu_a")
        texts = [t.get_text() for t in kept["fig_dmma_square"].axes[0].texts]
        assert any("no FP64 tensor-core results" in t for t in texts)


def test_wgmma_square_draws_the_measured_wgmma_rows_beside_their_yardsticks(tmp_path: Path) -> None:
    """fig_wgmma_square: measured rows of the wgmma implementations (float32) beside cuBLAS and CUTLASS's sm_90
    TF32 GEMM, each its own colour, with the FP32 and TF32 peaks; the SIMT Strassen rows stay out; a run without
    wgmma rows says where they are timed instead."""
    square = pd.read_csv(FIXTURES / "gpu_a" / "square.csv")
    gemm = square[square["impl"] == "gemm"]
    wg = pd.concat([gemm.assign(impl=impl, tflops=gemm["tflops"] * factor) for impl, factor in (
        ("gemm-3xtf32-wgmma", 2.0), ("strassen1-3xtf32-wgmma", 2.2), ("cutlass-tf32-sm90", 5.0))])
    with kept_figures() as kept:
        drawn = figures.fig_wgmma_square(pd.concat([square, wg]), tmp_path, {"FP32 peak": 67.0, "TF32 peak": 494.7},
                                         "gpu_a")
        fig = kept["fig_wgmma_square"]
        curves = _curves(fig.axes[0])
        assert set(curves) == {get_impl(i).label for i in ("cublas", "gemm-3xtf32-wgmma", "strassen1-3xtf32-wgmma",
                                                           "cutlass-tf32-sm90")}
        ours = curves[get_impl("strassen1-3xtf32-wgmma").label]
        want = wg[wg["impl"] == "strassen1-3xtf32-wgmma"].sort_values("x")["tflops"]
        assert list(ours.get_ydata()) == pytest.approx(list(want))
        assert to_hex(ours.get_color()) == style("strassen1-3xtf32-wgmma")["color"]
        assert len({to_hex(c.get_color()) for c in curves.values()}) == len(curves)
        assert len([line for line in fig.axes[0].lines if line.get_gid() == figures.PEAK]) == 2
        text = caption(drawn, {"device": "gpu_a", "model": "", "data": "", "sources": [], "missing": ""})
        assert "wgmma" in text and get_impl("gemm-3xtf32-wgmma").label in text
        figures.fig_wgmma_square(square, tmp_path, {}, "gpu_a")
        texts = [t.get_text() for t in kept["fig_wgmma_square"].axes[0].texts]
        assert any("no wgmma results" in t and "sm_90" in t for t in texts), texts


def test_the_report_puts_the_model_beside_the_runs_measurements(report) -> None:  # noqa: ANN001
    """A GPU run's model_validate.csv is the report's model validation table (its schemes and models as written)."""
    _, out = report
    table = (out / "tables" / "model_validation.md").read_text()
    assert "as-run" in table and "sequential" in table and "| l2 " in table and "median_ratio" in table
    assert 'id="model_validation"' in (out / "index.html").read_text()
