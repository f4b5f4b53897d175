"""Scalar results of a sum plus terms without its indices (``s = 2 + B(i,j)``): the terms
without summed indices are the sum's initial value, added once (as ``a(i) = b(i) + B(i,j)``
adds ``b(i)`` once per row), the sum walks the sparse operands' entries only. Each checked
against numpy, operands with empty rows (issue #34: these gave TVM's ``ScheduleError``)."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir
import sparsetir.algebra as alg
from sparsetir.algebra.kernel import _default_schedule


def _matrix(seed, empty=(0, 3)):
    a = sp.random(6, 7, density=0.35, format="csr", random_state=seed).toarray()
    a[list(empty)] = 0
    return a


B, C = _matrix(1), _matrix(2, (3, 5))


@pytest.mark.parametrize("fmt", ["CSR", "DCSR", "COO", "CSC", None])
@pytest.mark.parametrize("statement, expected", [
    ("s = 2 + B(i,j)", 2 + B.sum()),
    ("s = B(i,j) + 2.5", B.sum() + 2.5),
    ("s = -1 - B(i,j) * C(i,j)", -1 - (B * C).sum()),
    ("s = B(i,j) + 2 - C(i,j)", B.sum() + 2 - C.sum()),
    ("s = 3 * B(i,j) + (2 - 4)", 3 * B.sum() - 2),
])
def test_a_constant_plus_a_sum_is_a_scalar(fmt, statement, expected):
    formats = {name: fmt for name in "BC" if f"{name}(" in statement and fmt}
    k = alg.compile(statement, formats=formats)
    operands = {name: (sp.csr_matrix(m) if fmt else m) for name, m in (("B", B), ("C", C))
                if f"{name}(" in statement}
    result = k(**operands)
    assert result.shape == () and result.dtype == np.float64
    np.testing.assert_allclose(result, expected, rtol=1e-12)


def test_a_constant_plus_an_empty_sum_is_the_constant():
    k = alg.compile("s = 2 + B(i,j)", formats={"B": "DCSR"})
    assert float(k(B=sp.csr_matrix((4, 5)))) == 2.0


def test_the_sum_walks_the_entries_and_starts_from_the_constant():
    """IR: the summed indices merge the terms that use them (B alone), not every coordinate
    (the constant is the init, stored once)."""
    k = alg.compile("s = 2 + B(i,j)", formats={"B": "CSR"})
    text = k.func.script()
    assert "T.coiterate(J, T.union(B))" in text
    assert "s[0] = T.float64(2.0)" in text
    main = sparsetir.lower_sparse_iter(k.func)["main"].script()
    assert "search" not in main                       # no lookup per (i, j)


def test_a_row_result_plus_a_constant_walks_the_rows_entries():
    k = alg.compile("a(i) = 2 + B(i,j)", formats={"B": "CSR"})
    assert "T.coiterate(J, T.union(B))" in k.func.script()
    np.testing.assert_allclose(k(B=sp.csr_matrix(B)), 2 + B.sum(axis=1), rtol=1e-12)


def test_a_scalar_of_dense_operands_runs_its_summed_loop_serially():
    """Dense operands only: no merge, the outer loop is summed, so it is not parallel (TVM's
    ``parallel`` refused it: the ScheduleError of issue #34)."""
    k = alg.compile("s = 2 + B(i,j) * C(i,j)")
    np.testing.assert_allclose(k(B=B, C=C), 2 + (B * C).sum(), rtol=1e-12)
    dense_rows = alg.compile("a(i) = 2 + B(i,j)")           # an output index: parallel
    np.testing.assert_allclose(dense_rows(B=B), 2 + B.sum(axis=1), rtol=1e-12)
    scheduled = [_default_schedule(sparsetir.lower_sparse_iter(kernel.func))["main"].script()
                 for kernel in (k, dense_rows)]
    assert "T.parallel" not in scheduled[0] and "T.parallel" in scheduled[1]
