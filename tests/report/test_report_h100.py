"""The report built from the H100's measured folder (data/nvidia-h100-80gb-hbm3), read back from the matplotlib
objects: CUTLASS's 3xTF32 SGEMM in fig_tensorcore_square, per-clock TFLOPS beside raw TFLOPS with the
power-capped points marked (fig_clock_square, left out on a CPU run), and every measured figure drawing each
point at its fastest strategy where a sweep timed several."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.colors import to_hex

import strassenbench.report.figures as figures
from strassenbench.impls import get_impl
from strassenbench.report.analysis import best_rows, chosen_strategies, speedups
from support.figures import kept_figures
from strassenbench.report.page import build_report
from strassenbench.report.contents import caption
from strassenbench.report.figures_clock import CAPPED, fig_clock_square, power_capped
from strassenbench.report.palette import style
from strassenbench.results import read_results

ROOT = Path(__file__).resolve().parents[2]
H100_DATA = ROOT / "data" / "nvidia-h100-80gb-hbm3"
CONTEXT = {"device": "DEV", "model": "MODEL", "data": "FOLDER", "sources": [], "missing": ""}


@pytest.fixture(scope="module")
def h100_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """The report of the committed H100 folder: (its figures as saved, its page)."""
    if not (H100_DATA / "square.csv").exists():
        pytest.skip("no H100 results in data/")
    out = tmp_path_factory.mktemp("h100-report")
    with kept_figures() as figs:
        build_report(H100_DATA, out)
    return figs, (out / "index.html").read_text()


def _curves(ax) -> dict[str, object]:  # noqa: ANN001
    return {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}


def _caption(page: str, stem: str) -> str:
    found = re.search(rf'id="{stem}".*?<figcaption>(.*?)</figcaption>', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def _square() -> pd.DataFrame:
    return read_results(H100_DATA / "square.csv", "bench")


def test_tensorcore_square_draws_cutlass_3xtf32(h100_report, tmp_path: Path) -> None:  # noqa: ANN001
    figs, page = h100_report
    ax = figs["fig_tensorcore_square"].axes[0]
    cutlass = get_impl("cutlass-3xtf32").label
    line = _curves(ax)[cutlass]
    rows = _square()
    rows = rows[(rows["impl"] == "cutlass-3xtf32") & (rows["status"] == "ok")].sort_values("x")
    assert list(line.get_xdata()) == list(rows["x"]) and len(rows) == 5
    assert list(line.get_ydata()) == pytest.approx(list(rows["tflops"]))
    assert to_hex(line.get_color()) == style("cutlass-3xtf32")["color"]
    text = _caption(page, "fig_tensorcore_square")
    assert "CUTLASS's 3xTF32 SGEMM" in text and f"; {cutlass};" in text  # described and in the Lines list
    without = figures.fig_tensorcore_square(_square()[lambda f: f["impl"] != "cutlass-3xtf32"], tmp_path, {}, "DEV")
    assert cutlass not in without.lines and "CUTLASS's 3xTF32" not in caption(without, CONTEXT)


def test_clock_square_draws_per_clock_tflops_and_marks_power_capped_points(h100_report) -> None:  # noqa: ANN001
    figs, page = h100_report
    raw, clocked = figs["fig_clock_square"].axes
    rows = _square().set_index(["impl", "x"])
    tf32 = rows.loc[("cublas-tf32", 8192)]  # 348 TFLOPS at a median of 1,605 MHz, the GPU's maximum 1,980
    per_clock = dict(zip(_curves(clocked)["cuBLAS TF32"].get_xdata(), _curves(clocked)["cuBLAS TF32"].get_ydata()))
    assert per_clock[8192] == pytest.approx(tf32["tflops"] * 1980 / 1605) and tf32["sm_clock_median_mhz"] == 1605
    raw_tf32 = dict(zip(_curves(raw)["cuBLAS TF32"].get_xdata(), _curves(raw)["cuBLAS TF32"].get_ydata()))
    assert raw_tf32[8192] == pytest.approx(tf32["tflops"])
    capped = [line for line in clocked.lines if line.get_gid() == CAPPED]
    assert len(capped) == 1 and (8192, pytest.approx(per_clock[8192])) in list(zip(*capped[0].get_data()))
    # the H100's file predates capped_share: its rows with the software power cap (0x4) set are marked
    assert len(capped[0].get_xdata()) == int(power_capped(best_rows(_square()[_square()["dtype"] == "float32"])).sum())
    text = _caption(page, "fig_clock_square")
    assert "diagnosis" in text and "not an achievable speedup" in text and "Circled: power-capped" in text
    assert "square.csv, system.json" in text


def test_power_capped_reads_capped_share_else_the_throttle_bits() -> None:
    newer = pd.DataFrame({"capped_share": [0.5, 0.49, None, None, None, None],
                          "throttle_reasons": ["0x0", "0x4", "0x4", "0x80", "0x1", "junk"]})
    assert list(power_capped(newer)) == [True, False, True, True, False, False]
    older = pd.DataFrame({"throttle_reasons": ["0x84", "0x0", "", None]})
    assert list(power_capped(older)) == [True, False, False, False]


def test_clock_square_is_left_out_without_clocks(tmp_path: Path) -> None:
    square = _square()
    for kwargs, why in (({"max_clock_mhz": 1980, "cpu": True}, "a CPU run has no SM clock"),
                        ({"max_clock_mhz": None, "cpu": False}, "gpu.max_sm_clock_mhz"),
                        ({"max_clock_mhz": 1980, "cpu": False, "clockless": True}, "sm_clock_median_mhz")):
        frame = square.assign(sm_clock_median_mhz=float("nan")) if kwargs.pop("clockless", False) else square
        drawn = fig_clock_square(frame, tmp_path, device="DEV", **kwargs)
        assert drawn.lines == [] and not drawn.solid and why in drawn.marks["left out"][0]
        assert "left out" in caption(drawn, CONTEXT) and why in caption(drawn, CONTEXT)


def _two_strategies() -> pd.DataFrame:
    """The H100's square sweep with 1-level Strassen timed a second time at every size with the Small strategy:
    faster than Huge at 4,096 (made so), slower elsewhere."""
    square = _square()
    huge = square[square["impl"] == "strassen1"]
    small = huge.assign(strategy="Small", time_median_s=huge["time_median_s"] * 1.5, tflops=huge["tflops"] / 1.5)
    at = small["x"] == 4096
    small.loc[at, "time_median_s"] = huge.loc[at.values, "time_median_s"].values / 2
    small.loc[at, "tflops"] = huge.loc[at.values, "tflops"].values * 2
    return pd.concat([square, small], ignore_index=True)


def test_figures_draw_each_point_at_its_fastest_strategy(tmp_path: Path) -> None:
    frame = _two_strategies()
    best = best_rows(frame).set_index(["impl", "x"])
    assert best.loc[("strassen1", 4096), "strategy"] == "Small" and best.loc[("strassen1", 8192), "strategy"] == "Huge"
    assert len(best_rows(frame)) == len(best_rows(_square()))  # one row per point
    assert chosen_strategies(frame) == {"strassen1": ["Huge", "Small"]} and chosen_strategies(_square()) == {}
    with kept_figures() as figs:
        drawn = figures.fig_stra_square(frame, tmp_path, None, "DEV")
    line = _curves(figs["fig_stra_square"].axes[0])["1-level (ours)"]
    ys = dict(zip(line.get_xdata(), line.get_ydata()))
    assert list(line.get_xdata()) == sorted(set(frame[frame["impl"] == "strassen1"]["x"]))  # one point per size
    assert ys[4096] == pytest.approx(best.loc[("strassen1", 4096), "tflops"])
    assert ys[8192] == pytest.approx(best.loc[("strassen1", 8192), "tflops"])
    text = caption(drawn, CONTEXT)
    assert "drawn at the fastest" in text and "1-level (ours): Huge, Small" in text
    assert "fastest" not in caption(figures.fig_stra_square(_square(), tmp_path, None, "DEV"), CONTEXT)
    ratio = speedups(frame).set_index(["sweep", "impl", "x"]).loc[("square", "strassen1", 4096), "speedup"]
    cublas = frame[(frame["impl"] == "cublas") & (frame["x"] == 4096)]["time_median_s"].iloc[0]
    assert ratio == pytest.approx(cublas / best.loc[("strassen1", 4096), "time_median_s"])
