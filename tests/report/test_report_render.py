"""The report as a reader sees it: index.html rendered by headless Chromium at a laptop's width. Every figure
loads, every linked file exists, and the page never scrolls sideways (wide tables scroll in their own box)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from strassenbench.bench.backends import NumpyBackend
from strassenbench.bench.runner import Point, run_sweep
from strassenbench.bench.timers import Criterion
from strassenbench.report.page import REPORT_FIGURES, build_report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
# Reads the laid-out page back into the DOM that --dump-dom prints.
PROBE = """<script>window.addEventListener('load', () => {
  const images = Array.from(document.images);
  document.body.setAttribute('data-probe', JSON.stringify({
    scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth, images: images.length,
    broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'))}));
});</script>"""

needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium (scripts/test_setup.sh installs it)")


def _chromium(url: str, profile: Path, width: int, *extra: str) -> subprocess.CompletedProcess:
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
           f"--user-data-dir={profile}", f"--window-size={width},900", "--virtual-time-budget=10000", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _render(out: Path, tmp_path: Path, width: int) -> dict:
    probe = out / "probe.html"
    probe.write_text((out / "index.html").read_text().replace("</body>", PROBE + "</body>"))
    proc = _chromium(probe.as_uri(), tmp_path / f"profile{width}", width, "--dump-dom")
    found = re.search(r'data-probe="([^"]*)"', proc.stdout)
    assert found, proc.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


def _cpu_run(tmp_path: Path) -> Path:
    data = tmp_path / "cpu"
    criterion = Criterion(min_samples=2, min_time=0.0, max_time=0.05, warmup=0, warmup_time=0.0)
    points = [Point(i, x, x, x, sweep=s, x=x) for s in ("square", "rankk") for x in (32, 64)
              for i in ("cublas", "strassen1", "strassen1-ref", "gemm")]
    for sweep in ("square", "rankk"):
        run_sweep([p for p in points if p.sweep == sweep], NumpyBackend(), data / f"{sweep}.csv", criterion,
                  progress=False)
    return data


@needs_browser
@pytest.mark.parametrize("run", ["gpu_fixture", "cpu_run"])
def test_the_report_renders_whole_and_fits_the_width(run: str, tmp_path: Path, modeled) -> None:  # noqa: ANN001
    data = modeled("gpu_a") if run == "gpu_fixture" else _cpu_run(tmp_path)
    out = tmp_path / "report"
    build_report(data, out)
    page = (out / "index.html").read_text()
    for link in set(re.findall(r'(?:href|src)="([^"#]+)"', page)):
        assert (out / link).is_file(), link  # every linked file exists
    for width in (1280, 1000):
        probe = _render(out, tmp_path, width)
        assert probe["images"] == len(REPORT_FIGURES) and probe["broken"] == [], probe
        assert probe["scrollWidth"] <= probe["innerWidth"], probe  # no sideways scrolling of the page
    shot = tmp_path / "page.png"
    proc = _chromium((out / "index.html").as_uri(), tmp_path / "profile_shot", 1280, f"--screenshot={shot}")
    assert shot.is_file() and shot.stat().st_size > 20_000, proc.stderr[-2000:]


@needs_browser
def test_the_probe_sees_a_page_that_overflows(tmp_path: Path) -> None:
    """The width check can fail: a table outside its scroll box makes the page wider than the window."""
    out = tmp_path / "report"
    build_report(FIXTURES / "gpu_a", out)
    index = out / "index.html"
    index.write_text(index.read_text().replace("</body>", "<table><tr>" + "<td>wide_cell_text</td>" * 300
                                               + "</tr></table></body>"))
    probe = _render(out, tmp_path, 1280)
    assert probe["scrollWidth"] > probe["innerWidth"]
