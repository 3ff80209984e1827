"""Inputs a hostile review found that still escaped the one-line rule: every refusal below is one line on stderr
with exit status 2 and no traceback, before any work, leaving every file as it was."""

from __future__ import annotations

import csv
import importlib.abc
import sys
from pathlib import Path

import pytest

from strassenbench.cli import main
from support.refusals import refused as _refused


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """No usable device, whatever this machine has: CuPy's device query fails, the driver is not the reason."""
    from strassenbench.bench import backends
    from strassenbench.fused import cuda
    from strassenbench.model import gpus

    def fail(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    monkeypatch.setattr(backends, "CudaBackend", fail)
    monkeypatch.setattr(cuda, "driver_mismatch", lambda: None)
    monkeypatch.setattr(gpus, "query_device", lambda: (_ for _ in ()).throw(RuntimeError("cannot query GPU 0: none")))


@pytest.mark.parametrize("argv", [
    ["verify", "--engine", "cuda", "--impl", "gemm", "--m", "64", "--n", "64", "--k", "64"],
    ["verify", "--engine", "cuda", "--levels", "1", "--m", "64", "--n", "64", "--k", "64", "--out", "{tmp}/v.csv"],
    ["accuracy", "--engine", "cuda", "--impl", "gemm", "--sizes", "64", "--out", "{tmp}/a.csv"],
])
def test_the_cuda_engine_without_a_gpu_is_one_line(no_gpu, tmp_path: Path, capsys, argv) -> None:  # noqa: ANN001
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    _refused(capsys, argv, "the cuda engine needs a visible NVIDIA GPU", tmp_path)


def test_model_spec_of_the_device_without_one_is_one_line(no_gpu, capsys) -> None:  # noqa: ANN001
    _refused(capsys, ["model", "spec", "--gpu", "H100", "--gpu", "device"], "cannot query GPU 0")


@pytest.mark.parametrize("command", [
    ["compare", "{a}", "{b}"],
    ["report", "--data", "{a}"],
    ["build", "--arch", "sm_80", "--strategy", "Small", "--counts", "1x1x1"],
    ["variants", "--levels", "1"],
])
@pytest.mark.parametrize("out", ["", ".", "/", "..", "x/.."])
def test_an_out_that_names_nothing_of_its_own_is_refused(tmp_path: Path, capsys, monkeypatch, command,  # noqa: ANN001
                                                          out: str) -> None:
    """"" would write into the current folder, "." and "/" cannot carry a lock named after them."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{a}", "a").replace("{b}", "b") for a in command]
    _refused(capsys, [*argv, "--out", out], "names no file or folder of its own", tmp_path)


@pytest.mark.parametrize("argv", [
    ["variants", "--levels", "1", "--algorithm", "x/no\nexist\x1b[31m.csv"],
    ["bench", "--impl", "gemm\x1b[31m", "--sizes", "64", "--out", "b.csv"],
    ["bench", "--impl", "gemm", "--sizes", "64\n65", "--out", "b.csv"],
])
def test_a_parsers_message_escapes_the_values_control_characters(tmp_path: Path, capsys, monkeypatch,  # noqa: ANN001
                                                                 argv: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    err = _refused(capsys, argv, "error: argument", tmp_path)
    assert "\x1b" not in err and ("\\x1b" in err or "\\n" in err)


@pytest.mark.parametrize("argv, message", [
    (["verify", "--levels", "1", "--m", "1048577", "--n", "4", "--k", "4"], "above the maximum 1,048,576"),
    (["impls", "--m", "99999999999999999999", "--n", "4", "--k", "4"], "above the maximum"),
    (["variants", "--levels", "01"], "no leading zero"),
    (["impls", "--m", "064", "--n", "4", "--k", "4"], "no leading zero"),
    (["bench", "--impl", "gemm", "--sizes", "00064", "--out", "b.csv"], "bad size '00064'"),
    (["bench", "--impl", "gemm", "--sizes", " 64", "--out", "b.csv"], "bad size ' 64'"),
    (["model", "predict", "--gpu", "H100", "--impl", "gemm", "--sizes", "512 ", "--out", "p.csv"], "bad size '512 '"),
    (["memlimit", "--impl", "gemm", "--memory-budget", "\uff12\uff15\uff16MiB", "--out", "m.csv"], "bad size"),
    (["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--alpha", "1e39"], "--alpha 1e+39 overflows"),
    (["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--dtype", "float64", "--alpha", "1e308"],
     "--alpha 1e+308 overflows float64"),
    (["verify", "--levels", "1", "--shape", "4x64x4", "--beta", "-1e39"], "--beta -1e+39 overflows float32"),
    (["bench", "--impl", "gemm", "--sizes", "64", "--max-time", "1e20", "--out", "b.csv"], "above the maximum 86,400 s"),
    (["bench", "--impl", "gemm", "--sizes", "64", "--min-time", "90000", "--out", "b.csv"], "above the maximum"),
    (["bench", "--impl", "gemm", "--sizes", "64", "--max-time", "0", "--out", "b.csv"], "0 s is not positive"),
])
def test_numbers_out_of_range_or_padded_are_refused(tmp_path: Path, capsys, monkeypatch, argv: list[str],  # noqa: ANN001
                                                    message: str) -> None:
    monkeypatch.chdir(tmp_path)
    _refused(capsys, argv, message, tmp_path)


def test_a_scale_that_fits_is_verified(capsys) -> None:  # noqa: ANN001
    """The bound is the dtype's, not a guess: 1e35 times A B at k = 4 fits float32 and checks exactly."""
    assert main(["verify", "--levels", "1", "--m", "4", "--n", "4", "--k", "4", "--alpha", "1e35"]) == 0
    assert "status=ok" in capsys.readouterr().out


def _predictions(tmp_path: Path, name: str, impl: str, sizes: str) -> Path:
    out = tmp_path / name
    assert main(["model", "predict", "--gpu", "H100", "--impl", impl, "--sizes", sizes, "--out", str(out)]) == 0
    return out


def test_model_speedup_of_predictions_with_no_size_in_common_is_one_line(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    gemm = _predictions(tmp_path, "gemm.csv", "gemm", "2048")
    strassen = _predictions(tmp_path, "strassen.csv", "strassen1", "1024")
    capsys.readouterr()
    _refused(capsys, ["model", "speedup", str(gemm), str(strassen)], "no size where both strassen1 and gemm", tmp_path)


@pytest.mark.parametrize("value, message", [("inf", "not a finite non-negative time"),
                                            ("-0.5", "not a finite non-negative time"),
                                            ("0", "not positive and finite")])
def test_model_speedup_refuses_a_time_that_cannot_be_right(tmp_path: Path, capsys, value: str,  # noqa: ANN001
                                                           message: str) -> None:
    path = _predictions(tmp_path, "p.csv", "gemm,strassen1", "1024,2048")
    rows = list(csv.reader(path.open(newline="")))
    rows[1][rows[0].index("time_s")] = value
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    capsys.readouterr()
    _refused(capsys, ["model", "speedup", str(path)], message, tmp_path)


def test_ctrl_c_while_the_cli_is_imported_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    """The entry point catches a Ctrl-C that lands while its modules load (the first half second of a run)."""

    class Interrupted(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object, target: object = None) -> None:
            if name == "strassenbench.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "strassenbench.cli")
    monkeypatch.setattr(sys, "meta_path", [Interrupted(), *sys.meta_path])
    from strassenbench.__main__ import run

    assert run() == 130
    assert capsys.readouterr().err == "strassenbench: interrupted\n"


def test_a_compiler_stopped_by_a_signal_leaves_no_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupted build kills its compilers: that is no failure of theirs, and no log is written."""
    import subprocess

    from strassenbench.fused import modules
    from strassenbench.fused.build import BuildError
    from strassenbench.fused.toolchain import Toolchain, ToolKilled, _failed

    killed = _failed(["/usr/bin/ptxas"], subprocess.CompletedProcess([], -9, "", ""))
    assert isinstance(killed, ToolKilled) and str(killed) == "ptxas was stopped by SIGKILL"

    def stopped(*_args: object) -> None:
        raise killed

    toolchain = Toolchain((13, 0), "nvcc", "nvcc", "ptxas")
    monkeypatch.setattr(Toolchain, "ptx", stopped)
    (tmp_path / "unit.cu").write_text("")
    with pytest.raises(BuildError, match="stopped by SIGKILL"):
        modules.compile_module(toolchain, "sm_90", tmp_path / "unit.cu", [], tmp_path, "unit")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unit.cu"]
