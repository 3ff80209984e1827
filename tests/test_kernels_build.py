"""`strassenbench build`: nvcc compiles the fused kernels for sm_80/sm_90 without a GPU, and resources.csv says
what the GPU compiler did (registers, spills, occupancy, SASS instruction classes)."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from strassenbench.algebra.primitives import variants
from strassenbench.cli import main
from strassenbench.fused.build import RESOURCE_COLUMNS, build, parse_ptxas, sass_counts
from strassenbench.fused.instances import instances, kernels_dir
from strassenbench.occupancy import ARCHS, blocks_per_sm
from strassenbench.strategies import STRATEGIES

ONE_LEVEL = {(1, 1, 1)} | {(v.W_A, v.W_B, v.W_C) for v in variants("strassen", 1)}


@pytest.fixture(scope="module")
def float32_sm90(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The full float32 set for sm_90 (every strategy, variant and write mode): about two minutes of nvcc."""
    return build(["sm_90"], tmp_path_factory.mktemp("build90"), dtypes=("float32",))


@pytest.fixture(scope="module")
def huge_sm80(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return build(["sm_80"], tmp_path_factory.mktemp("build80"), dtypes=("float32",), strategies=("Huge",))


def test_full_float32_set_compiles_for_sm90(float32_sm90: pd.DataFrame) -> None:
    assert list(float32_sm90.columns) == RESOURCE_COLUMNS
    expected = {i.name for i in instances(dtypes=("float32",))}
    assert set(float32_sm90["kernel"]) == expected
    assert (float32_sm90["registers"] > 0).all() and (float32_sm90["ffma"] > 0).all()
    for row in float32_sm90.itertuples():  # occupancy is the calculator's, from ptxas's numbers
        s = STRATEGIES[row.strategy]
        assert row.blocks_per_sm == blocks_per_sm(ARCHS["sm_90"], s.threads, row.registers, row.smem_bytes)


@pytest.mark.parametrize("table", ["float32_sm90", "huge_sm80"])
def test_huge_one_level_target(table: str, request: pytest.FixtureRequest) -> None:
    """Every 1-level float32 Huge variant: no spills, 2 blocks per SM, 128-bit fragment loads, no LDL/STL.

    A k_S slice needs k_S (m_R + n_R) / 4 fragment loads of 128 bits; narrower LDS in these kernels are the
    reads of the per-product term descriptors, which live in shared memory (see kernels/strassen.cuh).
    """
    huge_s = STRATEGIES["Huge"]
    fragment_loads = huge_s.k_S * (huge_s.m_R + huge_s.n_R) // 4
    frame = request.getfixturevalue(table)
    huge = frame[(frame["strategy"] == "Huge") & (frame["dtype"] == "float32")]
    one = huge[[tuple(w) in ONE_LEVEL for w in huge[["W_A", "W_B", "W_C"]].itertuples(index=False)]]
    assert len(one) == 2 * len(ONE_LEVEL)  # plain and atomic
    failing = one[(one["spill_stores"] > 0) | (one["spill_loads"] > 0) | (one["blocks_per_sm"] < 2)
                  | (one["local_mem_ops"] > 0) | (one["lds128"] < fragment_loads)]
    assert failing.empty, failing.to_string()


def test_unchanged_build_is_skipped_and_header_change_rebuilds(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    sources = tmp_path / "kernels"
    shutil.copytree(kernels_dir(), sources)
    monkeypatch.setenv("STRASSENBENCH_KERNELS", str(sources))
    out = tmp_path / "build"
    log: list[bool] = []

    def run() -> None:
        build(["sm_80"], out, dtypes=("float32",), strategies=("Small",), progress=lambda arch, rebuilt: log.append(rebuilt))

    run()
    cubin = out / "strassen_sm_80.cubin"
    stamp = cubin.stat().st_mtime_ns
    run()
    assert log == [True, False] and cubin.stat().st_mtime_ns == stamp
    header = sources / "epilogue.cuh"
    header.write_text(header.read_text() + "\n// touched\n")
    run()
    assert log == [True, False, True]
    assert (out / "resources.csv").is_file()


def test_parse_ptxas_log() -> None:
    log = """ptxas info    : Compiling entry function 'k1' for 'sm_90'
ptxas info    : Function properties for k1
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 8 bytes cumulative stack size, 16528 bytes smem
ptxas info    : Function properties for scale
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 26 registers, used 0 barriers
"""
    props = parse_ptxas(log)
    assert (props["k1"].registers, props["k1"].spill_stores, props["k1"].spill_loads) == (128, 4, 12)
    assert (props["k1"].smem_bytes, props["k1"].stack_bytes) == (16528, 8)
    assert props["scale"].smem_bytes == 0


def test_sass_counts() -> None:
    sass = """
        Function : k1
        /*0080*/                   LDS.128 R4, [R2+0x10] ;                  /* 0x000010000204 */
        /*0090*/                   LDS R8, [R2] ;                           /* 0x000000000208 */
        /*00a0*/               @P0 LDG.E.128 R12, desc[UR4][R6.64] ;        /* 0x000000040612 */
        /*00b0*/                   FFMA R1, R2, R3, R1 ;                    /* 0x000000030201 */
        /*00c0*/                   STL [R1], R2 ;                           /* 0x000000020101 */
        Function : k2
        /*0010*/                   DFMA R2, R4, R6, R2 ;                    /* 0x000000060402 */
"""
    counts = sass_counts(sass)
    assert counts["k1"] == {"lds128": 1, "lds_other": 1, "ldg": 1, "ffma": 1, "local_mem_ops": 1}
    assert counts["k2"] == {"ffma": 1}


def test_build_cli_rejects_unknown_arch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "--arch", "sm_75"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_no_float32_kernel_spills_on_sm90(float32_sm90: pd.DataFrame) -> None:
    """Only Huge is capped (128 registers for 2 blocks per SM); every other instantiation gets the registers
    it needs, so no float32 kernel spills (a cap on Large once made it spill)."""
    spilling = float32_sm90[(float32_sm90["spill_stores"] > 0) | (float32_sm90["spill_loads"] > 0)]
    assert spilling.empty, spilling[["kernel", "registers", "spill_stores"]].to_string()
    assert (float32_sm90["local_mem_ops"] == 0).all()
