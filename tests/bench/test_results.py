"""One reader for result files (strassenbench.results): broken files are refused by every reader, naming the
file and the line; a bench resume re-measures exactly the point whose row was cut; user mistakes are one line,
exit 2, and change nothing."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.bench.backends import NumpyBackend
from strassenbench.bench.runner import Point, run_sweep
from strassenbench.bench.timers import Criterion
from strassenbench.cli import main
from strassenbench.results import ResultsError, read_results

FAST = Criterion(min_samples=3, min_time=0.0, precision=0.5, max_time=0.2, warmup=1, warmup_time=0.0)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def square(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep file: 3 points of the numpy engine."""
    out = tmp_path_factory.mktemp("sweep") / "square.csv"
    run_sweep([Point("cublas", x, x, x, sweep="square", x=x) for x in (32, 48, 64)], NumpyBackend(), out, FAST,
              progress=False)
    return out


def _cut(text: str) -> str:
    """The file as an interrupted writer would leave it: the last row cut in half."""
    body = text.rstrip("\n")
    last = body.rfind("\n")
    return body[: last + 1 + (len(body) - last) // 2]


def _with_field(text: str, column: str, value: str) -> str:
    """The file with ``column`` of its first row set to ``value``."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    rows[1][rows[0].index(column)] = value
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def _broken(square: Path) -> dict[str, str]:
    text = square.read_text()
    header, *rows = text.splitlines()
    return {
        "cut": _cut(text),
        "columns": text.replace("time_median_s", "t_median", 1),
        "fields": header + "\n" + rows[0] + ",extra\n",
        "number": _with_field(text, "m", "3x"),
        "empty": "",
        "binary": "\0\1\2 not text",
    }


REASONS = {"cut": "line 4 is cut short", "columns": "no column 'time_median_s'", "fields": "line 2 has",
           "number": "line 2: column 'm' is not an integer", "empty": "empty file", "binary": "not a CSV file"}


def test_reader_keeps_types(square: Path) -> None:
    frame = read_results(square, "bench")
    assert len(frame) == 3 and frame["m"].dtype == "int64" and frame["time_median_s"].dtype == "float64"
    assert (frame["status"] == "ok").all() and pd.api.types.is_string_dtype(frame["gpu"])


@pytest.mark.parametrize("case", sorted(REASONS))
def test_every_reader_refuses_a_broken_file(case: str, square: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """report, collect, compare and the reader itself refuse it: exit 2, one line naming the file and what is
    wrong, nothing written."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "gpu_a", run)
    broken = run / "square.csv"
    text = _broken(square)[case]
    broken.write_bytes(text.encode()) if case != "binary" else broken.write_bytes(text.encode("latin-1"))
    with pytest.raises(ResultsError, match=REASONS[case]):
        read_results(broken)
    commands = {
        "report": ["report", "--data", str(run), "--out", str(tmp_path / "report")],
        "collect": ["collect", str(square), str(broken), "--out", str(tmp_path / "all.csv")],
        "compare": ["compare", str(FIXTURES / "gpu_b"), str(run), "--out", str(tmp_path / "cmp")],
    }
    for name, argv in commands.items():
        capsys.readouterr()
        assert main(argv) == 2, name
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and str(broken) in lines[0] and REASONS[case] in lines[0], (name, err)
    assert not (tmp_path / "all.csv").exists()
    assert not (tmp_path / "report" / "index.html").exists() and not (tmp_path / "cmp" / "index.html").exists()


def test_resume_after_a_cut_row_measures_exactly_that_point(square: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "square.csv"
    out.write_text(_cut(square.read_text()))
    measured: list[int] = []
    points = [Point("cublas", x, x, x, sweep="square", x=x) for x in (32, 48, 64)]
    frame = run_sweep(points, NumpyBackend(), out, FAST, progress=False, on_point=lambda r: measured.append(r["m"]))
    assert measured == [64]  # the cut last point, and only it
    assert "line 4 was cut short; that point is measured again" in capsys.readouterr().err
    again = read_results(out, "bench")
    assert sorted(again["m"]) == [32, 48, 64] and len(frame) == 3 and (again["status"] == "ok").all()


def test_collect_keeps_integers_and_refuses_mixed_kinds(square: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "all.csv"
    copy = tmp_path / "again.csv"  # other points of the same kind (a point given twice is refused: test_secure_readers)
    copy.write_text(square.read_text().replace(",square,", ",rankk,"))
    assert main(["collect", str(square), str(copy), "--out", str(out)]) == 0
    joined = pd.read_csv(out)
    assert len(joined) == 6 and joined["m"].dtype == "int64" and "32.0" not in out.read_text()
    assert main(["collect", str(square), str(FIXTURES / "gpu_a" / "memlimit.csv"), "--out", str(tmp_path / "x.csv")]) == 2
    assert "other columns" in capsys.readouterr().err and not (tmp_path / "x.csv").exists()


def test_report_refuses_an_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run").mkdir()
    assert main(["report", "--data", str(tmp_path / "run"), "--out", str(tmp_path / "r")]) == 2
    assert "no results (square.csv" in capsys.readouterr().err and not (tmp_path / "r").exists()


BAD = [
    (["bench", "--impl", "gemm,,strassen1", "--out", "{tmp}/b.csv"], "empty item"),
    (["bench", "--impl", "gemm", "--min-time", "-1", "--out", "{tmp}/b.csv"], "negative"),
    (["bench", "--impl", "gemm", "--precision", "0", "--out", "{tmp}/b.csv"], "not positive"),
    (["bench", "--impl", "gemm", "--sizes", "64", "--out", "{tmp}"], "is a folder"),
    (["bench", "--impl", "gemm", "--sizes", "64", "--out", "{tmp}/file.txt/b.csv"], "is a file, not a folder"),
    (["bench", "--impl", "gemm", "--sweep", "custom", "--shapes", "1000000x1000000x8", "--out", "{tmp}/b.csv"],
     "GiB of host memory"),
    (["schedule", "--levels", "1", "--streams", "1000000"], "above the maximum 49"),
    (["variants", "--levels", "99"], "above the maximum 4"),
    (["verify", "--levels", "1", "--m", "1048576", "--n", "1048576", "--k", "4"], "GiB of host memory"),
    (["verify", "--levels", "1", "--m", "8", "--n", "8", "--k", "8", "--out", "{tmp}"], "is a folder"),
    (["collect", "{tmp}/nothere.csv", "--out", "{tmp}/c.csv"], "no such file"),
    (["report", "--data", "{tmp}", "--out", "{tmp}/file.txt"], "is a file"),
    (["model", "predict", "--gpu", "V100", "--impl", "gemm,", "--sizes", "1024"], "empty item"),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[" ".join(a[:2]) + f" {i}" for i, (a, _) in enumerate(BAD)])
def test_user_mistakes_are_one_line_and_change_nothing(argv: list[str], message: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file.txt").write_text("keep me\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "file.txt").read_text() == "keep me\n"


def test_result_files_follow_the_umask(tmp_path: Path) -> None:
    import os
    import stat

    from strassenbench.io import write_atomic

    write_atomic(tmp_path / "r.csv", "a\n")
    mode = stat.S_IMODE((tmp_path / "r.csv").stat().st_mode)
    mask = os.umask(0)
    os.umask(mask)
    assert mode == 0o666 & ~mask


def test_names_in_any_case() -> None:
    from strassenbench.cli import build_parser

    args = build_parser().parse_args(["build", "--arch", "sm_80", "--strategy", "huge", "--strategy", "SMALL"])
    assert args.strategy == ["Huge", "Small"]
    args = build_parser().parse_args(["bench", "--impl", "gemm", "--strategy", "BEST", "--out", "x.csv"])
    assert args.strategy == "best"


@pytest.mark.parametrize(("content", "message"), [(b"", "an empty file"), (b"\x00\x01binary", "not a CSV file")])
def test_bench_resume_refuses_an_empty_or_binary_file(content: bytes, message: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "square.csv"
    out.write_bytes(content)
    assert main(["bench", "--impl", "gemm", "--sizes", "32", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and str(out) in err and "Traceback" not in err
    assert out.read_bytes() == content
