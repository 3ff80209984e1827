"""The GPU set-up, checked without a GPU: the gpu extras bring CuPy's CUDA libraries, a driver older than
CuPy's CUDA is one line naming the fix, and CuPy (where the gpu extra is installed) finds NVRTC and cuBLAS
without a CUDA toolkit."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from strassenbench.fused.cuda import runtime_mismatch

ROOT = Path(__file__).resolve().parents[1]


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
    with, and cuBLAS load from the pip CUDA libraries. Skipped where CuPy is not installed (the test command
    installs the test extra only)."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e '.[gpu]')")
    from cupy.cuda import nvrtc
    from cupy_backends.cuda.libs import cublas

    major, _ = nvrtc.getVersion()
    assert major == cupy.cuda.runtime.runtimeGetVersion() // 1000
    assert cublas.getVersion(0) // 10000 == major  # cublasGetVersion needs no handle or GPU
