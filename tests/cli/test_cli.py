"""The command line: outputs, exit codes and one-line errors."""

import io
import subprocess
import sys

import pandas as pd
import pytest

from strassenbench.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_variants_csv(capsys):
    code, out, _ = run(capsys, "variants", "--levels", "1")
    assert code == 0
    frame = pd.read_csv(io.StringIO(out))
    assert list(frame.columns) == ["variant", "W_A", "W_B", "W_C", "count", "products"]
    assert frame["count"].tolist() == [1, 2, 2, 2]
    assert frame["products"].tolist() == ["M0", "M5 M6", "M2 M3", "M1 M4"]


def test_variants_two_level_markdown(capsys):
    code, out, _ = run(capsys, "variants", "--levels", "2", "--format", "markdown")
    assert code == 0
    assert out.startswith("|   variant |")
    assert len([line for line in out.splitlines() if line.startswith("|")]) == 12


def test_schedule_csv(capsys):
    code, out, _ = run(capsys, "schedule", "--levels", "1", "--streams", "2")
    assert code == 0
    frame = pd.read_csv(io.StringIO(out))
    assert frame.groupby("stage")["product"].apply(list).tolist() == [["M1", "M4", "M5", "M6"], ["M2", "M3"], ["M0"]]
    assert frame.loc[frame["product"] == "M5", "stream"].item() == 0


def test_schedule_markdown_reports_makespan(capsys):
    code, out, _ = run(capsys, "schedule", "--levels", "2", "--streams", "4", "--format", "markdown")
    assert code == 0
    assert "makespan 16 products (lower bound 16, sequential 49)" in out


def test_verify_ok(capsys):
    code, out, _ = run(capsys, "verify", "--engine", "numpy", "--levels", "2", "--m", "33", "--n", "17",
                       "--k", "130", "--dtype", "float64", "--alpha", "2", "--beta", "0.5", "--seed", "3")
    assert code == 0
    fields = dict(item.split("=") for item in out.split())
    assert fields["status"] == "ok"
    assert float(fields["rel_error"]) <= float(fields["bound"])
    assert float(fields["rel_error"]) < 1e-13


def test_verify_fails_with_exit_1_when_bound_exceeded(capsys, monkeypatch):
    import strassenbench.verify as verify_module

    def broken(plan, A, B, C, alpha, beta):
        C[...] = 0

    monkeypatch.setitem(verify_module.ENGINES, "numpy", broken)
    code, out, _ = run(capsys, "verify", "--levels", "1", "--m", "8", "--n", "8", "--k", "8")
    assert code == 1
    assert "status=FAIL" in out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["verify", "--levels", "1", "--m", "0", "--n", "4", "--k", "4"], "--m: 0 is below the minimum 1"),
        (["verify", "--levels", "1", "--m", "-5", "--n", "4", "--k", "4"], "below the minimum"),
        (["verify", "--levels", "1", "--m", "2.5", "--n", "4", "--k", "4"], "'2.5' is not a plain decimal integer"),
        (["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--dtype", "int8"], "invalid choice"),
        (["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--algorithm", "x"], "unknown algorithm 'x'"),
        (["verify", "--levels", "-1", "--m", "4", "--n", "4", "--k", "4"], "--levels: -1 is below"),
        (["verify", "--levels", "3", "--m", "4", "--n", "4", "--k", "4"], "more than the shape 4x4x4 allows"),
        (["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--beta", "inf"], "not finite"),
        (["verify", "--levels", "1", "--m", "4", "--n", "4"], "give --m, --k and --n"),
        (["variants"], "required: --levels"),
        (["schedule", "--levels", "1", "--streams", "0"], "--streams: 0 is below"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, fragment):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert fragment in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_levels_beyond_shape_is_exit_2(capsys):
    code, out, err = run(capsys, "verify", "--levels", "3", "--m", "4", "--n", "4", "--k", "4")
    assert code == 2 and out == ""
    assert err.strip() == "strassenbench: error: 3 levels is more than the shape 4x4x4 allows (at most 2)"


def test_console_script_runs():
    """The installed entry point (not just main()) gives one line and exit 2 on bad input."""
    proc = subprocess.run([sys.executable, "-m", "strassenbench", "verify", "--levels", "1", "--m", "x",
                           "--n", "1", "--k", "1"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1


def test_verify_emu_runs_the_real_kernels(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "v.csv"
    code = main(["verify", "--engine", "emu", "--levels", "1", "--m", "17", "--n", "33", "--k", "9",
                 "--strategy", "Small", "--scheme", "streams", "--streams", "3", "--beta", "0.5", "--out", str(out)])
    assert code == 0
    line = capsys.readouterr().out
    assert "engine=emu" in line and "scheme=streams" in line and "streams=3" in line and "status=ok" in line
    assert "strategy" in out.read_text().splitlines()[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["verify", "--engine", "numpy", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--strategy", "Huge"],
         "--strategy applies to the fused engines"),
        (["verify", "--levels", "3", "--m", "40", "--n", "40", "--k", "40", "--algorithm", "strassen+winograd"],
         "has 2 levels, not 3"),
        (["verify", "--engine", "emu", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--strategy", "Giant"],
         "invalid choice"),
        (["build", "--arch", "sm_90", "--dtype", "float16"], "invalid choice"),
    ],
)
def test_fused_bad_input_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
