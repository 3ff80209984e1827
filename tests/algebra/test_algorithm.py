"""Algorithms as coefficients: Brent equations, diagnostics, Kronecker levels."""

import math

import numpy as np
import pytest

from strassenbench.algebra.algorithm import (
    ALGORITHMS,
    STRASSEN,
    AlgorithmError,
    Algorithm,
    catalogue_rows,
    parse_algorithm,
)
from strassenbench.algebra.brent import matmul_tensor
from strassenbench.algebra.levels import multilevel


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_shipped_algorithms_satisfy_brent_equations(name):
    alg = ALGORITHMS[name]
    assert not alg.brent_residual().any()
    assert alg.dims == (2, 2, 2)


def test_ranks():
    assert ALGORITHMS["strassen"].rank == 7
    assert ALGORITHMS["winograd"].rank == 7
    assert ALGORITHMS["classical"].rank == 8


def test_strassen_is_the_papers_equation():
    """M1 = (A2 + A3) B0; C2 += M1; C3 -= M1, as in Eq. (eqn:gpu_allops)."""
    alg = ALGORITHMS["strassen"]
    assert alg.product_names == tuple(f"M{i}" for i in range(7))
    assert alg.U[1].tolist() == [0, 0, 1, 1]
    assert alg.V[1].tolist() == [1, 0, 0, 0]
    assert alg.W[1].tolist() == [0, 0, 1, -1]
    assert alg.W[4].tolist() == [-1, 1, 0, 0]


def test_additions_counted_naively_and_the_exponent():
    """Strassen's 18 additions (5 + 5 forming operands, 8 summing products), Winograd's 24 with its shared sums
    expanded (it has 15 when they are shared), the classical 2x2x2's 4; omega = 3 log R / log(mkn)."""
    assert [ALGORITHMS[n].additions for n in ("strassen", "winograd", "classical")] == [18, 24, 4]
    assert abs(ALGORITHMS["strassen"].omega - math.log2(7)) < 1e-12 and ALGORITHMS["classical"].omega == 3
    assert multilevel("strassen", 0).omega == 3 and multilevel("strassen", 0).additions == 0  # the GEMM's <1,1,1;1>
    row = next(r for r in catalogue_rows() if r["algorithm"] == "strassen")
    assert row["additions"] == 18 and row["omega"] == 2.8074


def test_stability_factors_match_higham():
    """e = 12 for Strassen (Higham Thm 23.2) and 18 for Winograd (Thm 23.3)."""
    assert ALGORITHMS["strassen"].stability_factor == 12
    assert ALGORITHMS["winograd"].stability_factor == 18


def test_wrong_coefficient_names_the_product():
    broken = STRASSEN.replace("M3 = A3 (B2 - B0)", "M3 = A3 (B2 + B0)")
    with pytest.raises(AlgorithmError, match=r"product M3 has coefficient 1 on B0, expected -1"):
        parse_algorithm("broken", (2, 2, 2), broken)


def test_wrong_update_names_the_product():
    broken = STRASSEN.replace("C2 += M1; C3 -= M1", "C2 += M1; C3 += M1")
    with pytest.raises(AlgorithmError, match=r"product M1 has coefficient 1 on C3, expected -1"):
        parse_algorithm("broken", (2, 2, 2), broken)


def test_missing_product_is_reported():
    broken = "\n".join(line for line in STRASSEN.strip().splitlines() if not line.startswith("M6"))
    with pytest.raises(AlgorithmError, match="fails the Brent equations"):
        parse_algorithm("broken", (2, 2, 2), broken)


@pytest.mark.parametrize(
    "text, message",
    [
        ("M0 A0 B0; C0 += M0", "cannot parse product"),
        ("M0 = A0 B0; C0 += M1", "cannot parse update"),
        ("M0 = A9 B0; C0 += M0", "outside the grid"),
        ("M0 = A0 B0; C7 += M0", "outside the grid"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(AlgorithmError, match=message):
        parse_algorithm("bad", (2, 2, 2), text)


def test_shape_mismatch_is_rejected():
    with pytest.raises(AlgorithmError, match="do not match"):
        Algorithm("bad", (2, 2, 2), np.ones((7, 4), int), np.ones((7, 3), int), np.ones((7, 4), int))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("levels", [0, 1, 2, 3])
def test_multilevel_satisfies_brent(name, levels):
    alg = multilevel(name, levels)
    base = ALGORITHMS[name]
    assert alg.rank == base.rank**levels
    assert alg.dims == tuple(d**levels for d in base.dims)
    assert not alg.brent_residual().any()


def test_two_level_strassen_has_49_products_with_nested_names():
    alg = multilevel("strassen", 2)
    assert alg.rank == 49
    assert alg.product_names[7 * 1 + 5] == "M1.5"
    # Block row 1, column 2 of the 4x4 grid is block 2 of block A1 (row 0, col 1 at the top level).
    assert alg.block_name("A", 1, 2) == "A1.2"
    assert alg.block_name("C", 3, 3) == "C3.3"


def test_two_level_products_are_kronecker_products_of_one_level_ones():
    """M_{r1.r2} = (sum over the outer A terms of the inner sums): u[(i1 i2),(p1 p2)] = u1[i1 p1] u2[i2 p2]."""
    one, two = multilevel("strassen", 1), multilevel("strassen", 2)
    for r1 in range(7):
        for r2 in range(7):
            u = two.U[r1 * 7 + r2].reshape(2, 2, 2, 2)  # (i1, i2, p1, p2) after reshaping the 4x4 grid
            expected = np.einsum("ip,jq->ijpq", one.U[r1].reshape(2, 2), one.U[r2].reshape(2, 2))
            assert np.array_equal(u, expected)


def test_matmul_tensor_counts():
    assert matmul_tensor(2, 3, 4).sum() == 2 * 3 * 4


def test_negative_levels_rejected():
    with pytest.raises(AlgorithmError, match="levels"):
        multilevel("strassen", -1)
