"""Modeled time: what every formula of the model returns (strassenbench.model.perf for the SIMT kernels and
whole implementations, strassenbench.model.tensor for the tensor-core kernels), and the three models that bound
it by different terms:

    paper   max(T_flop, T_gmop, T_smop)                       the paper's model alone (Sec. s:analysis)
    issue   max(T_flop, T_gmop, T_smop, T_issue, T_latency)   with the main loop's issue slots and the slices'
                                                              load latency: the default
    l2      max(T_flop, T_dram, T_l2, T_smop, T_issue, T_latency)   and global traffic through the L2 for T_gmop

and, in every model, T_stream: a stage of concurrent launches takes at least its longest stream's launches one
after another (strassenbench.model.schemes; 0 for a launch alone).
T_issue, T_latency, T_dram, T_l2 and T_stream are this project's terms (strassenbench.model.issue, .latency,
.memory, .schemes).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .files import DEFAULT_MODEL, ModelError

__all__ = ["Timing", "ZERO", "INFINITE", "MODELS", "DEFAULT_MODEL", "bounded", "sum_of"]

# The terms each model bounds a kernel's time by (Timing's fields)
MODELS: dict[str, tuple[str, ...]] = {
    "issue": ("t_flop", "t_gmop", "t_smop", "t_issue", "t_latency", "t_stream"),
    "paper": ("t_flop", "t_gmop", "t_smop", "t_stream"),
    "l2": ("t_flop", "t_dram", "t_l2", "t_smop", "t_issue", "t_latency", "t_stream"),
}


@dataclass(frozen=True)
class Timing:
    """Modeled seconds, with every model's components summed over the kernels that make it up.

    One kernel takes the largest of its model's terms (MODELS); kernels run one after another, so their
    seconds add. Every term is reported whichever model bounds the time.
    """

    seconds: float
    t_flop: float
    t_gmop: float
    t_smop: float
    t_issue: float = 0.0  # issue slots (strassenbench.model.issue): this project's term, not the paper's
    t_dram: float = 0.0  # DRAM with a wave's reuse (strassenbench.model.memory): this project's
    t_l2: float = 0.0  # every block's words through the L2 (strassenbench.model.memory): this project's
    t_stream: float = 0.0  # a stage's longest stream, its launches each alone (strassenbench.model.schemes)
    t_latency: float = 0.0  # each slice's load latency left uncovered (strassenbench.model.latency): this project's
    model: str = ""  # which of MODELS bounds ``seconds`` ("": ZERO or INFINITE, which any model may add)

    def __add__(self, other: "Timing") -> "Timing":
        return Timing(*(a + b for a, b in zip(self.numbers(), other.numbers())), model=_joined(other.model, self.model))

    def __mul__(self, times: int) -> "Timing":
        return Timing(*(a * times for a in self.numbers()), model=self.model)

    def numbers(self) -> tuple[float, ...]:
        """Every field but ``model``, in order (spelled out: dataclasses.astuple copies, and the model adds
        Timings millions of times for one `pick` table)."""
        return (self.seconds, self.t_flop, self.t_gmop, self.t_smop, self.t_issue, self.t_dram, self.t_l2,
                self.t_stream, self.t_latency)

    @property
    def limiter(self) -> str:
        """Which term of its model dominates: flop, gmop, smop, issue, latency, dram, l2 or stream."""
        parts = {name.removeprefix("t_"): getattr(self, name) for name in MODELS[self.model or DEFAULT_MODEL]}
        return max(parts, key=parts.__getitem__)


def _joined(onto: str, added: str) -> str:
    """The model of a sum: the one its times share ("" takes any: ZERO, INFINITE); ValueError for two."""
    if onto and added and onto != added:
        raise ValueError(f"a time by model {added} added to one by model {onto}")
    return onto or added


# Each model's terms as positions in bounded's tuple: Timing's fields between ``seconds`` and ``model``.
_TERMS = {model: tuple([f.name for f in fields(Timing)][1:-1].index(t) for t in terms)
          for model, terms in MODELS.items()}


def sum_of(terms) -> Timing:  # noqa: ANN001 - iterable of (Timing, count)
    """ZERO + t_1 * count_1 + t_2 * count_2 + ..., added in that order field by field (the same sums as those
    Timings' + and *, without a Timing between: a prediction adds hundreds of thousands of them)."""
    totals = [0.0] * 9
    model = ""
    for timing, count in terms:
        model = _joined(model, timing.model)
        for i, value in enumerate(timing.numbers()):
            totals[i] = totals[i] + value * count
    return Timing(*totals, model=model)


def bounded(model: str, t_flop: float, t_gmop: float, t_smop: float, t_issue: float, t_dram: float,
            t_l2: float, t_stream: float = 0.0, t_latency: float = 0.0) -> Timing:
    """One kernel's or stage's Timing: every term, and its seconds the largest of ``model``'s terms (ModelError
    for a model that is not one of MODELS). ``t_stream``: a stage's longest stream (0 for one launch alone);
    ``t_latency``: the slices' uncovered load latency (strassenbench.model.latency; 0 where not modeled)."""
    if model not in MODELS:
        raise ModelError(f"no model {model!r} (choose from {', '.join(MODELS)})")
    terms = (t_flop, t_gmop, t_smop, t_issue, t_dram, t_l2, t_stream, t_latency)
    return Timing(max(terms[i] for i in _TERMS[model]), *terms, model=model)


ZERO = Timing(0.0, 0.0, 0.0, 0.0, 0.0)
# A kernel that cannot run (no block fits an SM, or the GPU has no such unit).
INFINITE = Timing(*(float("inf"),) * 9)
