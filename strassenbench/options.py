"""How a fused run is set up: block-size strategy, task-parallel scheme, streams, build folder and math mode.

``RunOptions`` is made once (by the command line, an implementation or a caller of the engines), checked
where it is made, and travels unchanged to the kernel launches (strassenbench.engines.fused_engine.prepare,
strassenbench.fused.launch). A strategy is checked by ``families.get_strategy`` and a scheme by
``check_scheme``, nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from .families import MODES, SIMT, Family, Mode, get_strategy
from .strategies import DmmaStrategy, Strategy, TensorStrategy

__all__ = ["RunOptions", "OptionsError", "SCHEMES", "PAPER_SCHEMES", "SPLITK", "ATOMIC_SCHEMES", "MAX_SPLIT", "SPLITS", "PRESUM",
           "RUN_SCHEMES", "DEFAULT_STREAMS", "check_scheme", "scheme_or_sequential"]

# The paper's three task-parallel schemes (Sec. s:task; strassenbench.fused.launch) and their streams.
PAPER_SCHEMES = ("sequential", "streams", "atomic")
# Beyond the paper: the atomic scheme with each product's k split into S parts, each a block of its own that adds
# its part of the product into C through the atomic write-back (more blocks where one wave is too few, at S times
# the write-back's reductions). S is a run option (RunOptions.split_k); a sweep takes the model's choice for each
# size (strassenbench.model.perf.best_split).
SPLITK = "splitk"
SCHEMES = (*PAPER_SCHEMES, SPLITK)  # the schemes any fused implementation takes (--scheme)
ATOMIC_SCHEMES = ("atomic", SPLITK)  # the schemes whose kernels write back with atomic adds
MAX_SPLIT = 16  # the most parts a product's k is split into
# The splits the model chooses among (strassenbench.model.perf.best_split): every count of parts up to 4, then
# coarser, which keeps a ranking of every candidate (pick, model winners) to a few times the atomic scheme's work.
SPLITS = (1, 2, 3, 4, 6, 8, 12, MAX_SPLIT)
# Beyond the paper: the operand sums formed once into a workspace, then the products in order
# (strassenbench.fused.launch). Opt-in: an implementation of its own runs it (strassen1-presum, ...), never a
# --scheme of the workspace-free ones, whose declared memory is none.
PRESUM = "presum"
RUN_SCHEMES = (*SCHEMES, PRESUM)  # every scheme a run (and so a results file) may have
DEFAULT_STREAMS = {"sequential": 1, "streams": 2, "atomic": 4, SPLITK: 4, PRESUM: 1}


def scheme_or_sequential(scheme: str | None) -> str:
    """A scheme as given, or sequential where none was (None, or blank in an older file): the paper's products one
    after another. The one place a missing scheme is read."""
    return scheme if scheme else SCHEMES[0]


class OptionsError(ValueError):
    """A strategy, scheme, stream count or mode no fused run takes."""


def check_scheme(scheme: str | None, streams: int | None) -> int:
    """The streams ``scheme`` (None: sequential) runs on: ``streams``, or the scheme's default."""
    scheme = scheme_or_sequential(scheme)
    if scheme not in DEFAULT_STREAMS:
        raise OptionsError(f"unknown scheme '{scheme}' (choose from {', '.join(SCHEMES)})")
    streams = DEFAULT_STREAMS[scheme] if streams is None else streams
    if isinstance(streams, bool) or not isinstance(streams, int):
        raise OptionsError(f"streams must be an integer, got {streams!r}")
    if scheme in ("sequential", PRESUM) and streams != 1:
        raise OptionsError(f"the {scheme} scheme runs on one stream")
    if streams < 1:
        raise OptionsError(f"streams must be >= 1, got {streams}")
    return streams


@dataclass(frozen=True)
class RunOptions:
    """The options of one fused run. ``strategy`` None is the engine's default (its family's Family.defaults),
    ``scheme`` None is sequential, ``streams`` None the scheme's default (DEFAULT_STREAMS)."""

    strategy: str | None = None
    scheme: str | None = None
    streams: int | None = None
    build_dir: str = "build"
    mode: str = SIMT  # or a tensor-core mode (strassenbench.families.MODES)
    split_k: int | None = None  # the splitk scheme's S (its runs need one; strassenbench.model.pick.split_options)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise OptionsError(f"unknown mode '{self.mode}' (choose from {', '.join(MODES)})")
        if self.strategy is not None:
            try:
                get_strategy(self.strategy, self.mode)
            except ValueError as err:
                raise OptionsError(str(err)) from None
        check_scheme(self.scheme, self.streams)
        if self.split_k is not None:
            if self.scheme != SPLITK:
                raise OptionsError(f"split_k is the {SPLITK} scheme's option, not the {self.scheme_name} scheme's")
            if isinstance(self.split_k, bool) or not isinstance(self.split_k, int) or \
                    not 1 <= self.split_k <= MAX_SPLIT:
                raise OptionsError(f"split_k must be an integer from 1 to {MAX_SPLIT}, got {self.split_k!r}")

    @property
    def run_mode(self) -> Mode:
        return MODES[self.mode]

    @property
    def family(self) -> Family:
        return self.run_mode.kernel_family

    @property
    def tensor(self) -> bool:
        """A tensor-core mode: TF32 (float32) or DMMA (float64) (strassenbench.families.Mode.tensor)."""
        return self.run_mode.tensor

    @property
    def scheme_name(self) -> str:
        return scheme_or_sequential(self.scheme)

    @property
    def stream_count(self) -> int:
        return DEFAULT_STREAMS[self.scheme_name] if self.streams is None else self.streams

    def kernel_strategy(self, engine: str) -> Strategy | TensorStrategy | DmmaStrategy:
        """The strategy the kernels of ``engine`` (emu or cuda) run: the one given, or the engine's default."""
        defaults = self.family.defaults
        if engine not in defaults:
            raise OptionsError(f"no fused engine '{engine}' (choose from {', '.join(defaults)})")
        return get_strategy(self.strategy or defaults[engine], self.mode)

    @property
    def write_mode(self) -> str:
        """How the kernels write C back: ``atomic`` adds in the atomic and splitk schemes, else ``plain``."""
        return "atomic" if self.scheme_name in ATOMIC_SCHEMES else "plain"

    def given(self) -> dict[str, object]:
        """The strategy, scheme, streams and split that were given (what a result row records)."""
        return {key: value for key, value in (("strategy", self.strategy), ("scheme", self.scheme),
                                              ("streams", self.streams), ("split_k", self.split_k))
                if value is not None}
