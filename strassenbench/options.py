"""How a fused run is set up: block-size strategy, task-parallel scheme, streams, build folder and math mode.

``RunOptions`` is made once (by the command line, an implementation or a caller of the engines), checked
where it is made, and travels unchanged to the kernel launches (strassenbench.engines.fused_engine.prepare,
strassenbench.fused.launch). A strategy is checked by ``strategies.get_strategy`` and a scheme by
``check_scheme``, nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from .strategies import DMMA_MODE, DmmaStrategy, Strategy, TensorStrategy, get_strategy
from .tensorcore import MODES as TENSOR_MODES

__all__ = ["RunOptions", "OptionsError", "SCHEMES", "DEFAULT_STREAMS", "MODES", "DEFAULT_STRATEGY",
           "DEFAULT_TENSOR_STRATEGY", "DEFAULT_DMMA_STRATEGY", "check_scheme"]

# The paper's three task-parallel schemes (Sec. s:task; strassenbench.fused.launch) and their streams.
SCHEMES = ("sequential", "streams", "atomic")
DEFAULT_STREAMS = {"sequential": 1, "streams": 2, "atomic": 4}
MODES = ("simt", *TENSOR_MODES, DMMA_MODE)  # DMMA_MODE: float64 on the FP64 tensor cores (sm_80 and later)

# The emulator runs one OS thread per CUDA thread: its default is the smallest block; the GPU's is the paper's
# (for the tensor-core modes, the tensor-core family's smallest and largest).
DEFAULT_STRATEGY = {"emu": "Small", "cuda": "Huge"}
DEFAULT_TENSOR_STRATEGY = {"emu": "TcSmall", "cuda": "TcHuge"}
DEFAULT_DMMA_STRATEGY = {"emu": "DmmaSmall", "cuda": "DmmaLarge"}


class OptionsError(ValueError):
    """A strategy, scheme, stream count or mode no fused run takes."""


def check_scheme(scheme: str | None, streams: int | None) -> int:
    """The streams ``scheme`` (None: sequential) runs on: ``streams``, or the scheme's default."""
    scheme = scheme or "sequential"
    if scheme not in SCHEMES:
        raise OptionsError(f"unknown scheme '{scheme}' (choose from {', '.join(SCHEMES)})")
    streams = DEFAULT_STREAMS[scheme] if streams is None else streams
    if isinstance(streams, bool) or not isinstance(streams, int):
        raise OptionsError(f"streams must be an integer, got {streams!r}")
    if scheme == "sequential" and streams != 1:
        raise OptionsError("the sequential scheme runs on one stream")
    if streams < 1:
        raise OptionsError(f"streams must be >= 1, got {streams}")
    return streams


@dataclass(frozen=True)
class RunOptions:
    """The options of one fused run. ``strategy`` None is the engine's default (DEFAULT_STRATEGY), ``scheme``
    None is sequential, ``streams`` None the scheme's default (DEFAULT_STREAMS)."""

    strategy: str | None = None
    scheme: str | None = None
    streams: int | None = None
    build_dir: str = "build"
    mode: str = "simt"  # or a tensor-core mode (strassenbench.tensorcore.MODES)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise OptionsError(f"unknown mode '{self.mode}' (choose from {', '.join(MODES)})")
        if self.strategy is not None:
            try:
                get_strategy(self.strategy, self.tensor, self.dmma)
            except ValueError as err:
                raise OptionsError(str(err)) from None
        check_scheme(self.scheme, self.streams)

    @property
    def tensor(self) -> bool:
        """A tensor-core mode: TF32 (float32) or DMMA (float64)."""
        return self.mode != "simt"

    @property
    def dmma(self) -> bool:
        return self.mode == DMMA_MODE

    @property
    def scheme_name(self) -> str:
        return self.scheme or "sequential"

    @property
    def stream_count(self) -> int:
        return DEFAULT_STREAMS[self.scheme_name] if self.streams is None else self.streams

    def kernel_strategy(self, engine: str) -> Strategy | TensorStrategy | DmmaStrategy:
        """The strategy the kernels of ``engine`` (emu or cuda) run: the one given, or the engine's default."""
        defaults = DEFAULT_DMMA_STRATEGY if self.dmma else DEFAULT_TENSOR_STRATEGY if self.tensor else DEFAULT_STRATEGY
        if engine not in defaults:
            raise OptionsError(f"no fused engine '{engine}' (choose from {', '.join(defaults)})")
        return get_strategy(self.strategy or defaults[engine], self.tensor, self.dmma)

    def given(self) -> dict[str, object]:
        """The strategy, scheme and streams that were given (what a result row records)."""
        return {key: value for key, value in (("strategy", self.strategy), ("scheme", self.scheme),
                                              ("streams", self.streams)) if value is not None}
