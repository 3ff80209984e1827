"""The paper's three sweeps (Sec. s:gpu_exp, figure fig:stra_square) and size lists."""

from __future__ import annotations

from collections.abc import Callable
from .limits import MAX_DIMENSION, MAX_SWEEP_POINTS, LimitError, decimal

__all__ = ["SWEEPS", "PAPER_FIXED", "shape", "parse_sizes", "PAPER_SIZES", "MODEL_SQUARE_IMPLS",
           "MODEL_SQUARE_STRATEGIES"]

# sweep -> (what it fixes, (m, k, n) as a function of the swept size x and the fixed size f)
SWEEPS: dict[str, tuple[str, Callable[[int, int], tuple[int, int, int]]]] = {
    "square": ("m = k = n = x", lambda x, f: (x, x, x)),
    "rankk": ("k = f (4096), m = n = x", lambda x, f: (x, f, x)),
    "panel": ("m = n = f (8192), k = x", lambda x, f: (f, x, f)),
}
PAPER_FIXED = {"square": 0, "rankk": 4096, "panel": 8192}  # the paper's fixed sizes (Sec. s:gpu_exp)

PAPER_SIZES = "512:20480:512"  # the paper's x axes run to 20,480

# Figure fig:model_square: GEMM and direct 1- and 2-level Strassen (their products one after another), measured
# and modeled with the Huge and Small strategies (the workflow's strategies and model_strategies rules, the
# report's figure and caption).
MODEL_SQUARE_IMPLS = ("gemm", "strassen1", "strassen2-direct")
MODEL_SQUARE_STRATEGIES = ("Huge", "Small")


def shape(sweep: str, x: int, fixed: int | None = None) -> tuple[int, int, int]:
    """(m, k, n) of point ``x`` of ``sweep``; ``fixed`` replaces the paper's fixed size (smoke runs)."""
    try:
        return SWEEPS[sweep][1](x, PAPER_FIXED[sweep] if fixed is None else fixed)
    except KeyError:
        raise ValueError(f"unknown sweep '{sweep}' (choose from {', '.join(SWEEPS)})") from None


def parse_sizes(text: str) -> list[int]:
    """'1024,2048' or 'start:stop:step' (stop included), or a mix separated by commas; plain ASCII decimals, at
    most MAX_SWEEP_POINTS sizes (counted before any list is made)."""
    sizes: list[int] = []
    parts = text.split(",")  # no blanks around a size: a plain decimal is its digits alone
    if "" in parts and any(parts):
        raise ValueError(f"empty item in sizes {text!r} (a stray comma?)")
    for part in filter(None, parts):
        fields = part.split(":")
        try:
            numbers = [decimal(f, "size") for f in fields]
        except LimitError:
            raise ValueError(f"bad size '{part}': sizes are plain decimal integers, lists 'a,b' or ranges "
                             "'start:stop:step'") from None
        if len(numbers) == 1:
            sizes.append(numbers[0])
        elif len(numbers) == 3 and numbers[2] > 0 and numbers[0] <= numbers[1]:
            count = (numbers[1] - numbers[0]) // numbers[2] + 1
            if len(sizes) + count > MAX_SWEEP_POINTS:
                raise ValueError(f"sizes '{text}' has {len(sizes) + count:,} points, above the limit of "
                                 f"{MAX_SWEEP_POINTS:,} (a larger step?)")
            sizes.extend(range(numbers[0], numbers[1] + 1, numbers[2]))
        else:
            raise ValueError(f"bad size range '{part}': use start:stop:step with start <= stop and step > 0")
        if len(sizes) > MAX_SWEEP_POINTS:
            raise ValueError(f"sizes '{text}' has more than {MAX_SWEEP_POINTS:,} points")
    if not sizes:
        raise ValueError("no sizes given")
    if min(sizes) < 1:
        raise ValueError(f"sizes must be >= 1, got {min(sizes)}")
    if max(sizes) > MAX_DIMENSION:
        raise ValueError(f"sizes must be at most {MAX_DIMENSION:,} (a side of 2^20), got {max(sizes):,}")
    return sorted(set(sizes))
