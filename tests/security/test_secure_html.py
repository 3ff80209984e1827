"""Nothing from a results folder becomes markup or mathtext: a GPU name outside the names' grammar (system.json
or a CSV's gpu column) is refused on read; folder names, file names and GPU names are escaped in
report/index.html and compare's index.html, in text and in attributes, and drawn literally in the figures;
compare refuses times it cannot divide by."""

from __future__ import annotations

import csv
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from markupsafe import escape

from strassenbench.cli import main
from strassenbench.report import figures
from strassenbench.report.page import REPORT_FIGURES, build_report
from strassenbench.report.compare import compare_runs
from strassenbench.report.figures import fig_compare, fig_memlimit, fig_stra_square

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
HOSTILE = f"{SCRIPT}{IMG} O'Brien & Co"  # refused as a GPU name (strassenbench.results.NAME_GRAMMAR)
GPU = "NVIDIA Test-GPU (A) 80GB"
FOLDER = f"run{IMG}'& O'Brien & Co"  # a folder name cannot hold '/', so not SCRIPT
TABLE = """q"uote'd<svg>&x.md"""
RAW = (IMG, "<svg>", "O'Brien & Co")


def _run_folder(where: Path, name: str, gpu: str, source: Path = FIXTURES / "gpu_a") -> Path:
    """The synthetic gpu_a fixture (``source``: with its model's files) copied to ``where/name``, its GPU
    (system.json and every CSV's gpu column: the model's GPU too, but for the issue bounds' built-in GPUs)
    renamed ``gpu``."""
    folder = where / name
    shutil.copytree(source, folder)
    system = json.loads((folder / "system.json").read_text())
    system["gpu"]["gpu"] = gpu
    (folder / "system.json").write_text(json.dumps(system))
    for path in (p for p in folder.glob("*.csv") if p.name != "model_issue_bounds.csv"):
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows({**r, "gpu": gpu} if "gpu" in r else r for r in rows)
    return folder


class _Page(HTMLParser):
    """Every element and attribute of a page, and its text (character references resolved)."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _assert_inert(page: str, tags: set[str]) -> _Page:
    """No raw payload in ``page``, no element it could make (script, an img with onerror, anything outside
    ``tags``), and each payload shown as text."""
    for raw in RAW:
        assert raw not in page, raw
    parsed = _Page(page)
    assert {tag for tag, _ in parsed.tags} <= tags, {tag for tag, _ in parsed.tags} - tags
    assert not any(name.startswith("on") for _, attrs in parsed.tags for name in attrs)
    assert {attrs["src"] for tag, attrs in parsed.tags if tag == "img"} <= {
        *(f"figures/{f}.png" for f in REPORT_FIGURES), "fig_compare_speedup.png"}
    assert GPU in "".join(parsed.text) and FOLDER in "".join(parsed.text)
    assert str(escape(FOLDER)) in page
    return parsed


REPORT_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "div", "table", "thead", "tbody",
               "tr", "th", "td", "p", "a", "figure", "img", "figcaption", "b", "ul", "li"}


def test_report_escapes_names_from_the_results_folder(tmp_path: Path, modeled) -> None:  # noqa: ANN001
    data = _run_folder(tmp_path, FOLDER, GPU, modeled("gpu_a"))
    out = tmp_path / "report"
    (out / "tables").mkdir(parents=True)
    (out / "tables" / TABLE).write_text("a table another step wrote\n")
    build_report(data, out)
    page = (out / "index.html").read_text()
    parsed = _assert_inert(page, REPORT_TAGS)
    assert str(escape(FOLDER)) in page and FOLDER not in page  # the folder, in the captions' "Data: ... in"
    links = [attrs["href"] for tag, attrs in parsed.tags if tag == "a" and "href" in attrs]
    table_link = next(h for h in links if unquote(h) == f"tables/{TABLE}")
    assert (out / unquote(table_link)).is_file() and TABLE not in page
    assert str(escape(TABLE.removesuffix(".md").replace("_", " "))) in page  # its title, as text
    assert 'href="tables/' in page and "href='" not in page  # attributes double-quoted


def test_compare_escapes_names_from_the_results_folders(tmp_path: Path) -> None:
    data = _run_folder(tmp_path, FOLDER, GPU)
    out = tmp_path / "cmp"
    assert main(["compare", str(data), str(FIXTURES / "gpu_b"), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    _assert_inert(page, {"html", "head", "meta", "title", "body", "h1", "h2", "h3", "img", "p", "a", "table",
                         "thead", "tbody", "tr", "th", "td"})
    assert f"baseline {escape(GPU)} ({escape(FOLDER)})</h1>" in page
    assert FOLDER not in page


def _texts(fig: plt.Figure) -> list:
    return list(fig.findobj(plt.Text))


MATH = r"$\frac{a}{b}$ and $\nosuchcommand$"  # parsed as mathtext, the second would fail


@pytest.mark.parametrize("gpu", [MATH, "a$b", "$"])
def test_figures_draw_names_literally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu: str) -> None:
    frame = pd.read_csv(FIXTURES / "gpu_a" / "square.csv").assign(gpu=gpu)
    memlimit = pd.read_csv(FIXTURES / "gpu_a" / "memlimit.csv").assign(label=f"{gpu} label")
    saved: dict[str, plt.Figure] = {}
    real = figures.save
    monkeypatch.setattr(figures, "save", lambda fig, out, stem: saved.setdefault(stem, fig) and real(fig, out, stem))
    fig_compare({f"{gpu} (one)": frame, "other": frame}, tmp_path)
    fig_memlimit(memlimit, tmp_path, gpu)
    fig_stra_square(frame, tmp_path, 15.7, gpu)
    for stem, fig in saved.items():
        assert (tmp_path / f"{stem}.png").stat().st_size > 1000 and (tmp_path / f"{stem}.pdf").is_file()
        named = [t for t in _texts(fig) if gpu in t.get_text()]
        assert named, stem  # the name is drawn, as written
        assert not any(t.get_parse_math() or t.get_usetex() for t in _texts(fig)), stem


def test_report_and_compare_with_a_mathtext_folder_name(tmp_path: Path) -> None:
    data = _run_folder(tmp_path, MATH, GPU)
    lone = _run_folder(tmp_path, "one $ sign", "lone")
    build_report(data, tmp_path / "report")
    page = (tmp_path / "report" / "index.html").read_text()
    assert MATH in page
    compare_runs([data, lone], tmp_path / "cmp")
    assert (tmp_path / "cmp" / "fig_compare_speedup.png").is_file()


def test_caption_checks_ignore_what_names_say(tmp_path: Path, modeled) -> None:  # noqa: ANN001
    """A GPU or folder name that reads like a caption's words (a file name, 'dashed', '; ' or '. ') is text,
    not a claim about the figure (the model's GPU name among them)."""
    data = _run_folder(tmp_path, "run; dashed, break-even.json", "GPU. dashed dotted line break-even.csv",
                       modeled("gpu_a"))
    build_report(data, tmp_path / "report")
    page = (tmp_path / "report" / "index.html").read_text()
    assert "GPU. dashed dotted line break-even.csv" in page and "run; dashed, break-even.json" in page


@pytest.mark.parametrize("where", ["csv", "system.json"])
def test_a_gpu_name_outside_the_grammar_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              where: str) -> None:
    """Markup in a GPU name never reaches a page, a table or a figure: report and compare refuse the folder in
    one line (file and line named), and write nothing."""
    data = _run_folder(tmp_path, "run", GPU)
    if where == "csv":
        _run_folder(tmp_path, "hostile", HOSTILE)
        shutil.copy(tmp_path / "hostile" / "square.csv", data / "square.csv")
        fragment = "square.csv: line 2: column 'gpu' is not a GPU name"
    else:
        system = json.loads((data / "system.json").read_text())
        system["gpu"]["gpu"] = HOSTILE
        (data / "system.json").write_text(json.dumps(system))
        fragment = "system.json: gpu.gpu"
    for argv in (["report", "--data", str(data), "--out", str(tmp_path / "report")],
                 ["compare", str(data), str(FIXTURES / "gpu_b"), "--out", str(tmp_path / "cmp")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and fragment in err and SCRIPT not in err.replace(repr(HOSTILE)[1:-1], ""), err
    assert not (tmp_path / "report").exists() and not (tmp_path / "cmp").exists()


def _set_time(folder: Path, value: str) -> None:
    path = folder / "square.csv"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[0, "time_median_s"] = value
    frame.to_csv(path, index=False)


@pytest.mark.parametrize("value", ["0", "0.0", "inf", "-inf", "nan"])
def test_compare_refuses_times_it_cannot_divide_by(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   value: str) -> None:
    data = _run_folder(tmp_path, "a", "GPU A")
    _set_time(data, value)
    out = tmp_path / "cmp"
    for folders in ([data, FIXTURES / "gpu_b"], [FIXTURES / "gpu_b", data]):
        assert main(["compare", *map(str, folders), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert "square.csv" in err and "time" in err, err
        assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_compare_refuses_a_zero_sample_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _run_folder(tmp_path, "a", "GPU A")
    row = pd.read_csv(data / "square.csv").iloc[0]
    line = {"sweep": row["sweep"], "impl": row["impl"], "m": int(row["m"]), "n": int(row["n"]), "k": int(row["k"]),
            "dtype": row["dtype"], "strategy_request": "", "scheme_request": "", "timing": "blocking", "samples": [[0.0, 1410, 0, True], [0.0, 1410, 0, True]]}
    (data / "square.samples.jsonl").write_text(json.dumps(line) + "\n")
    assert main(["compare", str(data), str(FIXTURES / "gpu_b"), "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "square.samples.jsonl" in err and "sample time of 0" in err, err
    assert not (tmp_path / "cmp").exists()
