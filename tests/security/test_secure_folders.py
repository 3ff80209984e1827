"""A results folder from another machine, mutated as a hostile review did: a value that cannot be right, a
symbolic link among its files, a column named like a spreadsheet formula. Every refusal is one line naming the
file, with exit status 2, and nothing is read outside the folder."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from strassenbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "gpu_a"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of a synthetic results folder (tests/fixtures/gpu_a), under data/ of a working folder."""
    target = tmp_path / "data" / "gpu-a"
    shutil.copytree(FIXTURE, target)
    return target


def _set(path: Path, column: str, value: str, rows: int = 1) -> None:
    """``column`` of the first ``rows`` data rows of the CSV ``path`` set to ``value``."""
    lines = list(csv.reader(path.open(newline="")))
    at = lines[0].index(column)
    for line in lines[1:1 + rows]:
        line[at] = value
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(lines)


def _one_line(capsys, argv: list[str], *words: str) -> str:  # noqa: ANN001
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and all(w in err for w in words), err
    return err


@pytest.mark.parametrize("file, column, value, rows", [
    ("square.csv", "x", "abc", 1),
    ("square.csv", "x", "inf", 1),
    ("square.csv", "x", "2.5", 1),
    ("square.csv", "throttled_samples", "inf", 1),
    ("square.csv", "tflops", "inf", 3),
    ("memlimit.csv", "predicted_n", "inf", 1),
    ("square.csv", "time_median_s", "1e308", 3),
])
def test_a_value_that_cannot_be_right_is_one_line_naming_the_file(folder: Path, tmp_path: Path, capsys,  # noqa: ANN001
                                                                   file: str, column: str, value: str,
                                                                   rows: int) -> None:
    _set(folder / file, column, value, rows)
    shown = "low_clock_discards" if column == "throttled_samples" else column  # its new name
    _one_line(capsys, ["report", "--data", str(folder), "--out", str(tmp_path / "report")], file, shown)
    _one_line(capsys, ["compare", str(FIXTURE), str(folder), "--out", str(tmp_path / "cmp")], file, shown)
    assert not (tmp_path / "report").exists() and not (tmp_path / "cmp").exists()


@pytest.mark.parametrize("target", ["outside", "nowhere", "loop"])
@pytest.mark.parametrize("name", ["square.csv", "panel.csv", "system.json"])
def test_a_link_among_a_folders_files_is_refused(folder: Path, tmp_path: Path, capsys, target: str,  # noqa: ANN001
                                                 name: str) -> None:
    """A link to a file outside the folder is never followed, and a dangling one does not hide a sweep."""
    outside = tmp_path / "outside" / name
    outside.parent.mkdir()
    shutil.copy(folder / name, outside)
    if name.endswith(".csv"):
        _set(outside, "commit", "OUTSIDE-MARKER")
    (folder / name).unlink()
    (folder / name).symlink_to({"outside": outside, "nowhere": tmp_path / "none" / name, "loop": name}[target])
    for argv in (["report", "--data", str(folder), "--out", str(tmp_path / "report")],
                 ["compare", str(FIXTURE), str(folder), "--out", str(tmp_path / "cmp")]):
        _one_line(capsys, argv, name, "a symbolic link")
    assert not (tmp_path / "report").exists() and not (tmp_path / "cmp").exists()


def test_collect_writes_no_formula_even_in_a_column_name(folder: Path, tmp_path: Path) -> None:
    square = folder / "square.csv"
    lines = list(csv.reader(square.open(newline="")))
    lines[0].append("=cmd|' /C calc'!A0")
    for line in lines[1:]:
        line.append("=1+1")
    with square.open("w", newline="") as f:
        csv.writer(f).writerows(lines)
    out = tmp_path / "collected.csv"
    assert main(["collect", str(square), "--out", str(out)]) == 0
    header, first = list(csv.reader(out.open(newline="")))[:2]
    assert "'=cmd|' /C calc'!A0" in header and "=cmd|' /C calc'!A0" not in header
    assert not any(cell.startswith(("=", "+", "@")) for cell in [*header, *first])


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    """A copy of a measured folder with samples files (data/nvidia-h200's sweeps and system.json)."""
    target = tmp_path / "data" / "h200"
    target.mkdir(parents=True)
    for name in ("square.csv", "square.samples.jsonl", "system.json"):
        shutil.copy(ROOT / "data" / "nvidia-h200" / name, target / name)
    return target


@pytest.mark.parametrize("change, message", [
    (lambda line: {**line, "m": 999, "n": 999, "k": 999}, "samples of a point its rows do not measure"),
    (lambda line: {**line, "samples": line["samples"][:-1]}, "and its row counts"),
    (lambda line: {**line, "samples": [[True, *s[1:]] for s in line["samples"]]}, "is not a samples record"),
    (lambda line: {**line, "samples": [[]]}, "is not a samples record"),
    (lambda line: {**line, "samples": [""]}, "is not a samples record"),
    (lambda line: {**line, "samples": [[1e308, *s[1:]] for s in line["samples"]]}, "at most 86,400 s"),
])
def test_compare_checks_each_samples_file_against_its_rows(measured: Path, tmp_path: Path, capsys,  # noqa: ANN001
                                                           change, message: str) -> None:
    import json

    samples = measured / "square.samples.jsonl"
    lines = samples.read_text().splitlines()
    lines[0] = json.dumps(change(json.loads(lines[0])))
    samples.write_text("\n".join(lines) + "\n")
    _one_line(capsys, ["compare", str(ROOT / "data" / "nvidia-h100-80gb-hbm3"), str(measured), "--out",
                       str(tmp_path / "cmp")], "square.samples.jsonl", message)
    assert not (tmp_path / "cmp").exists()


@pytest.mark.parametrize("args, column", [(["spec", "--gpu", "H100"], "tau_gmop"),
                                          (["winners", "--gpu", "H100", "--sizes", "2048"], "time_s")])
def test_the_models_tables_refuse_a_time_that_cannot_be_right(tmp_path: Path, capsys, args: list[str],  # noqa: ANN001
                                                              column: str) -> None:
    """A model file read back (the report reads them from a run's folder) with a negative or infinite time."""
    from strassenbench.model.files import SPEC, WINNERS
    from strassenbench.results import ResultsError, read_results

    path = tmp_path / "model.csv"
    assert main(["model", *args, "--out", str(path)]) == 0
    for value in ("-1", "inf"):
        _set(path, column, value)
        with pytest.raises(ResultsError, match=f"column '{column}' is not a finite non-negative time"):
            read_results(path, SPEC if args[0] == "spec" else WINNERS)


def test_a_bench_output_folder_may_hold_links_of_its_own(tmp_path: Path) -> None:
    """The refusal is the reader's of a results folder (report, compare): a bench writing into a working folder
    that holds, say, a linked compile_commands.json runs, and reads nothing through the link."""
    (tmp_path / "elsewhere.json").write_text("{}")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "compile_commands.json").symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "work" / "old.csv").symlink_to(tmp_path / "nowhere.csv")
    assert main(["bench", "--impl", "gemm", "--sizes", "32", "--min-time", "0", "--warmup-time", "0",
                 "--min-samples", "2", "--precision", "1", "--no-progress",
                 "--out", str(tmp_path / "work" / "square.csv")]) == 0
