"""The paper's performance model (Sec. s:analysis), for GEMM, every variant, and whole implementations.

Per thread block of strategy (m_S, n_S, k_S, m_R, n_R) and a variant with operand counts (W_A, W_B, W_C),
for an inner dimension k (rounded up to a multiple of k_S):

    N_flop = 2 m_S n_S k + (W_A - 1) m_S k + (W_B - 1) n_S k + (W_C - 1) m_S n_S      Eq. (eqn:n_flop)
    N_gmop = W_A m_S k + W_B n_S k + W_C m_S n_S                                     Eqs. (eqn:n_gmop, AB_gr_rs, C_rg)
    N_smop = t m_R k + m_S k + t n_R k + n_S k,  t = m_S n_S / (m_R n_R)             Eqs. (eqn:n_smop, AB_sr)

and with #blocks = #SM x active blocks per SM and ceil(m/m_S) ceil(n/n_S) tiles in ceil(tiles/#blocks) waves:

    T_flop = waves #blocks N_flop / tau_flop                                         Eq. (eqn:t_flop)
    T_smop = waves sizeof #blocks N_smop / tau_smop                                  Eq. (eqn:t_smop)
    T_gmop = tiles sizeof N_gmop / tau_gmop                                          Eq. (eqn:t_gmop)
    T      = max(T_flop, T_gmop, T_smop)

and, beyond the paper, T_issue (the main loop's issue slots, strassenbench.model.issue), in the maximum by
default (model "issue"), and T_dram and T_l2 (global traffic through the L2, strassenbench.model.memory), in
place of T_gmop in model "l2" (strassenbench.model.terms.MODELS). Every term is reported whichever model
bounds the time.

Implementations compose kernels: fused L-level Strassen runs its R^L products one after another (as the
paper's model does, without task parallelism); the workspace-based reference adds, at each of its levels,
the traffic of forming operand sums and distributing products in DRAM. The reference part is this
project's extension of the model, not the paper's, and is labelled so in outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from ..algebra.levels import grid_dims
from ..algebra.primitives import primitives
from ..fused.instances import kernel_counts
from ..families import SIMT, counterpart, family_of
from ..impls import IMPLS, PAPER_MODELED
from ..options import ATOMIC_SCHEMES, PRESUM, SPLITK, SPLITS
from ..occupancy import blocks_per_sm
from ..plan import split_chunk
from ..strategies import STRATEGIES, Strategy, WarpGrid
from . import issue
from .files import RESOURCE_KEYS, ModelError, load_resources  # noqa: F401 - re-exported
from .gpus import GPUSpec
from .memory import global_times
from .tensor import tensor_figures, tensor_load
from .schemes import Load, alone, presum_words, scheme_time
from .terms import DEFAULT_MODEL, Timing

__all__ = [
    "Counts",
    "Timing",
    "MODELED_IMPLS",
    "ModelError",
    "modeled",
    "block_counts",
    "registers",
    "active_blocks",
    "kernel_load",
    "kernel_time",
    "impl_time",
    "best_split",
    "own_scheme",
    "load_resources",
    "best_strategy",
    "ranked_strategies",
    "model_strategies",
    "effective_tflops",
]

ITEMSIZE = {"float32": 4, "float64": 8}

# Modeled implementations: (reference levels on top, fused levels below), as in the paper's figures.
MODELED_IMPLS: dict[str, tuple[int, int]] = {
    name: (IMPLS[name].workspace_levels, IMPLS[name].levels - IMPLS[name].workspace_levels) for name in PAPER_MODELED
}


@lru_cache(maxsize=None)
def own_scheme(impl: str) -> str | None:
    """The scheme an implementation runs whatever scheme is asked (the presum ones'), else None. Cached: every
    impl_time asks, and a catalogue name's implementation is made anew at each get_impl."""
    if impl in MODELED_IMPLS:
        return None
    from ..impls import ImplError, get_impl

    try:
        return get_impl(impl).scheme
    except ImplError as err:
        raise ModelError(str(err)) from None


def modeled(impl: str) -> tuple[int, int, str]:
    """(reference levels on top, fused levels below, the fused levels' algorithm) of an implementation: the
    paper's (MODELED_IMPLS), or a fused implementation of any algorithm (``grey322-11-50x1``, mixed specs)."""
    if impl in MODELED_IMPLS:
        return (*MODELED_IMPLS[impl], "strassen")
    from ..impls import ImplError, get_impl

    try:
        chosen = get_impl(impl)
    except ImplError as err:
        raise ModelError(str(err)) from None
    if chosen.kind != "fused":
        raise ModelError(f"the model has no formula for {impl} (choose from {', '.join(MODELED_IMPLS)}, or a "
                         "fused implementation of any algorithm such as grey322-11-50x1)")
    return 0, chosen.levels, chosen.algorithm


@dataclass(frozen=True)
class Counts:
    """Operations per thread block (figure tab:notation)."""

    n_flop: float
    n_gmop: float
    n_smop: float


def block_counts(s: Strategy, w: tuple[int, int, int], k: int) -> Counts:
    w_a, w_b, w_c = w
    kk = math.ceil(k / s.k_S) * s.k_S
    n_flop = 2 * s.m_S * s.n_S * kk + (w_a - 1) * s.m_S * kk + (w_b - 1) * s.n_S * kk + (w_c - 1) * s.m_S * s.n_S
    n_gmop = w_a * s.m_S * kk + w_b * s.n_S * kk + w_c * s.m_S * s.n_S
    n_smop = s.threads * (s.m_R + s.n_R) * kk + (s.m_S + s.n_S) * kk
    return Counts(n_flop, n_gmop, n_smop)


def registers(s: Strategy, w: tuple[int, int, int], footnote: bool = False) -> int:
    """Registers per thread, Eq. (constrain_reg): m_R n_R + (2 + W_A) m_R + (2 + W_B) n_R.

    With ``footnote``, the footnote's W_A + W_B + 5 address and loop registers are added.
    """
    w_a, w_b, _ = w
    base = s.m_R * s.n_R + (2 + w_a) * s.m_R + (2 + w_b) * s.n_R
    return base + (w_a + w_b + 5 if footnote else 0)


@issue.per_table
def active_blocks(
    spec: GPUSpec, s: Strategy, w: tuple[int, int, int], dtype: str, resources: pd.DataFrame | None = None
) -> tuple[int, str]:
    """(active blocks per SM, where the number came from): the compiled kernel's, else the register formula."""
    if resources is not None:
        rows = issue.kernel_rows(resources, spec.arch, s, w, dtype)
        if len(rows):
            return int(rows["blocks_per_sm"].iloc[0]), "resources.csv"
    regs = min(registers(s, w) * ITEMSIZE[dtype] // 4, spec.limits.max_registers_per_thread)
    return blocks_per_sm(spec.limits, s.threads, regs, s.smem_bytes(ITEMSIZE[dtype])), "register formula"


def kernel_load(
    spec: GPUSpec, s: Strategy, w: tuple[int, int, int], m: int, k: int, n: int, dtype: str, active: int,
    slice_counts: tuple[float, float] | None = None,
) -> Load | None:
    """One kernel's launch (one product of variant ``w``) on an m x k x n problem, as the schemes' model takes it
    (strassenbench.model.schemes.Load; None when no block fits an SM): the paper's per-block counts and this
    project's issue clocks (``slice_counts``: the main loop's instructions and FP-pipe instructions per thread
    and k_S slice for T_issue; default: issue.default_slice_counts)."""
    if active < 1:
        return None
    size = ITEMSIZE[dtype]
    c = block_counts(s, w, k)
    tiles = math.ceil(m / s.m_S) * math.ceil(n / s.n_S)
    blocks = spec.sm_count * active
    kk = math.ceil(k / s.k_S) * s.k_S
    t_gmop, t_dram, t_l2 = global_times(spec, m, n, s.m_S, s.n_S, kk, w, c.n_gmop, blocks, size)
    instructions, fp_ops = slice_counts or issue.default_slice_counts(s, w, dtype)
    cores = spec.fp32_cores_per_sm if dtype == "float32" else spec.fp64_cores_per_sm
    warp_clocks = (s.threads // 32) * issue.block_clocks(math.ceil(k / s.k_S), instructions, fp_ops,
                                                         issue.lanes(cores))  # per block
    return Load(tiles, blocks, (c.n_flop, size * c.n_smop, warp_clocks),
                (spec.tau_flop(dtype), spec.tau_smop, issue.SUB_PARTITIONS * spec.sm_count * spec.boost_clock_hz),
                (t_gmop, t_dram, t_l2))


def kernel_time(
    spec: GPUSpec, s: Strategy, w: tuple[int, int, int], m: int, k: int, n: int, dtype: str, active: int,
    slice_counts: tuple[float, float] | None = None, model: str = DEFAULT_MODEL,
) -> Timing:
    """Modeled time of one kernel (one product of variant ``w``) alone on an m x k x n problem: the largest of
    ``model``'s terms (timing.MODELS) over ceil(tiles / #blocks) waves:

        T_flop  = waves #blocks N_flop / tau_flop               Eq. (eqn:t_flop)
        T_smop  = waves sizeof #blocks N_smop / tau_smop        Eq. (eqn:t_smop)
        T_issue = waves #blocks warps slices clocks / (4 #SM clock rate)   (strassenbench.model.issue)
    """
    return alone(model, kernel_load(spec, s, w, m, k, n, dtype, active, slice_counts))


def _half(d: int, levels: int) -> int:
    return math.ceil(d / 2**levels)


@lru_cache(maxsize=None)
def _reference_words() -> tuple[int, int, int]:
    """Words a reference level moves in DRAM per element of an A, B and C block, over its 7 products.

    Forming sum_i u_i X_i reads W_A blocks and writes one (nothing when W_A = 1); distributing M to W_C > 1
    blocks reads M, and reads and writes each C block (with W_C = 1 the GEMM accumulates into C directly).
    """
    prims = primitives("strassen", 1)
    a = sum(len(p.a) + 1 for p in prims if len(p.a) > 1)
    b = sum(len(p.b) + 1 for p in prims if len(p.b) > 1)
    c = sum(3 * len(p.c) for p in prims if len(p.c) > 1)
    return a, b, c


def impl_time(
    spec: GPUSpec,
    impl: str,
    s: Strategy,
    m: int,
    k: int,
    n: int,
    dtype: str,
    resources: pd.DataFrame | None = None,
    model: str = DEFAULT_MODEL,
    scheme: str = "sequential",
    streams: int | None = None,
    split: int | None = None,
) -> Timing:
    """Modeled time of a whole implementation (its kernels and, for references, their DRAM passes), by
    ``model`` (timing.MODELS), its fused products run by ``scheme`` on ``streams`` streams (None: the scheme's
    default; strassenbench.model.schemes); in the splitk scheme each product's k in ``split`` parts (None: the
    fastest split, best_split)."""
    ref_levels, fused_levels, algorithm = modeled(impl)
    own = own_scheme(impl)
    if own:  # the presum implementations: their own scheme, whichever is asked
        scheme, streams = own, None
    if not ref_levels and not fused_levels:  # a GEMM takes no scheme: one kernel, plain write-back
        scheme, streams, split = "sequential", None, None
    if scheme == SPLITK and split is None:
        return best_split(spec, impl, s, m, k, n, dtype, resources, model, streams)[1]
    if scheme != SPLITK and split not in (None, 1):
        raise ModelError(f"a split of k is the {SPLITK} scheme's, not the {scheme} scheme's")
    mode = _tensor_mode(impl)
    if ref_levels:
        bm, bk, bn = _half(m, 1), _half(k, 1), _half(n, 1)
        inner = {(1, 0): "gemm", (2, 0): "strassen1-ref", (1, 1): "strassen1"}[(ref_levels, fused_levels)]
        words_a, words_b, words_c = _reference_words()
        extra = ITEMSIZE[dtype] * (words_a * bm * bk + words_b * bk * bn + words_c * bm * bn) / spec.dram_bandwidth
        below = impl_time(spec, inner, s, bm, bk, bn, dtype, resources, model, scheme, streams, split)
        return below * len(primitives("strassen", 1)) + Timing(extra, 0.0, extra, 0.0, 0.0, extra, model=model)
    # The products of every variant on blocks of the (virtually padded) grid, Sec. s:fringe; the traffic and
    # flops are the variant's own counts, the occupancy the kernel's that runs it (instances.kernel_counts).
    gm, gk, gn = grid_dims(algorithm, fused_levels)
    sm, sk, sn = math.ceil(m / gm), math.ceil(k / gk), math.ceil(n / gn)
    # the kernels the scheme launches: atomicAdd write-back for atomic and splitk (their own registers and loop)
    table = issue.write_mode_table(resources, "atomic" if scheme in ATOMIC_SCHEMES else "plain")
    family = family_of(mode)
    parts = 1
    if scheme == SPLITK:  # each product's k in parts of split_chunk (strassenbench.fused.launch.split_steps)
        kernel_s = family.strategies[counterpart(s.name, mode)] if family.tensor else s
        chunk = split_chunk(sk, split, kernel_s.k_S)
        sk, parts = chunk, math.ceil(sk / chunk)
    computes = family.computes or dtype  # the kernels' dtype
    book = _kernel_book(spec, s, dtype, mode, table)

    def load_of(w: tuple[int, int, int]) -> Load | None:
        kernel = kernel_counts(w)
        found = book.get(kernel)
        if found is None:
            found = book[kernel] = _kernel_figures(spec, s, kernel, dtype, mode, table)
        if family.tensor:  # the tensor-core kernels (strassenbench.model.tensor), in the strategy's role
            return tensor_load(spec, found[0], kernel, sm, sk, sn, mode, *found[1:], atomic=scheme in ATOMIC_SCHEMES)
        return kernel_load(spec, s, w, sm, sk, sn, dtype, *found)

    fused = scheme_time(model, algorithm, fused_levels, scheme, streams, computes, load_of, parts)
    if scheme != PRESUM:
        return fused
    words_a, words_b = presum_words(algorithm, fused_levels)  # the sums' pass over DRAM, before the products
    sums = ITEMSIZE[computes] * (words_a * sm * sk + words_b * sk * sn) / spec.dram_bandwidth
    return fused + Timing(sums, 0.0, sums, 0.0, 0.0, sums, model=model)


def best_split(
    spec: GPUSpec, impl: str, s: Strategy, m: int, k: int, n: int, dtype: str, resources: pd.DataFrame | None = None,
    model: str = DEFAULT_MODEL, streams: int | None = None,
) -> tuple[int, Timing]:
    """(S, its time): the split of each product's k (S of options.SPLITS, up to 16 parts) that makes ``impl`` on
    strategy ``s`` fastest in the splitk scheme by ``model``; the fewest parts among equals (fewer reductions into
    C). More
    parts give more blocks where one wave is few (the products' waves at small sizes), and cost S times the
    write-back's words and each part's own prologue and write-back."""
    best: tuple[int, Timing] | None = None
    for split in SPLITS:
        timing = impl_time(spec, impl, s, m, k, n, dtype, resources, model, SPLITK, streams, split)
        if best is None or timing.seconds < best[1].seconds * (1 - 1e-9):
            best = (split, timing)
    assert best is not None
    return best


@issue.per_table
def _kernel_book(spec: GPUSpec, s: Strategy, dtype: str, mode: str, resources: pd.DataFrame | None) -> dict:
    """What the model reads of each kernel (W_A x W_B x W_C) of strategy ``s`` on ``spec`` (_kernel_figures),
    filled in as the kernels are asked for: a prediction asks for the same ones hundreds of thousands of times
    (`model winners`), and one look-up per implementation is cheaper than one per product."""
    return {}


def _kernel_figures(spec: GPUSpec, s: Strategy, kernel: tuple[int, int, int], dtype: str, mode: str,
                    resources: pd.DataFrame | None) -> tuple:
    """A SIMT kernel's (active blocks per SM, main-loop slice counts) as kernel_load takes them; a tensor-core
    kernel's (its family's strategy in ``s``'s role, active blocks, instructions per slice, load-use distance)
    as tensor_load does."""
    family = family_of(mode)
    if family.tensor:
        tensor = family.strategies[counterpart(s.name, mode)]
        return (tensor, *tensor_figures(spec, tensor, kernel, mode, resources))
    active, _ = active_blocks(spec, s, kernel, dtype, resources)
    counts, _ = issue.slice_counts(spec.arch, s, kernel, dtype, resources)
    return active, counts


def _tensor_mode(impl: str) -> str:
    """SIMT, or the tensor-core mode of a fused implementation on the tensor cores."""
    if impl in MODELED_IMPLS:
        return SIMT
    from ..impls import get_impl

    return get_impl(impl).mode


def best_strategy(
    spec: GPUSpec, impl: str, m: int, k: int, n: int, dtype: str, resources: pd.DataFrame | None = None,
    model: str = DEFAULT_MODEL, scheme: str = "sequential",
) -> tuple[str, Timing]:
    """The fastest strategy for this point (model_strategies; the paper picked the best of its six per point)."""
    return ranked_strategies(spec, impl, m, k, n, dtype, resources, model, scheme)[0]


def model_strategies(impl: str) -> dict[str, Strategy | WarpGrid]:
    """The strategies the model ranks for ``impl``: the paper's six, or a tensor-core family's own (TcSmall ..
    TcHuge, DmmaSmall ..), each in the role the kernels give it (_kernel_figures)."""
    mode = _tensor_mode(impl)
    return family_of(mode).strategies if mode != SIMT else STRATEGIES


def ranked_strategies(
    spec: GPUSpec, impl: str, m: int, k: int, n: int, dtype: str, resources: pd.DataFrame | None = None,
    model: str = DEFAULT_MODEL, scheme: str = "sequential",
) -> list[tuple[str, Timing]]:
    """The strategies of ``impl`` (model_strategies) for this point, fastest first by the model (ties in the
    table's order)."""
    timed = [(name, impl_time(spec, impl, s, m, k, n, dtype, resources, model, scheme))
             for name, s in model_strategies(impl).items()]
    return sorted(timed, key=lambda item: item[1].seconds)


def effective_tflops(m: int, k: int, n: int, seconds: float) -> float:
    """Eq. (e:gpu_etflops): 2 m n k / time, in TFLOPS."""
    return 2.0 * m * n * k / seconds * 1e-12 if seconds > 0 and np.isfinite(seconds) else 0.0
