"""T_latency (strassenbench.model.latency): the tensor-core kernels' occupancy and what one block per SM costs. The
chain of one slice by hand, its waves (a second block per SM halves it), the register count that finds the
staged 3xTF32 kernels' one block per SM without a build, the concurrent launches' share, and on the H100's
square sweep the 3xTF32 GEMM predicted within 0.7 to 1.3 of its measured time (0.35 before the term), while
no SIMT prediction moves."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from strassenbench.model.gpus import SPECS
from strassenbench.model.issue import BLOCK_SLICES
from strassenbench.model.latency import LOAD_LATENCY_S, load_latency_clocks, slice_chain_clocks
from strassenbench.model.perf import impl_time, load_resources
from strassenbench.model.schemes import Load, alone, stage_time
from strassenbench.model.tensor import tensor_active_blocks, tensor_kernel_time
from strassenbench.model.validate import validation_rows
from strassenbench.results import read_results
from strassenbench.strategies import STRATEGIES, TENSOR_STRATEGIES

ROOT = Path(__file__).resolve().parents[2]
H100_DATA = ROOT / "data" / "nvidia-h100-80gb-hbm3"
H100 = SPECS["H100"]
TC_HUGE = TENSOR_STRATEGIES["TcHuge"]
N = 8192


def _resources() -> pd.DataFrame:
    return load_resources(H100_DATA / "resources_sm_90.csv")


def test_one_slice_waits_for_its_loads_then_issues_the_rest() -> None:
    # lambda 1,000 clocks; 2 warps per sub-partition; 240 instructions, the loads used 100 after issue
    assert slice_chain_clocks(1000.0, 2, 240, 100) == 1000 + 2 * 140
    assert slice_chain_clocks(100.0, 2, 240, 100) == 2 * 240  # the warps' own issue covers the latency
    assert slice_chain_clocks(1000.0, 2, 240, 500) == 1000  # a distance past the slice is the slice
    assert load_latency_clocks(H100) == pytest.approx(LOAD_LATENCY_S * 1.98e9)


def test_the_staged_3xtf32_kernel_holds_one_block_per_sm_and_waits_on_every_slice() -> None:
    """The build's TcHuge 3xTF32 GEMM: 212 registers, one block per SM, 242 instructions per slice, loads used
    117 after issue. Its time at 8,192 is T_latency: 32 waves of 1,024 slices of the chain, and what a block
    issues beyond its k (BLOCK_SLICES)."""
    resources = _resources()
    assert tensor_active_blocks(H100, TC_HUGE, (1, 1, 1), "3xtf32", resources) == (1, "resources.csv")
    t = tensor_kernel_time(H100, TC_HUGE, (1, 1, 1), N, N, N, "3xtf32", resources)
    chain = slice_chain_clocks(load_latency_clocks(H100), 2, 242.0, 117.0)
    slices = 1024 + BLOCK_SLICES
    assert t.limiter == "latency" and t.t_latency == pytest.approx(32 * slices * chain / H100.boost_clock_hz)
    assert t.t_latency > 2.5 * t.t_issue  # the latency the one block leaves uncovered, not its issue slots


def test_a_second_block_per_sm_hides_half_the_latency() -> None:
    """The same kernel with two blocks per SM (as the H200's build before staged accumulation had it): half the
    waves, half T_latency; and the paper's model, which has no such term, does not see it."""
    resources = _resources()
    two = resources.copy()
    two.loc[(two["mode"] == "3xtf32"), "blocks_per_sm"] = 2
    one_block = tensor_kernel_time(H100, TC_HUGE, (1, 1, 1), N, N, N, "3xtf32", resources)
    two_blocks = tensor_kernel_time(H100, TC_HUGE, (1, 1, 1), N, N, N, "3xtf32", two)
    assert two_blocks.t_latency == pytest.approx(one_block.t_latency / 2)
    assert two_blocks.seconds < 0.6 * one_block.seconds
    paper = [tensor_kernel_time(H100, TC_HUGE, (1, 1, 1), N, N, N, "3xtf32", r, "paper") for r in (resources, two)]
    assert paper[0].seconds == pytest.approx(paper[1].seconds) and paper[0].t_latency == one_block.t_latency


def test_without_a_build_the_register_count_finds_one_block_and_the_loop_is_counted() -> None:
    """No resources.csv: the staged accumulation's 4-register sum per mma tile counts 3xTF32 TcHuge to one block
    per SM (1xTF32 two), and the counted loop predicts the 3xTF32 GEMM within 20% of the build's figures."""
    assert tensor_active_blocks(H100, TC_HUGE, (1, 1, 1), "3xtf32") == (1, "register count")
    assert tensor_active_blocks(H100, TC_HUGE, (1, 1, 1), "1xtf32") == (2, "register count")
    counted = impl_time(H100, "gemm-3xtf32", STRATEGIES["Huge"], N, N, N, "float32")
    built = impl_time(H100, "gemm-3xtf32", STRATEGIES["Huge"], N, N, N, "float32", _resources())
    assert counted.limiter == built.limiter == "latency"
    assert counted.seconds == pytest.approx(built.seconds, rel=0.2)


def test_concurrent_launches_share_the_residency() -> None:
    """Two launches of 66 blocks, 132 resident each, 1 s of chain a block: alone one wave, 1 s each; together
    they fill one wave, 1 s in all (each block holds its slot for its chain)."""
    def load(blocks: int) -> Load:
        return Load(blocks, 132, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), 1.0)

    assert alone("issue", load(66)).t_latency == 1.0 and alone("issue", load(200)).t_latency == 2.0
    both = stage_time("issue", [[load(66)], [load(66)]])
    assert both.t_latency == pytest.approx(1.0) and both.seconds == pytest.approx(1.0)
    assert alone("paper", load(66)).seconds == 0.0  # the paper's model leaves it out


def test_validation_on_the_h100_square_sweep() -> None:
    """By the default model with the H100's build: the 3xTF32 GEMM's median predicted / measured time from 0.7 to
    1.3 (0.35 without T_latency), the 1xTF32 GEMM's too; the SIMT implementations carry no T_latency."""
    measured = read_results(H100_DATA / "square.csv", "bench")
    table = validation_rows(H100, measured, ["issue"], ["as-run"], _resources(), "H100").set_index("impl")
    for impl in ("gemm-3xtf32", "gemm-tf32", "strassen1-3xtf32"):
        assert 0.7 <= table.loc[impl, "median_ratio"] <= 1.3, (impl, table.loc[impl])
    for impl in ("gemm", "strassen1", "strassen2-direct", "strassen2-hybrid"):
        assert impl_time(H100, impl, STRATEGIES["Huge"], N, N, N, "float32", _resources()).t_latency == 0.0
