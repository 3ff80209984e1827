"""The bounds a command checks before it starts any work, and the one syntax of sizes and counts.

Each limit says where it comes from; a request beyond one is refused in one line naming it, never started
and left to run for minutes or to exhaust memory.
"""

from __future__ import annotations

import re

__all__ = ["MAX_LEVELS", "MAX_STREAMS", "MAX_PRODUCTS", "MAX_SCHEDULE_PRODUCTS", "MAX_RANK", "MAX_ALGORITHM_BYTES",
           "MAX_GRID_SIDE", "MAX_RECORD_BYTES", "MAX_DIMENSION",
           "MAX_SWEEP_POINTS", "MAX_WINNER_POINTS", "MAX_VALIDATE_ROWS", "MAX_ENTRY", "MAX_COMMON_DENOMINATOR", "MAX_PATH_BYTES", "LimitError", "decimal",
           "check_products"]

# Strassen levels: 7^L products; beyond 4 levels (2,401 products, 16^4 block terms) no plan is practical here.
MAX_LEVELS = 4
# CUDA streams of a schedule: one per product of a 2-level plan is the most any schedule can use.
MAX_STREAMS = 49
# Products of one plan (the ranks of its levels multiplied): Strassen at MAX_LEVELS levels.
MAX_PRODUCTS = 7**MAX_LEVELS
# The stream scheduler's greedy search grows with the square of the products: 3 levels of Strassen take ~2 s.
MAX_SCHEDULE_PRODUCTS = 7**3
# A one-level algorithm of a coefficient file: products, file size, and the digits of one entry (numerators
# and denominators are int64: a product of three entries must not overflow).
MAX_RANK = 1_000
MAX_ALGORITHM_BYTES = 4 << 20
MAX_ENTRY = 10**6
# The common denominator of one coefficient matrix: its numerators (at most MAX_ENTRY times it, under 2^51)
# fit the int64 the kernels' coefficients are made from; the Brent check itself is exact for any size.
MAX_COMMON_DENOMINATOR = 2**31
# A record algorithm in its publisher's format (strassenbench.algebra.records): each side of its format (the
# collections reach 5x5x5; a 64 x 64 x 64 Brent tensor is the most the exact check forms quickly), and an npz
# archive's size, packed and unpacked (AlphaTensor's 93 formats take 0.75 MB).
MAX_GRID_SIDE = 12
MAX_RECORD_BYTES = 64 << 20
# A side of a problem (m, n or k): a float32 matrix of 2^20 x 2^20 is 4 TiB, beyond any GPU's memory; the
# model counts a launch's waves one by one, which past it takes minutes and gigabytes.
MAX_DIMENSION = 1 << 20
# Points of one sweep (sizes x implementations x dtypes are timed one by one).
MAX_SWEEP_POINTS = 10_000
# Model rankings of one `model winners` (GPUs x sweeps x sizes: each ranks every candidate, about a second or
# more; the paper profile asks for 276), and measured rows one `model validate` predicts (a GPU's sweeps hold a
# few hundred).
MAX_WINNER_POINTS = 400
MAX_VALIDATE_ROWS = MAX_SWEEP_POINTS
# A file name the operating system takes (NAME_MAX of Linux file systems).
MAX_PATH_BYTES = 255

_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)")  # no padding: not 064, nor -0


class LimitError(ValueError):
    """A request beyond one of the stated limits, or a number not written as a plain decimal."""


def decimal(text: str, what: str = "number") -> int:
    """A plain ASCII decimal integer, as the tables write them: digits 0-9 and an optional minus sign; no
    spaces, underscores, leading zeros, signs other than '-', or digits of other scripts (which Python's int()
    takes)."""
    if not _DECIMAL.fullmatch(text):
        raise LimitError(f"{what} '{text}' is not a plain decimal integer (digits 0-9, no leading zero, e.g. 1024)")
    return int(text)


def check_products(products: int, what: str, limit: int = MAX_PRODUCTS, why: str = "Strassen at 4 levels") -> None:
    if products > limit:
        raise LimitError(f"{what} has {products:,} products, above the limit of {limit:,} ({why})")
