"""The fused kernels on a real GPU through CuPy (marked ``gpu``: skipped without CuPy and a CUDA device).

The same launch descriptions as the emulator tests, run by cupy.RawModule from the cubin of
`strassenbench build` for this device's architecture.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from strassenbench.engines import ENGINES
from strassenbench.fused.launch import SCHEMES
from strassenbench.plan import make_plan
from strassenbench.strategies import STRATEGIES
from strassenbench.verify import verify

pytestmark = pytest.mark.gpu

FRINGE = [(1, 2, 1), (17, 33, 130), (33, 130, 257), (130, 257, 1), (257, 1, 17), (1000, 1024, 777)]


@pytest.fixture(scope="module")
def build_dir(gpu_build: str) -> str:
    return gpu_build  # conftest.py: one build per session, or the folder --gpu-build names


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("scheme", SCHEMES)
def test_cuda_matches_numpy_exactly_on_integers(strategy: str, scheme: str, build_dir: str) -> None:
    rng = np.random.default_rng(0)
    for levels, (m, k, n), dtype in itertools.product((0, 1, 2), FRINGE, ("float32", "float64")):
        if levels and max(m, k, n) < 2 ** levels:
            continue
        if levels == 2 and strategy != "Small" and max(m, k, n) < 1000:
            continue
        A, B, C = (rng.integers(-2, 3, s).astype(dtype) for s in ((m, k), (k, n), (m, n)))
        plan = make_plan("strassen", levels, m, k, n)
        expected, got = C.copy(), C.copy()
        ENGINES["numpy"](plan, A, B, expected, 0.5, -1.5)
        ENGINES["cuda"](plan, A, B, got, 0.5, -1.5, strategy=strategy, scheme=scheme, build_dir=build_dir,
                        split_k=2 if scheme == "splitk" else None)
        np.testing.assert_array_equal(got, expected, err_msg=f"L={levels} {(m, k, n)} {dtype}")


@pytest.mark.parametrize("levels", [0, 1, 2])
def test_cuda_random_inputs_within_bound(levels: int, build_dir: str) -> None:
    for dtype in ("float32", "float64"):
        result = verify(engine="cuda", algorithm="strassen", levels=levels, m=1537, n=1025, k=2049, dtype=dtype,
                        alpha=1.0, beta=0.5, options={"strategy": "Huge", "build_dir": build_dir})
        assert result["status"] == "ok", result


@pytest.mark.parametrize("name", ["cublas", "gemm", "strassen1", "strassen2-direct", "strassen1-ref", "strassen2-ref",
                                  "strassen2-hybrid"])
def test_every_impl_on_cuda_within_bound(name: str, build_dir: str) -> None:
    from strassenbench.impls import IMPLS

    options = {"build_dir": build_dir} if IMPLS[name].kind in ("fused", "hybrid") else {}
    for dtype, (m, n, k) in itertools.product(("float32", "float64"), [(1537, 1025, 2049), (33, 130, 17)]):
        result = verify(engine="cuda", impl=name, m=m, n=n, k=k, dtype=dtype, alpha=1.0, beta=0.5, options=options)
        assert result["status"] == "ok", result


@pytest.mark.parametrize("scheme", SCHEMES)
def test_cuda_schemes_exact(scheme: str, build_dir: str) -> None:
    from strassenbench.impls import IMPLS

    rng = np.random.default_rng(1)
    for name in ("strassen1", "strassen2-direct", "strassen2-hybrid"):
        A, B, C = (rng.integers(-2, 3, s).astype("float32") for s in ((999, 1001), (1001, 1003), (999, 1003)))
        expected = A.astype(np.float64) @ B + C
        IMPLS[name](A, B, C, 1.0, 1.0, engine="cuda", strategy="Huge", scheme=scheme, build_dir=build_dir,
                    split_k=3 if scheme == "splitk" else None)
        np.testing.assert_array_equal(C, expected)


def test_cutlass_baseline_on_the_gpu(build_dir: str) -> None:
    """The CUTLASS baseline (strassenbench.fused.cutlass) through the `cutlass` implementation: exact on
    small integers, fringe shapes included, with alpha and beta, and on strided views."""
    from strassenbench.impls import IMPLS

    rng = np.random.default_rng(1)
    for m, k, n in FRINGE:
        A, B, C = (rng.integers(-2, 3, s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
        expected = 0.5 * (A.astype(np.float64) @ B) - 1.5 * C
        IMPLS["cutlass"](A, B, C, 0.5, -1.5, engine="cuda", build_dir=build_dir)
        np.testing.assert_array_equal(C, expected.astype(np.float32), err_msg=f"{(m, k, n)}")
    big = rng.integers(-2, 3, (70, 90)).astype(np.float32)
    A, B, C = big[:33, 1:48], big[2:49, 5:25], np.zeros((33, 20), dtype=np.float32)
    IMPLS["cutlass"](A, B, C, engine="cuda", build_dir=build_dir)
    np.testing.assert_array_equal(C, A @ B)


# ------------------------------------------------------------------ the tensor-core family (sm_80 and later)
@pytest.fixture(scope="module")
def tc_build_dir(gpu_build: str) -> str:
    """The tensor-core kernels, added to the session's build (conftest.py)."""
    from pathlib import Path

    from strassenbench.fused.build import build
    from strassenbench.fused.cuda import device_arch

    arch = device_arch()
    if int(arch.removeprefix("sm_")) < 80:
        pytest.skip(f"{arch} has no TF32 tensor cores (sm_80 and later)")
    build([arch], Path(gpu_build), dtypes=("float32",), strategies=("TcSmall", "TcHuge"), cutlass=True)
    return gpu_build


@pytest.mark.parametrize("name", ["gemm-tf32", "gemm-3xtf32", "strassen1-tf32", "strassen1-3xtf32",
                                  "strassen2-tf32", "strassen2-3xtf32", "cublas-tf32", "cutlass-3xtf32"])
def test_tensor_core_impls_exact_on_integers(name: str, tc_build_dir: str) -> None:
    """Small integers are exact in TF32: every tensor-core implementation, both strategies, fringe shapes and
    shapes with interior tiles (the pipelined loop), matches float64 exactly."""
    from strassenbench.impls import IMPLS

    impl = IMPLS[name]
    rng = np.random.default_rng(2)
    strategies = ["TcSmall", "TcHuge"] if "strategy" in impl.options else [None]
    shapes = [(1000, 1024, 776), (1024, 512, 1024)] + ([] if impl.kind == "cutlass" else FRINGE[:5])
    for strategy, (m, k, n) in itertools.product(strategies, shapes):
        A, B, C = (rng.integers(-8, 9, s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
        expected = A.astype(np.float64) @ B + C
        options = {"build_dir": tc_build_dir} if impl.kind != "blas" else {}
        if strategy:
            options["strategy"] = strategy
        impl(A, B, C, 1.0, 1.0, engine="cuda", **options)
        np.testing.assert_array_equal(C, expected, err_msg=f"{name} {strategy} {(m, k, n)}")


def test_gemm_3xtf32_beats_cublas_fp32_at_8192(tc_build_dir: str, tmp_path) -> None:  # noqa: ANN001
    """The issue's bar: gemm-3xtf32 at n = 8,192 at least 1.5x cuBLAS's FP32 SGEMM, timed alike (the same
    blocking-kernel method, one sweep), with a relative error within 4x cuBLAS's on the same inputs."""
    import pandas as pd

    from strassenbench.cli import main

    out = tmp_path / "square.csv"
    assert main(["bench", "--engine", "cuda", "--impl", "cublas,gemm-3xtf32", "--sizes", "8192", "--out", str(out),
                 "--build-dir", tc_build_dir, "--strategy", "Huge", "--max-time", "5", "--no-progress"]) == 0
    frame = pd.read_csv(out, keep_default_na=False).set_index("impl")
    assert (frame["status"] == "ok").all() and set(frame["timing"]) == {"blocking"}
    assert frame.loc["gemm-3xtf32", "strategy"] == "TcHuge"
    speedup = frame.loc["gemm-3xtf32", "tflops"] / frame.loc["cublas", "tflops"]
    assert speedup >= 1.5, frame[["tflops", "time_median_s"]]
    assert frame.loc["gemm-3xtf32", "rel_error"] <= 4 * frame.loc["cublas", "rel_error"], frame[["rel_error"]]


# ------------------------------------------------------------------ the FP64 tensor-core family (sm_80 and later)
@pytest.fixture(scope="module")
def dmma_build_dir(gpu_build: str) -> str:
    """The DMMA kernels (DmmaSmall for the exactness checks, DmmaHuge for the speed goal, DmmaLarge for the
    accuracy table's default) and CUTLASS's DMMA GEMM, added to the session's build (conftest.py)."""
    from pathlib import Path

    from strassenbench.fused.build import build
    from strassenbench.fused.cuda import device_arch

    arch = device_arch()
    if int(arch.removeprefix("sm_")) < 80:
        pytest.skip(f"{arch} has no FP64 tensor cores (sm_80 and later)")
    build([arch], Path(gpu_build), dtypes=("float64",), strategies=("DmmaSmall", "DmmaLarge", "DmmaHuge"),
          cutlass=True)
    return gpu_build


@pytest.mark.parametrize("name", ["gemm-dmma", "strassen1-dmma", "strassen2-dmma", "cutlass-dmma"])
def test_dmma_impls_exact_on_integers(name: str, dmma_build_dir: str) -> None:
    """Small integers are exact in any order of summation: every DMMA implementation, both strategies, fringe
    shapes and shapes with interior tiles (the pipelined loop), matches the float64 product exactly."""
    from strassenbench.impls import IMPLS

    impl = IMPLS[name]
    rng = np.random.default_rng(4)
    strategies = ["DmmaSmall", "DmmaHuge"] if "strategy" in impl.options else [None]
    shapes = [(1000, 1024, 776), (1024, 512, 1024)] + ([] if impl.kind == "cutlass" else FRINGE[:5])
    for strategy, (m, k, n) in itertools.product(strategies, shapes):
        A, B, C = (rng.integers(-8, 9, s).astype(np.float64) for s in ((m, k), (k, n), (m, n)))
        expected = A @ B + C
        options = {"build_dir": dmma_build_dir}
        if strategy:
            options["strategy"] = strategy
        impl(A, B, C, 1.0, 1.0, engine="cuda", **options)
        np.testing.assert_array_equal(C, expected, err_msg=f"{name} {strategy} {(m, k, n)}")


def test_strassen1_dmma_beats_cublas_dgemm_at_8192(dmma_build_dir: str, tmp_path) -> None:  # noqa: ANN001
    """The issue's bar, on an A100 or an H100 (cuBLAS's DGEMM runs on their FP64 tensor cores): strassen1-dmma at
    n = 8,192 at least 1.05x cuBLAS float64, timed alike (one sweep, one method), with a relative error within
    4x of cuBLAS's on the same inputs, both measured against an exact product (`accuracy --dtype float64`: the
    sweep's own check is against cuBLAS's DGEMM, whose error is what is compared)."""
    import pandas as pd

    from strassenbench.cli import main
    from strassenbench.device import current_device

    name, _ = current_device()
    if not any(key in name for key in ("A100", "H100", "H200")):
        pytest.skip(f"{name}: the goal is set for the A100 and H100's FP64 tensor cores")
    out = tmp_path / "square.csv"
    assert main(["bench", "--engine", "cuda", "--impl", "cublas,strassen1-dmma", "--dtype", "float64", "--sizes",
                 "8192", "--out", str(out), "--build-dir", dmma_build_dir, "--strategy", "Huge", "--max-time", "5",
                 "--no-progress"]) == 0
    frame = pd.read_csv(out, keep_default_na=False).set_index("impl")
    assert (frame["status"] == "ok").all() and len(set(frame["timing"])) == 1
    assert frame.loc["strassen1-dmma", "strategy"] == "DmmaHuge"
    speedup = frame.loc["strassen1-dmma", "tflops"] / frame.loc["cublas", "tflops"]
    assert speedup >= 1.05, frame[["tflops", "time_median_s"]]
    errors = tmp_path / "accuracy.csv"
    assert main(["accuracy", "--engine", "cuda", "--impl", "cublas,strassen1-dmma", "--dtype", "float64", "--sizes",
                 "8192", "--inputs", "uniform", "--build-dir", dmma_build_dir, "--no-progress",
                 "--out", str(errors)]) == 0
    error = pd.read_csv(errors).set_index("impl")["rel_error"]
    assert 0 < error["strassen1-dmma"] <= 4 * error["cublas"], error
