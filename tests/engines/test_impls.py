"""The implementation registry: every implementation on every CPU engine, schemes, memory, CLI."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from strassenbench.options import PAPER_SCHEMES  # splitk: tests/fused/test_splitk.py
from strassenbench.algebra.primitives import primitives
from strassenbench.cli import main
from strassenbench.impls import IMPLS, ImplError, get_impl
from strassenbench.reference.strassen_ref import workspace_bytes

CPU_ENGINES = ("numpy", "emu")
SHAPES = [(17, 33, 130), (33, 17, 33), (1, 2, 1), (130, 9, 17)]


def operands(m: int, k: int, n: int, dtype: str, seed: int = 0):  # noqa: ANN201
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-2, 3, s).astype(dtype) for s in ((m, k), (k, n), (m, n)))


def test_registry_names_and_labels() -> None:
    assert list(IMPLS) == ["cublas", "cutlass", "gemm", "strassen1", "strassen2-direct", "strassen1-presum",
                           "strassen2-presum", "strassen1-ref",
                           "strassen2-ref", "strassen2-hybrid", "cublas-tf32", "cutlass-3xtf32", "gemm-tf32",
                           "strassen1-tf32", "strassen2-tf32", "gemm-3xtf32", "strassen1-3xtf32", "strassen2-3xtf32",
                           "cutlass-dmma", "gemm-dmma", "strassen1-dmma", "strassen2-dmma", "cutlass-tf32-sm90",
                           "gemm-tf32-wgmma",
                           "strassen1-tf32-wgmma", "strassen2-tf32-wgmma", "gemm-3xtf32-wgmma", "strassen1-3xtf32-wgmma",
                           "strassen2-3xtf32-wgmma", "auto", "auto-3xtf32", "auto-3xtf32-wgmma"]
    assert {i.label for i in IMPLS.values()} >= {"cuBLAS", "CUTLASS", "GEMM (ours)", "1-level (ours)", "1-level reference",
                                                 "2-level hybrid (ours)", "2-level reference", "2-level direct (ours)"}
    assert all("cuda" in i.engines for i in IMPLS.values())


@pytest.mark.parametrize("name", [n for n, i in IMPLS.items() if i.kind != "auto"])  # auto: tests/model/test_pick.py
def test_every_impl_on_every_cpu_engine_exact(name: str) -> None:
    impl = IMPLS[name]
    for engine, (m, k, n), dtype in itertools.product(CPU_ENGINES, SHAPES, ("float32", "float64")):
        if engine not in impl.engines:
            continue
        A, B, C = operands(m, k, n, dtype)
        if dtype not in impl.dtypes:  # the tensor-core implementations: one dtype only, and they say so
            with pytest.raises(ImplError, match=f"computes {impl.dtypes[0]}, not {dtype}"):
                impl(A, B, C, 0.5, -1.5, engine=engine)
            continue
        expected = 0.5 * (A.astype(np.float64) @ B) - 1.5 * C  # small integers: exact in TF32 too
        impl(A, B, C, 0.5, -1.5, engine=engine)
        np.testing.assert_array_equal(C, expected, err_msg=f"{name} {engine} {(m, k, n)} {dtype}")


@pytest.mark.parametrize("name", ["strassen1", "strassen2-direct", "strassen2-hybrid", "strassen1-tf32",
                                  "strassen2-3xtf32", "strassen2-dmma"])
@pytest.mark.parametrize("scheme", PAPER_SCHEMES)
def test_fused_impls_every_scheme_on_the_emulator(name: str, scheme: str) -> None:
    A, B, C = operands(33, 40, 18, IMPLS[name].dtypes[0])
    expected = A @ B + C
    strategy = IMPLS[name].family.defaults["emu"]
    IMPLS[name](A, B, C, 1.0, 1.0, engine="emu", strategy=strategy, scheme=scheme)
    np.testing.assert_array_equal(C, expected)


def test_tensor_core_names_and_strategies() -> None:
    """<algorithm>x<L> and mixed specs take a mode suffix; a tensor-core implementation takes the tensor-core
    strategies only, and a SIMT one the paper's only."""
    assert (get_impl("winogradx1-3xtf32").mode, get_impl("winogradx1-3xtf32").levels) == ("3xtf32", 1)
    assert get_impl("strassenx2-tf32").mode == "1xtf32"
    assert get_impl("grey322-11-50+strassen-3xtf32").algorithm == "grey322-11-50+strassen"
    assert get_impl("strassen1-3xtf32").label == "1-level 3xTF32 (ours)"
    assert get_impl("cublas-tf32").kind == "blas" and get_impl("cublas").mode == "simt"
    dmma = get_impl("grey322-11-50x1-dmma")
    assert (dmma.mode, dmma.dtypes, dmma.label) == ("dmma", ("float64",), "grey322-11-50 1-level DMMA (ours)")
    A, B, C = operands(8, 8, 8, "float32")
    with pytest.raises(ImplError, match="unknown tensor-core strategy 'Huge'"):
        IMPLS["gemm-3xtf32"](A, B, C, engine="emu", strategy="Huge")
    with pytest.raises(ImplError, match="unknown strategy 'TcHuge'"):
        IMPLS["gemm"](A, B, C, engine="emu", strategy="TcHuge")


def test_extra_memory_formulas() -> None:
    m, n, k = 4096, 4096, 4096
    # the fused kernels carry their products' terms as kernel parameters: nothing on the device
    for name in ("cublas", "gemm", "strassen1", "strassen2-direct"):
        assert get_impl(name).extra_bytes(m, n, k, "float32") == 0
    assert get_impl("strassen1-ref").extra_bytes(m, n, k, "float32") == 4 * 3 * 2048 * 2048
    assert get_impl("strassen2-ref").extra_bytes(m, n, k, "float64") == 8 * 3 * (2048**2 + 1024**2)
    assert get_impl("strassen2-hybrid").extra_bytes(m, n, k, "float32") == workspace_bytes(m, k, n, 1, "float32")


def test_impl_option_and_engine_errors() -> None:
    A, B, C = operands(8, 8, 8, "float32")
    with pytest.raises(ImplError, match="runs on"):
        IMPLS["strassen1-ref"](A, B, C, engine="emu")
    with pytest.raises(ImplError, match="takes no --scheme"):
        IMPLS["gemm"](A, B, C, engine="emu", scheme="atomic")
    with pytest.raises(ImplError, match="takes no --strategy"):
        IMPLS["strassen1"](A, B, C, engine="numpy", strategy="Huge")
    with pytest.raises(ImplError, match="unknown implementation"):
        get_impl("nope")
    with pytest.raises(ImplError, match="cutlass runs on cuda, not numpy"):
        IMPLS["cutlass"](A, B, C, engine="numpy")
    with pytest.raises(ImplError, match="cutlass computes float32, not float64"):
        IMPLS["cutlass"].prepare(*operands(8, 8, 8, "float64"), engine="cuda")


def test_impls_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["impls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "impl,label,engines,extra_memory" and len(lines) == 1 + len(IMPLS)
    assert main(["impls", "--m", "1024", "--n", "1024", "--k", "1024"]) == 0
    assert "extra_bytes" in capsys.readouterr().out.splitlines()[0]
    assert main(["impls", "--m", "1024"]) == 2
    assert "go together" in capsys.readouterr().err


@pytest.mark.parametrize("name", [name for name, impl in IMPLS.items() if set(impl.engines) - {"cuda"}])
def test_verify_impl_cli(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    engine = "emu" if "emu" in IMPLS[name].engines else "numpy"
    dtype = "float64" if "float64" in IMPLS[name].dtypes else "float32"  # the tensor-core ones: float32
    assert main(["verify", "--impl", name, "--engine", engine, "--m", "33", "--n", "20", "--k", "47",
                 "--beta", "0.5", "--dtype", dtype]) == 0
    assert "status=ok" in capsys.readouterr().out


def test_verify_impl_bad_combinations(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--impl", "strassen1", "--levels", "1", "--m", "4", "--n", "4", "--k", "4"]) == 2
    assert main(["verify", "--impl", "strassen1-ref", "--engine", "emu", "--m", "4", "--n", "4", "--k", "4"]) == 2
    err = capsys.readouterr().err
    assert "exactly one of --levels" in err and "runs on cuda, numpy, not emu" in err


def test_hybrid_is_one_reference_level_over_fused_one_level() -> None:
    """7 fused 1-level calls under one Strassen-Winograd level: 49 products, one level of workspace."""
    import strassenbench.impls as impls

    calls = []
    original = impls._leaf_call

    def spy(engine, options, out, a, b, alpha, beta):  # noqa: ANN001, ANN202
        run = original(engine, options, out, a, b, alpha, beta)

        def counted() -> None:
            calls.append(a.shape)
            run()

        return counted

    impls._leaf_call = spy
    try:
        A, B, C = operands(64, 64, 64, "float32")
        expected = A @ B
        ws = IMPLS["strassen2-hybrid"](A, B, C, engine="emu", strategy="Small")
    finally:
        impls._leaf_call = original
    np.testing.assert_array_equal(C, expected)
    assert calls == [(32, 32)] * 7
    assert len(ws.levels) == 1 and IMPLS["strassen2-hybrid"].workspace_levels == 1


@pytest.mark.parametrize("name", [n for n, i in IMPLS.items() if i.kind != "auto"])  # auto: chosen per call
def test_prepared_calls_replay_exactly(name: str) -> None:
    """impl.prepare(...) builds launches, parameter arrays and workspace once; every replay computes anew."""
    impl = IMPLS[name]
    for engine in CPU_ENGINES:
        if engine not in impl.engines:
            continue
        options = {"scheme": "atomic"} if engine == "emu" and "scheme" in impl.options else {}
        A, B, C = operands(33, 47, 20, impl.dtypes[-1])
        expected = C + 2 * (A @ B)
        call = impl.prepare(A, B, C, 1.0, 1.0, engine=engine, **options)
        call()
        call()
        np.testing.assert_array_equal(C, expected, err_msg=f"{name} {engine}")
