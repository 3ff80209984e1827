"""Modeled time: what every formula of the model returns (strassenbench.model.perf for the SIMT kernels and
whole implementations, strassenbench.model.tensor for the tensor-core kernels)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Timing", "ZERO", "INFINITE"]


@dataclass(frozen=True)
class Timing:
    """Modeled seconds, with the three components summed over the kernels that make it up.

    One kernel takes max(T_flop, T_gmop, T_smop); kernels run one after another, so their seconds add.
    """

    seconds: float
    t_flop: float
    t_gmop: float
    t_smop: float
    t_issue: float = 0.0  # issue slots (strassenbench.model.issue): this project's term, not the paper's

    def __add__(self, other: "Timing") -> "Timing":
        return Timing(*(a + b for a, b in zip(self.astuple(), other.astuple())))

    def __mul__(self, times: int) -> "Timing":
        return Timing(*(a * times for a in self.astuple()))

    def astuple(self) -> tuple[float, float, float, float, float]:
        return self.seconds, self.t_flop, self.t_gmop, self.t_smop, self.t_issue

    @property
    def limiter(self) -> str:
        """Which resource dominates: flop, gmop, smop or issue."""
        parts = {"flop": self.t_flop, "gmop": self.t_gmop, "smop": self.t_smop, "issue": self.t_issue}
        return max(parts, key=parts.__getitem__)


ZERO = Timing(0.0, 0.0, 0.0, 0.0, 0.0)
# A kernel that cannot run (no block fits an SM, or the GPU has no such unit).
INFINITE = Timing(float("inf"), float("inf"), float("inf"), float("inf"), float("inf"))
