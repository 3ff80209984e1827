"""The model of the Wg kernels (strassenbench.model.wgmma): the loader's counted instructions on an interior tile,
and a launch's terms with the atomic write-back's tile reductions (their staging boxes' shared-memory traffic and
the raw stages left beside them); no wgmma off sm_90."""

from __future__ import annotations

import pytest

from strassenbench.model.gpus import SPECS
from strassenbench.model.wgmma import wg_figures, wg_load, wg_slice_instructions
from strassenbench.strategies import WG_STRATEGIES

WG = WG_STRATEGIES["WgLarge"]


def test_the_loaders_instructions_grow_with_the_terms_and_the_split() -> None:
    """Each later term of an operand adds its chunks' read-back and weighted adds (5 a chunk) beside its loads;
    3xTF32 adds the split (2 more instructions an element) and the second part's store per chunk."""
    a_chunks, b_chunks = WG.m_S * WG.k_S // 512, WG.k_S // 4
    one, two = (wg_slice_instructions(WG, w, "wg1xtf32") for w in ((1, 1, 1), (2, 2, 2)))
    # a term of A: a load and a store a chunk; of B: 4 loads and a store; a later one also 5 a chunk; a raw stage 8
    assert two - one == a_chunks * (2 + 5) + b_chunks * (5 + 5) + 8
    split = wg_slice_instructions(WG, (2, 2, 2), "wg3xtf32") - two
    assert split == (a_chunks + b_chunks) * (4 * 2 + 1)
    assert wg_slice_instructions(WG, (4, 4, 4), "wg1xtf32") > two


@pytest.mark.parametrize("mode", ["wg1xtf32", "wg3xtf32"])
def test_the_atomic_kernels_tile_reductions_in_the_model(mode: str) -> None:
    """The atomic kernel's staging boxes: 2 W_C m_S n_S more shared-memory words a tile (written by the consumers,
    read by TMA), the same flops and traffic; its raw stages are the reduce kernel's (3xTF32: 2 beside the boxes,
    so its latency chain is no shorter)."""
    spec, w, n = SPECS["H100"], (2, 2, 2), 8192
    active, per_slice, load_use = wg_figures(spec, WG, w, mode)
    plain, atomic = (wg_load(spec, WG, w, n, n, n, mode, active, per_slice, load_use, atomic=a) for a in (False, True))
    assert atomic.work[0] == plain.work[0] and atomic.traffic == plain.traffic
    assert atomic.work[1] - plain.work[1] == 4 * 2 * w[2] * WG.m_S * WG.n_S
    assert atomic.latency >= plain.latency
    if mode == "wg3xtf32":
        assert (WG.raw_stages(2), WG.raw_stages(2, reduce=True)) == (3, 2) and atomic.latency > plain.latency


def test_no_wgmma_off_sm_90() -> None:
    spec = SPECS["A100"]
    active, per_slice, load_use = wg_figures(spec, WG, (1, 1, 1), "wg3xtf32")
    assert wg_load(spec, WG, (1, 1, 1), 4096, 4096, 4096, "wg3xtf32", active, per_slice, load_use) is None
