"""The kernel families are one record each (strassenbench.families): what they name exists, what derives from
them agrees with them, and their names are written nowhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from strassenbench.families import ALL_STRATEGIES, FAMILIES, MODES, SIMT, by_accuracy, counterpart, mode_by_suffix
from strassenbench.fused.instances import instances, kernels_dir, parse_instance
from strassenbench.impls import IMPLS, get_impl

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "strassenbench"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_family_names_what_exists(family: str) -> None:
    f = FAMILIES[family]
    assert f.modes and all(MODES[m].family == family for m in f.modes)
    assert set(f.defaults.values()) <= set(f.strategies) and f.cutlass_tile in f.strategies
    assert (kernels_dir() / f.primitive).is_file()
    macro = re.search(rf"#define {f.macro}\(([^)]*)\)", (kernels_dir() / "instances.cuh").read_text())
    assert macro is not None, f.macro
    inst = next(i for i in instances(strategies=tuple(f.strategies)) if i.family is f)
    # the macro's parameters, one per field (counts is W_A, W_B, W_C)
    assert len(macro[1].split(",")) == sum(len(inst.field(name)) for name in f.fields)
    assert inst.source_line().startswith(f"{f.macro}({inst.name}, ")
    assert all(type(s) is f.strategy_type for s in f.strategies.values())


def test_modes_derive_names_labels_and_baselines() -> None:
    for mode in MODES.values():
        gemm = get_impl(f"gemm-{mode.suffix}" if mode.suffix else "gemm")
        assert gemm.mode == mode.name and set(gemm.dtypes) == set(mode.dtypes)
        assert mode_by_suffix(gemm.name) == ("gemm", mode.name)
        if mode.tensor:
            assert gemm.label == f"GEMM {mode.label} (ours)"
            assert get_impl(f"grey322-11-50x1-{mode.suffix}").mode == mode.name
    tensor = {name for name, impl in IMPLS.items() if impl.tensor}
    assert tensor == {f"{base}-{m.suffix}" for m in MODES.values() if m.tensor
                      for base in ("gemm", "strassen1", "strassen2")} | {"cublas-tf32", "cutlass-3xtf32", "cutlass-dmma",
                                                                          "cutlass-tf32-sm90"}
    # the winners' order, most accurate first (wgmma's modes beside mma.sync's of the same arithmetic)
    assert by_accuracy("float32") == ("simt", "3xtf32", "wg3xtf32", "1xtf32", "wg1xtf32")
    assert counterpart("Huge", "3xtf32") == "TcHuge" and counterpart("Small", "dmma") == "DmmaSmall"
    assert len(ALL_STRATEGIES) == sum(len(f.strategies) for f in FAMILIES.values())


def test_every_kernel_name_reads_back() -> None:
    every = instances(strategies=tuple(ALL_STRATEGIES))
    assert {i.family.name for i in every} == set(FAMILIES)
    assert all(parse_instance(i.name) == i for i in every)


@pytest.mark.parametrize("literal", ['"3xtf32"', '"1xtf32"', '"dmma"', "TcHuge", "DmmaHuge"])
def test_a_family_name_is_written_in_at_most_three_package_files(literal: str) -> None:
    """A mode or strategy name lives in its record (and its table and baseline): everything else derives."""
    files = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if literal in p.read_text())
    assert len(files) <= 3, files
    assert "strassenbench/families.py" in files


def test_a_simt_mode_default_is_the_papers() -> None:
    assert FAMILIES[SIMT].defaults == {"emu": "Small", "cuda": "Huge"}  # the emulator's smallest, the paper's Huge
