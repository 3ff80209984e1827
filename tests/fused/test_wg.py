"""The wgmma family (kernels/wgmma_primitive.cuh, sm_90a; the WgLarge strategy): its record and strategy, its
kernels exact on integers through the emulator at 0, 1 and 2 levels (TMA and scalar loads, persistent blocks
running several tiles, plain and atomic write-back), its launches' tensor maps and dynamic shared memory, planted
mistakes in its pipeline that the emulator catches, and the machine code nvcc makes of it (HGMMA, TMA, setmaxnreg,
no spills)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from support.plants import assert_plant_fails

from strassenbench.engines import ENGINES
from strassenbench.families import FAMILIES, MODES, WGMMA
from strassenbench.fused.emu import PERSISTENT_BLOCKS
from strassenbench.fused.instances import instances
from strassenbench.fused.launch import TensorMapArg, plan_launches, tma_able
from strassenbench.fused.sass import mainloop_metrics, parse_sass
from strassenbench.plan import make_plan
from strassenbench.strategies import WG_SHARED_BYTES, WG_STRATEGIES

WG = "WgLarge"
WG_MODES = ("wg1xtf32", "wg3xtf32")


def test_the_family_record_and_its_strategy() -> None:
    """WgLarge: a loader and two consumer warpgroups on a 128 x 128 x 32 tile; the raw stages that fit beside the
    operand stages in 227 KiB (4 for 1xTF32, 3 for 3xTF32's two parts; the atomic TMA kernels' 32 KiB of staging
    boxes, two of 16 x 32 floats a consumer warp, leave 3xTF32 2); the family builds for sm_90 only, its units for
    sm_90a."""
    s = WG_STRATEGIES[WG]
    assert (s.m_S, s.n_S, s.k_S, s.consumers, s.threads, s.op_stages) == (128, 128, 32, 2, 384, 2)
    assert (s.raw_stages(1), s.raw_stages(2)) == (4, 3)
    assert s.smem_bytes(parts=1) == 2 * 32768 + 4 * 32768 + 1024 <= WG_SHARED_BYTES
    assert s.smem_bytes(parts=2) == 2 * 65536 + 3 * 32768 + 1024 <= WG_SHARED_BYTES
    assert (s.out_bytes(True), s.raw_stages(1, True), s.raw_stages(2, True)) == (32768, 4, 2)
    assert s.smem_bytes(parts=1, reduce=True) == 32768 + 2 * 32768 + 4 * 32768 + 1024 <= WG_SHARED_BYTES
    assert s.smem_bytes(parts=2, reduce=True) == 32768 + 2 * 65536 + 2 * 32768 + 1024 <= WG_SHARED_BYTES
    family = FAMILIES[WGMMA]
    assert family.modes == WG_MODES and all(MODES[m].tf32 for m in WG_MODES)
    assert [family.builds_for(a) for a in ("sm_80", "sm_90", "sm_100")] == [False, True, False]
    assert family.target("sm_90") == "sm_90a"
    with pytest.raises(ValueError, match="k_S = 32"):
        type(s)("Bad", 128, 128, 16)


def _operands(m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, ...]:
    """Integers in [-100, 100]: exact in TF32 and in the 2-level operand sums; every product and sum of the shapes
    below stays below 2^24, exact in float32."""
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-100, 101, s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))


# (m, k, n) per level: leading dimensions a multiple of 4 (TMA: the vector kernels) with several tiles a product
# (more than the emulator's persistent blocks), and odd ones (the scalar kernels, every fringe).
SHAPES = {0: [(260, 96, 264), (131, 67, 129)], 1: [(516, 72, 264), (129, 33, 131)], 2: [(516, 136, 520), (45, 40, 97)]}
WG_CASES = [pytest.param(mode, scheme, levels, marks=[pytest.mark.slow] if (levels == 2 and (mode, scheme) != (
    "wg3xtf32", "atomic")) or (levels == 1 and scheme == "sequential" and mode == "wg1xtf32") else [])
    for levels in (0, 1, 2) for scheme in ("sequential", "atomic") for mode in WG_MODES
    if levels or scheme == "sequential"]


@pytest.mark.parametrize(("mode", "scheme", "levels"), WG_CASES)
def test_wg_kernels_exact(mode: str, scheme: str, levels: int) -> None:
    """Every variant of 0, 1 and 2 levels on WgLarge, with alpha and beta: exact, through TMA (the vector kernels)
    and plain loads (the scalar ones), every launch persistent over more tiles than the emulator's blocks."""
    loads = set()
    for m, k, n in SHAPES[levels]:
        A, B, C = _operands(m, k, n, seed=m + n)
        plan = make_plan("strassen", levels, m, k, n)
        program = plan_launches(plan, A, B, C, 2.0, -1.0, strategy=WG_STRATEGIES[WG], scheme=scheme, mode=mode)
        wg = [launch for launch in program.launches if launch.instance]
        loads |= {launch.instance.loads for launch in wg}
        assert all(launch.persistent and launch.shared == launch.instance.shared_bytes for launch in wg)
        if m > 256:
            assert any(launch.grid[0] > PERSISTENT_BLOCKS for launch in wg)  # a block runs several tiles
        got = C.copy()
        ENGINES["emu"](plan, A, B, got, 2.0, -1.0, strategy=WG, scheme=scheme, mode=mode)
        np.testing.assert_array_equal(got, 2.0 * (A.astype(np.float64) @ B) - C,
                                      err_msg=f"{mode} {scheme} {levels} {(m, k, n)}")
    assert loads == {"vector", "scalar"}


def test_the_launch_maps_whole_operands_and_places_terms_in_them() -> None:
    """A Wg launch of the TMA kernel carries tensor maps of the whole of A and B with the tile's boxes (k_S x m_S
    of A, n_S x k_S of B) and, atomic, of C with the tile reductions' 32 x 16 boxes in the 128-byte swizzle (a
    plain one leaves it unused); its terms are their blocks' places, row << 32 | column; an operand TMA cannot
    map (a row not a multiple of 16 bytes, an address not 16-byte aligned; C's too when atomic) makes it the
    scalar kernel, with unused maps."""
    A, B, C = _operands(256, 64, 256, seed=1)
    plan = make_plan("strassen", 1, 256, 64, 256)
    program = plan_launches(plan, A, B, C, 1.0, 0.0, strategy=WG_STRATEGIES[WG], scheme="atomic", mode="wg3xtf32")
    launch = next(launch for launch in program.launches if launch.instance)  # after the scale kernel (beta = 0)
    maps = [a for a in launch.args if isinstance(a, TensorMapArg)]
    assert [m.array is x for m, x in zip(maps, (A, B, C))] == [True, True, True]
    assert [(m.box, m.swizzle) for m in maps] == [((32, 128), 0), ((128, 32), 0), ((32, 16), 128)]
    assert launch.instance.reduces and launch.shared == WG_STRATEGIES[WG].smem_bytes(parts=2, reduce=True)
    plain = plan_launches(make_plan("strassen", 0, 256, 64, 256), A, B, C, 1.0, 0.0, strategy=WG_STRATEGIES[WG],
                          mode="wg3xtf32").launches[-1]
    plain_maps = [a for a in plain.args if isinstance(a, TensorMapArg)]
    assert [m.array is x for m, x in zip(plain_maps, (A, B, None))] == [True, True, True]
    assert not plain.instance.reduces and plain.instance.loads == "vector"
    wide = np.zeros((256, 259), np.float32)  # C's rows 259 floats apart: no map of C, so no TMA kernel when atomic
    odd_c = plan_launches(plan, A, B, wide[:, :256], 1.0, 0.0, strategy=WG_STRATEGIES[WG], scheme="atomic",
                          mode="wg1xtf32").launches[-1]
    assert odd_c.instance.loads == "scalar" and not odd_c.instance.reduces
    products = launch.args[-1]
    step = next(s for s in plan.steps if s.primitive.name == launch.products[0])
    view = step.a[-1][0]
    assert products["address"][0, len(step.a) - 1] == (view.row << 32) | view.col
    assert tma_able(A, 64) and not tma_able(A[:, 1:], 64) and not tma_able(A[:, :63], 63)
    odd = plan_launches(make_plan("strassen", 1, 256, 63, 256), A[:, :63].copy(), B[:63].copy(), C, 1.0, 0.0,
                        strategy=WG_STRATEGIES[WG], scheme="atomic", mode="wg1xtf32").launches[-1]
    assert odd.instance.loads == "scalar"
    assert [a.array for a in odd.args if isinstance(a, TensorMapArg)] == [None, None, None]


# ------------------------------------------------------------------ planted mistakes
_PRIMITIVE = "wgmma_primitive.cuh"
PLANTS = {  # the mistake (the text, what replaces it) and the levels of the product it spoils
    # the scalar kernel (odd shapes, -1): the TMA kernels' fence before a raw stage's release also orders the
    # operand stores before it
    "the loader does not fence its operands for wgmma": (
        "        fence_proxy_async();  // the operands", "        // (no fence)", -1),
    "the loader releases a raw stage to TMA without a proxy fence after reading it": (
        "            fence_proxy_async();\n            mbarrier_arrive(&s.raw_empty[slot]);",
        "            mbarrier_arrive(&s.raw_empty[slot]);", 0),
    "the loader sums the terms' fringe tiles without their masks": (
        "return ts.rows >= R && ts.cols >= C;", "return ts.rows > 0 && ts.cols > 0;", 1),
    "the loader reads a raw stage before it lands": (
        "            mbarrier_wait(&s.raw_full[slot], (raw / RAW_STAGES) & 1);\n", "", 0),
    "the operands are stored without the swizzle": (
        "swizzle_128b(128u * r + 16u * c) / 4", "(128u * r + 16u * c) / 4", 0),
    "the k-steps do not advance along the tile": (
        "desc(a0 + 8 * ks), desc(b0 + 8 * ks), PARTS == 2", "desc(a0), desc(b0 + 8 * ks), PARTS == 2", 0),
    "the consumers free a stage whose wgmma are in flight": (
        "          wgmma_wait<1>();\n", "          wgmma_wait<2>();\n", 0),
    "a term's sum forgets the terms before it": ("    if (j > 0) {\n      const Vec<float, 4> sum", "    if (j > 1) {\n"
                                                 "      const Vec<float, 4> sum", 1),
    # the atomic TMA kernels' tile reductions (1-level: interior tiles and fringes)
    "a staging box is not fenced before its reduction reads it": (
        "      fence_proxy_async();\n      syncwarp();\n      tma_store_2d", "      syncwarp();\n      tma_store_2d", 1),
    "a staging box is written again before its reduction has read it": (
        "      bulk_wait_read<1>(lane == 0);\n", "", 1),
    "a staging box is written without the swizzle": (
        "reinterpret_cast<char*>(tile) + swizzle_128b(offset)", "reinterpret_cast<char*>(tile) + offset", 1),
    "every warp's reduction lands on the first warp's rows": (
        "64 * consumer + 16 * (ct / 32);  // the warp's", "64 * consumer;  // the warp's", 1),
}

_PLANT_RUN = """
import sys
import numpy as np

from strassenbench.engines import ENGINES
from strassenbench.fused.emu import EmuFault
from strassenbench.plan import make_plan
levels = int(sys.argv[1])
rng = np.random.default_rng(0)
# several tiles a block, several slices a tile; -1: the GEMM at odd leading dimensions (the scalar kernel)
m, k, n = {0: (260, 96, 264), 1: (516, 136, 264), -1: (259, 95, 263)}[levels]
levels = max(levels, 0)
A, B = (rng.integers(-100, 101, s).astype(np.float32) for s in ((m, k), (k, n)))
got = np.zeros((m, n), np.float32)
try:
    ENGINES["emu"](make_plan("strassen", levels, m, k, n), A, B, got, 1.0, 0.0, strategy="WgLarge", mode="wg1xtf32",
                   scheme="atomic" if levels else "sequential")
except EmuFault as fault:
    print("fault:", fault)
print("exact" if np.array_equal(got, A.astype(np.float64) @ B) else "wrong")
"""


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_planted_pipeline_mistakes_fail_on_the_emulator(plant: str, tmp_path: Path) -> None:
    """The kernel sources with one mistake in the Wg pipeline ($STRASSENBENCH_KERNELS): a missing proxy fence (in
    the scalar kernel) or raw-stage wait, the operands' swizzle or k-step dropped, a stage freed while its wgmma
    read it, a sum that drops its first term, fringe tiles summed unmasked, a raw stage released to TMA without a
    proxy fence after its reads; in the tile reductions a staging box not fenced, rewritten before it is read or
    not swizzled, a box on the wrong rows: the result is wrong or the emulator faults. The unplanted sources, run
    alike, are exact."""
    old, new, levels = PLANTS[plant]
    assert_plant_fails(tmp_path, _PRIMITIVE, old, new, _PLANT_RUN, str(levels))


# ------------------------------------------------------------------ machine code
def test_the_wg_units_build_for_sm_90a_to_hgmma_and_tma_without_spills(tmp_path: Path) -> None:
    """The GEMM's and a 1-level product's units of both modes, built for sm_90 (their units for sm_90a): no spill
    and no stack; every kernel's main loop issues m64n128k8 HGMMA (4 a slice in 1xTF32, 12 in 3xTF32) in at most 90
    (210) instructions a slice (85 and 203 to 206 with nvcc 13.0), and the kernel gives
    registers to the consumers (setmaxnreg: the loader down to 104, the consumers up to 200); the TMA kernels load
    with UTMALDG, the scalar ones do not; the atomic TMA kernels reduce into C with UTMAREDG, the others do not.
    An sm_80 build leaves the family out."""
    from strassenbench.fused.build import build
    from strassenbench.fused.modules import BuildError
    from strassenbench.fused.toolchain import find_tool

    out = tmp_path / "build"
    frame = build(["sm_90"], out, dtypes=("float32",), strategies=(WG,), counts=((1, 1, 1), (2, 2, 2)), cutlass=False)
    assert len(frame) == len(instances(dtypes=("float32",), strategies=(WG,), counts=((1, 1, 1), (2, 2, 2))))
    assert (frame[["spill_stores", "spill_loads", "stack_bytes"]] == 0).all().all()
    for unit in sorted(out.glob("strassen_sm_90_wg*.cubin")):
        sass = subprocess.run([find_tool("cuobjdump"), "--dump-sass", str(unit)], capture_output=True, text=True,
                              check=True).stdout
        for kernel, code in parse_sass(sass).items():
            if not kernel.startswith("strassen_"):  # the helper kernels every module carries
                continue
            opcodes = [ins.opcode for ins in code]
            parts = 2 if "wg3xtf32" in kernel else 1
            loop = mainloop_metrics(code)  # the consumers' slice loop: its wgmma, waits and arrivals (3xTF32: 64 FADD)
            assert loop["loop_hmma"] == 4 * (1 if parts == 1 else 3), kernel
            assert loop["loop_instructions"] <= (90 if parts == 1 else 210), (kernel, loop["loop_instructions"])
            assert "HGMMA.64x128x8.F32.TF32" in opcodes, kernel
            assert any(ins.opcode.startswith("USETMAXREG.DEALLOC") and "0x68" in ins.operands for ins in code)
            assert any(ins.opcode.startswith("USETMAXREG.TRY_ALLOC") and "0xc8" in ins.operands for ins in code)
            assert any(op.startswith("UTMALDG") for op in opcodes) == (not kernel.endswith("_scalar")), kernel
            reduces = "_atomic" in kernel and not kernel.endswith("_scalar")
            assert any(op.startswith("UTMAREDG") for op in opcodes) == reduces, kernel
    assert (frame["smem_bytes"] == 0).all()  # their tiles are the launch's dynamic shared memory
    with pytest.raises(BuildError, match="need sm_90 only, not sm_80"):
        build(["sm_80"], tmp_path / "b80", dtypes=("float32",), strategies=(WG,), counts=((1, 1, 1),), cutlass=False)


# ------------------------------------------------------------------ the baseline
def test_the_cutlass_sm90_baseline_is_the_familys_and_targets_sm_90a_only() -> None:
    """cutlass-tf32-sm90 runs CUTLASS's sm_90 TMA warp-specialized TF32 GEMM (the wgmma family's baseline, in its
    1xTF32 mode), built for sm_90a in sm_90's build and for no other architecture; the model predicts it as our
    wgmma GEMM."""
    from strassenbench.fused.cutlass import BASELINES, baseline_impl
    from strassenbench.impls import family_impls, get_impl
    from strassenbench.model.pick import _AS_MODELED

    spec = BASELINES["wg1xtf32"]
    assert baseline_impl("wg1xtf32") == "cutlass-tf32-sm90" and baseline_impl("3xtf32") == "cutlass-3xtf32"
    assert get_impl("cutlass-tf32-sm90").mode == "wg1xtf32" and "cutlass-tf32-sm90" in family_impls(WGMMA)
    assert [spec.builds_for(a) for a in ("sm_80", "sm_90", "sm_100")] == [False, True, False]
    assert spec.arch_suffix == "a" and _AS_MODELED["cutlass-tf32-sm90"] == "gemm-tf32-wgmma"


@pytest.mark.slow
def test_the_cutlass_sm90_baseline_builds_to_hgmma_and_tma(tmp_path: Path) -> None:
    """Built from the nvidia-cutlass headers with the fused kernels' nvcc (about a minute and a half): its row has
    no spill, HGMMA in its main loop and its source name; the library and cubin are there."""
    from strassenbench.fused.cutlass import BASELINES, build_baseline
    from strassenbench.fused.modules import toolchain_for

    built = build_baseline("sm_90", tmp_path, toolchain_for("sm_90"), baseline=BASELINES["wg1xtf32"])
    assert built is not None
    row, rebuilt = built
    assert rebuilt and row["source"] == "cutlass-tf32-sm90" and row["spill_stores"] == 0
    assert row["loop_hmma"] > 0 and row["loop_mma_macs"] > 0
    assert (tmp_path / "cutlasstf32sm90_sm_90.cubin").is_file() and (tmp_path / "libsb_cutlasstf32sm90_sm_90.so").is_file()


@pytest.mark.parametrize("mode", WG_MODES)
def test_the_numpy_engine_is_the_wg_kernels_arithmetic_bit_for_bit(mode: str) -> None:
    """Random [0, 1) operands (every low bit in play): the NumPy engine's product in a wgmma mode (TF32 rounding or
    split, one staged sum per slice of 32 with its small products first) equals the Wg GEMM's on the emulator bit
    for bit; the order matters (smalls interleaved with the big products per k-step gives another result)."""
    from strassenbench.tensorcore import matmul

    rng = np.random.default_rng(3)
    m, k, n = 130, 100, 136
    A, B = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    plan = make_plan("strassen", 0, m, k, n)
    got = {}
    for engine, options in (("numpy", {}), ("emu", {"strategy": WG})):
        got[engine] = np.zeros((m, n), np.float32)
        ENGINES[engine](plan, A, B, got[engine], 1.0, 0.0, mode=mode, **options)
    np.testing.assert_array_equal(got["numpy"], got["emu"])
    if mode == "wg3xtf32":
        assert not np.array_equal(matmul(A, B, mode, stage_k=32), got["emu"])
