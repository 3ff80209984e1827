"""The fused engines: the CUDA kernels of kernels/ run on the CPU emulator (``emu``) or the GPU (``cuda``).

Both build their launches with strassenbench.fused.launch.plan_launches from the same plan; only the runner
differs.
"""

from __future__ import annotations

import numpy as np

from ..gemm import check_operands
from ..plan import Plan
from ..strategies import get_strategy

__all__ = ["emu_gemm", "cuda_gemm", "FUSED_OPTIONS"]

FUSED_OPTIONS = ("strategy", "scheme", "streams")


def _check(plan: Plan, A, B, C) -> None:  # noqa: ANN001
    m, k, n = check_operands(A, B, C)
    if (m, k, n) != (plan.m, plan.k, plan.n):
        raise ValueError(f"plan is for {plan.m}x{plan.k}x{plan.n}, operands are {m}x{k}x{n}")


def emu_gemm(
    plan: Plan, A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
    strategy: str = "Small", scheme: str = "sequential", streams: int | None = None,
) -> None:
    """C <- alpha A B + beta C in place by the real kernels on the CPU emulator (NumPy arrays)."""
    from ..fused import emu
    from ..fused.launch import plan_launches

    _check(plan, A, B, C)
    emu.run(plan_launches(plan, A, B, C, alpha, beta, strategy=get_strategy(strategy), scheme=scheme,
                          streams=streams))


def cuda_gemm(
    plan: Plan, A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
    strategy: str = "Huge", scheme: str = "sequential", streams: int | None = None, build_dir: str = "build",
) -> None:
    """C <- alpha A B + beta C on the GPU. CuPy arrays run in place; NumPy arrays are copied there and back."""
    from ..fused import cuda
    from ..fused.launch import plan_launches

    _check(plan, A, B, C)
    cupy = cuda._cupy()
    host = isinstance(C, np.ndarray)
    dA, dB, dC = (cupy.asarray(x) for x in (A, B, C)) if host else (A, B, C)
    cuda.run(plan_launches(plan, dA, dB, dC, alpha, beta, strategy=get_strategy(strategy), scheme=scheme,
                           streams=streams, to_device=cupy.asarray), build_dir=build_dir)
    if host:
        C[...] = cupy.asnumpy(dC)
