"""The algebra of fast matrix multiplication: coefficients, levels, primitives, variants, schedules."""

from .algorithm import ALGORITHMS, Algorithm, AlgorithmError, get_algorithm, parse_algorithm
from .levels import multilevel
from .primitives import Primitive, Variant, primitives, variants
from .schedule import Schedule, Stage, makespan_lower_bound, schedule

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "AlgorithmError",
    "Primitive",
    "Schedule",
    "Stage",
    "Variant",
    "get_algorithm",
    "makespan_lower_bound",
    "multilevel",
    "parse_algorithm",
    "primitives",
    "schedule",
    "variants",
]
