"""Every kernel instantiation the plans need, derived from the algebra (never typed by hand).

One instantiation per (strategy, dtype, W_A x W_B x W_C, write mode, loads): the strategies of figure
tab:gpu_block_size, the operand counts of the variants the plans have (by default every variant of 1- and
2-level Strassen, figure tab:perfeq_level2, plus the plain GEMM (1, 1, 1); ``plan_counts`` for any other
algorithm), plain or atomicAdd write-back, and vector (128-bit) or scalar global loads (the scalar kernel
serves terms that are not aligned to the vector loads).

A variant runs on the kernel whose counts are its own rounded up to powers of two (``kernel_counts``); the
launch fills the extra terms with empty blocks (zero extent, coefficient 0), whose loads and stores are
predicated off: no memory traffic, one FFMA of zeros per loaded element. Strassen's counts are powers of
two, so its kernels are exactly the paper's; the 13 algorithms of algorithms/ at one and two levels have
697 distinct counts but 219 kernels, which keeps a build of all of them (and the CPU emulator) in reach.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import env
from ..algebra.levels import check_levels
from ..algebra.primitives import variant_counts
from ..families import ALL_STRATEGIES, FAMILIES, MODES, SIMT, Family, strategy_family
from ..strategies import STRATEGIES, DmmaStrategy, Strategy, TensorStrategy, WarpGrid, WgStrategy

__all__ = [
    "PARAM_BYTES",
    "products_dtype",
    "max_batch",
    "FUSED_ALGORITHM",
    "FUSED_LEVELS",
    "WRITE_MODES",
    "LOADS",
    "load_widths",
    "write_width",
    "Instance",
    "kernels_dir",
    "kernel_counts",
    "operand_counts",
    "plan_counts",
    "presum_counts",
    "instances",
    "render",
    "scale_kernel",
    "presum_kernel",
    "PRESUM_TERMS",
    "PRESUM_BATCH",
    "BLOCK_KERNEL",
    "helper_kernels",
    "parse_instance",
    "sources_digest",
]

FUSED_ALGORITHM = "strassen"  # the default build: the paper's kernels (others are built per plan: plan_counts)
FUSED_LEVELS = (1, 2)  # 1-level and direct 2-level (paper, Sec. s:gpu_multi)
WRITE_MODES = ("plain", "atomic")
LOADS = ("vector", "scalar")
_SHORT = {"float32": "f32", "float64": "f64"}
_CTYPE = {"float32": "float", "float64": "double"}
# The paper's Huge runs 2 blocks of 256 threads per SM: at most 128 registers per thread in float32. Smaller
# blocks are not capped: a 128-register cap on the 64-thread Large made most of its kernels spill on sm_80.
# A capped kernel that spills under the cap is rebuilt uncapped (strassenbench.fused.build): no kernel spills.
HUGE_BLOCK_THREADS, HUGE_REGISTER_CAP = 256, 128


# The kernel parameters: lda, ldb, ldc, bk (4 int32), alpha and beta, and sb::Products (kernels/tile_loader.cuh),
# within the 4 KiB every CUDA driver accepts (kernels/instances.cuh checks the same bound).
PARAM_BYTES = 4096


def products_dtype(dtype: str, terms: int, batch: int) -> np.dtype:
    """The layout of sb::Products<T, terms, batch>: per product and term the address of the term's block,
    its rows and columns, and its coefficient (C struct layout, as nvcc and g++ lay it out)."""
    shape = (batch, terms)
    return np.dtype([("address", np.uint64, shape), ("rows", np.int32, shape), ("cols", np.int32, shape),
                     ("coeff", np.dtype(dtype), shape)], align=True)


@lru_cache(maxsize=None)
def max_batch(dtype: str, terms: int, head: int | None = None) -> int:
    """Z: the most products one launch carries in its parameters (a larger batch takes several launches);
    0 when not even one product's terms fit. ``head``: the parameters' bytes before sb::Products (a family's
    head_bytes; default lda, ldb, ldc, bk, alpha and beta)."""
    fixed = 16 + 2 * np.dtype(dtype).itemsize if head is None else head
    z = 0
    while fixed + products_dtype(dtype, terms, z + 1).itemsize <= PARAM_BYTES:
        z += 1
    return z


def kernels_dir() -> Path:
    """The CUDA sources: $STRASSENBENCH_KERNELS (a folder with instances.cuh, strassenbench.env), else kernels/
    beside the package (an editable install)."""
    default = Path(__file__).resolve().parents[2] / "kernels"
    return env.source_folder("STRASSENBENCH_KERNELS", "the CUDA kernel sources", "instances.cuh") or default


@lru_cache(maxsize=4096)
def kernel_counts(counts: tuple[int, int, int]) -> tuple[int, int, int]:
    """The W_A x W_B x W_C of the kernel that runs a variant of these counts: each rounded up to a power of 2."""
    return tuple(1 << (w - 1).bit_length() for w in counts)  # type: ignore[return-value]


@lru_cache(maxsize=None)
def plan_counts(algorithm: str, levels: int) -> tuple[tuple[int, int, int], ...]:
    """The kernels (their W_A x W_B x W_C) that ``levels`` levels of ``algorithm`` (a name or a mixed spec)
    run on, sorted; the GEMM's (1, 1, 1) at 0 levels."""
    if levels == 0:
        return ((1, 1, 1),)
    check_levels(algorithm, levels)  # within MAX_PRODUCTS: counted from the levels' nonzeros, not the products
    return tuple(sorted({kernel_counts(w) for w in variant_counts(algorithm, levels)}))


@lru_cache(maxsize=None)
def presum_counts(algorithm: str, levels: int) -> tuple[tuple[int, int, int], ...]:
    """The kernels the presum scheme runs ``levels`` levels of ``algorithm`` on (strassenbench.fused.launch): one
    term of A and of B (a sum of several comes from the workspace), the variant's W_C, sorted."""
    return tuple(sorted({kernel_counts((1, 1, c)) for *_, c in plan_counts(algorithm, levels)}))


@lru_cache(maxsize=None)
def operand_counts() -> tuple[tuple[int, int, int], ...]:
    """The default kernels' W_A x W_B x W_C: the GEMM and every variant of 1- and 2-level Strassen, sorted."""
    counts = set(plan_counts(FUSED_ALGORITHM, 0))
    for levels in FUSED_LEVELS:
        counts.update(plan_counts(FUSED_ALGORITHM, levels))
    return tuple(sorted(counts))


@lru_cache(maxsize=None)
def default_level(counts: tuple[int, int, int]) -> int:
    """The levels of Strassen whose plan first runs this default kernel: 0 (the GEMM), 1 or 2."""
    for levels in (0, *FUSED_LEVELS):
        if counts in plan_counts(FUSED_ALGORITHM, levels):
            return levels
    raise ValueError(f"no default kernel has W_A x W_B x W_C = {counts}")


@dataclass(frozen=True)
class Instance:
    strategy: Strategy | TensorStrategy | DmmaStrategy | WgStrategy
    dtype: str
    counts: tuple[int, int, int]
    write_mode: str
    loads: str = "vector"
    capped: bool = True  # False: built without the register cap (it spilled under it)
    reread: bool = False  # True: its terms read afresh every interior slice (it spilled otherwise)
    mode: str = SIMT  # a mode of the strategy's family (strassenbench.families), in one of the mode's dtypes
    flight: int = 16  # SIMT: the registers of raw loads in flight on the interior path (mainloop.cuh's FLIGHT)

    def __post_init__(self) -> None:
        family = strategy_family(self.strategy)
        if self.mode not in family.modes or self.dtype not in MODES[self.mode].dtypes:
            raise ValueError(f"no {self.mode} kernel of strategy {self.strategy.name} in {self.dtype}")

    @property
    def family(self) -> Family:
        return FAMILIES[MODES[self.mode].family]

    @property
    def tensor(self) -> bool:
        """A tensor-core kernel: TF32 (float32) or DMMA (float64)."""
        return self.family.tensor

    @property
    def precision(self) -> str:
        """What the kernel computes in: its dtype (SIMT) or its tensor-core mode."""
        return self.mode if self.tensor else self.dtype

    @property
    def name(self) -> str:
        a, b, c = self.counts
        suffix = "" if self.loads == "vector" else "_scalar"
        short = self.mode if self.tensor else _SHORT[self.dtype]
        return f"strassen_{short}_{self.strategy.name.lower()}_w{a}x{b}x{c}_{self.write_mode}{suffix}"

    @property
    def min_blocks(self) -> int:
        """__launch_bounds__ minimum blocks per SM: 2 for float32 kernels with blocks of 256 threads (at most
        128 registers, as the paper's "2 active blocks"), unless the kernel spilled under that cap and is
        built uncapped; 1 (ptxas chooses) otherwise."""
        if self.capped and self.dtype == "float32" and self.strategy.threads >= HUGE_BLOCK_THREADS:
            return max(1, 65536 // (self.strategy.threads * HUGE_REGISTER_CAP))
        return 1

    @property
    def batch(self) -> int:
        """Z, the products one launch of this kernel can carry (blockIdx.z < Z; the Wg kernels' launch batch)."""
        return max_batch(self.dtype, sum(self.counts), self.family.head_bytes)

    @property
    def shared_bytes(self) -> int:
        """The dynamic shared memory its launches ask for: the Wg kernels' (WgStrategy.smem_bytes), else 0 (the
        other families' tiles are static)."""
        if not isinstance(self.strategy, WgStrategy):
            return 0
        return self.strategy.smem_bytes(parts=MODES[self.mode].parts, reduce=self.reduces)

    @property
    def reduces(self) -> bool:
        """A Wg kernel that writes C by tile reductions (the atomic TMA kernels: sb::WgKernel::kReduce)."""
        return isinstance(self.strategy, WgStrategy) and self.write_mode == "atomic" and self.loads == "vector"

    def field(self, name: str) -> tuple[str, ...]:
        """The argument(s) ``name`` of the family's instance macro (strassenbench.families.Family.fields): the
        instance's own, else the strategy's attribute."""
        own = {"name": (self.name,), "ctype": (_CTYPE[self.dtype],), "min_blocks": (self.min_blocks,),
               "counts": self.counts, "atomic": (self.write_mode == "atomic",), "batch": (self.batch,),
               "vector": (self.loads == "vector",), "reread": (self.reread,), "flight": (self.flight,),
               "parts": (MODES[self.mode].parts,),
               "smem": (self.shared_bytes,)}
        if name == "raw_stages":
            return (str(self.strategy.raw_stages(MODES[self.mode].parts, self.reduces)),)
        values = own[name] if name in own else (getattr(self.strategy, name),)
        return tuple(str(v).lower() if isinstance(v, bool) else str(v) for v in values)

    def source_line(self) -> str:
        """The family's instance macro with this instance's fields (kernels/instances.cuh)."""
        return f"{self.family.macro}({', '.join(v for f in self.family.fields for v in self.field(f))})"


def scale_kernel(dtype: str) -> str:
    return f"scale_{_SHORT[dtype]}"


# The presum kernel (kernels/presum.cuh, the presum scheme's operand sums): at most PRESUM_TERMS inputs per
# sum and PRESUM_BATCH sums per launch, in one sb::Products<T, PRESUM_TERMS + 1, PRESUM_BATCH> (term 0 the
# output); kernels/instances.cuh has the same numbers.
PRESUM_TERMS, PRESUM_BATCH = 16, 8


def presum_kernel(dtype: str) -> str:
    return f"presum_{_SHORT[dtype]}"


# nvbench's blocking kernel (kernels/blocking.cuh), which the GPU timer enqueues before every timed call.
BLOCK_KERNEL = "block_stream"


def helper_kernels(selected: tuple[Instance, ...]) -> tuple[str, ...]:
    """The kernels every module of ``selected`` carries beside them: the scale kernel (beta applied once,
    strassenbench.fused.launch) and the presum kernel of each dtype, and the blocking kernel."""
    dtypes = sorted({i.dtype for i in selected})
    return (*(scale_kernel(d) for d in dtypes), *(presum_kernel(d) for d in dtypes), BLOCK_KERNEL)


_NAME = re.compile(rf"strassen_(?P<dtype>{'|'.join([*_SHORT.values(), *(m for m in MODES if MODES[m].tensor)])})_"
                   r"(?P<strategy>[a-z]+)_w(?P<a>\d+)x(?P<b>\d+)x(?P<c>\d+)_(?P<mode>plain|atomic)(?P<scalar>_scalar)?")


def parse_instance(name: str) -> Instance | None:
    """The instantiation a kernel name such as strassen_f32_small_w2x2x2_plain names (Instance.name read back);
    None for the scale and blocking kernels."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    strategy = next((s for s in ALL_STRATEGIES.values() if s.name.lower() == m["strategy"]), None)
    mode = m["dtype"] if m["dtype"] in MODES else SIMT
    dtype = MODES[mode].dtypes[0] if mode != SIMT else next(d for d, short in _SHORT.items() if short == m["dtype"])
    if strategy is None:
        return None
    try:
        return Instance(strategy, dtype, (int(m["a"]), int(m["b"]), int(m["c"])), m["mode"],
                        "scalar" if m["scalar"] else "vector", mode=mode)
    except ValueError:  # a strategy of another family
        return None


def instances(
    dtypes: tuple[str, ...] = ("float32", "float64"),
    strategies: tuple[str, ...] = tuple(STRATEGIES),
    counts: tuple[tuple[int, int, int], ...] | None = None,
    write_modes: tuple[str, ...] = WRITE_MODES,
    loads: tuple[str, ...] = LOADS,
    modes: tuple[str, ...] | None = None,
) -> tuple[Instance, ...]:
    """The instantiations of each family's strategies among ``strategies`` (strassenbench.families), in each of
    its modes (the tensor-core ones among ``modes``, default all) and each of their dtypes among ``dtypes``: the
    SIMT kernels in every dtype asked for, the tensor-core ones in the dtype they compute."""
    counts = operand_counts() if counts is None else counts
    return tuple(
        Instance(family.strategies[s], d, w, write, load, mode=mode)
        for family in FAMILIES.values() for d in dtypes for s in strategies if s in family.strategies
        for mode in family.modes if d in MODES[mode].dtypes and (not family.tensor or modes is None or mode in modes)
        for w in counts for write in write_modes for load in loads
    )


def vec_width(itemsize: int, n: int) -> int:
    """The widest vector of elements, at most 128 bits, that divides n (kernels/platform.cuh vec_width)."""
    w = 16 // itemsize
    while w > 1 and n % w:
        w //= 2
    return w


def load_widths(strategy: Strategy | TensorStrategy, dtype: str) -> tuple[int, int]:
    """(V_A, V_B): elements per global load of the vector kernels' A and B tiles, as kernels/strassen.cuh
    (LoadWidths) computes them: the widest vector, at most 128 bits, that divides a thread's share of a row."""
    itemsize, s = np.dtype(dtype).itemsize, strategy
    return (vec_width(itemsize, min(s.m_S * s.k_S // s.threads, s.k_S)),
            vec_width(itemsize, min(s.k_S * s.n_S // s.threads, s.n_S)))


def write_width(strategy: Strategy | WarpGrid, dtype: str) -> int:
    """Columns of C the float32 vector kernels' atomic write-back reduces at a time (kernels/epilogue.cuh), which
    its C terms are aligned to: those side by side in a thread's accumulator (kVb), the widest vector that
    divides n_R for the SIMT tiles (kernels/mainloop.cuh WarpTile), 2 for the mma fragments' column pairs
    (MmaWarpTile). 1 in float64, which reduces element by element (PTX has no vector reduction of f64)."""
    if dtype != "float32":
        return 1
    return vec_width(np.dtype(dtype).itemsize, strategy.n_R) if isinstance(strategy, Strategy) else 2


def render(selected: tuple[Instance, ...]) -> str:
    """The translation unit that instantiates ``selected`` (and helper_kernels: scale, blocking)."""
    lines = [
        "// Generated by strassenbench.fused.instances; do not edit.",
        '#include "instances.cuh"',
        "",
        *(f"SB_SCALE_INSTANCE({scale_kernel(d)}, {_CTYPE[d]})" for d in sorted({i.dtype for i in selected})),
        *(f"SB_PRESUM_INSTANCE({presum_kernel(d)}, {_CTYPE[d]})" for d in sorted({i.dtype for i in selected})),
        f"SB_BLOCK_INSTANCE({BLOCK_KERNEL})",
        *(i.source_line() for i in selected),
        "",
    ]
    return "\n".join(lines)


def sources_digest(*extra: str) -> str:
    """A hash of every file under kernels/ and of ``extra`` (source text, compiler, flags)."""
    h = hashlib.sha256()
    root = kernels_dir()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in {".cuh", ".hpp", ".cpp", ".cu"}):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    for text in extra:
        h.update(text.encode())
    return h.hexdigest()
