"""`strassenbench build`: the toolchain the driver needs (nvcc 13, or NVRTC 12 for sm_70 and CUDA 12 drivers)
compiles the fused kernels without a GPU, and resources.csv says what the GPU compiler did (registers,
spills, occupancy, SASS instruction classes)."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.algebra.primitives import variants
from strassenbench.cli import main
from strassenbench.fused import cutlass
from strassenbench.fused import build as build_module
from strassenbench.fused.build import RESOURCE_COLUMNS, build, parse_ptxas
from strassenbench.fused.instances import instances, kernels_dir
from strassenbench.fused.modules import unit_of
from strassenbench.fused.toolchain import Toolchain, ToolchainError, choose, find_tool, parse_cuda_version, toolchains
from strassenbench.model.issue import issue_fractions
from strassenbench.occupancy import ARCHS, blocks_per_sm
from strassenbench.strategies import STRATEGIES
from support.workflow_helpers import FLOAT32_FAST, FLOAT32_SLOW, seed_build

ONE_LEVEL = {(1, 1, 1)} | {(v.W_A, v.W_B, v.W_C) for v in variants("strassen", 1)}
# The builds a test reads by name (request.getfixturevalue): each test with the tests of its build's group
# (conftest.py: one worker of `pytest -n` builds it). The sm_80 Huge set (three minutes of nvcc) is in the slow
# tier: sm_90's is the default suite's.
TABLES = [pytest.param(name, marks=[pytest.mark.xdist_group(f"test_kernels_build.py::{name}"),
                                    *([pytest.mark.slow] if name == "huge_sm80" else [])])
          for name in ("float32_sm90", "huge_sm80")]


@pytest.fixture(scope="module")
def float32_sm90(float32_sm90_build) -> pd.DataFrame:  # noqa: ANN001
    """The full float32 set for sm_90 and the CUTLASS baseline (conftest.py: built once per session)."""
    return float32_sm90_build[1]


@pytest.fixture(scope="module")
def huge_sm80(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return build(["sm_80"], tmp_path_factory.mktemp("build80"), dtypes=("float32",), strategies=("Huge",))


def _check_float32_set(frame: pd.DataFrame, strategies: tuple[str, ...], baseline: bool) -> None:
    """Every float32 kernel of ``strategies`` (and the CUTLASS baseline) read back, none spilling, and its
    occupancy the calculator's from ptxas's numbers."""
    assert list(frame.columns) == RESOURCE_COLUMNS
    expected = {i.name for i in instances(dtypes=("float32",), strategies=strategies)} | (
        {cutlass.KERNEL} if baseline else set())
    assert set(frame["kernel"]) == expected
    assert (frame["registers"] > 0).all() and (frame["ffma"] > 0).all()
    for row in frame.itertuples():
        s = STRATEGIES[row.strategy]
        assert row.blocks_per_sm == blocks_per_sm(ARCHS["sm_90"], s.threads, row.registers, row.smem_bytes)
    spilling = frame[(frame["spill_stores"] > 0) | (frame["spill_loads"] > 0)]
    assert spilling.empty, spilling[["kernel", "registers", "spill_stores"]].to_string()
    assert (frame["local_mem_ops"] == 0).all()


def test_float32_small_and_huge_compile_for_sm90(float32_sm90: pd.DataFrame) -> None:
    _check_float32_set(float32_sm90, FLOAT32_FAST, baseline=True)


@pytest.mark.slow
def test_every_float32_strategy_compiles_for_sm90(float32_sm90_build, tmp_path) -> None:  # noqa: ANN001
    """The other four strategies' float32 kernels (240, about five minutes of nvcc on one core) for sm_90."""
    seed_build(tmp_path, float32_sm90_build[0])
    _check_float32_set(build(["sm_90"], tmp_path, dtypes=("float32",), strategies=FLOAT32_SLOW, cutlass=False),
                       FLOAT32_SLOW, baseline=False)


def _counts(frame: pd.DataFrame) -> list[tuple[int, int, int]]:
    return [tuple(w) for w in frame[["W_A", "W_B", "W_C"]].itertuples(index=False)]


@pytest.mark.parametrize("table", TABLES)
def test_huge_one_level_target(table: str, request: pytest.FixtureRequest) -> None:
    """The GEMM and every 1-level float32 Huge variant, read from their machine code: at most 128 registers,
    no spills, 2 blocks per SM (the paper's "2 active blocks"), 128-bit fragment loads, and a main loop
    whose global loads are all LDG, issued at least 200 instructions before the first instruction that
    waits for them, with FFMA at least 80% (GEMM) or 77% (Strassen) of the loop."""
    huge_s = STRATEGIES["Huge"]
    fragment_loads = huge_s.k_S * (huge_s.m_R + huge_s.n_R) // 4
    frame = request.getfixturevalue(table)
    huge = frame[(frame["strategy"] == "Huge") & (frame["dtype"] == "float32") & (frame["source"] == "strassenbench")]
    one = huge[[w in ONE_LEVEL for w in _counts(huge)]]
    assert len(one) == 2 * 2 * len(ONE_LEVEL)  # plain and atomic, vector and scalar loads
    failing = one[(one["registers"] > 128) | (one["blocks_per_sm"] < 2) | (one["local_mem_ops"] > 0)
                  | (one["spill_stores"] > 0) | (one["lds128"] < fragment_loads)]
    assert failing.empty, failing.to_string()
    one = one[one["loads"] == "vector"]
    failing = one[(one["loop_generic_loads"] > 0) | ((one["write_mode"] == "plain") & (one["load_use_distance"] < 200))]
    assert failing.empty, failing.to_string()
    plain = one[one["write_mode"] == "plain"].set_index(pd.Index(_counts(one[one["write_mode"] == "plain"])))
    assert plain.loc[[(1, 1, 1)], "loop_ffma_share"].min() >= 0.80
    assert plain["loop_ffma_share"].min() >= 0.77


@pytest.mark.parametrize("table", TABLES)
def test_huge_direct_two_level_var0_target(table: str, request: pytest.FixtureRequest) -> None:
    """The direct 2-level Var#0 (W_A = W_B = W_C = 4), float32 Huge, plain write-back: in the 128 registers
    of 2 blocks per SM without spilling (the paper's needs 160 and runs 1 block), every global load LDG issued
    at least 200 instructions ahead of its first use, FFMA at least 84% of the main loop."""
    frame = request.getfixturevalue(table)
    var0 = frame[(frame["strategy"] == "Huge") & (frame["dtype"] == "float32") & (frame["W_A"] == 4)
                 & (frame["W_B"] == 4) & (frame["W_C"] == 4) & (frame["write_mode"] == "plain")
                 & (frame["loads"] == "vector")].iloc[0]
    assert var0["registers"] <= 128 and var0["blocks_per_sm"] == 2 and var0["spill_stores"] == 0
    assert var0["loop_generic_loads"] == 0 and var0["loop_global_loads"] == 8
    assert var0["load_use_distance"] >= 200
    assert var0["loop_ffma_share"] >= 0.84


@pytest.mark.parametrize("table", TABLES)
def test_atomic_write_back_reduces_whole_vectors_on_sm90(table: str, request: pytest.FixtureRequest) -> None:
    """The atomic write-back's global reductions, read from the machine code: one per element of the W_C
    m_R x n_R blocks in the scalar kernels, and on sm_90 one per 4 in the vector kernels
    (red.global.add.v4.f32: the w2x2x2 Huge kernel's 128 scalar reductions become 32); sm_80 has no vector
    reduction. The plain write-back has none."""
    frame = request.getfixturevalue(table)
    huge = frame[(frame["strategy"] == "Huge") & (frame["source"] == "strassenbench") & (frame["dtype"] == "float32")]
    s = STRATEGIES["Huge"]
    per_term = s.m_R * s.n_R
    assert (huge.loc[huge["write_mode"] == "plain", "global_reductions"] == 0).all()
    atomic = huge[huge["write_mode"] == "atomic"]
    arch = atomic["arch"].iloc[0]
    width = {("sm_90", "vector"): 4}
    expected = atomic.apply(lambda r: r["W_C"] * per_term // width.get((arch, r["loads"]), 1), axis=1)
    assert (atomic["global_reductions"] == expected).all(), atomic[["kernel", "global_reductions"]].to_string()
    if arch == "sm_90":
        w222 = atomic[(atomic["W_A"] == 2) & (atomic["W_B"] == 2) & (atomic["W_C"] == 2) & (atomic["loads"] == "vector")]
        assert w222["global_reductions"].tolist() == [32]


def test_huge_two_level_fit_the_cap_or_get_their_registers(float32_sm90: pd.DataFrame) -> None:
    """Every 2-level kernel (up to 4 terms per operand) is built under the 128-register cap; one that would
    spill under it is built uncapped instead (one block per SM). None spills; all loads are LDG."""
    huge = float32_sm90[(float32_sm90["strategy"] == "Huge") & (float32_sm90["source"] == "strassenbench")]
    wide = huge[[max(w) > 2 for w in _counts(huge)]]
    assert not wide.empty and (wide["spill_stores"] == 0).all() and (wide["loop_generic_loads"] == 0).all()
    uncapped = wide[wide["registers"] > 128]
    assert (uncapped["blocks_per_sm"] == 1).all()
    vector_plain = wide[(wide["loads"] == "vector") & (wide["write_mode"] == "plain")]
    assert (vector_plain["registers"] <= 128).mean() >= 0.5  # most fit: the cap is the rule, not the exception


def _stub_compiler(monkeypatch: pytest.MonkeyPatch, row_of) -> list[tuple]:  # noqa: ANN001
    """The build's compiles stubbed: each writes an empty module and returns, per kernel, the resources row
    ``row_of(instance, ptxas_options)`` says (every other column 0). The calls, in order: (module name, its
    instances, ptxas options, the module whose PTX it assembles)."""
    calls: list[tuple] = []

    def fake_compile(arch, name, selected, out, toolchain, ptxas_options=(), ptx_of=None):  # noqa: ANN001, ANN202
        calls.append((name, selected, ptxas_options, ptx_of))
        (out / f"{name}.cu").write_text(build_module.render(selected))
        (out / f"{name}.fatbin").write_bytes(b"")
        return [{**dict.fromkeys(RESOURCE_COLUMNS, 0), "kernel": i.name, **row_of(i, ptxas_options)} for i in selected]

    monkeypatch.setattr(build_module, "_compile", fake_compile)
    stub = Toolchain((13, 0), "nvcc", "stub-nvcc", "stub-ptxas")
    monkeypatch.setattr(build_module, "toolchain_for", lambda arch, driver=None: stub)
    return calls


def test_spilling_capped_kernels_are_rebuilt_uncapped(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The build's policy, with ptxas's report stubbed: a capped kernel that spills is assembled again under the
    cap at other ptxas register-usage levels (<unit>_rul4, <unit>_rul0, <unit>_rul8); one that still spills, without
    the cap into <unit>_uncapped.fatbin. Each row comes from the compile that kept it, and the index points
    to its module."""
    def row_of(i, ptxas_options):  # noqa: ANN001, ANN202
        # atomic kernels spill under the cap at the default level; the vector ones stop at level 4
        fixed = "--register-usage-level=4" in ptxas_options
        return {"registers": 128 if i.capped else 150, "loop_instructions": 600, "load_use_distance": 250,
                "spill_stores": 8 if i.capped and i.write_mode == "atomic" and not (fixed and i.loads == "vector")
                else 0}

    calls = _stub_compiler(monkeypatch, row_of)
    monkeypatch.setattr(build_module, "FLIGHTS", (8,))
    selected = instances(dtypes=("float32",), strategies=("Huge",), counts=((4, 4, 4),))
    assert build_module._build_unit("sm_90", "unit", selected, tmp_path, force=False, driver=None)
    levels = [f"_rul{level}" for level in (4, 0, 8)]
    assert [name for name, *_ in calls] == [
        "unit", *(f"unit{s}" for s in levels), "unit_flight8", *(f"unit_flight8{s}" for s in levels), "unit_uncapped"]
    assert [c[2] for c in calls[1:4]] == [(f"--register-usage-level={level}",) for level in (4, 0, 8)]
    # the levels assemble their module's PTX again (no front end); FLIGHT 8's and the uncapped kernels' source
    # differs
    assert [c[3] for c in calls] == [None, "unit", "unit", "unit", None, *["unit_flight8"] * 3, None]
    level4 = {i.name for i in calls[1][1] if i.loads == "vector" and i.write_mode == "atomic"}
    relaxed = calls[-1][1]
    assert {i.write_mode for i in relaxed} == {"atomic"} and not any(i.capped for i in relaxed)
    assert {i.loads for i in relaxed} == {"scalar"} and level4
    assert all(i.min_blocks == 1 for i in relaxed) and all(i.min_blocks == 2 for i in selected)
    index = json.loads((tmp_path / "unit.json").read_text())
    assert {k for k, v in index.items() if v == "unit_uncapped.fatbin"} == {i.name for i in relaxed}
    assert {k for k, v in index.items() if v == "unit_rul4.fatbin"} == level4
    # the others fixed nothing and bettered nothing: not kept
    assert not [p.name for p in tmp_path.glob("unit_*.fatbin") if p.stem not in ("unit_rul4", "unit_uncapped")]
    table = pd.read_csv(tmp_path / "unit.csv")
    assert (table["spill_stores"] == 0).all() and set(table.loc[table["registers"] == 150, "kernel"]) == {
        i.name for i in relaxed}
    # unchanged: nothing compiles again
    assert not build_module._build_unit("sm_90", "unit", selected, tmp_path, force=False, driver=None)
    assert len(calls) == 9


def test_tuned_kernels_keep_their_best_source_and_level(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The Huge float32 vector kernels (_tuned) are compiled at every register-usage level, and again from the
    source with each FLIGHTS value at every level, and each keeps its best compile (_score: no spills, then loads
    in time, fewer than LOAD_AHEAD instructions before their use being late, then fewest instructions). Here the
    plain kernel's best is FLIGHT 8 at the default level (its default source is late at the default level and
    level 4, and needs more instructions at 0 and 8); the atomic one, late everywhere, keeps FLIGHT 4 at the
    default level, the fewest instructions. Only the modules a kernel keeps stay. The scalar kernels, which load
    after their FFMAs by design, are not compiled again."""
    figures = {("plain", 16, ""): (600, 120), ("plain", 16, "4"): (590, 150), ("plain", 16, "0"): (620, 230),
               ("plain", 16, "8"): (615, 240), ("plain", 8, ""): (605, 260), ("plain", 8, "4"): (605, 260),
               ("plain", 8, "0"): (640, 300), ("plain", 8, "8"): (600, 150),
               ("atomic", 16, ""): (600, 100), ("atomic", 16, "4"): (610, 180), ("atomic", 16, "0"): (605, 190),
               ("atomic", 16, "8"): (640, 170), ("atomic", 8, ""): (598, 120), ("atomic", 8, "4"): (598, 120),
               ("atomic", 8, "0"): (650, 150), ("atomic", 8, "8"): (597, 90)}

    def row_of(i, ptxas_options):  # noqa: ANN001, ANN202
        level = "".join(o.removeprefix("--register-usage-level=") for o in ptxas_options)
        if i.loads == "scalar":
            instructions, lu = 700, 20
        elif i.flight == 4:  # the plain kernel's FLIGHT 4 takes more instructions, the atomic one's fewest
            instructions, lu = (610, 250) if i.write_mode == "plain" else (595 if level in ("", "4") else 620, 110)
        else:
            instructions, lu = figures[i.write_mode, i.flight, level]
        return {"registers": 128, "loop_instructions": instructions, "load_use_distance": lu}

    calls = _stub_compiler(monkeypatch, row_of)
    monkeypatch.setattr(build_module, "FLIGHTS", (8, 4))
    selected = instances(dtypes=("float32",), strategies=("Huge",), counts=((2, 2, 2),))
    vector = {i.write_mode: i.name for i in selected if i.loads == "vector"}
    assert build_module._build_unit("sm_90", "unit", selected, tmp_path, force=False, driver=None)
    modules = [f"unit{f}{r}" for f in ("", "_flight8", "_flight4") for r in ("", "_rul4", "_rul0", "_rul8")]
    assert [(name, {i.name for i in kernels}) for name, kernels, *_ in calls] == [
        ("unit", {i.name for i in selected}), *((m, set(vector.values())) for m in modules[1:])]
    assert all(i.flight == int(name.split("_flight")[1][:1]) if "flight" in name else i.flight == 16
               for name, kernels, *_ in calls for i in kernels)
    index = json.loads((tmp_path / "unit.json").read_text())
    assert index[vector["plain"]] == "unit_flight8.fatbin" and index[vector["atomic"]] == "unit_flight4.fatbin"
    assert sorted(p.stem for p in tmp_path.glob("unit*.fatbin")) == ["unit", "unit_flight4", "unit_flight8"]
    flight8 = (tmp_path / "unit_flight8.cu").read_text().splitlines()
    assert all(line.endswith(", 8)") for line in flight8 if line.startswith("SB_STRASSEN_INSTANCE"))
    table = pd.read_csv(tmp_path / "unit.csv").set_index("kernel")
    assert table.loc[vector["plain"], ["loop_instructions", "load_use_distance"]].tolist() == [605, 260]
    assert table.loc[vector["atomic"], ["loop_instructions", "load_use_distance"]].tolist() == [595, 110]


def test_vector_kernels_that_spill_uncapped_read_their_terms_afresh(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The build's last remedy, with ptxas's report stubbed: vector kernels that spill under the cap, at every
    register-usage level and uncapped (as PLinOpt's 4x4x4:48 plain w16x8x2 did on sm_90, at 255 registers)
    are compiled once more with their terms reread every interior slice, uncapped, into <unit>_reread.fatbin.
    The plain kernel no longer spills there and keeps that build; the atomic one spills there too and keeps its
    uncapped build, and no scalar kernel is compiled again."""
    def row_of(i, ptxas_options):  # noqa: ANN001, ANN202, ARG001
        spills = i.loads == "vector" and not (i.reread and i.write_mode == "plain")
        return {"loop_instructions": 700, "registers": 128 if i.capped else 255, "spill_stores": 8 * spills,
                "spill_loads": 40 if i.reread and spills else 8 * spills, "load_use_distance": 250}

    calls = _stub_compiler(monkeypatch, row_of)
    monkeypatch.setattr(build_module, "FLIGHTS", (8,))
    selected = instances(dtypes=("float32",), strategies=("Huge",), counts=((16, 8, 2),))
    vector = {i.write_mode: i.name for i in selected if i.loads == "vector"}
    assert build_module._build_unit("sm_90", "unit", selected, tmp_path, force=False, driver=None)
    assert [name for name, *_ in calls] == ["unit", "unit_rul4", "unit_rul0", "unit_rul8", "unit_flight8",
                                            "unit_flight8_rul4", "unit_flight8_rul0", "unit_flight8_rul8",
                                            "unit_uncapped", "unit_reread"]
    reread = calls[-1][1]
    assert {i.name for i in reread} == set(vector.values())
    assert all(i.reread and not i.capped and i.min_blocks == 1 for i in reread)
    assert all(line.endswith(", true, 16)") for line in (tmp_path / "unit_reread.cu").read_text().splitlines()
               if line.startswith("SB_STRASSEN_INSTANCE"))  # REREAD on, FLIGHT the default
    index = json.loads((tmp_path / "unit.json").read_text())
    assert index[vector["plain"]] == "unit_reread.fatbin" and index[vector["atomic"]] == "unit_uncapped.fatbin"
    table = pd.read_csv(tmp_path / "unit.csv").set_index("kernel")
    assert table.loc[vector["plain"], "spill_stores"] == 0 and table.loc[vector["atomic"], "spill_loads"] == 8


def test_unchanged_build_is_skipped_and_header_change_rebuilds(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """One module per (arch, dtype, strategy), each compiled only when its stamp changes; the index maps
    every kernel to its fatbin."""
    sources = tmp_path / "kernels"
    shutil.copytree(kernels_dir(), sources)
    monkeypatch.setenv("STRASSENBENCH_KERNELS", str(sources))
    out = tmp_path / "build"
    log: list[tuple[str, bool]] = []

    def run(*counts: tuple[int, int, int]) -> None:
        build(["sm_80"], out, dtypes=("float32",), strategies=("Small",), counts=counts,
              progress=lambda unit, rebuilt: rebuilt is not None and log.append((unit, rebuilt)))

    gemm, var0 = "strassen_sm_80_float32_small_w1x1x1", "strassen_sm_80_float32_small_w2x2x2"
    run((1, 1, 1))
    cubin = out / f"{gemm}.fatbin"
    stamp = cubin.stat().st_mtime_ns
    run((1, 1, 1), (2, 2, 2))  # only the new unit compiles
    assert log == [(gemm, True), (gemm, False), (var0, True)]
    assert cubin.stat().st_mtime_ns == stamp
    assert len(pd.read_csv(out / "resources.csv")) == 8
    run((2, 2, 2))  # a smaller request keeps the earlier units in the index
    index = json.loads((out / "strassen_sm_80.json").read_text())
    helpers = {"scale_f32", "presum_f32", "block_stream"}  # every module carries them (instances.helper_kernels)
    assert set(index) == {i.name for i in instances(dtypes=("float32",), strategies=("Small",),
                                                    counts=((1, 1, 1), (2, 2, 2)))} | helpers
    assert index["strassen_f32_small_w1x1x1_plain"] == cubin.name
    header = sources / "epilogue.cuh"
    header.write_text(header.read_text() + "\n// touched\n")
    run((2, 2, 2))
    assert log[-1] == (var0, True)
    index = json.loads((out / "strassen_sm_80.json").read_text())  # the stale GEMM unit is left out
    assert set(index) == {i.name for i in instances(dtypes=("float32",), strategies=("Small",), counts=((2, 2, 2),))} \
        | helpers


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


def test_build_cli_rejects_unknown_arch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "--arch", "sm_75"]) == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "message"), [("2x2", "W_AxW_BxW_C"), ("0x1x1", "W_AxW_BxW_C"),
                                                ("3x3x3", "no fused kernel has W_A x W_B x W_C = 3x3x3")])
def test_build_cli_rejects_bad_counts(value: str, message: str, tmp_path, capsys) -> None:  # noqa: ANN001
    assert main(["build", "--arch", "sm_80", "--counts", value, "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())


@pytest.fixture(scope="module")
def float64_wide(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """float64 Huge (8 x 8 doubles per thread, at the 255-register limit) for sm_90: every variant."""
    return build(["sm_90"], tmp_path_factory.mktemp("build64"), dtypes=("float64",), strategies=("Huge",),
                 cutlass=False)


def _check_float64_wide(frame: pd.DataFrame, kernels: int) -> None:
    assert len(frame) == kernels
    spilling = frame[(frame["spill_stores"] > 0) | (frame["spill_loads"] > 0)]
    assert spilling.empty, spilling[["kernel", "arch", "registers", "spill_stores"]].to_string()
    assert (frame["local_mem_ops"] == 0).all() and (frame["registers"] <= 255).all()
    vector = frame[frame["loads"] == "vector"]
    assert (vector["loop_generic_loads"] == 0).all() and (vector["loop_global_loads"] > 0).all()


@pytest.mark.slow  # two minutes of nvcc on both cores: with the widest kernels, in the slow tier
def test_no_float64_kernel_spills_at_the_register_limit(float64_wide: pd.DataFrame) -> None:
    """The float64 kernels whose accumulator and fragments alone take 192 registers fit the other 63 without
    spilling, vector and scalar, plain and atomic, every variant, on sm_90; the vector kernels' main loops load
    with LDG only."""
    _check_float64_wide(float64_wide, 15 * 2 * 2)


@pytest.mark.slow
def test_float64_large_fits_the_register_limit_on_sm90_and_sm80(tmp_path) -> None:  # noqa: ANN001
    """float64 Large (the same 8 x 8 doubles per thread as Huge) for sm_90 and sm_80 (whose Huge kernels have
    room to spare), as test_no_float64_kernel_spills_at_the_register_limit checks Huge."""
    _check_float64_wide(build(["sm_90", "sm_80"], tmp_path, dtypes=("float64",), strategies=("Large",),
                              cutlass=False), 2 * 15 * 2 * 2)


@pytest.mark.parametrize("table", TABLES)
def test_cutlass_baseline_row_and_our_gemm_beside_it(table: str, request: pytest.FixtureRequest) -> None:
    """The CUTLASS baseline is built with the same nvcc and read the same way; our GEMM's main loop spends
    at least as large a share of its instructions on FFMA, in no more instructions per slice."""
    frame = request.getfixturevalue(table)
    ref = frame[frame["source"] == "cutlass"]
    assert len(ref) == 1 and ref["kernel"].item() == cutlass.KERNEL
    ref = ref.iloc[0]
    assert ref["loop_barriers"] == 1 and ref["loop_generic_loads"] == 0 and ref["loop_global_loads"] == 8
    ours = frame[(frame["source"] == "strassenbench") & (frame["strategy"] == "Huge") & (frame["W_A"] == 1)
                 & (frame["W_C"] == 1) & (frame["write_mode"] == "plain") & (frame["loads"] == "vector")].iloc[0]
    assert ours["loop_ffma_share"] >= ref["loop_ffma_share"]
    assert ours["loop_instructions"] <= ref["loop_instructions"]


@pytest.mark.parametrize(("cc", "arch"), [("70", "sm_70"), ("75", "sm_70"), ("80", "sm_80"), ("86", "sm_80"),
                                          ("89", "sm_80"), ("90", "sm_90"), ("100", "sm_90"), ("120", "sm_90")])
def test_every_compute_capability_maps_to_the_build_it_runs(cc: str, arch: str) -> None:
    """Within a major the machine code runs; a newer major (Blackwell) runs the sm_90 build's PTX."""
    from strassenbench.fused.cuda import build_arch

    assert build_arch(cc) == arch


@pytest.mark.parametrize("cc", ["61", "x"])
def test_a_gpu_without_a_build_is_one_clear_error(cc: str) -> None:
    from strassenbench.fused.cuda import CudaError, build_arch

    with pytest.raises(CudaError, match="older than every build|unrecognised"):
        build_arch(cc)


def test_loading_refuses_a_cubin_from_other_sources(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The cuda engine checks a cubin's stamp before loading it: built from other kernel sources, it is one
    error naming the fix (CuPy's module loading stubbed: no GPU needed)."""
    from strassenbench.fused import cuda

    class Loaded:
        def get_function(self, name: str) -> str:
            return f"loaded {name}"

    monkeypatch.setattr(cuda, "module", lambda build_dir, cubin: Loaded())

    sources = tmp_path / "kernels"
    shutil.copytree(kernels_dir(), sources)
    monkeypatch.setenv("STRASSENBENCH_KERNELS", str(sources))
    out = tmp_path / "build"
    build(["sm_80"], out, dtypes=("float32",), strategies=("Small",), counts=((1, 1, 1),))
    kernel = "strassen_f32_small_w1x1x1_plain"
    for cached in (cuda._read_index, cuda._check_fresh, cuda.function):
        cached.cache_clear()
    assert cuda.function(str(out), "sm_80", kernel) == f"loaded {kernel}"  # fresh: the stamp passes
    (sources / "epilogue.cuh").write_text((sources / "epilogue.cuh").read_text() + "\n// changed\n")
    for cached in (cuda._read_index, cuda._check_fresh, cuda.function):
        cached.cache_clear()
    with pytest.raises(cuda.CudaError, match="is stale: built by nvcc 13"):
        cuda.function(str(out), "sm_80", kernel)


@pytest.mark.parametrize(("module_file", "unit"), [
    ("u.fatbin", "u"), ("u_rul4.fatbin", "u"), ("u_flight8.fatbin", "u"), ("u_flight8_rul0.fatbin", "u"),
    ("u_uncapped.fatbin", "u"), ("u_reread.fatbin", "u"),
    ("strassen_sm_90_float32_huge_w2x2x2_flight8_rul8.fatbin", "strassen_sm_90_float32_huge_w2x2x2")])
def test_every_module_of_a_unit_names_its_unit(module_file: str, unit: str) -> None:
    """The stamp a module is checked by is its unit's, whichever of the build's modules holds the kernel."""
    assert unit_of(module_file) == unit


@pytest.mark.xdist_group("test_kernels_build.py::float32_sm90")
def test_every_kernel_of_a_build_loads_fresh(float32_sm90_build, monkeypatch) -> None:  # noqa: ANN001
    """Every kernel of the sm_90 float32 build, from whichever module the build kept (levels, FLIGHT 8, uncapped,
    reread), passes the cuda engine's freshness check (CuPy's module loading stubbed: no GPU needed); the
    search kept some kernels outside their unit's first module."""
    from strassenbench.fused import cuda

    class Loaded:
        def get_function(self, name: str) -> str:
            return f"loaded {name}"

    monkeypatch.setattr(cuda, "module", lambda build_dir, cubin: Loaded())
    out = Path(float32_sm90_build[0])
    index = json.loads((out / "strassen_sm_90.json").read_text())
    for cached in (cuda._read_index, cuda._check_fresh, cuda.function):
        cached.cache_clear()
    kernels = [k for k in index if k.startswith("strassen_f32_")]
    assert kernels and all(cuda.function(str(out), "sm_90", k) == f"loaded {k}" for k in kernels)
    assert any(unit_of(index[k]) != index[k].removesuffix(".fatbin") for k in kernels)


NVCC13 = Toolchain((13, 0), "nvcc", "/cuda-13/bin/nvcc", "/cuda-13/bin/ptxas")
NVRTC12 = Toolchain((12, 9), "nvrtc", "libnvrtc.so.12", "ptxas-12")


@pytest.mark.parametrize(("arch", "driver", "expected"), [
    ("sm_90", None, NVCC13),          # no driver known: the newest that builds the arch
    ("sm_90", (13, 1), NVCC13),
    ("sm_90", (12, 4), NVRTC12),      # a CUDA 12 driver cannot load CUDA 13 cubins
    ("sm_80", (12, 0), NVRTC12),
    ("sm_70", None, NVRTC12),         # CUDA 13 does not build Volta
    ("sm_70", (13, 0), NVRTC12),      # a CUDA 13 driver runs CUDA 12 code
])
def test_toolchain_chosen_by_arch_and_driver(arch: str, driver, expected: Toolchain) -> None:  # noqa: ANN001
    assert choose(arch, driver, (NVCC13, NVRTC12)) == expected


@pytest.mark.parametrize(("arch", "driver", "available", "message"), [
    ("sm_70", None, (NVCC13,), r"no CUDA toolchain here builds sm_70 \(found: nvcc 13.0\): pip install -e '.\[cu12\]'"),
    ("sm_90", (12, 4), (NVCC13,), r"the driver runs CUDA 12.4 code.*nvcc 13.0.*'.\[gpu-cu12\]'"),
    ("sm_80", (11, 8), (NVCC13, NVRTC12), r"driver runs CUDA 11.8 code.*update the driver"),
])
def test_no_fitting_toolchain_is_one_line_naming_the_fix(arch, driver, available, message) -> None:  # noqa: ANN001
    with pytest.raises(ToolchainError, match=message) as err:
        choose(arch, driver, available)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("text", "version"), [("12.4", (12, 4)), ("13.0", (13, 0)), ("12040", (12, 4)),
                                               ("13010", (13, 1))])
def test_cuda_versions_parse(text: str, version: tuple[int, int]) -> None:
    assert parse_cuda_version(text) == version


def test_build_cli_rejects_a_bad_driver_version(tmp_path, capsys) -> None:  # noqa: ANN001
    assert main(["build", "--arch", "sm_80", "--driver-cuda", "twelve", "--out", str(tmp_path / "b")]) == 2
    assert "is not a CUDA version" in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_sm70_without_the_cuda12_toolchain_is_one_line(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    """Without the cu12 extra (toolchains found: CUDA 13 only) `build --arch sm_70` says what to install,
    in one line, before writing anything."""
    from strassenbench.fused import modules

    monkeypatch.setattr(modules, "toolchains", lambda: (NVCC13,))
    modules.toolchain_for.cache_clear()
    try:
        assert main(["build", "--arch", "sm_70", "--out", str(tmp_path / "b")]) == 2
    finally:
        modules.toolchain_for.cache_clear()
    err = capsys.readouterr().err
    assert "builds sm_70" in err and "[cu12]" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()


def _fatbin_contents(path) -> str:  # noqa: ANN001
    result = subprocess.run([find_tool("cuobjdump"), "--list-elf", "--list-ptx", str(path)], capture_output=True,
                            text=True, check=True)
    return result.stdout


def test_sm70_builds_with_the_cuda12_toolchain(tmp_path) -> None:  # noqa: ANN001
    """The test extra installs the cu12 toolchain (NVRTC 12, ptxas 12, CCCL 12): the V100 build compiles, its
    fatbin carries sm_70 SASS and PTX, ptxas's figures fill resources.csv, and the SASS columns stay empty
    (CUDA 13's disassembler no longer reads sm_70). The CUTLASS baseline needs nvcc and is left out."""
    assert choose("sm_70", None, toolchains()).frontend == "nvrtc"
    out = tmp_path / "b"
    lines: list[str] = []
    table = build(["sm_70"], out, dtypes=("float32",), strategies=("Huge",), counts=((1, 1, 1), (2, 2, 2)),
                  progress=lambda what, rebuilt: lines.append(what))
    assert any("sm_70 with nvrtc 12" in line for line in lines)
    assert any("CUTLASS baseline: not built" in line for line in lines)
    assert len(table) == 8 and (table["registers"] > 0).all() and (table["blocks_per_sm"] >= 1).all()
    assert table["ffma"].isna().all() and table["loop_ffma_share"].isna().all()
    contents = _fatbin_contents(out / "strassen_sm_70_float32_huge_w2x2x2.fatbin")
    assert "sm_70.cubin" in contents and "sm_70.ptx" in contents


def test_every_fatbin_carries_ptx(tmp_path) -> None:  # noqa: ANN001
    """sm_80 by CUDA 13 (nvcc) and by CUDA 12 (NVRTC, for a CUDA 12 driver): each fatbin holds the SASS and
    the PTX a newer GPU compiles when loading; a unit built for one driver is stale for the other."""
    out = tmp_path / "b"
    unit = "strassen_sm_80_float32_small_w1x1x1"
    for driver, toolchain in (((13, 0), "nvcc 13"), ((12, 4), "nvrtc 12")):
        build(["sm_80"], out, dtypes=("float32",), strategies=("Small",), counts=((1, 1, 1),), driver=driver)
        contents = _fatbin_contents(out / f"{unit}.fatbin")
        assert "sm_80.cubin" in contents and "sm_80.ptx" in contents
        assert (out / f"{unit}.toolchain").read_text().startswith(toolchain)
    assert build_module.unit_fresh(out, unit, "sm_80", (12, 4))
    assert not build_module.unit_fresh(out, unit, "sm_80", (13, 0))


# Issue-slot targets of the float32 Huge vector main loops, instructions per k_S slice of 512 math FFMA: GEMM,
# every 1-level variant (all counts <= 2), every 2-level variant (strassenbench.model.issue).
LOOP_TARGETS = {1: 569, 2: 590, 4: 630}


@pytest.mark.parametrize("fixture", TABLES)
def test_main_loops_at_the_issue_limit(fixture: str, request: pytest.FixtureRequest) -> None:
    """Every float32 Huge vector kernel, plain and atomic: GEMM at most 569 instructions per slice (512 math
    FFMA), every 1-level variant 590, every 2-level one 630; every global load of the main loop an LDG issued
    at least 200 instructions before its first use; <= 128 registers, no spills, 2 blocks per SM."""
    frame = request.getfixturevalue(fixture)
    huge = frame[(frame["strategy"] == "Huge") & (frame["source"] == "strassenbench") & (frame["loads"] == "vector")
                 & (frame["dtype"] == "float32")]
    widest = huge[["W_A", "W_B", "W_C"]].max(axis=1)
    assert len(huge) == 2 * 15
    failing = huge[(huge["loop_instructions"] > widest.map(LOOP_TARGETS)) | (huge["load_use_distance"] < 200)
                   | (huge["loop_generic_loads"] > 0) | (huge["spill_stores"] > 0) | (huge["registers"] > 128)
                   | (huge["blocks_per_sm"] != 2)]
    assert failing.empty, failing[["kernel", "loop_instructions", "load_use_distance", "registers"]].to_string()
    # the issue-limited fraction of the FP32 peak, per family of sub-partitions, from the counts the build read
    fractions = issue_fractions(huge)
    gemm = (widest == 1) & (huge["write_mode"] == "plain")
    first = fractions[gemm].iloc[0]
    assert first["issue_fraction_fp32x32"] == pytest.approx(512 / huge[gemm].iloc[0]["loop_instructions"], abs=1e-4)
    assert first["issue_fraction_fp32x16"] == 1.0 and huge[gemm].iloc[0]["loop_fp32"] == 512
    assert (fractions["issue_fraction_fp32x32"] >= 0.8).all()


@pytest.fixture(scope="module")
def tensor_huge(tmp_path_factory: pytest.TempPathFactory, float32_sm90_build) -> pd.DataFrame:  # noqa: ANN001
    """TcHuge's GEMM and 1-level M0 kernels in both modes for sm_90 and sm_80, and CUTLASS's 3xTF32 SGEMM beside
    them (the session's sm_90 units seeded: seed_build)."""
    out = tmp_path_factory.mktemp("build-tc")
    seed_build(out, float32_sm90_build[0])
    return build(["sm_90", "sm_80"], out, dtypes=("float32",), strategies=("TcHuge",), counts=((1, 1, 1), (2, 2, 2)))


@pytest.mark.slow  # nvcc for two archs and CUTLASS's baselines: TcTallAsync's test below keeps the default tier's
def test_tensor_core_kernels_fit_beside_cutlass_3xtf32(tensor_huge: pd.DataFrame) -> None:
    """No spill and no stack in any tensor-core kernel; the main loop has the HMMA of its tile (16 per slice in
    1xTF32, 48 in 3xTF32). 1xTF32 runs 2 TcHuge blocks per SM. 3xTF32 keeps a second accumulator for its staged
    accumulation (each slice's products summed apart, then added: the tensor core truncates its sums), as
    CUTLASS's 3xTF32 SGEMM (example 27) does: as many warps per SM as CUTLASS's, and its main loop within 1.2x
    of CUTLASS's instructions per HMMA (it adds its staged sums every slice of 8, CUTLASS every 16)."""
    from strassenbench.strategies import TENSOR_STRATEGIES

    ours = tensor_huge[tensor_huge["source"] == "strassenbench"]
    assert len(ours) == 2 * 2 * 2 * 4  # archs, modes, counts, write modes x loads
    assert (ours[["spill_stores", "spill_loads", "stack_bytes"]] == 0).all().all()
    one = ours[ours["mode"] == "1xtf32"]
    assert (one["blocks_per_sm"] == 2).all(), one[["kernel", "arch", "registers", "blocks_per_sm"]]
    fast = ours[(ours["loads"] == "vector") & (ours["write_mode"] == "plain")]
    assert (fast["loop_hmma"] == fast["mode"].map({"1xtf32": 16, "3xtf32": 48})).all()
    for arch in ("sm_90", "sm_80"):
        ref = tensor_huge[(tensor_huge["source"] == "cutlass-3xtf32") & (tensor_huge["arch"] == arch)].iloc[0]
        assert ref["loop_hmma"] > 0 and ref["spill_stores"] == 0
        three = ours[(ours["arch"] == arch) & (ours["mode"] == "3xtf32")]
        warps = three["blocks_per_sm"] * TENSOR_STRATEGIES["TcHuge"].threads // 32
        assert (warps >= ref["blocks_per_sm"] * cutlass.BASELINES["3xtf32"].threads // 32).all()
        limit = 1.2 * ref["loop_instructions"] / ref["loop_hmma"]
        mine = fast[(fast["arch"] == arch) & (fast["mode"] == "3xtf32")]
        per_hmma = mine["loop_instructions"] / mine["loop_hmma"]
        assert len(mine) == 2 and (per_hmma <= limit).all(), (arch, per_hmma.tolist(), limit)


@pytest.fixture(scope="module")
def tensor_tall_both(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """TcTall's and TcTallAsync's GEMM and widest 1-level kernels (w2x2x2) in both modes for sm_90."""
    return build(["sm_90"], tmp_path_factory.mktemp("build-tctall"), dtypes=("float32",),
                 strategies=("TcTall", "TcTallAsync"), counts=((1, 1, 1), (2, 2, 2)), cutlass=False)


@pytest.fixture(scope="module")
def tensor_tall(tensor_tall_both: pd.DataFrame) -> pd.DataFrame:
    return tensor_tall_both[tensor_tall_both["strategy"] == "TcTall"]


def test_tctall_holds_two_blocks_per_sm_in_3xtf32(tensor_tall: pd.DataFrame) -> None:
    """CUTLASS's 3xTF32 SGEMM shape, 128 x 64 on 4 warps of 64 x 32: the 3xTF32 GEMM and 1-level kernels hold 2
    blocks per SM on sm_90 (TcHuge's hold one) with no spill or stack, 1xTF32's at least 3; every main loop has
    its warp tile's HMMA (16 per slice in 1xTF32, 48 in 3xTF32)."""
    assert len(tensor_tall) == 2 * 2 * 4  # modes, counts, write modes x loads
    assert (tensor_tall[["spill_stores", "spill_loads", "stack_bytes"]] == 0).all().all()
    blocks = tensor_tall["blocks_per_sm"]
    assert (blocks[tensor_tall["mode"] == "3xtf32"] == 2).all() and (blocks[tensor_tall["mode"] == "1xtf32"] >= 3).all()
    fast = tensor_tall[(tensor_tall["loads"] == "vector") & (tensor_tall["write_mode"] == "plain")]
    assert (fast["loop_hmma"] == fast["mode"].map({"1xtf32": 16, "3xtf32": 48})).all()


def test_tctallasync_matches_cutlass_3xtf32s_main_loop(tensor_tall_both: pd.DataFrame) -> None:
    """The multistage pipeline (k_S = 16, 3 cp.async stages, the split on the fragments, one staged sum per
    slice): its 3xTF32 GEMM and 1-level kernels hold 2 blocks per SM on sm_90 with no spill or stack (at most
    255 registers for 128 threads), 1xTF32's GEMM 3; the main loops have their HMMA (32 per slice of 16 in
    1xTF32, 96 in 3xTF32), copy by cp.async (LDGSTS: no LDG in the GEMM's loop, so no load-use distance), and the
    3xTF32 GEMM's loop issues no more instructions than CUTLASS's 3xTF32 SGEMM's (128 x 64 x 16, 3 stages: 445
    per slice with the same nvcc, the committed sm_90 resources; the slow tier builds it afresh). The w2x2x2
    kernels' main iterations (their register sums unpredicated, at the interior cursor's offsets) add at most 130
    instructions a slice to their GEMM's: 12 128-bit loads, 24 FFMA and 6 stores, and their addresses (with the
    predicated path in the same loop it was 286 to 315)."""
    ours = tensor_tall_both[tensor_tall_both["strategy"] == "TcTallAsync"]
    assert len(ours) == 2 * 2 * 4
    assert (ours[["spill_stores", "spill_loads", "stack_bytes"]] == 0).all().all()
    three, one = ours[ours["mode"] == "3xtf32"], ours[ours["mode"] == "1xtf32"]
    assert (three["blocks_per_sm"] == 2).all() and (three["registers"] <= 255).all()
    fast = ours[(ours["loads"] == "vector") & (ours["write_mode"] == "plain")].set_index(["mode", "W_A"])
    assert fast.loc[("1xtf32", 1), "blocks_per_sm"] == 3
    assert (fast["loop_hmma"] == [{"1xtf32": 32, "3xtf32": 96}[mode] for mode, _ in fast.index]).all()
    assert fast["load_use_distance"].isna().loc[[("1xtf32", 1), ("3xtf32", 1)]].all()
    committed = pd.read_csv(Path(__file__).resolve().parents[2] / "data" / "nvidia-h100-80gb-hbm3"
                            / "resources_sm_90.csv")
    cutlass_row = committed[committed["kernel"].str.startswith("cutlass_tensorop_3xtf32")].iloc[0]
    assert fast.loc[("3xtf32", 1), "loop_instructions"] <= cutlass_row["loop_instructions"]
    assert fast.loc[("3xtf32", 1), "loop_hmma"] == cutlass_row["loop_hmma"]
    for mode in ("1xtf32", "3xtf32"):
        assert fast.loc[(mode, 2), "loop_instructions"] - fast.loc[(mode, 1), "loop_instructions"] <= 130, mode


def test_a_cutlass_baseline_built_elsewhere_stays_fresh(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The baseline's stamp names its headers by their release files' text, not their paths: a build folder
    made on another machine (headers elsewhere, or not installed, as on a GPU node without the pip headers) is
    used as it is when its sources, toolchain and flags match, and refused when they do not."""
    spec = cutlass.BASELINES["simt"]
    toolchain = Toolchain((13, 0), "nvcc", "/nowhere/nvcc", "/nowhere/ptxas")
    headers = []
    for where in ("here", "there"):  # the same release at two paths
        folder = tmp_path / where / "include" / "cutlass"
        folder.mkdir(parents=True)
        (folder / "version.h").write_text("#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n")
        monkeypatch.setattr(cutlass, "include_dirs", lambda w=where: [tmp_path / w / "include"])
        headers.append(cutlass.headers_digest())
    assert headers[0] == headers[1]
    out = tmp_path / "build"
    out.mkdir()
    name = f"{spec.prefix}_sm_90"
    for path in (out / f"{name}.cubin", out / f"libsb_{name}.so"):
        path.write_bytes(b"\x7fELF")
    pd.DataFrame([{"kernel": spec.kernel, "registers": 122}]).to_csv(out / f"{name}.csv", index=False)
    digest = cutlass.sources_digest(toolchain.name, " ".join(cutlass.FLAGS), "sm_90", str(spec.source))
    (out / f"{name}.stamp").write_text(f"{digest}\n{headers[0]}")
    monkeypatch.setattr(cutlass, "_compile", lambda *a: pytest.fail("compiled a fresh baseline"))
    row, rebuilt = cutlass.build_baseline("sm_90", out, toolchain, baseline=spec)
    assert (row["registers"], rebuilt) == (122, False)

    def no_headers() -> list:
        raise ToolchainError("the CUTLASS baseline needs CUTLASS's headers: pip install nvidia-cutlass")

    monkeypatch.setattr(cutlass, "include_dirs", no_headers)
    row, rebuilt = cutlass.build_baseline("sm_90", out, toolchain, baseline=spec)
    assert (row["registers"], rebuilt) == (122, False)
    (out / f"{name}.stamp").write_text(f"{'0' * 64}\n{headers[0]}")  # other sources: cannot be rebuilt here
    with pytest.raises(ToolchainError, match="pip install nvidia-cutlass"):
        cutlass.build_baseline("sm_90", out, toolchain, baseline=spec)


@pytest.mark.slow
def test_the_widest_catalogue_kernels_build_without_spills_on_sm90(tmp_path) -> None:  # noqa: ANN001
    """PLinOpt's 4x4x4:48 needs W = 16 kernels; its plain vector w16x8x2 and w16x8x8 spilled on sm_90 at 255
    registers at every register-usage level until the build read their terms afresh (_reread_spilling). The
    four units with 16 terms on a side that its one level uses the most build for Huge without a spill, and
    the plain w16x8x8 still takes the fallback (with nvcc 13; w16x8x2 no longer spills since the main loop
    counts its pairs of slices down)."""
    table = build(["sm_90"], tmp_path, dtypes=("float32",), strategies=("Huge",),
                  counts=((16, 8, 2), (16, 8, 8), (16, 16, 16), (8, 16, 2)), cutlass=False)
    assert len(table) == 16 and (table["spill_stores"] == 0).all() and (table["spill_loads"] == 0).all()
    modules = {kernel: module for path in tmp_path.glob("strassen_sm_90_float32_huge_w*.json")
               for kernel, module in json.loads(path.read_text()).items() if kernel.startswith("strassen_f32")}
    assert modules["strassen_f32_huge_w16x8x8_plain"].endswith("_reread.fatbin"), modules


@pytest.fixture(scope="module")
def dmma_build(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The FP64 tensor-core kernels of the GEMM, a 1-level variant and the widest 2-level one, every strategy,
    for sm_80 and sm_90, and CUTLASS's DMMA GEMM beside them (sm_80: its default configuration's target)."""
    out = tmp_path_factory.mktemp("build-dmma")
    ours = build(["sm_80", "sm_90"], out, dtypes=("float64",), strategies=("DmmaSmall", "DmmaLarge", "DmmaHuge"),
                 counts=((1, 1, 1), (2, 2, 1), (4, 4, 4)), cutlass=False)
    theirs = build(["sm_80"], out, dtypes=("float64",), strategies=("DmmaHuge",), counts=((1, 1, 1),))
    return pd.concat([ours, theirs[theirs["source"] != "strassenbench"]], ignore_index=True)


def test_dmma_kernels_fit_beside_cutlass_dmma(dmma_build: pd.DataFrame) -> None:
    """No spill and no stack in any DMMA kernel; each main loop does its tile's multiply-adds per slice (m_W n_W
    k_S a warp) in the mma of its arch: one m8n8k4 per 8 x 8 tile and k-step of 4 on sm_80, one m16n8k16 per
    16 x 8 tile and 16 of k on sm_90 (m16n8k8 for DmmaHuge, whose k_S is 8); its global loads are LDG. The GEMM
    of DmmaLarge and of DmmaHuge (CUTLASS's tile) issues fewer instructions per multiply-add of mma than
    CUTLASS's DMMA GEMM on sm_80 (which stages its loads through cp.async), on sm_80 and on sm_90, and keeps at
    least as many warps per SM."""
    from strassenbench.strategies import DMMA_STRATEGIES

    ours = dmma_build[dmma_build["source"] == "strassenbench"]
    assert len(ours) == 2 * 3 * 3 * 4  # archs, strategies, counts, write modes x loads
    assert (ours[["spill_stores", "spill_loads", "stack_bytes"]] == 0).all().all()
    assert set(ours["mode"]) == {"dmma"} and set(ours["dtype"]) == {"float64"}
    s = ours["strategy"].map(DMMA_STRATEGIES)
    assert (ours["loop_mma_macs"] == s.map(lambda s: s.m_W * s.n_W * s.k_S)).all()
    k_per_mma = s.map(lambda s: 16 if s.k_S % 16 == 0 else 8).where(ours["arch"] == "sm_90", 4)
    rows_per_mma = (ours["arch"] == "sm_90").map({True: 16, False: 8})
    per_slice = s.map(lambda s: s.m_W) // rows_per_mma * s.map(lambda s: s.n_W // 8) * s.map(lambda s: s.k_S) // k_per_mma
    assert (ours["loop_hmma"] == per_slice).all()
    assert (ours["loop_generic_loads"] == 0).all()
    ref = dmma_build[(dmma_build["source"] == "cutlass-dmma")].iloc[0]
    assert ref["arch"] == "sm_80" and ref["loop_hmma"] > 0 and ref["spill_stores"] == 0
    for arch, strategy in itertools.product(("sm_80", "sm_90"), ("DmmaLarge", "DmmaHuge")):
        gemm = ours[(ours["arch"] == arch) & (ours["strategy"] == strategy) & (ours["W_A"] == 1)
                    & (ours["loads"] == "vector")]
        assert len(gemm) == 2
        assert (gemm["loop_instructions"] / gemm["loop_mma_macs"]
                < ref["loop_instructions"] / ref["loop_mma_macs"]).all(), (arch, strategy)
        warps = gemm["blocks_per_sm"] * DMMA_STRATEGIES[strategy].threads // 32
        assert (warps >= ref["blocks_per_sm"] * cutlass.BASELINES["dmma"].threads // 32).all(), (arch, strategy)


@pytest.mark.slow
def test_every_dmma_kernel_builds_without_spills(tmp_path) -> None:  # noqa: ANN001
    """Every default DMMA kernel (every strategy, every variant of 1 and 2 levels, plain and atomic, vector
    and scalar) for sm_80 and sm_90: 360 kernels, none spills."""
    table = build(["sm_80", "sm_90"], tmp_path, dtypes=("float64",), strategies=("DmmaSmall", "DmmaLarge", "DmmaHuge"),
                  cutlass=False)
    assert len(table) == 360 and (table[["spill_stores", "spill_loads", "stack_bytes"]] == 0).all().all()
