"""The kernel families, one record each, and their run modes: everything else derives from these records.

A *family* is a set of fused kernels sharing one primitive (kernels/<primitive>): the paper's SIMT kernels
(figure tab:gpu_block_size), the TF32 tensor-core kernels on mma.sync (beyond the paper) and the FP64
tensor-core (DMMA) kernels. A *mode* is what a family's kernels compute in: SIMT in the user's dtype, 1xTF32
or 3xTF32 (CUTLASS's big/small split), or DMMA. Implementations (strassenbench.impls), run options, the build
and the emulator (strassenbench.fused), the model, pick and the report read what a family or mode does from
here: its strategies, defaults, dtypes, architectures, instance macro and fields, names, labels and model
terms. A new family is a record here, its strategy table (strassenbench.strategies) and its kernel headers.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from .strategies import (DMMA_STRATEGIES, STRATEGIES, TENSOR_STRATEGIES, WG_STRATEGIES, DmmaStrategy, Strategy,
                         TensorStrategy, WgStrategy)

__all__ = ["Family", "Mode", "FAMILIES", "MODES", "SIMT", "TF32", "DMMA", "WGMMA", "family_of", "mode_of",
           "mode_by_suffix", "tensor_modes", "by_accuracy", "strategy_family", "get_strategy", "counterpart",
           "ALL_STRATEGIES"]

SIMT = "simt"  # the paper's mode and family: CUDA cores in the user's dtype
TF32, DMMA = "tf32", "dmma"  # the tensor-core families: TF32 on mma.sync (beyond the paper), FP64 (DMMA)
WGMMA = "wgmma"  # TF32 on Hopper's warpgroup tensor cores (wgmma, sm_90a; beyond the paper)

# The fields of each family's instance macro (kernels/*.cuh SB_*_INSTANCE), in order, as Instance.field reads
# them: a strategy's attribute, or one of the instance's own (name, ctype, min_blocks, counts, atomic, batch,
# vector, reread, flight, parts).
_WARP_GRID_FIELDS = ("name", "threads", "min_blocks", "m_S", "n_S", "k_S", "warps_m", "warps_n", "counts",
                     "atomic", "batch", "vector")


@dataclass(frozen=True)
class Family:
    """One kernel family: its strategies (strassenbench.strategies), per-engine default strategy, what it
    computes, where it builds, how the build and the emulator instantiate it, and how the model counts it."""

    name: str  # as in kernel names' families and messages
    hardware: str  # what its products run on, in messages and the report
    what: str  # before "strategy" in messages: "" for SIMT, "tensor-core ", "FP64 tensor-core "
    strategies: Mapping[str, Strategy | TensorStrategy | DmmaStrategy]
    defaults: Mapping[str, str]  # engine -> default strategy: the emulator's smallest, the GPU's
    cutlass_tile: str  # our strategy beside which its CUTLASS baseline builds (strassenbench.fused.cutlass)
    computes: str | None  # the kernels' dtype (None: the user's, float32 or float64)
    min_arch: int  # the oldest architecture (sm_XY as XY) its kernels build for
    primitive: str  # kernels/ header of its per-thread-block product
    macro: str  # its instance macro
    fields: tuple[str, ...]  # the macro's arguments (Instance.field)
    peak: str  # the GPUSpec attribute of its products' rate (strassenbench.model.gpus)
    itemsize: int | None  # bytes of the kernels' elements (None: the user's dtype's)
    max_arch: int | None = None  # the newest architecture its kernels build for (None: any from min_arch on)
    arch_suffix: str = ""  # what its units' target adds to the build's architecture: "a" (sm_90a) for wgmma
    head_bytes: int | None = None  # kernel parameters before sb::Products (None: 16 + two scalars of its dtype)
    own_cublas: bool = True  # cuBLAS in its modes (strassenbench.impls); wgmma's is the TF32 family's, the same

    @property
    def tensor(self) -> bool:
        """On tensor cores (TF32, DMMA or wgmma)."""
        return self.name != SIMT

    def builds_for(self, arch: str) -> bool:
        """Whether its kernels build for ``arch`` (sm_XY): from min_arch to max_arch."""
        number = int(arch.removeprefix("sm_").rstrip("a"))
        return number >= self.min_arch and (self.max_arch is None or number <= self.max_arch)

    def target(self, arch: str) -> str:
        """The architecture its units compile for in a build for ``arch``: sm_90a for wgmma in sm_90's."""
        return arch + self.arch_suffix

    @property
    def modes(self) -> tuple[str, ...]:
        """Its run modes (MODES), in MODES' order."""
        return tuple(m.name for m in MODES.values() if m.family == self.name)

    @property
    def strategy_type(self) -> type:
        """The class of its strategies (Strategy, TensorStrategy, DmmaStrategy)."""
        return type(next(iter(self.strategies.values())))


@dataclass(frozen=True)
class Mode:
    """A run mode: what a family's kernels compute in, and how its implementations are named and labelled."""

    name: str  # RunOptions.mode, Impl.mode, Instance.mode; a tensor-core mode is also a kernel name's precision
    family: str  # the name of its Family
    suffix: str  # of its implementations' names: gemm-<suffix> ('' for SIMT: gemm)
    label: str  # after an implementation's label: "GEMM 3xTF32 (ours)"
    precision: str  # the precision the report's winners and accuracy tables name it by
    dtypes: tuple[str, ...]
    parts: int = 1  # TF32 parts per operand element the loader writes: 2 for 3xTF32's big and small
    products: int = 1  # tensor-core products per product: 3 for 3xTF32 (a_small b_big, a_big b_small, a_big b_big)
    unit_roundoff: float | None = None  # of its products (the error bound's u); None: the dtype's
    blas: str = "fp32"  # cuBLAS's compute type for its baseline (cublasGemmEx): fp32, or tf32
    line: str = "-"  # the report's line style for its winners
    stage_k: int = 8  # 3xTF32: the k of one staged sum (strassenbench.tensorcore.matmul): a k-step, a Wg slice's 32
    smalls_first: bool = False  # 3xTF32: a stage's small products all before its big ones (the Wg kernels)

    @property
    def tensor(self) -> bool:
        """On tensor cores (TF32 or DMMA): every mode but SIMT."""
        return self.family != SIMT

    @property
    def tf32(self) -> bool:
        """On the TF32 tensor cores (float32 operands rounded or split to TF32): mma.sync's or wgmma's."""
        return self.family in (TF32, WGMMA)

    @property
    def staged(self) -> bool:
        """Its tensor-core products are summed per slice before the accumulator (3xTF32's staged
        accumulation; strassenbench.tensorcore.matmul)."""
        return self.parts > 1

    @property
    def kernel_family(self) -> Family:
        return FAMILIES[self.family]

    @property
    def single(self) -> str:
        """The mode of one product per product in its family (3xTF32's 1xTF32; itself otherwise)."""
        return FAMILIES[self.family].modes[0]


_FAMILIES = (
    Family(SIMT, "CUDA cores", "", STRATEGIES, {"emu": "Small", "cuda": "Huge"}, "Huge", None, 70,
           "strassen.cuh", "SB_STRASSEN_INSTANCE",
           ("name", "ctype", "threads", "min_blocks", "m_S", "n_S", "k_S", "m_R", "n_R", "warp_m", "warp_n",
            "counts", "atomic", "batch", "vector", "reread", "flight"), "simt", None),
    Family(TF32, "TF32 tensor cores", "tensor-core ", TENSOR_STRATEGIES, {"emu": "TcSmall", "cuda": "TcHuge"},
           "TcHuge", "float32", 80, "tensorcore_primitive.cuh", "SB_TENSORCORE_INSTANCE",
           (*_WARP_GRID_FIELDS, "parts", "stages"), "tf32_mma_sync_flops", 4),
    Family(DMMA, "FP64 tensor cores (DMMA)", "FP64 tensor-core ", DMMA_STRATEGIES,
           {"emu": "DmmaSmall", "cuda": "DmmaLarge"}, "DmmaHuge", "float64", 80, "dmma_primitive.cuh",
           "SB_DMMA_INSTANCE", _WARP_GRID_FIELDS, "fp64_tensor_flops", 8),
    # wgmma exists on sm_90a only (PTX ISA, "wgmma.mma_async": requires sm_90a); Blackwell has its own MMA.
    Family(WGMMA, "TF32 tensor cores (wgmma)", "wgmma ", WG_STRATEGIES, {"emu": "WgLarge", "cuda": "WgLarge"},
           "WgLarge", "float32", 90, "wgmma_primitive.cuh", "SB_WG_INSTANCE",
           ("name", "threads", "m_S", "n_S", "k_S", "counts", "atomic", "batch", "vector", "parts", "raw_stages",
            "op_stages", "smem"), "tf32_flops", 4, max_arch=90, arch_suffix="a", head_bytes=448, own_cublas=False),
)

# Ordered as the kernels, implementations and tables list them: SIMT, 1xTF32, 3xTF32, DMMA, then wgmma's 1xTF32
# and 3xTF32 (the same arithmetic as mma.sync's modes, on sm_90a's warpgroup tensor cores).
# The unit roundoff of the TF32 modes (strassenbench.accuracy): 1xTF32 rounds every operand (and every operand
# sum) to TF32's 10 explicit mantissa bits, u = 2^-11. 3xTF32 drops a_small b_small and the part of each operand
# below its small TF32 part, each at most 2^-22 of the product, before FP32 accumulation: u = 2^-21 covers both
# and the accumulation's 2^-24 (a 3xTF32 product is a few float32 roundings from exact).
MODES: Mapping[str, Mode] = MappingProxyType({mode.name: mode for mode in (
    Mode(SIMT, SIMT, "", "", "float32", ("float32", "float64")),
    Mode("1xtf32", TF32, "tf32", "TF32", "1xTF32", ("float32",), unit_roundoff=2.0**-11, blas="tf32",
         line=":"),
    Mode("3xtf32", TF32, "3xtf32", "3xTF32", "3xTF32", ("float32",), parts=2, products=3,
         unit_roundoff=2.0**-21, line="--"),
    Mode(DMMA, DMMA, "dmma", "DMMA", "FP64", ("float64",)),
    Mode("wg1xtf32", WGMMA, "tf32-wgmma", "TF32 wgmma", "1xTF32", ("float32",), unit_roundoff=2.0**-11,
         blas="tf32", line=":"),
    Mode("wg3xtf32", WGMMA, "3xtf32-wgmma", "3xTF32 wgmma", "3xTF32", ("float32",), parts=2, products=3,
         unit_roundoff=2.0**-21, line="--", stage_k=32, smalls_first=True),
)})

FAMILIES: Mapping[str, Family] = MappingProxyType({family.name: family for family in _FAMILIES})

ALL_STRATEGIES: Mapping[str, Strategy | TensorStrategy | DmmaStrategy | WgStrategy] = MappingProxyType(
    {name: s for family in FAMILIES.values() for name, s in family.strategies.items()})


def mode_of(name: str) -> Mode:
    """The mode record of ``name``; ValueError naming the modes for an unknown one."""
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown mode '{name}' (choose from {', '.join(MODES)})") from None


def family_of(mode: str) -> Family:
    """The family whose kernels run ``mode``."""
    return FAMILIES[mode_of(mode).family]


def tensor_modes(family: str | None = None) -> tuple[str, ...]:
    """The tensor-core modes (of ``family`` only, when given)."""
    return tuple(m.name for m in MODES.values() if m.tensor and family in (None, m.family))


def by_accuracy(dtype: str) -> tuple[str, ...]:
    """The modes that compute ``dtype``, most accurate first (the dtype's own unit roundoff before any mode's)."""
    return tuple(sorted((m.name for m in MODES.values() if dtype in m.dtypes),
                        key=lambda m: MODES[m].unit_roundoff or 0.0))


def mode_by_suffix(name: str) -> tuple[str, str]:
    """(base, mode) of an implementation name: ``gemm-3xtf32`` is (gemm, 3xtf32), ``gemm`` is (gemm, simt)."""
    for mode in MODES.values():
        if mode.suffix and name.endswith(f"-{mode.suffix}"):
            return name[: -len(mode.suffix) - 1], mode.name
    return name, SIMT


def strategy_family(strategy: Strategy | TensorStrategy | DmmaStrategy) -> Family:
    """The family a strategy belongs to."""
    return next(f for f in FAMILIES.values() if f.strategies.get(strategy.name) is strategy)


def get_strategy(name: str, mode: str = SIMT) -> Strategy | TensorStrategy | DmmaStrategy:
    """The strategy ``name`` of the family that runs ``mode``; ValueError naming the family's strategies."""
    family = family_of(mode)
    try:
        return family.strategies[name]
    except KeyError:
        raise ValueError(f"unknown {family.what}strategy '{name}' (choose from {', '.join(family.strategies)})") \
            from None


def counterpart(name: str, mode: str) -> str:
    """The strategy of ``mode``'s family in the role of a SIMT one (a sweep's --strategy applies to every family):
    the one of the closest thread-block area; a name of the family stands for itself."""
    table = family_of(mode).strategies
    if name in table:
        return name
    s = get_strategy(name)
    return min(table.values(), key=lambda t: abs(t.m_S * t.n_S - s.m_S * s.n_S)).name
