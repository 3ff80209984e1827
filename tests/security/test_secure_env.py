"""Environment variables: each is checked when it is read, and one that cannot be used is refused in one line
naming it, exit 2, before any work; an empty variable means its default (strassenbench.env). A hung toolchain
probe or compiler is bounded (STRASSENBENCH_PROBE_TIMEOUT, STRASSENBENCH_COMPILE_TIMEOUT) and killed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from strassenbench import env
from strassenbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
VARIABLES = ("STRASSENBENCH_CACHE", "XDG_CACHE_HOME", "CXX", "STRASSENBENCH_EMU_FLAGS", "STRASSENBENCH_CUDA_BIN",
             "STRASSENBENCH_KERNELS", "STRASSENBENCH_ALGORITHMS", "NVCC_CCBIN",
             "STRASSENBENCH_PROBE_TIMEOUT", "STRASSENBENCH_COMPILE_TIMEOUT", "STRASSENBENCH_INJECT_FAILURE")
EMU_VERIFY = ["verify", "--impl", "strassen1", "--engine", "emu", "--m", "32", "--n", "32", "--k", "32"]
SMALL_BUILD = ["build", "--arch", "sm_90", "--driver-cuda", "13.0", "--dtype", "float32", "--strategy", "Small",
               "--counts", "1x1x1", "--no-cutlass"]


def _clear_caches() -> None:
    from strassenbench.algebra import algorithm
    from strassenbench.fused import emu, modules, toolchain

    for cached in (emu.library, toolchain.toolchains, toolchain.find_tool, modules.toolchain_for,
                   algorithm.get_algorithm):
        cached.cache_clear()


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test reads the variables afresh: none set, nothing remembered from an earlier read."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    _clear_caches()
    yield
    _clear_caches()


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], variable: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("strassenbench: error: ") and err.count("\n") == 1, err
    assert f"{variable}=" in err, err
    return err


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.fixture()
def afile(tmp_path: Path) -> Path:
    path = tmp_path / "afile"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize(("variable", "value", "expects"), [
    ("STRASSENBENCH_CACHE", "relative/cache", "it is relative"),
    ("STRASSENBENCH_CACHE", "{afile}", "is not a folder"),
    ("STRASSENBENCH_CACHE", "{afile}/sub", "is not a folder"),
    ("STRASSENBENCH_CACHE", "/" + "x" * 300 + "/cache", "absolute path of a folder"),
    ("STRASSENBENCH_CACHE", "{tmp_path}/missing/cache", "missing does not exist"),
    ("XDG_CACHE_HOME", "{tmp_path}/missing/deeper", "missing does not exist"),
    ("HOME", "{tmp_path}/no-such-home", "no-such-home does not exist"),
    ("XDG_CACHE_HOME", "relative", "it is relative"),
    ("XDG_CACHE_HOME", "{afile}", "is not a folder"),
    ("HOME", "relative-home", "it is relative"),
    ("CXX", "/nonexistent/g++", "an executable file or a command on PATH"),
    ("CXX", "{afile}", "an executable file or a command on PATH"),
    ("CXX", "no-such-compiler-here", "an executable file or a command on PATH"),
    ("CXX", "g++ 'unclosed", "No closing quotation"),
    ("CXX", "   ", "an executable file or a command on PATH"),
    ("STRASSENBENCH_EMU_FLAGS", "-O2 'unclosed", "No closing quotation"),
    ("STRASSENBENCH_EMU_FLAGS", "-O2 extra.cpp", "not 'extra.cpp'"),
    ("STRASSENBENCH_EMU_FLAGS", "-o /tmp/elsewhere.so", "changes the output"),
    ("STRASSENBENCH_EMU_FLAGS", "-c", "changes the output"),
    ("STRASSENBENCH_KERNELS", "{tmp_path}/missing", "the CUDA kernel sources"),
    ("STRASSENBENCH_KERNELS", "{tmp_path}", "a folder with instances.cuh"),
    ("STRASSENBENCH_COMPILE_TIMEOUT", "soon", "a positive number of seconds"),
    ("STRASSENBENCH_COMPILE_TIMEOUT", "0", "a positive number of seconds"),
    ("STRASSENBENCH_COMPILE_TIMEOUT", "-5", "a positive number of seconds"),
    ("STRASSENBENCH_COMPILE_TIMEOUT", "1e400", "a positive number of seconds"),
    ("STRASSENBENCH_COMPILE_TIMEOUT", "9" * 20, "a positive number of seconds"),
])
def test_the_emulator_refuses_an_unusable_variable(variable, value, expects, tmp_path, afile,  # noqa: ANN001
                                                   monkeypatch, capsys) -> None:
    """Before the emulator compiles anything: its cache, compiler, flags, sources and compile limit."""
    if variable not in ("STRASSENBENCH_CACHE", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.setenv("STRASSENBENCH_CACHE", str(tmp_path / "cache"))  # a fresh cache: the compile is asked
    monkeypatch.setenv(variable, value.format(afile=afile, tmp_path=tmp_path))
    before = _tree(tmp_path)
    err = _refused(capsys, EMU_VERIFY, variable)
    assert expects in err
    assert _tree(tmp_path) == before  # nothing written: no cache folder, no library


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes any folder")
def test_a_cache_folder_that_cannot_be_written_is_refused(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    monkeypatch.setenv("STRASSENBENCH_CACHE", str(locked / "emu"))
    assert "is not writable" in _refused(capsys, EMU_VERIFY, "STRASSENBENCH_CACHE")


def test_the_cache_is_checked_for_writing(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """A folder that cannot be written is refused (os.access, as a non-root user sees it)."""
    monkeypatch.setattr(env.os, "access", lambda path, mode: False)
    monkeypatch.setenv("STRASSENBENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(env.EnvError, match=r"^STRASSENBENCH_CACHE=.*is not writable\)$"):
        env.cache_folder("STRASSENBENCH_CACHE")


@pytest.mark.parametrize("value", ["", "relative/folder"])
def test_the_cache_defaults(value, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """STRASSENBENCH_CACHE empty is unset: XDG_CACHE_HOME's strassenbench/emu, else HOME's .cache (an
    empty XDG_CACHE_HOME too)."""
    from strassenbench.fused.emu import cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("STRASSENBENCH_CACHE", "")
    assert cache_dir() == tmp_path / "xdg" / "strassenbench" / "emu"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    (tmp_path / "home").mkdir()  # a home folder exists
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "strassenbench" / "emu"
    monkeypatch.setenv("STRASSENBENCH_CACHE", value)
    if value:
        with pytest.raises(env.EnvError, match="STRASSENBENCH_CACHE"):
            cache_dir()


def test_an_empty_variable_means_its_default(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from strassenbench.algebra.algorithm import algorithm_names, algorithms_dir
    from strassenbench.bench.runner import injection
    from strassenbench.fused.emu import _compiler_command
    from strassenbench.fused.instances import kernels_dir
    from strassenbench.fused.toolchain import toolchains

    defaults = (algorithms_dir(), algorithm_names(), kernels_dir(), _compiler_command(), toolchains())
    (tmp_path / "planted.txt").write_text("not a coefficient file\n")  # an empty value is not the current folder
    monkeypatch.chdir(tmp_path)
    for name in VARIABLES:
        monkeypatch.setenv(name, "")
    _clear_caches()
    assert (algorithms_dir(), algorithm_names(), kernels_dir(), _compiler_command(), toolchains()) == defaults
    assert "planted" not in algorithm_names()
    assert env.flags("STRASSENBENCH_EMU_FLAGS") == [] and injection() is None
    assert env.seconds(env.PROBE_TIMEOUT) == 30 and env.seconds(env.COMPILE_TIMEOUT) == 1800
    assert env.compiler_path("NVCC_CCBIN") is None


def test_cuda_visible_devices_keeps_cudas_meaning(monkeypatch) -> None:  # noqa: ANN001
    """CUDA's own variable: empty hides every GPU (not the default), unset shows them all."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert env.visible_devices() == ""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert env.visible_devices() is None


def test_values_that_are_taken(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """Shell quoting, compiler arguments, -I/dir, decimal seconds, a folder or a command for NVCC_CCBIN."""
    from strassenbench.fused.emu import _compiler, _compiler_command

    monkeypatch.setenv("STRASSENBENCH_EMU_FLAGS", "-fsanitize=address,undefined '-DNAME=a b' -I/some/dir")
    assert env.flags("STRASSENBENCH_EMU_FLAGS") == ["-fsanitize=address,undefined", "-DNAME=a b", "-I/some/dir"]
    monkeypatch.setenv("CXX", "g++ -m64")
    assert _compiler_command()[1:] == ["-m64"] and Path(_compiler()).name == "g++"
    monkeypatch.setenv("STRASSENBENCH_COMPILE_TIMEOUT", "2.5")
    assert env.seconds(env.COMPILE_TIMEOUT) == 2.5
    for value in ("g++", str(tmp_path)):
        monkeypatch.setenv("NVCC_CCBIN", value)
        assert env.compiler_path("NVCC_CCBIN") == value


@pytest.mark.parametrize(("value", "expects"), [
    ("{tmp_path}/missing", "the coefficient files (a folder)"),
    ("{afile}", "the coefficient files (a folder)"),
])
@pytest.mark.parametrize("argv", [
    ["algorithms"],
    ["schedule", "--algorithm", "grey322-11-50", "--levels", "1"],  # read while the argument is checked
    ["verify", "--impl", "grey322-11-50x1", "--m", "8", "--n", "8", "--k", "8"],
])
def test_algorithms_folder_is_checked(value, expects, argv, tmp_path, afile, monkeypatch,  # noqa: ANN001
                                      capsys) -> None:
    monkeypatch.setenv("STRASSENBENCH_ALGORITHMS", value.format(tmp_path=tmp_path, afile=afile))
    assert expects in _refused(capsys, argv, "STRASSENBENCH_ALGORITHMS")


@pytest.mark.parametrize(("setup", "expects"), [
    ("afile", "not a folder"),
    ("empty", "no executable nvcc, ptxas in it"),
    ("nvcc only", "no executable ptxas in it"),
    ("no version", "names no CUDA release"),
    ("not executable", "no executable nvcc in it"),
])
def test_a_broken_cuda_bin_is_refused_not_skipped(setup, expects, tmp_path, afile, monkeypatch,  # noqa: ANN001
                                                  capsys) -> None:
    """Never the nvcc on PATH instead of the folder asked for."""
    folder = tmp_path / "bin"
    folder.mkdir()
    if setup in ("nvcc only", "no version", "not executable"):
        _script(folder / "nvcc", "echo 'nvcc: NVIDIA (R) Cuda compiler driver'")
    if setup in ("no version", "not executable"):
        _script(folder / "ptxas", "exit 0")
    if setup == "not executable":
        (folder / "nvcc").chmod(0o644)
    monkeypatch.setenv("STRASSENBENCH_CUDA_BIN", str(afile if setup == "afile" else folder))
    out = tmp_path / "build"
    assert expects in _refused(capsys, [*SMALL_BUILD, "--out", str(out)], "STRASSENBENCH_CUDA_BIN")
    assert not out.exists()


@pytest.mark.parametrize("value", ["never", "0", "nan", "inf", "1e400", "604801"])
def test_the_probe_timeout_is_checked(value, tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    folder = tmp_path / "bin"
    folder.mkdir()
    _script(folder / "nvcc", "echo 'Cuda compilation tools, release 13.0, V13.0.48'")
    _script(folder / "ptxas", "exit 0")
    monkeypatch.setenv("STRASSENBENCH_CUDA_BIN", str(folder))
    monkeypatch.setenv("STRASSENBENCH_PROBE_TIMEOUT", value)
    _refused(capsys, [*SMALL_BUILD, "--out", str(tmp_path / "build")], "STRASSENBENCH_PROBE_TIMEOUT")


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return None


def _alive(pid: int, grace: float = 5.0) -> bool:
    """Whether ``pid`` still runs ``grace`` seconds on (a SIGKILL is delivered asynchronously: on a loaded
    machine the process may still show as running for a moment after killpg returns)."""
    deadline = time.monotonic() + grace
    while _state(pid) not in (None, "Z"):  # a killed child that nobody reaped yet is gone
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)
    return False


def _fake_cuda(folder: Path, hang: str) -> Path:
    """An nvcc that hangs on ``hang`` ("--version": the probe; "-ptx": a compile), with a child that holds
    its output open (as cicc and ptxas do) and writes its process id to sleeper.pid."""
    folder.mkdir()
    sleeper = f'sleep 60 & echo $! > "{folder}/sleeper.pid"; wait'
    answer = "echo 'Cuda compilation tools, release 13.0, V13.0.48'"
    _script(folder / "nvcc", f'if [ "$1" = "{hang}" ]; then {sleeper}; else {answer}; fi')
    _script(folder / "ptxas", "exit 0")
    return folder


@pytest.mark.parametrize(("hang", "variable", "command"), [
    ("--version", "STRASSENBENCH_PROBE_TIMEOUT", "nvcc --version`"),
    ("-ptx", "STRASSENBENCH_COMPILE_TIMEOUT", "nvcc -ptx"),
])
def test_a_hung_nvcc_is_bounded(hang, variable, command, tmp_path) -> None:  # noqa: ANN001
    """`build` with an nvcc that never answers stops after the limit, naming the command and the variable
    that sets the limit; the tool and its children are killed."""
    folder = _fake_cuda(tmp_path / "bin", hang)
    environ = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    environ.update(STRASSENBENCH_CUDA_BIN=str(folder), **{variable: "1"})
    out = tmp_path / "build"
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "strassenbench", *SMALL_BUILD, "--out", str(out)],
                            capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=50, check=False)
    assert time.monotonic() - start < 40
    assert result.returncode == 2, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert command in error and f"did not finish within 1 s (set {variable}" in error, result.stderr
    assert "Traceback" not in result.stderr
    assert not _alive(int((folder / "sleeper.pid").read_text()))
    if hang == "--version":
        assert not out.exists()  # refused before any work


def test_run_tool_kills_a_hung_tool_at_its_limit(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from strassenbench.fused.toolchain import ToolchainError, run_tool

    monkeypatch.setenv("STRASSENBENCH_COMPILE_TIMEOUT", "0.5")
    tool = _script(tmp_path / "tool", f'sleep 60 & echo $! > "{tmp_path}/sleeper.pid"; wait')
    start = time.monotonic()
    with pytest.raises(ToolchainError, match=r"tool` did not finish within 0.5 s \(set STRASSENBENCH_COMPILE"):
        run_tool([str(tool)])
    assert time.monotonic() - start < 10
    assert not _alive(int((tmp_path / "sleeper.pid").read_text()))
    with pytest.raises(ToolchainError, match="cannot run"):
        run_tool([str(tmp_path / "missing-tool")])


def test_a_hung_emulator_compiler_is_bounded(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    """CXX that never finishes: the emulator build stops at STRASSENBENCH_COMPILE_TIMEOUT, one line, and the
    cache holds no library."""
    _script(tmp_path / "slowcxx", "sleep 60")
    monkeypatch.setenv("CXX", str(tmp_path / "slowcxx"))
    monkeypatch.setenv("STRASSENBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STRASSENBENCH_COMPILE_TIMEOUT", "0.5")
    assert main(EMU_VERIFY) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did not finish within 0.5 s" in err and "slowcxx" in err
    assert not list((tmp_path / "cache").glob("*.so"))


@pytest.mark.parametrize("value", ["nosuch:32:32:32", "cublas:0:32:32", "cublas:32:32:" + "9" * 30,
                                   " cublas:32:32:32"])
def test_an_injection_that_names_no_point_is_refused(value, tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    """Not ignored silently: an unknown implementation or a size no point has."""
    monkeypatch.setenv("STRASSENBENCH_INJECT_FAILURE", value)
    out = tmp_path / "square.csv"
    assert main(["bench", "--impl", "cublas", "--sizes", "32", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "STRASSENBENCH_INJECT_FAILURE=" in err and not out.exists()


@pytest.mark.parametrize("value", ["/nonexistent/g++", "relative/missing"])
def test_doctor_names_a_bad_nvcc_ccbin(value, monkeypatch) -> None:  # noqa: ANN001
    from strassenbench.doctor import Failed, host_compiler

    monkeypatch.setenv("NVCC_CCBIN", value)
    with pytest.raises(Failed, match=r"^no host C\+\+ compiler: NVCC_CCBIN="):
        host_compiler()


def test_a_long_value_is_shortened_in_the_message(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("STRASSENBENCH_EMU_FLAGS", "-O2 " + "x" * 5000)
    with pytest.raises(env.EnvError) as info:
        env.flags("STRASSENBENCH_EMU_FLAGS")
    assert len(str(info.value)) < 1000 and "\n" not in str(info.value)  # the value is 5,004 characters
