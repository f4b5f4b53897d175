"""A kernel of ``sparsetir.algebra`` computes its statement's float arithmetic as written, in
IEEE arithmetic as numpy does: TVM's simplifier, which treats floats as real numbers, does not
fold ``B - B`` to 0 (it is NaN where ``B`` holds inf or NaN), ``(B + C) - C`` to ``B`` (NaN
where ``C`` holds inf; 0 for ``(1e-20 + 1) - 1``) or ``B - (B + C)`` to ``-C``
(``backend.exact_floats``). Checked against numpy over operands holding inf, NaN and tiny
values, with empty rows, into sparse, dense and summed results."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir.algebra as alg

NAN, INF = np.nan, np.inf

# row 1 of B and row 3 of C are empty; B and C overlap where B holds 1e-20 and C holds 1
B_VALS = np.array([[INF, NAN, 0., 1e-20], [0., 0., 0., 0.], [-INF, 2., 1e-20, 0.],
                   [1., 0., 3., 1e-20]])
C_VALS = np.array([[1., INF, 2., 1.], [NAN, 0., INF, 1.], [0., 1., 1., -INF],
                   [0., 0., 0., 0.]])


def _numpy(text):
    """``text`` over ``B`` and ``C`` in numpy's dense arithmetic: the reference of a sum,
    where an operand's unstored entry is 0."""
    with np.errstate(all="ignore"):
        return eval(text, {"B": B_VALS, "C": C_VALS})  # noqa: S307  (the test's own text)


def _dense(result):
    return result.to_dense() if hasattr(result, "to_dense") else np.asarray(result)


@pytest.mark.parametrize("rhs", ["B - B", "(B + C) - C", "(B + C) - B", "B - (B + C)",
                                 "C - (B + C) + B"])
@pytest.mark.parametrize("sparse, result", [("CSR", "CSR"), ("DCSR", "DCSR"), ("CSR", None),
                                            (None, None)])
def test_cancelling_sums_are_computed_as_written(rhs, sparse, result):
    """Sparse operands and result, sparse operands into a dense result, and dense ones."""
    statement = "A(i,j) = " + rhs.replace("B", "B(i,j)").replace("C", "C(i,j)")
    names = [n for n in "BC" if n in rhs]
    formats = {n: sparse for n in names if sparse} | ({"A": result} if result else {})
    operands = {n: sp.csr_matrix(_numpy(n)) if sparse else _numpy(n) for n in names}
    out = alg.compile(statement, formats=formats)(**operands)
    np.testing.assert_array_equal(_dense(out), _numpy(rhs))


def test_a_cancelling_factor_of_a_sum_over_stored_entries():
    """``B .* (E - E)`` summed over ``B``'s entries into a vector and into a scalar: NaN
    where ``B`` holds inf or NaN or ``E`` does under an entry of ``B`` (``inf * 0``,
    ``inf - inf``), where TVM alone folded ``E - E``, then ``B * 0``, to 0; the empty row 1
    sums nothing."""
    B = sp.csr_matrix(B_VALS)
    expected = np.where(B_VALS != 0, _numpy("B * (C - C)"), 0.0)
    k = alg.compile("a(i) = B(i,j) * (E(i,j) - E(i,j))", formats={"B": "CSR"})
    np.testing.assert_array_equal(k(B=B, E=C_VALS), expected.sum(axis=1))
    k = alg.compile("s = B(i,j) * (E(i,j) - E(i,j))", formats={"B": "CSR"})
    np.testing.assert_array_equal(k(B=B, E=C_VALS), expected.sum())


def test_rounding_of_a_dense_sum_is_kept():
    """``(E + 1) - 1`` rounds ``1e-20 + 1`` to 1 first: 0, as numpy's."""
    k = alg.compile("A(i,j) = (E(i,j) + 1) - 1", formats={})
    np.testing.assert_array_equal(k(E=B_VALS), _numpy("(B + 1) - 1"))
