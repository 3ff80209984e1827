"""The GPU set-up, checked without a GPU: the gpu extras bring CuPy's CUDA libraries, a driver older than
CuPy's CUDA is one line naming the fix, and CuPy (where the gpu extra is installed) finds NVRTC and cuBLAS
without a CUDA toolkit."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from strassenbench.fused.cuda import runtime_mismatch
from strassenbench.fused.toolchain import Toolchain

ROOT = Path(__file__).resolve().parents[2]


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_gpu_extras_bring_cupys_cuda_libraries() -> None:
    """CuPy's ctk extra (the pip CUDA libraries: NVRTC, cuBLAS, ...) for both majors; the CUDA 12 one also
    brings the CUDA 12 build toolchain."""
    extras = _extras()
    assert any(r.startswith("cupy-cuda13x[ctk]") for r in extras["gpu"])
    assert any(r.startswith("cupy-cuda12x[ctk]") for r in extras["gpu-cu12"])
    assert "strassenbench[cu12]" in extras["gpu-cu12"]
    assert {r.split(">")[0] for r in extras["cu12"]} == {"nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvcc-cu12",
                                                         "nvidia-cuda-cccl-cu12"}


@pytest.mark.parametrize(("driver", "runtime", "message"), [
    ((12, 4), 13020, "driver runs CUDA 12.4, and CuPy is built for CUDA 13: pip install -e '.[gpu-cu12]'"),
    ((11, 8), 12060, "driver runs CUDA 11.8, and CuPy is built for CUDA 12: update the NVIDIA driver"),
    ((13, 0), 13020, None),
    ((13, 1), 12090, None),  # a newer driver runs older CUDA
    (None, 13020, None),  # no driver: not a mismatch (no GPU)
])
def test_a_driver_older_than_cupys_cuda_is_one_line_naming_the_fix(driver, runtime, message) -> None:  # noqa: ANN001
    found = runtime_mismatch(driver, runtime)
    assert found == message if message is None else message in found and "\n" not in found


def test_cupy_finds_nvrtc_and_cublas_without_a_toolkit() -> None:
    """Where the gpu extra is installed (no GPU needed): NVRTC, which CuPy compiles its elementwise kernels
    with, and cuBLAS load from the pip CUDA libraries. Skipped where they are not installed: the test extra
    installs CuPy alone (the cudasim tests need no CUDA library)."""
    from importlib.metadata import PackageNotFoundError, distribution

    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e '.[gpu]')")
    try:
        distribution(f"nvidia-cublas{'' if cupy.cuda.runtime.runtimeGetVersion() >= 13000 else '-cu12'}")
    except PackageNotFoundError:
        pytest.skip("CuPy's CUDA libraries are not installed (the gpu extra: pip install -e '.[gpu]')")
    from cupy.cuda import nvrtc
    from cupy_backends.cuda.libs import cublas

    major, _ = nvrtc.getVersion()
    assert major == cupy.cuda.runtime.runtimeGetVersion() // 1000
    assert cublas.getVersion(0) // 10000 == major  # cublasGetVersion needs no handle or GPU


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """A fake GPU machine for `doctor`: set its facts, and the doctor's probes read them."""
    from strassenbench import doctor
    from strassenbench.fused import modules
    from strassenbench.fused.toolchain import Toolchain

    facts = {"gpu": ("NVIDIA H100 80GB HBM3", "sm_90", (13, 0)), "cupy": ("14.2.0", 13020),
             "device": ("90", "0000:3B:00.0", True),
             "toolchains": (Toolchain((13, 0), "nvcc", "nvcc", "ptxas"), Toolchain((12, 9), "nvrtc", "lib", "ptxas"))}
    monkeypatch.setattr(doctor, "_gpu", lambda: facts["gpu"])
    monkeypatch.setattr(doctor, "_cupy_runtime", lambda: facts["cupy"])
    monkeypatch.setattr(doctor, "_cuda_device", lambda: facts["device"])
    monkeypatch.setattr(doctor, "_libraries", lambda: "NVRTC 13.5, cuBLAS 131000")
    monkeypatch.setattr(modules, "toolchains", lambda: facts["toolchains"])
    modules.toolchain_for.cache_clear()
    yield facts
    modules.toolchain_for.cache_clear()


def test_doctor_passes_on_a_ready_machine(machine, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    from strassenbench.cli import main

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "ok  GPU: NVIDIA H100 80GB HBM3 (sm_90)" in out and "same GPU in NVML" in out
    assert "ok  toolchain: nvcc 13.0 builds sm_90; the GPU runs its SASS" in out
    assert main(["doctor", "--arch"]) == 0 and capsys.readouterr().out == "sm_90\n"
    machine["device"] = ("120", "0000:3B:00.0", True)  # a Blackwell: the sm_90 build's PTX
    assert main(["doctor"]) == 0 and "runs its PTX, compiled by the driver" in capsys.readouterr().out


@pytest.mark.parametrize(("change", "message"), [
    ({"gpu": ("NVIDIA H100 80GB HBM3", "sm_90", (12, 4))}, "runs CUDA 12.4, and CuPy is built for CUDA 13"),
    ({"gpu": ("Tesla V100-SXM2-16GB", "sm_70", (12, 4)), "cupy": ("14.2.0", 12090), "device": ("70", "b", True),
      "toolchains": ()}, "no CUDA toolchain here builds sm_70"),
    ({"device": ("90", "0000:3B:00.0", False)}, "NVML finds no GPU at CUDA's PCI bus id"),
    # A Blackwell runs the sm_90 PTX, which a CUDA 13.0 driver cannot JIT from nvcc 13.5's output.
    ({"device": ("100", "0000:3B:00.0", True), "toolchains": (Toolchain((13, 5), "nvcc", "nvcc", "ptxas"),)},
     "pip install 'nvidia-cuda-nvcc==13.0.*'"),
    ({"NVCC_CCBIN": "/nonexistent/g++"}, "no host C++ compiler"),
])
def test_doctor_stops_at_the_first_problem_naming_the_fix(machine, change, message, capsys, monkeypatch) -> None:  # noqa: ANN001
    from strassenbench.cli import main

    change = dict(change)
    if "NVCC_CCBIN" in change:
        monkeypatch.setenv("NVCC_CCBIN", change.pop("NVCC_CCBIN"))
    machine.update(change)
    assert main(["doctor"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_doctor_without_a_gpu_says_so(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from strassenbench import device
    from strassenbench.cli import main

    monkeypatch.setattr(device, "visible_gpus", lambda: [])
    assert main(["doctor"]) == 2
    assert "no NVIDIA GPU is visible to NVML" in capsys.readouterr().err


GPU_SCRIPTS = ["gpu_run.sh", "gpu_wgmma.sh", "gpu_hopper.sh"]


@pytest.mark.parametrize("script", GPU_SCRIPTS)
def test_the_gpu_script_checks_the_setup_before_anything(tmp_path: Path, script: str) -> None:
    """scripts/gpu_run.sh (and the other GPU scripts) on a machine without a GPU stops at `doctor` with its one
    line, writing nothing."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHON=sys.executable, DATA=str(tmp_path / "data"), BUILD=str(tmp_path / "build"),
               CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(["bash", str(ROOT / "scripts" / script)], capture_output=True, text=True,
                            env=env, check=False, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "no NVIDIA GPU is visible to NVML" in result.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "build").exists()


@pytest.mark.parametrize("script", GPU_SCRIPTS)
def test_every_implementation_a_gpu_script_names_exists(script: str) -> None:
    """The lists of implementations a GPU script assigns (NAME=a,b,c or NAME=$NAME,d) are registered names: a typo
    would cost a GPU run its sweep."""
    import re

    from strassenbench.impls import get_impl

    text = (ROOT / "scripts" / script).read_text()
    # NAME=a,b (or =$NAME,c; after a test's &&; before ,$OTHER or a comment), and the lists given to --impl
    assigned = re.findall(r"(?:^\s*|&& )[A-Z][A-Z0-9_]*=(?:\$[A-Z][A-Z0-9_]*,)?([a-z][a-z0-9,-]*?)(?:,\$[A-Z_]+)?"
                          r"(?:\s*#.*)?$", text, re.MULTILINE)
    given = re.findall(r"--impl \"?([a-z][a-z0-9,-]*)", text)
    names = {name for value in [*assigned, *given] for name in value.split(",") if name}
    assert len(names) >= 4, names  # the pattern still finds the script's lists
    for name in sorted(names):
        get_impl(name)  # raises on an unknown name
