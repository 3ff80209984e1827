"""The argument types of the command line: each parses one value or says in one line why it cannot
(argparse.ArgumentTypeError, which the parser reports with exit status 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

from ..algebra.algorithm import AlgorithmError, get_algorithm
from ..algebra.levels import check_levels, split_spec
from ..impls import ImplError, get_impl
from ..limits import MAX_DIMENSION, MAX_LEVELS, LimitError, decimal
from ..model.perf import ModelError, modeled
from ..readers import ReadError, check_name
from ..sweeps import parse_sizes

__all__ = ["integer", "finite", "any_case", "seconds", "duration", "positive", "fraction", "bounded", "inputs",
           "cuda_version", "counts", "shapes", "memory_bytes", "impl_list", "impl", "modeled_impls", "input_name", "sizes",
           "algorithm", "plan"]


def integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = decimal(text)
        except LimitError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a plain decimal integer (digits 0-9, no leading zero, "
                                             "e.g. 1024)") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below the minimum {minimum}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{value:,} is above the maximum {maximum:,}")
        return value

    parse.__name__ = "integer"
    return parse


def finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"'{text}' is not finite")
    return value


def any_case(options: Sequence[str]) -> Callable[[str], str]:
    """One of ``options``, matched in any case (huge, HUGE, Huge), returned as spelled in ``options``."""
    canonical = {o.lower(): o for o in options}

    def parse(text: str) -> str:
        try:
            return canonical[text.lower()]
        except KeyError:
            raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(options)})") from None

    parse.__name__ = "choice"
    return parse


def strategy_request(text: str) -> str:
    """bench's --strategy: a strategy, ``best``, or ``best+NAME[+NAME]`` (best, those always timed too), any case."""
    from ..strategies import STRATEGIES

    one = any_case(["best", *STRATEGIES])
    first, *also = text.split("+")
    if one(first) != "best" and also:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (a strategy, best, or best+NAME such as "
                                         "best+Huge+Small)")
    return "+".join([one(first), *(any_case(list(STRATEGIES))(name) for name in also)])


MAX_SECONDS = 86_400.0  # a bench's times per point: a day bounds the work before it starts


def seconds(text: str) -> float:
    value = finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value:g} s is negative")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{value:g} s is above the maximum {MAX_SECONDS:,.0f} s (a day)")
    return value


def duration(text: str) -> float:
    """Seconds above zero, at most a day (--max-time, a cap per measurement)."""
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("0 s is not positive")
    return value


def positive(text: str) -> float:
    value = finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value:g} is not positive")
    return value


def fraction(text: str) -> float:
    value = finite(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{value:g} is not a fraction in (0, 1]")
    return value


def share(text: str) -> float:
    """A fraction from 0 (included) to 1 (excluded), e.g. compare's noise floor."""
    value = finite(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{value:g} is not a fraction in [0, 1)")
    return value


def bounded(minimum: int, maximum: int, why: str) -> Callable[[str], int]:
    """An integer in [minimum, maximum]; ``why`` says where the maximum comes from."""
    base = integer(minimum)

    def parse(text: str) -> int:
        value = base(text)
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{value} is above the maximum {maximum} ({why})")
        return value

    parse.__name__ = "integer"
    return parse


def inputs(text: str) -> str:
    from ..verify import INPUTS

    unknown = [d for d in text.split(",") if d not in INPUTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown inputs {unknown[0]!r} (choose from {', '.join(INPUTS)})")
    return text


def cuda_version(text: str) -> tuple[int, int]:
    from ..fused.toolchain import parse_cuda_version

    try:
        return parse_cuda_version(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _plain_positive(text: str) -> bool:
    """A positive integer in plain ASCII digits (strassenbench.limits.decimal: not ' 64', '1_024' or another
    script's digits)."""
    try:
        return decimal(text) > 0
    except LimitError:
        return False


def counts(text: str) -> tuple[int, int, int]:
    """W_A x W_B x W_C, e.g. 2x2x2."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(_plain_positive(p) for p in parts):
        raise argparse.ArgumentTypeError(f"operand counts are W_AxW_BxW_C, e.g. 2x2x2: {text!r}")
    return tuple(int(p) for p in parts)  # type: ignore[return-value]


def shape(text: str) -> tuple[int, int, int]:
    """A problem shape MxKxN (A is m x k, B k x n), e.g. 17x33x130, each side from 1 to MAX_DIMENSION."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(_plain_positive(p) for p in parts):
        raise argparse.ArgumentTypeError(f"a shape is MxKxN, e.g. 17x33x130: {text!r}")
    sides = tuple(int(p) for p in parts)
    if max(sides) > MAX_DIMENSION:
        raise argparse.ArgumentTypeError(f"{text}: a side above the maximum {MAX_DIMENSION:,}")
    return sides  # type: ignore[return-value]


def _names(text: str) -> list[str]:
    """A comma-separated list; an empty item (a stray comma) is a mistake, not nothing."""
    names = [n.strip() for n in text.split(",")]
    if "" in names:
        raise argparse.ArgumentTypeError(f"empty item in {text!r} (a stray comma?)")
    return names


def shapes(text: str) -> list[tuple[int, int, int]]:
    out = []
    for part in _names(text):
        fields = part.lower().split("x")
        if len(fields) != 3 or not all(_plain_positive(f) for f in fields):
            raise argparse.ArgumentTypeError(f"bad shape '{part}': use MxNxK with positive integers, e.g. 1024x1024x512")
        out.append(tuple(int(f) for f in fields))
    if not out:
        raise argparse.ArgumentTypeError("no shapes given")
    return out


def memory_bytes(text: str) -> int:
    from ..bench.memlimit import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _checked_names(text: str, check: Callable[[str], object], error: type[Exception]) -> list[str]:
    """The comma-separated names of ``text``, each accepted by ``check`` (its ``error`` is the message)."""
    names = _names(text)
    for name in names:
        try:
            check(name)
        except error as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return list(dict.fromkeys(names))


def impl_list(text: str) -> list[str]:
    return _checked_names(text, get_impl, ImplError)


def impl(text: str) -> str:
    """One implementation (`strassenbench impls`, or <algorithm>x<L>)."""
    if "," in text:
        raise argparse.ArgumentTypeError(f"one implementation, not a list: {text!r}")
    return impl_list(text)[0]


def modeled_impls(text: str) -> list[str]:
    """Implementations the model has a formula for: the paper's, and fused ones of any algorithm."""
    return _checked_names(text, modeled, ModelError)


def input_name(text: str) -> str:
    """A file or folder to read, its name one the system takes (readers.check_name), checked before it is used."""
    try:
        check_name(text, "input")
    except ReadError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def sizes(text: str) -> list[int]:
    try:
        return parse_sizes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def algorithm(text: str) -> str:
    """An algorithm: a name of `strassenbench algorithms`, a coefficient file's path, or mixed levels a+b."""
    try:
        for name in split_spec(text):
            get_algorithm(name)
    except AlgorithmError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def plan(text: str) -> tuple[str, int]:
    """SPEC:L, e.g. grey322-11-50:1 or grey322-11-50+strassen:2."""
    spec, sep, levels = text.rpartition(":")
    if not sep or not (_plain_positive(levels) or levels == "0"):
        raise argparse.ArgumentTypeError(f"a plan is ALGORITHM:LEVELS, e.g. grey322-11-50:1: {text!r}")
    if int(levels) > MAX_LEVELS:
        raise argparse.ArgumentTypeError(f"{text}: {levels} levels is above the maximum {MAX_LEVELS}")
    try:
        check_levels(algorithm(spec), int(levels))
    except (AlgorithmError, LimitError) as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return spec, int(levels)
