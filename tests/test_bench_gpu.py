"""The benchmark runner on a GPU (marked ``gpu``: skipped without CuPy and a CUDA device)."""

from __future__ import annotations

import pandas as pd
import pytest

from strassenbench.cli import main

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    from strassenbench.fused.build import build
    from strassenbench.fused.cuda import device_arch

    out = tmp_path_factory.mktemp("gpu-build")
    build([device_arch()], out, dtypes=("float32",))
    return str(out)


def test_small_square_sweep_on_the_gpu(tmp_path, build_dir: str) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    impls = "cublas,gemm,strassen1,strassen1-ref,strassen2-ref,strassen2-hybrid,strassen2-direct"
    assert main(["bench", "--engine", "cuda", "--impl", impls, "--sizes", "1024,2048", "--out", str(out),
                 "--build-dir", build_dir, "--scheme", "atomic", "--max-time", "2"]) == 0
    frame = pd.read_csv(out, keep_default_na=False)
    assert (frame["status"] == "ok").all(), frame[["impl", "m", "status", "message"]]
    assert (frame["gpu"] != "cpu").all() and (frame["driver"] != "").all()
    assert (frame["memory_check"] == "ok").all(), frame[["impl", "extra_bytes", "measured_extra_bytes"]]
    assert (frame["sm_clock_start_mhz"].astype(str) != "").all()
    assert (tmp_path / "system.json").is_file()


def test_memlimit_confirms_under_a_budget(build_dir: str, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "mem.csv"
    assert main(["memlimit", "--engine", "cuda", "--impl", "cublas,strassen1,strassen1-ref", "--memory-budget",
                 "2GiB", "--step", "256", "--out", str(out), "--build-dir", build_dir]) == 0
    frame = pd.read_csv(out)
    assert frame["confirmed"].all(), frame
