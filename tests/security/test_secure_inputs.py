"""What a results folder, a catalogue folder or an argument can ask for since the last hardening round: names
outside the project's grammar, spreadsheet formulas and markup, implausible values, resumes no sweep writes,
bad data that pick once skipped, unbounded model work, models of hardware a GPU lacks, a byte-order mark, and
error messages a path could split. Each is refused in one line (exit 2) with every file as it was, or read."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.cli import main
from strassenbench.io import csv_text, markdown
from strassenbench.results import ResultsError, read_results

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "gpu_a"
QUICK = ["--min-time", "0", "--warmup-time", "0", "--min-samples", "2", "--precision", "1", "--no-progress"]


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> str:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err, (argv, err)
    return err


def _edited(tmp_path: Path, name: str = "run", **cells: str) -> Path:
    """gpu_a copied to ``tmp_path/name``, square.csv's first row given ``cells``."""
    folder = tmp_path / name
    shutil.copytree(FIXTURE, folder)
    frame = pd.read_csv(folder / "square.csv", dtype=str, keep_default_na=False)
    for column, value in cells.items():
        frame.loc[0, column] = value
    frame.to_csv(folder / "square.csv", index=False)
    return folder


@pytest.mark.parametrize("column, value, what", [
    ("impl", "<script>alert(3)</script>|y", "column 'impl' is not a name of letters"),
    ("impl", "=HYPERLINK(\"http://x\")", "column 'impl' is not a name of letters"),
    ("gpu", "A100 <img src=x onerror=alert(1)>", "column 'gpu' is not a GPU name"),
    ("time_median_s", "1e-12", "column 'time_median_s' is not a time of at least 1e-07 s"),
    ("m", str(2**20 + 1), "column 'm' is not a side of 1 to 1,048,576"),
])
def test_values_no_project_run_writes_are_refused_on_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          column: str, value: str, what: str) -> None:
    folder = _edited(tmp_path, **{column: value})
    with pytest.raises(ResultsError, match=rf"square.csv: line 2: {what}"):
        read_results(folder / "square.csv")
    _one_line(capsys, ["compare", str(folder), str(ROOT / "tests" / "fixtures" / "gpu_b"),
                       "--out", str(tmp_path / "cmp")], "line 2")
    _one_line(capsys, ["report", "--data", str(folder), "--out", str(tmp_path / "rep")], "line 2")
    assert not (tmp_path / "cmp").exists() and not (tmp_path / "rep").exists()


def test_formulas_are_neutral_in_csv_and_markup_is_text_in_markdown(tmp_path: Path) -> None:
    """OWASP's CSV-injection advice: a text cell that begins with = + - @, a tab or CR gets a leading quote,
    numbers (also as text) stay numbers. Markdown cells escape HTML."""
    frame = pd.DataFrame({"label": ["=HYPERLINK(\"x\")", "+1 cell", "-x", "@SUM(A1)", "\tx", "plain", "-1.5"],
                          "time": [-1.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    cells = pd.read_csv(pd.io.common.StringIO(csv_text(frame)), keep_default_na=False)
    assert cells["label"].tolist() == ["'=HYPERLINK(\"x\")", "'+1 cell", "'-x", "'@SUM(A1)", "'\tx", "plain", "-1.5"]
    assert cells["time"].tolist() == frame["time"].tolist()
    text = markdown(pd.DataFrame({"gpu": ["<script>alert(1)</script> & <img onerror=x>"]}))
    assert "<script>" not in text and "&lt;script&gt;" in text and "&amp;" in text
    folder = _edited(tmp_path, label="=HYPERLINK(\"http://evil\",\"x\")")  # a label is free text: kept, neutral
    assert main(["compare", str(folder), str(ROOT / "tests" / "fixtures" / "gpu_b"), "--out", str(tmp_path / "cmp")]) == 0
    compare = (tmp_path / "cmp" / "compare.csv").read_text()
    assert ",=HYPERLINK" not in compare and "\"=HYPERLINK" not in compare


def test_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "square.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (FIXTURE / "square.csv").read_bytes())
    assert read_results(path).equals(read_results(FIXTURE / "square.csv"))


def _cpu_sweep(tmp_path: Path) -> Path:
    out = tmp_path / "sweep" / "square.csv"
    assert main(["bench", "--impl", "gemm", "--sizes", "32,48", "--out", str(out), *QUICK]) == 0
    return out


@pytest.mark.parametrize("damage, fragment", [("twice", "hold one point"), ("untimed", "an ok row without a time")])
def test_a_resume_refuses_what_no_sweep_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str,
                                               fragment: str) -> None:
    out = _cpu_sweep(tmp_path)
    capsys.readouterr()
    lines = out.read_text().splitlines(keepends=True)
    if damage == "twice":
        out.write_text("".join(lines + [lines[1]]))
    else:
        header = lines[0].rstrip("\n").split(",")
        row = lines[1].rstrip("\n").split(",")
        row[header.index("time_median_s")] = ""
        out.write_text("".join([lines[0], ",".join(row) + "\n", *lines[2:]]))
    before = {p.name: p.read_bytes() for p in out.parent.iterdir()}
    assert main(["bench", "--impl", "gemm", "--sizes", "32,48,64", "--out", str(out), *QUICK]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("strassenbench: error")]
    assert len(errors) == 1 and fragment in errors[0]  # beside the engine's notice, one error line
    assert {p.name: p.read_bytes() for p in out.parent.iterdir()} == before


def test_pick_refuses_bad_data_it_once_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    h100 = data / "h100"
    h100.mkdir(parents=True)
    for name in ("system.json", "square.csv"):
        shutil.copy(ROOT / "data" / "nvidia-h100-80gb-hbm3" / name, h100 / name)
    frame = pd.read_csv(h100 / "square.csv", dtype=str, keep_default_na=False)
    frame.loc[0, "impl"] = "../../etc/passwd"
    frame.to_csv(h100 / "square.csv", index=False)
    argv = ["pick", "--gpu", "H100", "--m", "2048", "--n", "2048", "--k", "2048", "--data", str(data)]
    _one_line(capsys, argv, "square.csv: line 2: column 'impl' is not a name inside the working folder")
    shutil.copy(ROOT / "data" / "nvidia-h100-80gb-hbm3" / "square.csv", h100 / "square.csv")
    algorithms = tmp_path / "algorithms"
    shutil.copytree(ROOT / "algorithms", algorithms)
    (algorithms / "broken.txt").write_text("1 2 3\n")
    monkeypatch.setenv("STRASSENBENCH_ALGORITHMS", str(algorithms))
    _one_line(capsys, argv, "broken.txt: expected 3 blocks of rows")


def test_model_work_is_bounded_and_models_only_what_a_gpu_has(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "deep" / "w.csv"
    _one_line(capsys, ["model", "winners", "--gpu", "H100", "--sizes", "1:10000:1", "--out", str(out)],
              "30,000 rankings, above the limit of 400")
    assert not (tmp_path / "deep").exists()
    big = tmp_path / "big.csv"
    frame = read_results(FIXTURE / "square.csv")
    pd.concat([pd.read_csv(FIXTURE / "square.csv")] * (10_001 // len(frame) + 1)).to_csv(big, index=False)
    _one_line(capsys, ["model", "validate", "--gpu", "A100", str(big)], "above the limit of 10,000")
    for argv, fragment in [
        (["model", "predict", "--gpu", "H100", "--impl", "strassen1-dmma", "--sizes", "1024"],
         "strassen1-dmma runs in float64, not float32"),
        (["model", "predict", "--gpu", "V100", "--impl", "strassen1-dmma", "--sizes", "1024", "--dtype", "float64"],
         "needs FP64 tensor cores (DMMA), which the Tesla V100 SXM2 16GB (sm_70) does not have"),
        (["model", "crossover", "--gpu", "V100", "--impl", "strassen1-tf32", "--sizes", "1024"],
         "needs TF32 tensor cores"),
    ]:
        _one_line(capsys, [*argv, "--out", str(out)], fragment)
    assert not (tmp_path / "deep").exists()


def test_the_h200_has_a_built_in_spec_and_validates_its_data(capsys: pytest.CaptureFixture[str]) -> None:
    from strassenbench.model.gpus import SPECS

    h200, h100 = SPECS["H200"], SPECS["H100"]
    assert h200.dram_bandwidth == 4.8e12 and (h200.arch, h200.sm_count, h200.tf32_flops) == (
        h100.arch, h100.sm_count, h100.tf32_flops)
    data = ROOT / "data" / "nvidia-h200"
    assert main(["model", "validate", "--gpu", "H200", "--resources", str(data / "resources_sm_90.csv"),
                 str(data / "square.csv")]) == 0
    out, err = capsys.readouterr()
    assert "H200 SXM 141GB" in out and "the model for H200 against 107 measured rows" in err


def test_an_error_is_one_line_whatever_the_path_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    odd = tmp_path / "a\nstrassenbench: done\x1b[2K"
    err = _one_line(capsys, ["collect", str(odd / "x.csv"), "--out", str(tmp_path / "o.csv")], "no such file")
    assert "a\\nstrassenbench: done\\x1b[2K" in err


def test_a_command_refused_by_expect_device_leaves_no_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _one_line(capsys, ["bench", "--impl", "gemm", "--sizes", "32", "--expect-device", "H100",
                       "--out", str(tmp_path / "new" / "deep" / "s.csv"), *QUICK], "this job measures cpu")
    assert not (tmp_path / "new").exists()


def test_sigterm_during_report_leaves_no_lock_and_no_partial_folder(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    proc = subprocess.Popen([sys.executable, "-m", "strassenbench", "report", "--data", str(FIXTURE),
                             "--out", str(out)], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".rep.partial.*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the report ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 143 and "stopped by SIGTERM" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("column", ["registers", "blocks_per_sm"])
def test_a_resources_file_with_zero_registers_or_blocks_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   column: str) -> None:
    """No build writes a kernel of zero registers or zero blocks per SM; the model would divide by it, or rank
    without cuBLAS's stand-in (a StopIteration in pick)."""
    frame = pd.read_csv(ROOT / "data" / "nvidia-h100-80gb-hbm3" / "resources_sm_90.csv")
    frame.loc[3, column] = 0
    frame.to_csv(tmp_path / "resources.csv", index=False)
    _one_line(capsys, ["pick", "--gpu", "H100", "--m", "1024", "--n", "1024", "--k", "1024", "--resources",
                       str(tmp_path / "resources.csv")], f"line 5: column '{column}' is '0', not a positive integer")
