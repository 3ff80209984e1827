"""Variant tables: figure tab:perfeq_level2 of the paper, including its Var# numbering."""

import pytest

from strassenbench.algebra.primitives import primitives, variants

# The paper's figure tab:perfeq_level2, transcribed column by column: (W_A, W_B, W_C, Cnt#) per Var#.
PAPER_ONE_LEVEL = [(2, 2, 2, 1), (2, 2, 1, 2), (1, 2, 2, 2), (2, 1, 2, 2)]
PAPER_TWO_LEVEL = [
    (4, 4, 4, 1),
    (1, 4, 4, 4),
    (2, 4, 4, 4),
    (4, 1, 4, 4),
    (4, 2, 4, 4),
    (4, 4, 1, 4),
    (4, 4, 2, 4),
    (2, 2, 4, 8),
    (2, 4, 2, 8),
    (4, 2, 2, 8),
]


def _table(levels):
    return [(v.W_A, v.W_B, v.W_C, v.count) for v in variants("strassen", levels)]


def test_gemm_column():
    assert _table(0) == [(1, 1, 1, 1)]


def test_one_level_table_equals_paper():
    assert _table(1) == PAPER_ONE_LEVEL


def test_two_level_table_equals_paper():
    assert _table(2) == PAPER_TWO_LEVEL


def test_one_level_membership_as_in_the_paper():
    """Sec. s:register: Var#0 = {M0}, Var#1 = {M5, M6}, Var#2 = {M2, M3}, Var#3 = {M1, M4}."""
    members = [[p.name for p in v.products] for v in variants("strassen", 1)]
    assert members == [["M0"], ["M5", "M6"], ["M2", "M3"], ["M1", "M4"]]


@pytest.mark.parametrize("levels", [1, 2, 3])
@pytest.mark.parametrize("algorithm", ["strassen", "winograd", "classical"])
def test_variants_partition_the_products(algorithm, levels):
    names = sorted(p.name for v in variants(algorithm, levels) for p in v.products)
    assert names == sorted(p.name for p in primitives(algorithm, levels))
    for v in variants(algorithm, levels):
        assert all(p.counts == (v.W_A, v.W_B, v.W_C) for p in v.products)
    assert [v.number for v in variants(algorithm, levels)] == list(range(len(variants(algorithm, levels))))


def test_primitive_description_uses_paper_notation():
    m1 = primitives("strassen", 1)[1]
    assert m1.describe() == "M1 = (A2 + A3) B0; C2 += M1; C3 -= M1"
    assert m1.counts == (2, 1, 2)
