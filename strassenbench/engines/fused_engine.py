"""The fused engines: the CUDA kernels of kernels/ run on the CPU emulator (``emu``) or the GPU (``cuda``).

Both build their launches with strassenbench.fused.launch.plan_launches from the same plan; only the runner
differs.
"""

from __future__ import annotations

from collections.abc import Callable

from ..gemm import check_operands
from ..options import RunOptions
from ..plan import Plan

__all__ = ["emu_gemm", "cuda_gemm", "prepare", "run"]


def _check(plan: Plan, A, B, C) -> None:  # noqa: ANN001
    m, k, n = check_operands(A, B, C)
    if (m, k, n) != (plan.m, plan.k, plan.n):
        raise ValueError(f"plan is for {plan.m}x{plan.k}x{plan.n}, operands are {m}x{k}x{n}")


def prepare(engine: str, plan: Plan, A, B, C, alpha: float = 1.0, beta: float = 0.0,  # noqa: ANN001
            options: RunOptions = RunOptions()) -> Callable[[], None]:
    """Build the launches once (their kernel parameters included) and return a call that replays them.

    The benchmark times replays, as an application holding its kernel parameters would run; ``run`` prepares
    and runs once. Operands must be the engine's arrays (NumPy for emu, CuPy for cuda). ``options`` were
    checked where they were made (strassenbench.options)."""
    from ..fused.launch import launch_program

    _check(plan, A, B, C)
    if engine not in options.family.defaults:
        raise ValueError(f"no fused engine '{engine}' (choose from emu, cuda)")
    program = launch_program(plan, A, B, C, alpha, beta, options, options.kernel_strategy(engine))
    if engine == "cuda":
        from ..fused import cuda

        return cuda.Prepared(program, options.build_dir, (A, B, C))
    from ..fused import emu

    return lambda: emu.run(program, operands=(A, B, C))


def run(engine: str, plan: Plan, A, B, C, alpha: float, beta: float, options: RunOptions) -> None:  # noqa: ANN001
    """C <- alpha A B + beta C in place, once, on ``engine``: on cuda, CuPy arrays in place and NumPy arrays
    copied there and back."""
    if engine != "cuda":
        prepare(engine, plan, A, B, C, alpha, beta, options)()
        return
    from ..fused.cuda import on_device

    _check(plan, A, B, C)
    on_device(lambda dA, dB, dC: prepare("cuda", plan, dA, dB, dC, alpha, beta, options)(), A, B, C)


def emu_gemm(
    plan: Plan, A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
    strategy: str | None = None, scheme: str | None = None, streams: int | None = None, mode: str = "simt",
    split_k: int | None = None,
) -> None:
    """C <- alpha A B + beta C in place by the real kernels on the CPU emulator (NumPy arrays); ``split_k`` the
    splitk scheme's parts (strassenbench.options)."""
    run("emu", plan, A, B, C, alpha, beta, RunOptions(strategy, scheme, streams, mode=mode, split_k=split_k))


def cuda_gemm(
    plan: Plan, A, B, C, alpha: float = 1.0, beta: float = 0.0, *,  # noqa: ANN001
    strategy: str | None = None, scheme: str | None = None, streams: int | None = None, build_dir: str = "build",
    mode: str = "simt", split_k: int | None = None,
) -> None:
    """C <- alpha A B + beta C on the GPU. CuPy arrays run in place; NumPy arrays are copied there and back."""
    run("cuda", plan, A, B, C, alpha, beta, RunOptions(strategy, scheme, streams, build_dir, mode, split_k))
