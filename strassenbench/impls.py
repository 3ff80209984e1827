"""The implementations the paper compares (figure fig:stra_square), behind one call and one table.

Beyond the registry, ``get_impl`` makes a fused implementation of any algorithm and level count on demand:
``grey322-11-50x1`` (one level of <3,2,2;11>), ``hk323-15-94x2``, or mixed levels ``grey322-11-50+strassen``.

``impl(A, B, C, alpha=1, beta=0, engine=..., strategy=..., scheme=...)`` computes C <- alpha A B + beta C
in place. Each implementation declares the engines it runs on and its extra device memory in bytes as a
function of (m, n, k, dtype): the workspace of the reference levels, nothing else (the fused kernels carry
their products' terms as kernel parameters and allocate nothing).

On the ``numpy`` engine the roles are played by CPU stand-ins, so that the whole pipeline runs without a
GPU: ``cublas`` is NumPy's BLAS matmul, the fused implementations run their plans on the NumPy engine (same
blocks and coefficients, products by BLAS instead of the fused kernel), and the references run the same
schedule on NumPy arrays. Timings of stand-ins say nothing about a GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from .algebra.algorithm import AlgorithmError
from .algebra.levels import check_levels, spec_levels
from .engines import ENGINES, FUSED_ENGINES
from .fused.cutlass import BASELINES, baseline_impl
from .fused.launch import param_bytes, presum_bytes, presum_formula
from .gemm import check_operands
from .inject import planted
from .limits import MAX_LEVELS, LimitError
from .families import FAMILIES, MODES, SIMT, Family, Mode, mode_by_suffix
from .options import PRESUM, OptionsError, RunOptions
from .plan import make_plan, max_levels

__all__ = ["Impl", "IMPLS", "PAPER_MODELED", "get_impl", "fast_impl", "algorithm_impl", "ImplError", "family_impls"]


class ImplError(ValueError):
    """An unknown implementation, or one asked to run on an engine or with an option it does not have."""


def _levels_for(levels: int, m: int, k: int, n: int, algorithm: str = "strassen") -> int:
    """At most ``levels``, as many as the shape allows (its largest dimension holds one element per block)."""
    return min(levels, max_levels(algorithm, m, k, n))


def _fused_bytes(levels: int, m: int, n: int, k: int, dtype: str, algorithm: str = "strassen") -> int:
    return param_bytes(make_plan(algorithm, _levels_for(levels, m, k, n, algorithm), m, k, n), dtype)


def _presum_bytes(levels: int, m: int, n: int, k: int, dtype: str, algorithm: str = "strassen") -> int:
    return presum_bytes(make_plan(algorithm, _levels_for(levels, m, k, n, algorithm), m, k, n), dtype)


def _ref_bytes(levels: int, m: int, n: int, k: int, dtype: str) -> int:
    from .reference.strassen_ref import workspace_bytes

    return workspace_bytes(m, k, n, levels, dtype)


def _hybrid_bytes(m: int, n: int, k: int, dtype: str) -> int:
    """The top level's workspace, and what its leaf products hold: _Leaves keeps a prepared fused 1-level
    program per product of the top level (at most Winograd's 7: products on the same views share one), each
    with its parameters (no device bytes today: they travel as kernel parameters,
    strassenbench.fused.launch.param_bytes)."""
    from .algebra.algorithm import get_algorithm
    from .reference.strassen_ref import level_blocks

    (bm, bk, bn), = level_blocks(m, k, n, 1)
    products = get_algorithm("winograd").rank
    return _ref_bytes(1, m, n, k, dtype) + products * _fused_bytes(1, bm, bn, bk, dtype)


@dataclass(frozen=True)
class Impl:
    name: str
    label: str  # as in the report's legends
    engines: tuple[str, ...]
    levels: int
    kind: str  # blas | cutlass | fused | reference | hybrid | auto
    options: tuple[str, ...] = ()
    extra_memory: Callable[[int, int, int, str], int] = field(default=lambda m, n, k, dtype: 0, repr=False)
    formula: str = "0"
    dtypes: tuple[str, ...] = ("float32", "float64")
    algorithm: str = "strassen"  # the fused levels' algorithm: a name of algorithms/ or a mixed spec (a+b)
    mode: str = SIMT  # a run mode of strassenbench.families: the fused kernels', cuBLAS's or CUTLASS's math
    scheme: str | None = None  # a scheme of its own (the presum ones'), which no --scheme changes

    @property
    def run_mode(self) -> Mode:
        return MODES[self.mode]

    @property
    def family(self) -> Family:
        """The kernel family its mode runs on (strassenbench.families)."""
        return self.run_mode.kernel_family

    @property
    def tensor(self) -> bool:
        """On tensor cores, TF32 or DMMA (strassenbench.families.Mode.tensor)."""
        return self.run_mode.tensor

    def extra_bytes(self, m: int, n: int, k: int, dtype: str) -> int:
        return int(self.extra_memory(m, n, k, dtype))

    def takes(self, option: str, engine: str) -> bool:
        """Whether this implementation takes ``option`` (strategy, scheme) on ``engine``: a fused one on a fused
        engine; cuBLAS, the references and every implementation on numpy take none."""
        return option in self.options and engine in FUSED_ENGINES

    def check(self, engine: str, strategy: str | None = None, scheme: str | None = None) -> None:
        """This implementation runs on ``engine`` and takes the options given there (their values are checked
        where the options are made: ``run_options``)."""
        if engine not in self.engines:
            raise ImplError(f"{self.name} runs on {', '.join(self.engines)}, not {engine}")
        for option, value in (("strategy", strategy), ("scheme", scheme)):
            if value is not None and not self.takes(option, engine):
                raise ImplError(f"{self.name} on {engine} takes no --{option}")

    def run_options(self, engine: str, strategy: str | None = None, scheme: str | None = None,
                    build_dir: str = "build", split_k: int | None = None) -> RunOptions:
        """The options of a run on ``engine``, in this implementation's mode, checked once here; ``split_k`` the
        splitk scheme's S (strassenbench.options)."""
        self.check(engine, strategy, scheme)
        try:
            return RunOptions(strategy, self.scheme or scheme, build_dir=build_dir, mode=self.mode, split_k=split_k)
        except OptionsError as err:
            raise ImplError(f"{self.name}: {err}") from None

    def effective_levels(self, m: int, k: int, n: int) -> int:
        """The levels this implementation runs on an m x k x n problem."""
        return _levels_for(self.levels, m, k, n, self.algorithm)

    @property
    def bound_algorithm(self) -> str:
        """The algorithm of the error bound: the reference (and the hybrid's top level) is Strassen-Winograd,
        whose stability factor 18 exceeds Strassen's 12; the fused ones run their own."""
        return "winograd" if self.kind in ("reference", "hybrid") else self.algorithm

    @property
    def workspace_levels(self) -> int:
        """Levels of reference workspace the implementation allocates (0 for the fused and BLAS ones)."""
        return {"reference": self.levels, "hybrid": self.levels - 1}.get(self.kind, 0)

    def __call__(
        self, A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
        engine: str = "numpy", strategy: str | None = None, scheme: str | None = None, workspace=None,  # noqa: ANN001
        build_dir: str = "build", split_k: int | None = None,
    ):  # noqa: ANN204 - returns the reference workspace, if any
        """C <- alpha A B + beta C once. On cuda, NumPy operands run on device copies and C is copied back.
        ``split_k``: the splitk scheme's parts of each product's k (strassenbench.options)."""
        return self.run(A, B, C, alpha, beta, engine, self.run_options(engine, strategy, scheme, build_dir, split_k),
                        workspace)

    def run(self, A, B, C, alpha: float, beta: float, engine: str, options: RunOptions,  # noqa: ANN001
            workspace=None):  # noqa: ANN001, ANN201
        """``__call__`` with its options made (``run_options``)."""
        def once(dA, dB, dC):  # noqa: ANN001, ANN202
            return self.prepare_run(dA, dB, dC, alpha, beta, engine, options, workspace)()

        if engine == "cuda":
            from .fused.cuda import on_device

            check_operands(A, B, C)
            return on_device(once, A, B, C)
        return once(A, B, C)

    def prepare(
        self, A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
        engine: str = "numpy", strategy: str | None = None, scheme: str | None = None, workspace=None,  # noqa: ANN001
        build_dir: str = "build",
    ) -> Callable[[], object]:
        """A call that computes C <- alpha A B + beta C with everything that does not depend on the values
        set up once: the fused kernels' launches and their parameters, the reference's workspace. Operands
        must be the engine's arrays. ``__call__`` runs it once; the benchmark times its replays."""
        options = self.run_options(engine, strategy, scheme, build_dir)
        return self.prepare_run(A, B, C, alpha, beta, engine, options, workspace)

    def prepare_run(self, A, B, C, alpha: float, beta: float, engine: str, options: RunOptions,  # noqa: ANN001
                    workspace=None) -> Callable[[], object]:  # noqa: ANN001
        """``prepare`` with its options made (``run_options``)."""
        from .reference.array_ops import ops_for
        from .reference.strassen_ref import Workspace, multiply

        self.check(engine)
        if options.mode != self.mode:
            raise ImplError(f"{self.name} computes in {self.mode}, not {options.mode} (Impl.run_options)")
        m, k, n = check_operands(A, B, C)
        if str(C.dtype) not in self.dtypes:
            raise ImplError(f"{self.name} computes {', '.join(self.dtypes)}, not {C.dtype}")
        if self.kind == "auto":
            raise ImplError(f"{self.name} is chosen per shape by bench and verify (strassenbench pick), not run itself")
        wrong = planted(self.name, m, n, k)  # the test hook's wrong result (strassenbench.inject)
        if wrong:
            return self._planted(wrong, A, B, C, alpha, beta, engine, options, workspace)
        if self.kind == "blas":
            ops = ops_for(C)
            return lambda: ops.gemm(C, A, B, alpha, beta, self.run_mode.blas)
        if self.kind == "cutlass":
            from .fused.cutlass import sgemm

            return partial(sgemm, A, B, C, alpha, beta, options.build_dir, self.mode)
        if self.kind == "fused":
            plan = make_plan(self.algorithm, self.effective_levels(m, k, n), m, k, n)
            return _engine_call(engine, options, plan, A, B, C, alpha, beta)
        if workspace is None:
            workspace = Workspace(m, k, n, self.workspace_levels, C.dtype, ops_for(C))
        leaf, levels = None, self.levels
        if self.kind == "hybrid":  # one reference level on top, the fused 1-level kernel for its 7 products
            leaf, levels = _Leaves(engine, options), self.levels - 1
        return lambda: multiply(A, B, C, alpha, beta, levels=levels, workspace=workspace, leaf=leaf)

    def _planted(self, wrong: str, A, B, C, alpha: float, beta: float, engine: str,  # noqa: ANN001
                 options: RunOptions, workspace=None) -> Callable[[], object]:  # noqa: ANN001
        """The call with the test hook's wrong result (strassenbench.inject.RESULT_KINDS) on ``engine``."""
        from dataclasses import replace

        from .reference.array_ops import ops_for
        from .reference.strassen_ref import Workspace, multiply

        ops = ops_for(C)
        m, k, n = check_operands(A, B, C)
        if wrong == "tf32":  # a 3xTF32 implementation in 1xTF32
            single = MODES[self.run_mode.single]
            if self.kind in ("blas", "cutlass"):
                return lambda: ops.gemm(C, A, B, alpha, beta, single.blas)
            options = replace(options, mode=single.name)
            plan = make_plan(self.algorithm, self.effective_levels(m, k, n), m, k, n)
            return _engine_call(engine, options, plan, A, B, C, alpha, beta)
        if wrong == "drop" and self.kind == "fused":
            plan = make_plan(self.algorithm, self.effective_levels(m, k, n), m, k, n)
            if len(plan.steps) > 1:
                return _engine_call(engine, options, replace(plan, steps=plan.steps[1:]), A, B, C, alpha, beta)
        if wrong == "drop" and self.kind in ("reference", "hybrid"):
            levels = self.levels - (self.kind == "hybrid")
            leaf = _dropping(_Leaves(engine, options) if self.kind == "hybrid" else ops.gemm, ops)
            space = workspace or Workspace(m, k, n, self.workspace_levels, C.dtype, ops)

            def call() -> None:
                leaf.reset()
                multiply(A, B, C, alpha, beta, levels=levels, workspace=space, leaf=leaf)

            return call
        return lambda: ops.scale(C, beta)  # zero, and drop where the one product is the whole GEMM


def _dropping(leaf: Callable, ops) -> Callable:  # noqa: ANN001
    """A leaf that leaves out its first product of every call (out = beta out there): the test hook's drop."""
    state = {"first": True}

    def call(out, a, b, alpha: float, beta: float) -> None:  # noqa: ANN001
        if state["first"]:
            state["first"] = False
            ops.scale(out, beta)
            return
        leaf(out, a, b, alpha, beta)

    def reset() -> None:
        state["first"] = True

    call.reset = reset  # type: ignore[attr-defined]
    return call


def _engine_call(engine: str, options: RunOptions, plan, A, B, C, alpha: float,  # noqa: ANN001
                 beta: float) -> Callable[[], None]:
    """``plan`` on ``engine`` as a replayable call: prepared launches on the fused engines."""
    if engine in FUSED_ENGINES:
        from .engines.fused_engine import prepare

        return prepare(engine, plan, A, B, C, alpha, beta, options)
    kwargs: dict = {"mode": options.mode} if options.tensor else {}  # the numpy engine's options
    if options.scheme_name == PRESUM:
        kwargs["presum"] = True
    return partial(ENGINES[engine], plan, A, B, C, alpha, beta, **kwargs)


def _leaf_call(engine: str, options: RunOptions, out, a, b, alpha: float,  # noqa: ANN001
               beta: float) -> Callable[[], None]:
    """One of the hybrid's leaf products: fused 1-level Strassen on a product of the reference's top level."""
    m, k = a.shape
    n = b.shape[1]
    plan = make_plan("strassen", _levels_for(1, m, k, n), m, k, n)
    return _engine_call(engine, options, plan, a, b, out, alpha, beta)


def _view_key(*arrays) -> tuple:  # noqa: ANN002
    """Where arrays live and how they are laid out (a NumPy or CuPy view)."""
    key = []
    for x in arrays:
        ptr = x.ctypes.data if isinstance(x, np.ndarray) else x.data.ptr
        key.append((ptr, x.shape, x.strides, str(x.dtype)))
    return tuple(key)


class _Leaves:
    """The hybrid's leaf products, each prepared on first sight and replayed after: their operands are
    fixed views of the operands and of the workspace, so the same launches serve every call."""

    def __init__(self, engine: str, options: RunOptions) -> None:
        self.engine, self.options, self.calls = engine, options, {}

    def __call__(self, out, a, b, alpha: float, beta: float) -> None:  # noqa: ANN001
        key = (_view_key(out, a, b), alpha, beta)
        if key not in self.calls:
            self.calls[key] = _leaf_call(self.engine, self.options, out, a, b, alpha, beta)
        self.calls[key]()


_FUSED = ("numpy", "emu", "cuda")


def _tensor_impl(name: str, label: str, levels: int, mode: Mode) -> Impl:
    """A fused implementation on a tensor-core family's kernels: its name ends in the mode's suffix (-tf32,
    -3xtf32, -dmma), its label in the mode's label (strassenbench.families)."""
    options = ("strategy",) if levels == 0 else ("strategy", "scheme")
    return Impl(f"{name}-{mode.suffix}", f"{label} {mode.label} (ours)", _FUSED, levels, "fused",
                options, partial(_fused_bytes, levels), "0", dtypes=mode.dtypes, mode=mode.name)


IMPLS: dict[str, Impl] = {
    impl.name: impl
    for impl in (
        Impl("cublas", "cuBLAS", ("cuda", "numpy"), 0, "blas"),
        # The paper's "CUTLASS" line: CUTLASS's own SIMT SGEMM (strassenbench.fused.cutlass), float32, GPU only.
        Impl("cutlass", "CUTLASS", ("cuda",), 0, "cutlass", dtypes=("float32",)),
        Impl("gemm", "GEMM (ours)", _FUSED, 0, "fused", ("strategy",),
             partial(_fused_bytes, 0), "0"),
        Impl("strassen1", "1-level (ours)", _FUSED, 1, "fused", ("strategy", "scheme"),
             partial(_fused_bytes, 1), "0"),
        Impl("strassen2-direct", "2-level direct (ours)", _FUSED, 2, "fused", ("strategy", "scheme"),
             partial(_fused_bytes, 2), "0"),
        # Beyond the paper, opt-in: the presum scheme (strassenbench.fused.launch), its operand sums formed once
        # into a workspace and the products in order; any algorithm by name, <algorithm>x<L>-presum.
        *(Impl(f"strassen{levels}-presum", f"{levels}-level presum (ours)", _FUSED, levels, "fused", ("strategy",),
               partial(_presum_bytes, levels), presum_formula("strassen", levels), scheme=PRESUM) for levels in (1, 2)),
        Impl("strassen1-ref", "1-level reference", ("cuda", "numpy"), 1, "reference", (),
             partial(_ref_bytes, 1), "(mk + kn + mn)/4"),
        Impl("strassen2-ref", "2-level reference", ("cuda", "numpy"), 2, "reference", (),
             partial(_ref_bytes, 2), "(mk + kn + mn)(1/4 + 1/16)"),
        Impl("strassen2-hybrid", "2-level hybrid (ours)", _FUSED, 2, "hybrid", ("strategy", "scheme"),
             _hybrid_bytes, "(mk + kn + mn)/4"),
        # Beyond the paper, per tensor-core family (strassenbench.families): cuBLAS in the modes it has a compute
        # type for (cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32: 1xTF32), CUTLASS's kernel of the family
        # (strassenbench.fused.cutlass: its example 27's 3xTF32 SGEMM, its DMMA DGEMM, wgmma's sm_90 TF32 GEMM
        # cutlass-tf32-sm90; GPU only), and the fused GEMM, 1-level and 2-level in each mode. wgmma's cuBLAS is the
        # TF32 family's (the same arithmetic: Family.own_cublas).
        *(impl for family in FAMILIES.values() if family.tensor for impl in (
            *(Impl(f"cublas-{mode.suffix}", f"cuBLAS {mode.label}", ("cuda", "numpy"), 0, "blas",
                   dtypes=mode.dtypes, mode=mode.name)
              for mode in map(MODES.get, family.modes) if mode.blas != MODES[SIMT].blas and family.own_cublas),
            *(Impl(baseline_impl(mode), f"CUTLASS {MODES[mode].label}", ("cuda",), 0, "cutlass",
                   dtypes=MODES[mode].dtypes, mode=mode) for mode in family.modes if mode in BASELINES),
            *(_tensor_impl(name, label, levels, MODES[mode]) for mode in family.modes
              for name, label, levels in (("gemm", "GEMM", 0), ("strassen1", "1-level", 1),
                                          ("strassen2", "2-level", 2))))),
        # What `strassenbench pick` ranks first for each shape (strassenbench.model.pick): bench and verify
        # choose per call and record the choice; in SIMT precision, or with the 3xTF32 tensor-core mode too.
        Impl("auto", "auto (pick's first)", ("cuda", "numpy", "emu"), 0, "auto"),
        *(Impl(f"auto-{mode.suffix}", f"auto, {mode.label} too (pick's first)", ("cuda", "numpy", "emu"), 0, "auto",
               dtypes=mode.dtypes) for mode in MODES.values() if mode.staged),
    )
}


# The paper's own implementations, whose times its model gives (Sec. s:analysis; strassenbench.model.perf): our GEMM,
# direct 1- and 2-level Strassen, the workspace-based references and the hybrid.
PAPER_MODELED = ("gemm", "strassen1", "strassen2-direct", "strassen1-ref", "strassen2-ref", "strassen2-hybrid")


def family_impls(family: str) -> tuple[str, ...]:
    """The registry's fused implementations on ``family``'s kernels (strassenbench.families), and its baselines."""
    return tuple(name for name, impl in IMPLS.items() if impl.kind != "auto" and impl.family.name == family)


_FAST_NAME = re.compile(r"^(?P<algorithm>.+?)x(?P<levels>[1-9][0-9]*)$")


def fast_impl(algorithm: str, levels: int | None = None, mode: str = SIMT, presum: bool = False) -> Impl:
    """The fused implementation of ``levels`` levels of ``algorithm`` (a name of algorithms/ or a path), or of
    a mixed spec ``a+b`` (its levels: one per part). Named ``<algorithm>x<L>`` (``grey322-11-50x1``) or by
    the mixed spec itself (``grey322-11-50+strassen``); on the tensor cores (``mode`` 1xtf32 or 3xtf32) with
    the mode's suffix, ``grey322-11-50x1-3xtf32``; on the FP64 tensor cores (``mode`` dmma) in float64,
    ``grey322-11-50x1-dmma``. ``presum``: in the presum scheme, the name ending in ``-presum``."""
    fixed = spec_levels(algorithm)
    levels = fixed if levels is None else levels
    if not levels:
        raise ImplError(f"{algorithm}: give the levels, e.g. {algorithm}x1")
    if levels > MAX_LEVELS:
        raise ImplError(f"{algorithm}x{levels}: {levels} levels is above the maximum {MAX_LEVELS}")
    try:
        check_levels(algorithm, levels)
    except (AlgorithmError, LimitError) as err:
        raise ImplError(str(err)) from None
    name = algorithm if fixed else f"{algorithm}x{levels}"
    label = f"{algorithm} (ours)" if fixed else f"{algorithm} {levels}-level (ours)"
    run = MODES[mode]
    if run.tensor:
        name, label = f"{name}-{run.suffix}", f"{label[:-len(' (ours)')]} {run.label} (ours)"
    if presum:
        return Impl(f"{name}-{PRESUM}", f"{label[:-len(' (ours)')]} presum (ours)", _FUSED, levels, "fused",
                    ("strategy",), partial(_presum_bytes, levels, algorithm=algorithm),
                    presum_formula(algorithm, levels), algorithm=algorithm, dtypes=run.dtypes, mode=mode,
                    scheme=PRESUM)
    return Impl(name, label, _FUSED, levels, "fused", ("strategy", "scheme"),
                partial(_fused_bytes, levels, algorithm=algorithm), "0", algorithm=algorithm,
                dtypes=run.dtypes, mode=mode)


def algorithm_impl(algorithm: str) -> Impl:
    """The implementation an algorithm is compared by: one level of a name (``grey322-11-50x1``), a mixed
    spec at its own levels."""
    return fast_impl(algorithm, spec_levels(algorithm) or 1)


def get_impl(name: str) -> Impl:
    """An implementation of the registry, or a fused one of any algorithm (``fast_impl``)."""
    if name in IMPLS:
        return IMPLS[name]
    presum = name.endswith(f"-{PRESUM}")
    base, mode = mode_by_suffix(name.removesuffix(f"-{PRESUM}"))
    if "+" in base:
        return fast_impl(base, mode=mode, presum=presum)
    match = _FAST_NAME.match(base)
    if match is None:
        raise ImplError(f"unknown implementation '{name}' (choose from {', '.join(IMPLS)}, or <algorithm>x<levels> "
                        "such as grey322-11-50x1, or a mixed spec such as grey322-11-50+strassen; "
                        f"{', '.join(f'-{m.suffix}' for m in MODES.values() if m.tensor)} after it runs in that "
                        f"tensor-core mode, and -{PRESUM} last in the presum scheme)")
    return fast_impl(match["algorithm"], int(match["levels"]), mode, presum)


def table(m: int | None = None, n: int | None = None, k: int | None = None, dtype: str = "float32") -> list[dict]:
    """Rows impl,label,engines,extra_memory for `strassenbench impls`; with a shape also levels, options
    and extra_bytes."""
    rows = []
    for impl in IMPLS.values():
        row = {"impl": impl.name, "label": impl.label, "engines": " ".join(impl.engines), "extra_memory": impl.formula}
        if m is not None:
            row.update(levels=impl.levels, options=" ".join(impl.options), extra_bytes=impl.extra_bytes(m, n, k, dtype))
        rows.append(row)
    return rows

