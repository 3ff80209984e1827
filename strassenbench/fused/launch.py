"""Plans become kernel launches: one description that the GPU (CuPy) and the CPU emulator both run.

A Launch is (kernel name, grid, block, arguments); arguments are the engine's arrays and NumPy scalars.
A Program is a list of stages; a stage gives each stream a list of launches, and every stream of a stage
finishes before the next stage starts. The paper's three schemes (Sec. s:task) are three programs:

- ``sequential``: one launch per product, plain write-back, one stream.
- ``streams``: one launch per product, plain write-back, the stages and streams of
  strassenbench.algebra.schedule (figure tab:gpu_streaming); products on concurrent streams never write
  the same C block.
- ``atomic``: atomicAdd write-back and batching: one launch per variant with blockIdx.z selecting the
  product, variants spread over four streams ("Task Parallelism: Batching" and "Element-wise atomic update").

Beyond the paper, ``splitk`` is the atomic scheme with each product's k split into S parts of
strassenbench.plan.split_chunk columns of A (rows of B): every part is a product of its own in the batch, over its
part of every term, and adds its share into C through the same atomic write-back (plan.split_steps; S is
RunOptions.split_k).

Beyond the paper, ``presum`` (opt-in, strassenbench.options.PRESUM): every operand sum of more than one term
is formed once into a workspace by the presum kernel (kernels/presum.cuh), then the products run one after
another as in ``sequential``, each loading one tile per operand; deterministic, and the workspace is
``presum_bytes``.

Every launch carries its products' terms (block address, extent, coefficient) in one kernel parameter,
sb::Products (``products_dtype``): no device memory is allocated for parameters, and a batch larger than
the kernel's Z takes several launches, as do more block rows than a grid's y holds (MAX_GRID).

beta is applied once: folded into the GEMM's epilogue, otherwise by a scale launch in a first stage.

The wgmma family's launches (persistent, with tensor maps and dynamic shared memory) are strassenbench.fused.wg_launch's;
what a launch and a program are, strassenbench.fused.program's.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from importlib import import_module

import numpy as np

from ..options import ATOMIC_SCHEMES, PRESUM, SCHEMES, SPLITK, RunOptions
from ..plan import BlockView, Plan, Step, make_plan, split_chunk, split_steps
from ..strategies import DmmaStrategy, Strategy, TensorStrategy, WgStrategy
from ..algebra.levels import grid_dims
from ..algebra.schedule import schedule
from .instances import (PRESUM_BATCH, PRESUM_TERMS, Instance, kernel_counts, load_widths, max_batch, presum_kernel,
                        products_dtype, scale_kernel, write_width)
from .program import Launch, Program, TensorMapArg, address, normalised
from .wg_launch import tma_able, wg_launches

__all__ = ["FusedError", "Launch", "Program", "TensorMapArg", "normalised", "tma_able", "SCHEMES", "SCALE_BLOCK",
           "MAX_GRID", "plan_launches", "launch_program", "param_bytes", "presum_bytes", "presum_formula", "presum_layout",
           "presum_sums", "PresumLayout"]

# The largest grid, blocks in x, y and z (CUDA C++ Programming Guide, "Compute Capabilities", table "Technical
# Specifications per Compute Capability": maximum x-, y- and z-dimension of a grid of thread blocks; the same
# from compute capability 3.0 on). A launch past it does not start.
MAX_GRID = (2**31 - 1, 65535, 65535)

SCALE_BLOCK = 256
SCALE_MAX_GRID = 1024  # far below MAX_GRID's x: the scale kernel's grid-stride loop covers any m x n


class FusedError(ValueError):
    """A plan or option the fused kernels cannot run."""


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _leading_dimension(name: str, x) -> int:  # noqa: ANN001 - NumPy or CuPy array
    itemsize = x.dtype.itemsize
    if x.strides[1] != itemsize or x.strides[0] % itemsize or x.strides[0] < x.shape[1] * itemsize:
        raise FusedError(f"{name} must be row-major with unit column stride (a C-contiguous array or a row slice)")
    return x.strides[0] // itemsize


def _by_variant(steps: tuple[Step, ...]) -> list[list[Step]]:
    groups: dict[int, list[Step]] = {}
    for step in steps:
        groups.setdefault(step.variant, []).append(step)
    return list(groups.values())


def _term_address(view: BlockView, base: int, ld: int, itemsize: int) -> int:
    """The address of a term's block: its first element in the operand at ``base`` (the base for an empty one)."""
    return base + (0 if view.empty else view.row * ld + view.col) * itemsize


def _products(group: list[Step], bases: tuple[int, int, int], lds: tuple[int, int, int], dtype: np.dtype,
              inst: Instance, rows0: int = 0) -> np.ndarray:
    """sb::Products<T, terms, batch> for the steps of one launch: block addresses, extents and coefficients.

    Each operand has the kernel's count of terms (instances.kernel_counts); the ones beyond the step's are
    empty (the first term's address, so as aligned as it; zero extent; coefficient 0), so the kernel
    predicates them off.

    A launch of a grid split along y (MAX_GRID) starts rows0 rows down the blocks: the kernel's rows, row0 =
    blockIdx.y m_S on, count from each term's first row, so every A and C term moves rows0 rows down and loses
    rows0 rows of its extent (B's rows are k, the same for every block row). A term with no rows left keeps
    its own address (valid, and as aligned as _vector_kernel found it) with zero rows. Whole rows keep a term's
    alignment: the vector kernels need ld a multiple of V.

    The A and B sums are normalised (``normalised``): the kernel forms x_0 + sum_t (u_t / u_0) x_t, one FFMA
    per element and extra term, and multiplies the product by u_0 with the output coefficients."""
    buf = np.zeros((), dtype=products_dtype(str(dtype), sum(inst.counts), inst.batch))
    for z, step in enumerate(group):
        first = 0
        for i, (side, base, ld, width) in enumerate(zip((step.a, step.b, step.c), bases, lds, inst.counts)):
            buf["address"][z, first: first + width] = _term_address(side[0][0], base, ld, dtype.itemsize)
            coeffs = normalised([c for _, c in side]) if i < 2 else [c for _, c in side]
            down = 0 if i == 1 else rows0
            for t, ((view, _), coeff) in enumerate(zip(side, coeffs), start=first):
                shift = down if view.rows > down and not view.empty else 0
                buf["address"][z, t] = _term_address(view, base, ld, dtype.itemsize) + shift * ld * dtype.itemsize
                buf["rows"][z, t], buf["cols"][z, t] = max(view.rows - down, 0), view.cols
                buf["coeff"][z, t] = float(coeff)  # exact in the dtype for the catalogue's 1/2, +-1, +-2
            first += width
    return buf


def _scheme_groups(plan: Plan, steps: tuple[Step, ...], scheme: str, streams: int) -> list[list[list[list[Step]]]]:
    """stages -> streams -> launches -> the steps each launch computes."""
    if scheme == "sequential":
        return [[[[s] for s in steps]]]
    if scheme in ATOMIC_SCHEMES:  # a variant's products (and their parts) in one launch's batch
        lanes: list[list[list[Step]]] = [[] for _ in range(streams)]
        for i, group in enumerate(_by_variant(steps)):
            lanes[i % streams].append(group)
        return [[lane for lane in lanes if lane]]
    by_name = {s.primitive.name: s for s in steps}
    stages = []
    for stage in schedule(plan.algorithm, plan.levels, streams).stages:
        lanes = [[[by_name[p.name]] for p in lane if p.name in by_name] for lane in stage.streams]
        if any(lanes):
            stages.append([lane for lane in lanes if lane])
    return stages


def _vector_kernel(group: list[Step], bases: tuple[int, int, int], lds: tuple[int, int, int], strategy: Strategy,
                   dtype: np.dtype, write_mode: str) -> bool:
    """Whether every term of the group allows the vector kernel: each A and B term its loads, and for the
    atomic write-back each C term its reductions (kernels/epilogue.cuh). A term allows V-wide accesses when its
    address and the leading dimension are multiples of V elements, and so is its extent along the row."""
    widths = load_widths(strategy, str(dtype))
    sides = [(0, widths[0]), (1, widths[1])]
    if write_mode == "atomic":
        sides.append((2, write_width(strategy, str(dtype))))
    for step in group:
        operands = (step.a, step.b, step.c)
        for side, v in sides:
            if lds[side] % v:
                return False
            for view, _ in operands[side]:
                if _term_address(view, bases[side], lds[side], dtype.itemsize) % (v * dtype.itemsize) or view.cols % v:
                    return False
    return True


def _launches(group: list[Step], A, B, C, lds, alpha, beta, strategy, write_mode, plan, mode,  # noqa: ANN001
              max_grid: tuple[int, int, int], bk: int) -> list[Launch]:
    """The launches of one group of products: one, or several when the group exceeds the kernel's batch (or
    the grid's z) or its block rows exceed the grid's y (each launch then covers at most max_grid[1] block
    rows, _products). ``bk``: the k each product runs over (the plan's, or a splitk part's)."""
    if isinstance(strategy, WgStrategy):
        return wg_launches(group, A, B, C, lds, strategy, write_mode, plan, mode, alpha, beta, bk)
    dtype = np.dtype(C.dtype)
    bases = (address(A), address(B), address(C))
    loads = "vector" if _vector_kernel(group, bases, lds, strategy, dtype, write_mode) else "scalar"
    first = group[0]  # its terms, which the presum scheme has made fewer than its primitive's
    inst = Instance(strategy, str(dtype), kernel_counts((len(first.a), len(first.b), len(first.c))), write_mode, loads,
                    mode=mode)
    bm, _, bn = plan.block
    block_cols, block_rows = _ceil_div(bn, strategy.n_S), _ceil_div(bm, strategy.m_S)
    if block_cols > max_grid[0]:  # a check, not a split: the kernel's int extents keep n below 2^31 anyway
        raise FusedError(f"{inst.name}: {block_cols} blocks along n, past the {max_grid[0]} of a grid's x")
    batch = min(inst.batch, max_grid[2])
    launches = []
    for first in range(0, len(group), batch):
        part = group[first: first + batch]
        for r0 in range(0, block_rows, max_grid[1]):
            grid = (block_cols, min(block_rows - r0, max_grid[1]), len(part))
            args = (np.int32(lds[0]), np.int32(lds[1]), np.int32(lds[2]), np.int32(bk), dtype.type(alpha),
                    dtype.type(beta), _products(part, bases, lds, dtype, inst, r0 * strategy.m_S))
            launches.append(Launch(inst.name, grid, (strategy.threads, 1, 1), args,
                                   tuple(s.primitive.name for s in part), inst))
    return launches


def _writing(plan: Plan) -> tuple[Step, ...]:
    """The steps that write something (a fringe's products may have every C term empty)."""
    return tuple(s for s in plan.steps if not all(v.empty for v, _ in s.c))


def _live_steps(plan: Plan, dtype: str) -> tuple[Step, ...]:
    """The steps that write something, each checked to fit the kernel parameters."""
    steps = _writing(plan)
    for s in steps:
        counts = kernel_counts(s.primitive.counts)
        if not max_batch(dtype, sum(counts)):
            raise FusedError(f"product {s.primitive.name} of {plan.algorithm} ({plan.levels} levels) has "
                             f"{'x'.join(map(str, s.primitive.counts))} terms: its {dtype} kernel's parameters "
                             "exceed the 4 KiB a launch takes (use fewer levels)")
    return steps


def plan_launches(
    plan: Plan,
    A, B, C,  # noqa: ANN001 - arrays of the engine (NumPy for emu, CuPy for cuda)
    alpha: float,
    beta: float,
    *,
    strategy: Strategy | TensorStrategy,
    scheme: str = "sequential",
    streams: int | None = None,
    mode: str = "simt",
    max_grid: tuple[int, int, int] = MAX_GRID,
    split_k: int | None = None,
) -> Program:
    """The program that computes C <- alpha A B + beta C following ``plan`` with ``scheme``, on the SIMT
    kernels of ``mode``'s family (strassenbench.families), ``strategy`` one of its strategies.
    ``max_grid``: the largest grid of a launch (the device's; tests pass smaller ones to split small
    problems). The scheme, streams, mode and split_k (the splitk scheme's S) are checked as
    strassenbench.options.RunOptions."""
    options = RunOptions(scheme=scheme, streams=streams, mode=mode, split_k=split_k)
    return launch_program(plan, A, B, C, alpha, beta, options, strategy, max_grid)


def launch_program(plan: Plan, A, B, C, alpha: float, beta: float, options: RunOptions,  # noqa: ANN001
                   strategy: Strategy | TensorStrategy, max_grid: tuple[int, int, int] = MAX_GRID) -> Program:
    """plan_launches with its options made (and checked) already: the scheme, streams and mode of
    ``options``, the kernels of ``strategy`` (``options.kernel_strategy``)."""
    scheme, streams, mode = options.scheme_name, options.stream_count, options.mode
    dtype = np.dtype(C.dtype)
    family = options.family
    if type(strategy) is not family.strategy_type:
        raise FusedError(f"strategy {strategy.name} has no {mode} kernels")
    if family.computes is not None and dtype != np.dtype(family.computes):
        raise FusedError(f"the {mode} kernels compute {family.computes}, not {dtype}")
    lds = tuple(_leading_dimension(n, x) for n, x in (("A", A), ("B", B), ("C", C)))
    steps = _live_steps(plan, str(dtype))
    write_mode = options.write_mode
    bk = plan.block[1]
    if scheme == SPLITK:
        if options.split_k is None:
            raise FusedError(f"the {SPLITK} scheme needs its split S (RunOptions.split_k; a sweep takes the model's, "
                             "strassenbench.model.pick.split_options)")
        bk = split_chunk(bk, options.split_k, strategy.k_S)
        steps = split_steps(steps, plan.block[1], bk)
    fold_beta = write_mode == "plain" and len(steps) == 1 and len(steps[0].c) == 1 and alpha != 0
    stages: list[tuple[tuple[Launch, ...], ...]] = []
    if beta != 1 and not fold_beta:
        m, n = C.shape
        grid = min(_ceil_div(m * n, SCALE_BLOCK), SCALE_MAX_GRID)
        scale = Launch(scale_kernel(str(dtype)), (grid, 1, 1), (SCALE_BLOCK, 1, 1),
                       (C, np.int32(m), np.int32(n), np.int32(lds[2]), dtype.type(beta)))
        stages.append(((scale,),))
    if alpha != 0 and scheme == PRESUM:
        return _presum_program(plan, steps, A, B, C, lds, alpha, beta if fold_beta else 1, strategy, mode, max_grid,
                               stages)
    if alpha != 0:
        kernel_beta = beta if fold_beta else 1
        for stage in _scheme_groups(plan, steps, scheme, streams):
            stages.append(tuple(
                tuple(launch for g in lane
                      for launch in _launches(g, A, B, C, lds, alpha, kernel_beta, strategy, write_mode, plan,
                                              mode, max_grid, bk))
                for lane in stage
            ))
    return Program(tuple(stages))


def _extent(terms: tuple[tuple[BlockView, Fraction], ...]) -> tuple[int, int]:
    """The rows and columns of a sum of ``terms``: its widest term's (the others add zeros past theirs)."""
    return max(view.rows for view, _ in terms), max(view.cols for view, _ in terms)


@dataclass(frozen=True)
class PresumLayout:
    """Where the presum scheme puts its operand sums: per operand (A, B) the distinct sums of more than one term
    (their terms with the coefficients normalised, the first 1), each a block of ``blocks[side]`` rows at
    ``index * blocks[side]`` in a workspace of leading dimension ``lds[side]``; and per product its terms with the
    summed sides as one workspace term."""

    sums: tuple[tuple[tuple[tuple[BlockView, Fraction], ...], ...], tuple[tuple[tuple[BlockView, Fraction], ...], ...]]
    blocks: tuple[int, int]
    lds: tuple[int, int]
    steps: tuple[Step, ...]
    summed: tuple[tuple[bool, bool], ...]  # per product: whether its A and B side come from the workspace

    def shape(self, side: int) -> tuple[int, int]:
        return len(self.sums[side]) * self.blocks[side], self.lds[side]


def presum_layout(plan: Plan, steps: tuple[Step, ...] | None = None) -> PresumLayout:
    """The presum workspace of ``plan`` (its live ``steps``): a sum of several terms is kept once however many
    products use it, and a product's term is the sum's block with the first coefficient (``normalised``: a sum
    and its multiples share a block). Rows of a workspace are 4 elements apart at least (16-byte aligned for
    the vector kernels' loads)."""
    steps = _writing(plan) if steps is None else steps
    shapes = (plan.block_shape_a, plan.block_shape_b)
    found: tuple[dict, dict] = ({}, {})
    new_steps, summed = [], []
    for step in steps:
        sides, flags = [], []
        for side, terms in enumerate((step.a, step.b)):
            if len(terms) == 1:
                sides.append(terms)
                flags.append(False)
                continue
            if len(terms) > PRESUM_TERMS:
                raise FusedError(f"product {step.primitive.name} of {plan.algorithm} sums {len(terms)} terms; the "
                                 f"presum kernel takes at most {PRESUM_TERMS} (use fewer levels)")
            coeffs = normalised([c for _, c in terms])
            key = tuple((view, Fraction(c)) for (view, _), c in zip(terms, [1, *coeffs[1:]]))
            index = found[side].setdefault(key, len(found[side]))
            sides.append(((BlockView(index * shapes[side][0], 0, *_extent(terms)), Fraction(coeffs[0])),))
            flags.append(True)
        new_steps.append(Step(step.primitive, step.variant, sides[0], sides[1], step.c))
        summed.append((flags[0], flags[1]))
    lds = tuple(max(4, _ceil_div(shape[1], 4) * 4) for shape in shapes)
    return PresumLayout((tuple(found[0]), tuple(found[1])), (shapes[0][0], shapes[1][0]), lds,  # type: ignore[arg-type]
                        tuple(new_steps), tuple(summed))


def presum_bytes(plan: Plan, dtype: str) -> int:
    """Device bytes the presum scheme allocates: its workspace (presum_layout), nothing for parameters."""
    layout = presum_layout(plan, _live_steps(plan, dtype))
    return sum(rows * ld for rows, ld in map(layout.shape, (0, 1))) * np.dtype(dtype).itemsize


@lru_cache(maxsize=None)
def presum_sums(algorithm: str, levels: int) -> tuple[tuple, tuple]:
    """The distinct sums of A and of B the presum scheme forms for ``levels`` levels of ``algorithm``, from a plan
    of one element per block (any shape has these, or fewer where a fringe empties a term)."""
    return presum_layout(make_plan(algorithm, levels, *grid_dims(algorithm, levels))).sums


def presum_formula(algorithm: str, levels: int) -> str:
    """The presum workspace as a formula: its distinct sums of A (blocks of mk / (m~ k~)) and of B."""
    dm, dk, dn = grid_dims(algorithm, levels)
    sums = presum_sums(algorithm, levels)
    return f"{len(sums[0])}mk/{dm * dk} + {len(sums[1])}kn/{dk * dn}"


def _presum_launches(layout: PresumLayout, side: int, base: int, ld: int, out_base: int, dtype: np.dtype,
                     max_grid: tuple[int, int, int]) -> list[Launch]:
    """The presum kernel's launches that form the sums of operand ``side`` (at the address ``base``, leading
    dimension ``ld``) into its workspace (at ``out_base``): at most PRESUM_BATCH to a launch."""
    launches = []
    sums, block_rows = layout.sums[side], layout.blocks[side]
    for first in range(0, len(sums), PRESUM_BATCH):
        part = sums[first: first + PRESUM_BATCH]
        buf = np.zeros((), dtype=products_dtype(str(dtype), PRESUM_TERMS + 1, PRESUM_BATCH))
        rows = cols = 0
        for z, terms in enumerate(part):
            out = out_base + (first + z) * block_rows * layout.lds[side] * dtype.itemsize
            buf["address"][z, :] = out  # unused inputs: a valid address, extent 0
            extent = _extent(terms)
            buf["rows"][z, 0], buf["cols"][z, 0] = extent
            rows, cols = max(rows, extent[0]), max(cols, extent[1])
            for t, (view, coeff) in enumerate(terms, start=1):
                buf["address"][z, t] = _term_address(view, base, ld, dtype.itemsize)
                buf["rows"][z, t], buf["cols"][z, t] = view.rows, view.cols
                buf["coeff"][z, t] = float(coeff)
        grid = (_ceil_div(max(cols, 1), SCALE_BLOCK), max(1, min(rows, max_grid[1])), len(part))
        launches.append(Launch(presum_kernel(str(dtype)), grid, (SCALE_BLOCK, 1, 1),
                               (np.int32(ld), np.int32(layout.lds[side]), buf)))
    return launches


def _presum_program(plan: Plan, steps: tuple[Step, ...], A, B, C, lds, alpha: float, beta: float,  # noqa: ANN001
                    strategy: Strategy | TensorStrategy, mode: str, max_grid: tuple[int, int, int],
                    stages: list) -> Program:
    """The presum scheme: the sums of A's and of B's terms (one stream each), then the products in order."""
    layout = presum_layout(plan, steps)
    dtype = np.dtype(C.dtype)
    xp = np if isinstance(C, np.ndarray) else import_module("cupy")  # the emulator's memory, or the device's
    workspace = tuple(xp.zeros(layout.shape(side), dtype=dtype) for side in (0, 1))
    sums = tuple(tuple(_presum_launches(layout, side, address(x), lds[side], address(workspace[side]), dtype,
                                        max_grid)) for side, x in enumerate((A, B)))
    if any(sums):
        stages.append(tuple(lane for lane in sums if lane))
    products = []
    for step, (sum_a, sum_b) in zip(layout.steps, layout.summed):
        a, b = (workspace[0] if sum_a else A), (workspace[1] if sum_b else B)
        step_lds = (layout.lds[0] if sum_a else lds[0], layout.lds[1] if sum_b else lds[1], lds[2])
        products += _launches([step], a, b, C, step_lds, alpha, beta, strategy, "plain", plan, mode, max_grid,
                              plan.block[1])
    stages.append((tuple(products),))
    return Program(tuple(stages), workspace)


def param_bytes(plan: Plan, dtype: str) -> int:
    """Device bytes the fused kernels allocate for their parameters: none (they travel as kernel parameters)."""
    _live_steps(plan, dtype)
    return 0
