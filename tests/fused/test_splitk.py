"""The splitk scheme (strassenbench.fused.launch): the atomic scheme with each product's k split into S parts, each
a product of the batch that adds its share into C through the atomic write-back. Its launches, exact results
through the real kernels on the emulator (SIMT, both tensor-core modes, DMMA), its option's checks, and the model's
choice of S (strassenbench.model.perf.best_split)."""

from __future__ import annotations

import numpy as np
import pytest

from strassenbench.cli import main
from strassenbench.fused import emu
from strassenbench.fused.launch import FusedError, plan_launches
from strassenbench.impls import ImplError, get_impl
from strassenbench.model.gpus import SPECS
from strassenbench.model.perf import best_split, impl_time
from strassenbench.model.pick import split_options
from strassenbench.options import MAX_SPLIT, SPLITS, OptionsError, RunOptions
from strassenbench.plan import BlockView, make_plan, split_chunk, split_steps
from strassenbench.strategies import DMMA_STRATEGIES, STRATEGIES, TENSOR_STRATEGIES

H100 = SPECS["H100"]
HUGE = STRATEGIES["Huge"]


def _operands(m: int, k: int, n: int, dtype: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Integers in [-8, 8]: every product, sum and partial sum exact in float32, TF32 and float64."""
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-8, 9, shape).astype(dtype) for shape in ((m, k), (k, n), (m, n)))


def _want(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return (alpha * (A.astype(np.float64) @ B) + beta * C).astype(C.dtype)


@pytest.mark.parametrize(("bk", "split", "k_S"), [(1024, 4, 8), (1000, 3, 8), (9, 4, 8), (130, 16, 8), (64, 1, 32),
                                                  (4096, 7, 16), (1, 2, 8)])
def test_a_split_covers_k_in_whole_slices(bk: int, split: int, k_S: int) -> None:
    """Every part but the last is whole k_S slices (so it starts as aligned as its term), there are at most S
    parts, and they cover k."""
    chunk = split_chunk(bk, split, k_S)
    parts = -(-bk // chunk)
    assert chunk % k_S == 0 and 1 <= parts <= split and (parts - 1) * chunk < bk <= parts * chunk
    assert split_chunk(bk, 1, k_S) >= bk  # one part: the whole k


@pytest.mark.parametrize(("levels", "shape"), [(1, (70, 90, 66)), (2, (37, 131, 29)), (0, (5, 40, 3))])
def test_the_parts_cover_every_terms_k_once(levels: int, shape: tuple[int, int, int]) -> None:
    """Each part keeps its product's C terms and coefficients and cuts A's terms along their columns and B's along
    their rows, chunk by chunk: over every chunk the cuts add up to each term's extent, and a chunk left out is
    one where every term of A, or every term of B, is empty (its part adds zero: a fringe's shorter blocks)."""
    m, k, n = shape
    plan = make_plan("strassen", levels, m, k, n)
    bk = plan.block[1]
    chunk = split_chunk(bk, 3, 8)
    parts = split_steps(plan.steps, bk, chunk)
    for step in plan.steps:
        mine = [p for p in parts if p.primitive is step.primitive]
        assert mine and all(p.c == step.c for p in mine)
        cuts = []
        for first in range(0, bk, chunk):  # what each chunk's part is
            a = tuple((BlockView(v.row, v.col + first, v.rows, max(0, min(v.cols - first, chunk))), c)
                      for v, c in step.a)
            b = tuple((BlockView(v.row + first, v.col, max(0, min(v.rows - first, chunk)), v.cols), c)
                      for v, c in step.b)
            cuts.append((a, b))
        for side in (0, 1):
            for t, (view, _) in enumerate(step.b if side else step.a):
                along = "rows" if side else "cols"
                assert sum(getattr(cut[side][t][0], along) for cut in cuts) == getattr(view, along)
        kept = [(p.a, p.b) for p in mine]
        assert kept[0] == cuts[0] and all(cut in kept or any(all(v.empty for v, _ in x) for x in cut)
                                          for cut in cuts[1:])
        assert all(cut in cuts for cut in kept)


def test_the_launches_batch_every_part_and_run_each_over_its_chunk() -> None:
    """Strassen at 1 level, S = 3: each variant's launch computes its products' parts in its batch (blockIdx.z),
    every kernel writes back with atomic adds over a k of one chunk, and beta is applied once, first."""
    m, k, n = 64, 256, 64
    A, B, C = _operands(m, k, n, "float32")
    plan = make_plan("strassen", 1, m, k, n)
    program = plan_launches(plan, A, B, C, 1.0, 0.5, strategy=STRATEGIES["Small"], scheme="splitk", split_k=3)
    scale, products = program.stages
    assert len(scale) == 1 and scale[0][0].kernel.startswith("scale_")
    launches = [launch for lane in products for launch in lane]
    chunk = split_chunk(plan.block[1], 3, STRATEGIES["Small"].k_S)
    assert {launch.args[3] for launch in launches} == {chunk} and chunk < plan.block[1]
    assert {launch.instance.write_mode for launch in launches} == {"atomic"}
    assert sum(launch.grid[2] for launch in launches) == 7 * 3
    assert sorted(name for launch in launches for name in launch.products) == sorted(
        s.primitive.name for s in plan.steps for _ in range(3))
    assert len(products) == 4  # the atomic scheme's streams


CASES = [  # (mode, strategy, dtype, shapes): odd shapes (the scalar kernels) and aligned ones (the vector kernels)
    ("simt", STRATEGIES["Small"], "float32", [(33, 130, 45), (64, 256, 64)]),
    ("simt", STRATEGIES["Small"], "float64", [(17, 99, 9), (64, 128, 32)]),
    ("1xtf32", TENSOR_STRATEGIES["TcSmall"], "float32", [(33, 130, 45), (64, 256, 64)]),
    ("3xtf32", TENSOR_STRATEGIES["TcSmall"], "float32", [(45, 97, 33)]),
    ("dmma", DMMA_STRATEGIES["DmmaSmall"], "float64", [(33, 130, 45), (64, 256, 64)]),
]


@pytest.mark.parametrize(("mode", "strategy", "dtype", "shapes"), [  # DMMA's splitk in the slow tier (15 s)
    pytest.param(*c, id=c[0] + "-" + c[2], marks=[pytest.mark.slow] if c[0] == "dmma" else []) for c in CASES])
def test_splitk_is_exact_on_the_emulator(mode: str, strategy, dtype: str, shapes: list) -> None:  # noqa: ANN001
    """0, 1 and 2 levels of Strassen in 2, 3 and MAX_SPLIT parts (more than k has slices), alpha and beta: exact."""
    runs = [(shapes[0], 1, 3), (shapes[0], 2, 2), (shapes[-1], 0, MAX_SPLIT), (shapes[-1], 1, 2)]
    for (m, k, n), levels, split in runs:
        A, B, C = _operands(m, k, n, dtype, seed=m + levels)
        got = C.copy()
        plan = make_plan("strassen", levels, m, k, n)
        emu.run(plan_launches(plan, A, B, got, -1.5, 0.5, strategy=strategy, scheme="splitk", split_k=split,
                              mode=mode), operands=(A, B, got))
        np.testing.assert_array_equal(got, _want(A, B, C, -1.5, 0.5), err_msg=f"{mode} {m}x{k}x{n} L{levels} S{split}")


def test_the_split_is_the_splitk_schemes_option_only() -> None:
    """split_k goes with the splitk scheme, as an integer from 1 to MAX_SPLIT; a splitk launch without one is
    refused, naming where the model's comes from."""
    for bad, message in [({"scheme": "atomic", "split_k": 2}, "not the atomic scheme's"),
                         ({"split_k": 2}, "not the sequential scheme's"),
                         ({"scheme": "splitk", "split_k": 0}, "from 1 to 16"),
                         ({"scheme": "splitk", "split_k": MAX_SPLIT + 1}, "from 1 to 16"),
                         ({"scheme": "splitk", "split_k": True}, "from 1 to 16"),
                         ({"scheme": "splitk", "split_k": 2.0}, "from 1 to 16")]:
        with pytest.raises(OptionsError, match=message):
            RunOptions(**bad)
    A, B, C = _operands(8, 8, 8, "float32")
    with pytest.raises(FusedError, match="split_options"):
        plan_launches(make_plan("strassen", 1, 8, 8, 8), A, B, C, 1.0, 0.0, strategy=STRATEGIES["Small"],
                      scheme="splitk")
    with pytest.raises(ImplError, match="no --scheme"):
        get_impl("gemm").run_options("emu", scheme="splitk")
    with pytest.raises(ImplError, match="not the sequential scheme's"):
        get_impl("strassen1").run_options("emu", split_k=2)


def test_splitk_is_the_atomic_scheme_at_one_part_in_the_model() -> None:
    """S = 1 is the atomic scheme's prediction exactly; more parts add blocks and S times the write-back's words."""
    for impl, n in [("strassen1", 2048), ("strassen2-direct", 4096), ("strassen2-hybrid", 3072)]:
        atomic = impl_time(H100, impl, HUGE, n, n, n, "float32", scheme="atomic")
        assert impl_time(H100, impl, HUGE, n, n, n, "float32", scheme="splitk", split=1) == atomic
    written = [impl_time(H100, "strassen1", HUGE, 8192, 8192, 8192, "float32", scheme="splitk", split=s).t_gmop
               for s in (1, 2, 4, 8)]
    assert written == sorted(written) and written[0] < written[-1]


def test_the_model_splits_where_one_wave_is_too_few() -> None:
    """best_split is the fastest S of SPLITS by brute force (the fewest parts among equals). On an H100 at 2,048, 1-level
    Strassen's 448 Huge blocks make 1.7 waves of 264: the model splits k, and predicts it faster than the atomic
    scheme; a GEMM takes no scheme, so no split (one kernel, plain write-back)."""
    for impl, n in [("strassen1", 2048), ("strassen1", 8192), ("strassen2-direct", 1536)]:
        split, timing = best_split(H100, impl, HUGE, n, n, n, "float32")
        times = {s: impl_time(H100, impl, HUGE, n, n, n, "float32", scheme="splitk", split=s).seconds
                 for s in SPLITS}
        assert timing.seconds == min(times.values()) and split == min(s for s, t in times.items() if t == min(
            times.values()))
        assert impl_time(H100, impl, HUGE, n, n, n, "float32", scheme="splitk") == timing
    split, timing = best_split(H100, "strassen1", HUGE, 2048, 2048, 2048, "float32")
    assert split > 1 and timing.seconds < impl_time(H100, "strassen1", HUGE, 2048, 2048, 2048, "float32",
                                                    scheme="atomic").seconds
    gemm = impl_time(H100, "gemm", HUGE, 2048, 2048, 2048, "float32")
    assert impl_time(H100, "gemm", HUGE, 2048, 2048, 2048, "float32", scheme="splitk") == gemm


def test_a_run_without_a_split_takes_the_models() -> None:
    """split_options fills in the model's S (the GPU auto ranks by: the H100's on the CPU engines) and leaves a
    given one, and every other scheme, as it is."""
    options = get_impl("strassen1").run_options("emu", "Huge", "splitk")
    chosen = split_options(options, "strassen1", 2048, 2048, 2048, "float32", "emu")
    assert chosen.split_k == best_split(H100, "strassen1", HUGE, 2048, 2048, 2048, "float32")[0] > 1
    given = get_impl("strassen1").run_options("emu", "Huge", "splitk", split_k=5)
    assert split_options(given, "strassen1", 2048, 2048, 2048, "float32", "emu") is given
    atomic = get_impl("strassen1").run_options("emu", "Huge", "atomic")
    assert split_options(atomic, "strassen1", 2048, 2048, 2048, "float32", "emu") is atomic


def test_verify_takes_a_split_and_says_which_ran(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["verify", "--engine", "emu", "--m", "40", "--n", "36", "--k", "100", "--dtype", "float64"]
    assert main([*base, "--impl", "strassen1", "--scheme", "splitk", "--split-k", "3"]) == 0
    assert "scheme=splitk split_k=3 " in capsys.readouterr().out
    assert main([*base, "--levels", "2", "--scheme", "splitk"]) == 0  # the model's S, printed
    out = capsys.readouterr().out
    assert "scheme=splitk split_k=" in out and "status=ok" in out
    for argv, message in [([*base, "--impl", "strassen1", "--split-k", "3"], "not the sequential scheme's"),
                          ([*base, "--impl", "strassen1", "--scheme", "splitk", "--split-k", "17"], "maximum 16"),
                          ([*base[:2], "numpy", *base[3:], "--levels", "1", "--split-k", "2"], "--split-k applies")]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
