"""The six block-size strategies of figure tab:gpu_block_size (CUTLASS's SIMT SGEMM configurations).

Thread block m_S x n_S x k_S, thread m_R x n_R, warp (m_W / m_R) x (n_W / n_R) threads. Every other size is
derived: a thread block has (m_S / m_R)(n_S / n_R) threads (Sec. s:cutlass).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Strategy", "STRATEGIES", "get_strategy"]


@dataclass(frozen=True)
class Strategy:
    name: str
    m_S: int
    n_S: int
    k_S: int
    m_R: int
    n_R: int
    warp_m: int  # m_W / m_R
    warp_n: int  # n_W / n_R

    def __post_init__(self) -> None:
        if self.warp_m * self.warp_n != 32:
            raise ValueError(f"strategy {self.name}: a warp has 32 threads, not {self.warp_m} x {self.warp_n}")
        if self.m_S % self.m_W or self.n_S % self.n_W:
            raise ValueError(f"strategy {self.name}: the warp tile must divide the thread block tile")

    @property
    def m_W(self) -> int:
        return self.warp_m * self.m_R

    @property
    def n_W(self) -> int:
        return self.warp_n * self.n_R

    @property
    def threads(self) -> int:
        """t_x t_y = (m_S n_S) / (m_R n_R), figure tab:notation."""
        return (self.m_S // self.m_R) * (self.n_S // self.n_R)

    def smem_bytes(self, itemsize: int) -> int:
        """The A and B tiles in shared memory: sizeof(T)(m_S k_S + n_S k_S), Eq. (constrain_sha_size)."""
        return itemsize * (self.m_S + self.n_S) * self.k_S


_TABLE = """
Small   16  16 16 2 2 4 8
Medium  32  32  8 4 4 4 8
Large   64  64  8 8 8 4 8
Tall   128  32  8 8 4 8 4
Wide    32 128  8 4 8 4 8
Huge   128 128  8 8 8 4 8
"""  # figure tab:gpu_block_size: Strategy, m_S, n_S, k_S, m_R, n_R, m_W/m_R, n_W/n_R

STRATEGIES: dict[str, Strategy] = {
    fields[0]: Strategy(fields[0], *map(int, fields[1:]))
    for fields in (line.split() for line in _TABLE.strip().splitlines())
}


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy '{name}' (choose from {', '.join(STRATEGIES)})") from None
