"""What a program of launches is (strassenbench.fused.launch builds them, the engines run them): a Launch (kernel,
grid, block, arguments), a Program (stages of streams of launches), a tensor map argument, and the operand sums'
coefficients as the kernels take them."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .instances import Instance

__all__ = ["Launch", "Program", "TensorMapArg", "address", "map_bytes", "normalised"]


@dataclass(frozen=True)
class TensorMapArg:
    """A TMA tensor map kernel parameter (CUtensorMap, 128 bytes) of a whole row-major operand: boxes of
    ``box`` = (columns, rows) elements in shared memory with no swizzle or (``swizzle`` 128) the 128-byte one,
    zeros outside the operand. Each engine encodes it for its device: the cuda engine through the driver
    (cuTensorMapEncodeTiled), the emulator in its own encoding. None for a map the kernel never reads (128 zero
    bytes)."""

    array: Any  # NumPy (emulator) or CuPy (cuda) array; None: unused
    box: tuple[int, int] = (0, 0)
    swizzle: int = 0  # bytes: 0 or 128


def map_bytes():  # noqa: ANN201 - a NumPy array
    """128 zero bytes, 64-byte aligned (as CUtensorMap asks), for an engine to encode a TensorMapArg into."""
    import numpy as np

    raw = np.zeros(128 + 64, np.uint8)
    return raw[-raw.ctypes.data % 64:][:128]


def address(x) -> int:  # noqa: ANN001 - NumPy or CuPy array
    """The device (CuPy) or host (NumPy, for the emulator) address of x[0, 0]."""
    return int(x.data.ptr) if hasattr(x.data, "ptr") else int(x.ctypes.data)


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Any, ...]
    products: tuple[str, ...] = ()  # the plan's product names this launch computes
    instance: Instance | None = None  # the kernel instantiation (None for the scale kernel)
    shared: int = 0  # dynamic shared memory per block, bytes (the Wg kernels')
    persistent: bool = False  # grid[0] is the launch's tiles; an engine may launch fewer blocks (its SMs' worth)


@dataclass(frozen=True)
class Program:
    stages: tuple[tuple[tuple[Launch, ...], ...], ...]  # stages -> streams -> launches
    workspace: tuple[Any, ...] = ()  # arrays the launches address (the presum scheme's), held while it lives

    @property
    def launches(self) -> list[Launch]:
        """Every launch in an order that respects the stages (how the single-stream emulator runs them)."""
        return [launch for stage in self.stages for lane in stage for launch in lane]

    @property
    def num_streams(self) -> int:
        return max((len(stage) for stage in self.stages), default=1)


def normalised(coeffs: list) -> list:
    """An operand sum's coefficients as the kernel takes them: the first u_0 (the factor the kernel moves to the
    write-back, tile_loader.cuh fold_scale), the others u_t / u_0 (the first term then enters the sum
    unscaled). Exact: the catalogue's coefficients are powers of two up to sign."""
    return [coeffs[0], *(Fraction(c) / Fraction(coeffs[0]) for c in coeffs[1:])]
