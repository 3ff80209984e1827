"""Any fast matrix multiplication algorithm: coefficient files, mixed levels, plans, fused kernels, model.

Integer inputs make every product exact in floating point (the catalogue's coefficients are small integers
and fractions with denominators up to 8), so the numpy engine and the emulated fused kernels must equal the
classical product bit for bit. The emulator compiles each plan's kernels: Benson and Ballard's 13 algorithms
and a few of the record collections' run here at one level, with a two-level and a mixed pair; every other
record algorithm at one level and every algorithm at two levels are the `slow` tests (pytest -m slow).
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from strassenbench.algebra.algorithm import (AlgorithmError, algorithm_names, algorithms_dir, get_algorithm,
                                             load_algorithm)
from strassenbench.algebra.levels import multilevel
from strassenbench.algebra.primitives import primitives, variants
from strassenbench.algebra.schedule import schedule
from strassenbench.cli import main
from strassenbench.engines import ENGINES
from strassenbench.fused import build as fused_build
from strassenbench.fused.build import check_counts
from strassenbench.fused.instances import kernel_counts, operand_counts, plan_counts
from strassenbench.fused.launch import plan_launches
from strassenbench.impls import ImplError, get_impl
from strassenbench.limits import MAX_PRODUCTS
from strassenbench.model.gpus import SPECS
from strassenbench.model.perf import impl_time
from strassenbench.plan import make_plan, max_levels
from strassenbench.strategies import STRATEGIES

FILES = sorted(p.stem for p in algorithms_dir().glob("*.txt"))
CATALOGUE = [name for name in algorithm_names()]
COLLECTIONS = ("perminov", "plinopt", "alphatensor")  # scripts/import_records.sh
RECORDS = [name for name in FILES if name.startswith(tuple(f"{c}-" for c in COLLECTIONS))]
BENSON = [name for name in FILES if name not in RECORDS]
# Emulated in the default suite: the rank-48 4x4 algorithm (the W = 16 kernels), a ternary flip-graph scheme and
# an AlphaTensor format beyond 5; the other record algorithms are the slow set's.
REPRESENTATIVE = ["plinopt-4x4x4-48-rational", "perminov-3x4x5-47", "alphatensor-2x2x6-21"]
MIXED = "grey322-11-50+strassen"


def integer_operands(m: int, k: int, n: int, dtype: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-2, 3, shape).astype(dtype) for shape in ((m, k), (k, n), (m, n)))


def odd_shape(spec: str, levels: int) -> tuple[int, int, int]:
    """m, k, n that are not multiples of the grid along any dimension split finer than 1 (Sec. s:fringe)."""
    gm, gk, gn = multilevel(spec, levels).dims
    return tuple(g + g // 2 + 1 if g > 1 else 3 for g in (gm, gk, gn))  # type: ignore[return-value]


def exact(spec: str, levels: int, engine: str, dtype: str, shape: tuple[int, int, int] | None = None) -> None:
    m, k, n = shape or odd_shape(spec, levels)
    assert max_levels(spec, m, k, n) >= levels
    A, B, C = integer_operands(m, k, n, dtype)
    expected = -1.5 * (A.astype(np.float64) @ B) + 0.5 * C
    ENGINES[engine](make_plan(spec, levels, m, k, n), A, B, C, -1.5, 0.5)
    np.testing.assert_array_equal(C, expected, err_msg=f"{spec} {levels} levels {engine} {dtype} {m}x{k}x{n}")


def test_every_catalogue_file_loads_and_has_its_shape() -> None:
    """The 13 files of Benson and Ballard's catalogue: name <m~><k~><n~>-<R>-<nonzeros> matches the data."""
    assert len(BENSON) == 13
    for name in BENSON:
        alg = get_algorithm(name)
        assert not alg.brent_residual().any()
        digits, rank, nonzeros = (name.removeprefix("grey-").rsplit("-", 2) if name != "grey-strassen"
                                  else ("222", "7", "36"))
        assert alg.dims == tuple(int(d) for d in digits[-3:]), name
        assert alg.rank == int(rank)
        assert np.count_nonzero(alg.U) + np.count_nonzero(alg.V) + np.count_nonzero(alg.W) == int(nonzeros)


def test_record_files_have_their_shape_rank_and_attribution() -> None:
    """The record collections' files (scripts/import_records.sh): <collection>-<m>x<k>x<n>-<R>[-...] matches the
    data, the header names the source, the licence and the original file, and the README's table lists each."""
    counts = {c: sum(name.startswith(f"{c}-") for name in RECORDS) for c in COLLECTIONS}
    assert counts == {"perminov": 20, "plinopt": 4, "alphatensor": 11}
    listed = (algorithms_dir() / "README.md").read_text()
    licences = {"perminov": "MIT", "plinopt": "CeCILL-B", "alphatensor": "CC-BY 4.0"}
    for name in RECORDS:
        collection, shape, rank = name.split("-")[:3]
        alg = get_algorithm(name)
        assert "x".join(map(str, alg.dims)) == shape and alg.rank == int(rank), name
        header = (algorithms_dir() / f"{name}.txt").read_text().split("\n")[:5]
        assert header[1].startswith("# from ") and header[3] == f"# licence: {licences[collection]}", header
        assert f"| {name} |" in listed, name
    assert get_algorithm("plinopt-4x4x4-48-rational").denominators != (1, 1, 1)  # rational, as its name says
    assert {get_algorithm(n).rank for n in RECORDS if n.startswith("perminov-5x5x5")} == {93}


def test_alphatensor_files_are_not_beaten_or_tied_but_the_two_for_comparison() -> None:
    """AlphaTensor's formats are in the catalogue only where no other file has the same format at a rank as low,
    except its 4x4x4:49 and 3x4x5:47, kept for comparison with Perminov's."""
    ranks: dict[tuple[int, ...], list[tuple[int, str]]] = {}
    for name in FILES:
        alg = get_algorithm(name)
        ranks.setdefault(tuple(sorted(alg.dims)), []).append((alg.rank, name))
    for name in (n for n in RECORDS if n.startswith("alphatensor-")):
        alg = get_algorithm(name)
        others = [r for r, other in ranks[tuple(sorted(alg.dims))] if other != name]
        assert (min(others, default=alg.rank + 1) > alg.rank) != (name in ("alphatensor-4x4x4-49",
                                                                           "alphatensor-3x4x5-47")), name


def test_rational_coefficients_are_exact() -> None:
    alg = get_algorithm("grey424-26-257")
    assert alg.denominators == (2, 1, 2)
    assert Fraction(1, 2) in {t.coeff for p in primitives("grey424-26-257", 1) for t in p.a + p.c}
    assert get_algorithm("grey-strassen").stability_factor == 12 == get_algorithm("strassen").stability_factor


def _corrupt(text: str, which: int, seed: int) -> tuple[str, int]:
    """Change one entry of block ``which`` (0 U, 1 V, 2 W): a nonzero to 0 or a zero to 1; (text, its line)."""
    lines = text.splitlines()
    blocks, current = [[]], 0
    for i, line in enumerate(lines):
        if line.startswith("#"):
            if blocks[-1]:
                blocks.append([])
            continue
        if line.strip():
            blocks[-1].append(i)
    rng = np.random.default_rng(seed)
    index = int(rng.choice(blocks[which]))
    tokens = lines[index].split()
    col = int(rng.integers(len(tokens)))
    tokens[col] = "0" if tokens[col] != "0" else "1"
    lines[index] = " ".join(tokens)
    return "\n".join(lines) + "\n", index + 1


@pytest.mark.parametrize("name", FILES)
def test_corrupted_copy_is_refused_naming_where(name: str, tmp_path: Path) -> None:
    text = (algorithms_dir() / f"{name}.txt").read_text()
    for which, seed in itertools.product(range(3), range(2)):
        bad, line = _corrupt(text, which, seed)
        path = tmp_path / f"{name}.txt"
        path.write_text(bad)
        with pytest.raises(AlgorithmError) as err:
            load_algorithm(path)
        message = str(err.value)
        assert "\n" not in message and f"line {line}," in message and "product M" in message, message
        assert f" on {'ABC'[which]}" in message, message


@pytest.mark.parametrize("text, fragment", [
    ("1 0\n0 1\n#\n1 0\n", "expected 3 blocks"),
    ("1 0\n#\n1\n#\n1 0\n", "line 3: 1 entries, expected 2"),
    ("1 x\n#\n1 0\n#\n1 0\n", "entry 'x' is not an integer or a fraction"),
    ("1\n1\n#\n1\n#\n1\n1\n1\n", "not m~k~, k~n~ and m~n~ of any grid"),
])
def test_malformed_file_is_one_line(text: str, fragment: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(AlgorithmError, match=fragment):
        load_algorithm(path)


def test_mixed_levels_are_kronecker_products() -> None:
    """<3,2,2;11> on top of Strassen: a <6,4,4;77> algorithm whose block A1.2 is block 2 of the top block A1."""
    alg = multilevel(MIXED, 2)
    assert alg.dims == (6, 4, 4) and alg.rank == 77 and not alg.brent_residual().any()
    assert alg.level_dims == ((3, 2, 2), (2, 2, 2))
    assert alg.block_name("A", 2, 1) == "A2.1" and alg.block_name("A", 1, 2) == "A1.2"
    with pytest.raises(AlgorithmError, match="has 2 levels, not 3"):
        multilevel(MIXED, 3)
    assert max_levels(MIXED, 1000, 1000, 1000) == 2


def _two_levels(name: str) -> bool:
    """Two levels of ``name`` within the products a plan may have (strassenbench.limits.MAX_PRODUCTS)."""
    return get_algorithm(name).rank ** 2 <= MAX_PRODUCTS


def _two_levels_fused(name: str) -> bool:
    """The kernels of two levels of ``name`` exist: every product's terms within one launch's parameters."""
    try:
        return _two_levels(name) and check_counts(plan_counts(name, 2)) is None
    except fused_build.BuildError:
        return False


@pytest.mark.parametrize("name", CATALOGUE)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_engine_exact_one_and_two_levels(name: str, dtype: str) -> None:
    """Every algorithm at one level; at two levels each of Benson and Ballard's (the records' are the slow set's)."""
    for levels in (1, 2) if name not in RECORDS else (1,):
        exact(name, levels, "numpy", dtype)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in RECORDS if _two_levels(n)])
def test_numpy_engine_exact_two_levels_records(name: str) -> None:
    exact(name, 2, "numpy", "float64")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_engine_exact_mixed(dtype: str) -> None:
    exact(MIXED, 2, "numpy", dtype)
    exact("strassen+hk323-15-94", 2, "numpy", dtype)


@pytest.mark.parametrize("name", [*BENSON, *REPRESENTATIVE])
def test_fused_kernels_exact_one_level(name: str) -> None:
    for dtype in ("float32", "float64"):
        exact(name, 1, "emu", dtype)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in RECORDS if n not in REPRESENTATIVE])
def test_fused_kernels_exact_one_level_records(name: str) -> None:
    for dtype in ("float32", "float64"):
        exact(name, 1, "emu", dtype)


@pytest.mark.parametrize("spec, levels", [("grey322-11-50", 2), (MIXED, 2), ("winograd", 1)])
def test_fused_kernels_exact_two_levels_and_mixed(spec: str, levels: int) -> None:
    for dtype in ("float32", "float64"):
        exact(spec, levels, "emu", dtype)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in FILES if _two_levels_fused(n)])
def test_fused_kernels_exact_two_levels_every_algorithm(name: str) -> None:
    for dtype in ("float32", "float64"):
        exact(name, 2, "emu", dtype)


def test_kernels_are_power_of_two_counts_and_strassen_keeps_its_own() -> None:
    assert kernel_counts((3, 1, 5)) == (4, 1, 8) and kernel_counts((1, 2, 4)) == (1, 2, 4)
    for levels in (1, 2):
        assert {(v.W_A, v.W_B, v.W_C) for v in variants("strassen", levels)} == set(plan_counts("strassen", levels))
    assert set(operand_counts()) == {(1, 1, 1), *plan_counts("strassen", 1), *plan_counts("strassen", 2)}


@pytest.mark.parametrize("name", CATALOGUE)
def test_build_accepts_every_plans_kernels(name: str) -> None:
    """What `build --plan` asks for is buildable: powers of two whose terms fit the kernel parameters."""
    check_counts(plan_counts(name, 1))
    if _two_levels(name) and not _two_levels_fused(name):  # refused naming the limit, never left out silently
        with pytest.raises(fused_build.BuildError, match="within 4096 bytes of parameters"):
            check_counts(plan_counts(name, 2))


def test_build_plan_adds_to_the_default_kernels(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`build --plan` builds the default kernels (GEMM and Strassen) and the plan's; with --counts, those."""
    asked = []
    monkeypatch.setattr(fused_build, "build", lambda archs, out, **kw: asked.append(kw["counts"]) or pd.DataFrame(
        columns=["spill_stores", "spill_loads"]))
    monkeypatch.setattr(fused_build, "toolchain_for", lambda arch, driver: None)
    plan = plan_counts("grey322-11-50", 1)
    assert main(["build", "--arch", "sm_90", "--plan", "grey322-11-50:1", "--out", str(tmp_path)]) == 0
    assert main(["build", "--arch", "sm_90", "--counts", "1x1x1", "--plan", "grey322-11-50:1",
                 "--out", str(tmp_path)]) == 0
    assert set(asked[0]) == {*operand_counts(), *plan} and set(asked[1]) == {(1, 1, 1), *plan}
    with pytest.raises(fused_build.BuildError, match="= 3x3x3 .each a power of two"):
        check_counts(((3, 3, 3),))
    with pytest.raises(fused_build.BuildError, match="= 64x64x64 "):  # 192 terms: beyond 4 KiB of parameters
        check_counts(((64, 64, 64),))


def test_padded_terms_are_empty() -> None:
    """A 3-term operand runs on the 4-term kernel: the fourth term has zero extent and coefficient 0."""
    plan = make_plan("winograd", 1, 8, 8, 8)
    A, B, C = integer_operands(8, 8, 8, "float32")
    program = plan_launches(plan, A, B, C, 1.0, 0.0, strategy=STRATEGIES["Small"])
    step = next(s for s in plan.steps if len(s.c) == 3)
    launch = next(l for l in program.launches if l.products == (step.primitive.name,))
    assert launch.instance.counts == kernel_counts(step.primitive.counts)
    params = launch.args[-1]
    w_a, w_b, w_c = launch.instance.counts
    last_c = w_a + w_b + w_c - 1
    assert params["rows"][0, last_c] == 0 and params["cols"][0, last_c] == 0 and params["coeff"][0, last_c] == 0
    assert all(params["rows"][0, w_a + w_b + t] > 0 for t in range(3))


def test_schedules_of_other_algorithms_are_valid() -> None:
    for spec in ("grey322-11-50", MIXED):
        levels = 2
        sched = schedule(spec, levels, 4)
        placed = [p.name for stage in sched.stages for lane in stage.streams for p in lane]
        assert sorted(placed) == sorted(p.name for p in primitives(spec, levels))
        for stage in sched.stages:
            seen: set = set()
            for lane in stage.streams:
                writes = set().union(*(p.writes for p in lane))
                assert not writes & seen
                seen |= writes


def test_implementations_of_any_algorithm() -> None:
    impl = get_impl("grey322-11-50x1")
    assert (impl.algorithm, impl.levels, impl.kind) == ("grey322-11-50", 1, "fused")
    assert get_impl(MIXED).levels == 2 and get_impl("strassenx1").levels == 1
    for bad in ("grey322-11-50", "nopex1", f"{MIXED}x3"):
        with pytest.raises(ImplError):
            get_impl(bad)
    A, B, C = integer_operands(14, 9, 11, "float64")
    expected = A @ B
    get_impl("hk323-15-94x1")(A, B, C, engine="numpy")
    np.testing.assert_array_equal(C, expected)


def test_model_of_any_algorithm() -> None:
    spec, strategy = SPECS["H100"], STRATEGIES["Huge"]
    assert impl_time(spec, "strassenx1", strategy, 4096, 4096, 4096, "float32") == \
        impl_time(spec, "strassen1", strategy, 4096, 4096, 4096, "float32")
    fast = impl_time(spec, "hk323-15-94x1", strategy, 6144, 4096, 6144, "float32")
    gemm = impl_time(spec, "gemm", strategy, 6144, 4096, 6144, "float32")
    # 15 products of a third, a half and a third: 15/18 of the GEMM's flops, plus the sums' traffic.
    assert 0 < fast.t_flop < gemm.t_flop


def test_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["algorithms"]) == 0
    out = capsys.readouterr().out
    assert "grey424-26-257,4x2x4,26,32," in out and "hk323-15-94" in out
    assert main(["variants", "--algorithm", MIXED, "--levels", "2"]) == 0
    capsys.readouterr()
    bad, _ = _corrupt((algorithms_dir() / "grey322-11-50.txt").read_text(), 1, 0)
    path = tmp_path / "mine.txt"
    path.write_text(bad)
    assert main(["verify", "--algorithm", str(path), "--levels", "1", "--m", "5", "--n", "5", "--k", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fails the Brent equations" in err and "Traceback" not in err
    assert main(["model", "crossover", "--gpu", "V100", "--impl", "strassen1,grey322-11-50x1", "--sizes",
                 "1024:8192:1024"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) == 3 and rows[2].split(",")[3] == "grey322-11-50x1"
    assert main(["model", "predict", "--gpu", "A100", "--impl", f"gemm,{MIXED}", "--sizes", "2048"]) == 0
    assert f",{MIXED}," in capsys.readouterr().out
    assert main(["model", "predict", "--gpu", "A100", "--impl", "strassen1-refx1"]) == 2
    assert main(["build", "--arch", "sm_90", "--plan", "grey322-11-50"]) == 2
    assert "ALGORITHM:LEVELS" in capsys.readouterr().err


@pytest.mark.parametrize("scheme", ["streams", "atomic"])
def test_fused_schemes_of_another_algorithm_exact(scheme: str) -> None:
    """The paper's task-parallel schemes per variant (streams: the schedule's stages; atomic: one batched
    atomicAdd launch per variant) on <3,2,2;11>."""
    m, k, n = odd_shape("grey322-11-50", 1)
    A, B, C = integer_operands(m, k, n, "float64")
    expected = 2.0 * (A @ B) - C
    ENGINES["emu"](make_plan("grey322-11-50", 1, m, k, n), A, B, C, 2.0, -1.0, scheme=scheme)
    np.testing.assert_array_equal(C, expected)
