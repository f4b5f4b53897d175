"""Statements nested or chained past what a recursive reader holds, and the ``preprocess``
annotation on a co-iteration: each either computes numpy's numbers or raises a clear error from
``sparsetir.errors`` naming the limit or what the annotation applies to (issue #34: these were
``RecursionError`` and "no root block to keep sparsetir's metadata").
"""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir
import sparsetir.algebra as alg
from sparsetir.algebra import NotationError, parse
from sparsetir.algebra.notation import BALANCE_AFTER, MAX_DEPTH, MAX_NESTING, _depth
from sparsetir.stage1.schedule import Schedule

CSR2 = {"A": "CSR", "B": "CSR"}
B = sp.csr_matrix(np.array([[1., 0, 2], [0, 0, 0], [0, 3, 0]]))     # an empty row


@pytest.mark.parametrize("statement", [
    "A(i,j) = " + "(" * 400 + "B(i,j)" + ")" * 400,
    "A(i,j) = " + "-" * 400 + "B(i,j)",
    "A(i,j) = " + "(2 * " * 400 + "B(i,j)" + ")" * 400,
])
def test_nesting_past_the_limit_is_refused_by_name(statement):
    with pytest.raises(NotationError, match=f"nests deeper than {MAX_NESTING} levels"):
        parse(statement)


def test_a_left_grouped_chain_past_the_depth_is_refused_by_name():
    statement = "A(i,j) = " + " / ".join(["B(i,j)"] * (MAX_DEPTH + 2))   # / is not regrouped
    with pytest.raises(NotationError, match=f"past the limit of {MAX_DEPTH}"):
        parse(statement)


def test_nesting_at_the_limit_computes():
    k = alg.compile("A(i,j) = " + "(" * MAX_NESTING + "2 * B(i,j)" + ")" * MAX_NESTING,
                    formats=CSR2)
    np.testing.assert_array_equal(k(B=B).to_dense(), 2 * B.toarray())


@pytest.mark.parametrize("op", ["+", "*", "-"])
def test_a_1200_term_chain_is_a_balanced_tree(op):
    stmt = parse("A(i,j) = " + f" {op} ".join(f"B{n}(i,j)" for n in range(1200)))
    assert _depth(stmt.rhs) <= 13             # ceil(log2(1200)) + 1, and a minus
    assert [a.name for a in stmt.accesses] == [f"B{n}" for n in range(1200)]   # in order


def test_a_short_chain_keeps_its_left_grouping():
    rhs = parse("A(i,j) = " + " - ".join(["B(i,j)"] * BALANCE_AFTER)).rhs
    assert str(rhs).startswith("(" * (BALANCE_AFTER - 1) + "B(i,j) - B(i,j))")


def test_a_1200_term_sum_computes():
    k = alg.compile("A(i,j) = B(i,j) * (" + " + ".join(["1"] * 1200) + ")", formats=CSR2)
    np.testing.assert_array_equal(k(B=B).to_dense(), 1200 * B.toarray())
    k = alg.compile("A(i,j) = B(i,j) * (" + " - ".join(["1"] * 21) + ")", formats=CSR2)
    np.testing.assert_array_equal(k(B=B).to_dense(), -19 * B.toarray())


def _annotated():
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    sch = Schedule(k.func)
    sch.annotate(sch.get_sparse_iteration("kernel"), "preprocess", True)
    return k, sch.func


def test_preprocess_on_a_coiteration_says_what_preprocess_applies_to():
    k, func = _annotated()
    with pytest.raises(sparsetir.LoweringError, match="co-iteration kernel is annotated "
                       "'preprocess', which marks the iterations that fill a new format"):
        k.rebuild(func)
    with pytest.raises(sparsetir.LoweringError, match="annotated 'preprocess'"):
        sparsetir.lower_sparse_iter(sparsetir.extract_preprocess(func))


def test_removing_the_only_iteration_says_what_preprocess_applies_to():
    _, func = _annotated()
    with pytest.raises(sparsetir.LoweringError, match="has no sparse iteration to lower .*"
                       "remove_preprocess removes those annotated 'preprocess'"):
        sparsetir.lower_sparse_iter(sparsetir.remove_preprocess(func))
