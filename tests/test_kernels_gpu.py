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
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    from strassenbench.fused.build import build
    from strassenbench.fused.cuda import device_arch

    out = tmp_path_factory.mktemp("gpu-build")
    build([device_arch()], out)
    return str(out)


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
        ENGINES["cuda"](plan, A, B, got, 0.5, -1.5, strategy=strategy, scheme=scheme, build_dir=build_dir)
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
        IMPLS[name](A, B, C, 1.0, 1.0, engine="cuda", strategy="Huge", scheme=scheme, build_dir=build_dir)
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
