"""The fused engines: the CUDA kernels of kernels/ run on the CPU emulator (``emu``) or the GPU (``cuda``).

Both build their launches with strassenbench.fused.launch.plan_launches from the same plan; only the runner
differs.
"""

from __future__ import annotations

from collections.abc import Callable
from ..gemm import check_operands
from ..plan import Plan
from ..strategies import get_strategy

__all__ = ["emu_gemm", "cuda_gemm", "prepare", "DEFAULT_STRATEGY"]

# The emulator runs one OS thread per CUDA thread: its default is the smallest block; the GPU's is the paper's
# (for the tensor-core modes, the tensor-core family's smallest and largest).
DEFAULT_STRATEGY = {"emu": "Small", "cuda": "Huge"}
DEFAULT_TENSOR_STRATEGY = {"emu": "TcSmall", "cuda": "TcHuge"}


def _check(plan: Plan, A, B, C) -> None:  # noqa: ANN001
    m, k, n = check_operands(A, B, C)
    if (m, k, n) != (plan.m, plan.k, plan.n):
        raise ValueError(f"plan is for {plan.m}x{plan.k}x{plan.n}, operands are {m}x{k}x{n}")


def prepare(
    engine: str, plan: Plan, A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
    strategy: str | None = None, scheme: str = "sequential", streams: int | None = None, build_dir: str = "build",
    mode: str = "simt",
) -> Callable[[], None]:
    """Build the launches once (their kernel parameters included) and return a call that replays them.

    The benchmark times replays, as an application holding its kernel parameters would run; ``emu_gemm`` and
    ``cuda_gemm`` prepare and run once. Operands must be the engine's arrays (NumPy for emu, CuPy for cuda).
    """
    from ..fused.launch import plan_launches

    _check(plan, A, B, C)
    if engine not in DEFAULT_STRATEGY:
        raise ValueError(f"no fused engine '{engine}' (choose from emu, cuda)")
    tensor = mode != "simt"
    default = (DEFAULT_TENSOR_STRATEGY if tensor else DEFAULT_STRATEGY)[engine]
    program = plan_launches(plan, A, B, C, alpha, beta, strategy=get_strategy(strategy or default, tensor),
                            scheme=scheme, streams=streams, mode=mode)
    if engine == "cuda":
        from ..fused import cuda

        return cuda.Prepared(program, build_dir, (A, B, C))
    from ..fused import emu

    return lambda: emu.run(program)


def emu_gemm(
    plan: Plan, A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
    strategy: str | None = None, scheme: str = "sequential", streams: int | None = None, mode: str = "simt",
) -> None:
    """C <- alpha A B + beta C in place by the real kernels on the CPU emulator (NumPy arrays)."""
    prepare("emu", plan, A, B, C, alpha, beta, strategy=strategy, scheme=scheme, streams=streams, mode=mode)()


def cuda_gemm(
    plan: Plan, A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
    strategy: str | None = None, scheme: str = "sequential", streams: int | None = None, build_dir: str = "build",
    mode: str = "simt",
) -> None:
    """C <- alpha A B + beta C on the GPU. CuPy arrays run in place; NumPy arrays are copied there and back."""
    from ..fused.cuda import on_device

    _check(plan, A, B, C)
    on_device(lambda dA, dB, dC: prepare("cuda", plan, dA, dB, dC, alpha, beta, strategy=strategy, scheme=scheme,
                                         streams=streams, build_dir=build_dir, mode=mode)(), A, B, C)
