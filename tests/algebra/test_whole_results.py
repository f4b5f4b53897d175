"""Sparse results (CSR, DCSR, COO, CSC, DCSC) of statements that co-iterate with dense operands.

A result every term writes at every coordinate (dense operands only, or a term without one of
the result's indices) is computed as a dense result and stored whole in its format, zeros kept
as explicit entries (a merge keeps every coordinate it visits); a sparse operand times a dense
one keeps the sparse operand's pattern, empty rows included. Numbers against numpy / scipy.
(Issue #34: such results were a TVM ``InternalError``, then a refusal.)
"""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir
import sparsetir.algebra as alg

FORMATS = ["CSR", "DCSR", "COO", "CSC", "DCSC"]


def _with_empty_rows(rows=5, cols=6, seed=0):
    """A random matrix (float64) whose rows 0 and 2 and column 4 are empty."""
    dense = sp.random(rows, cols, density=0.5, random_state=seed).toarray()
    dense[[0, 2]] = 0
    dense[:, 4] = 0
    return dense


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("statement", ["A(i,j) = C(i,j) * D(i,j)", "A(i,j) = C(i,j) + D(i,j)"])
def test_a_sparse_result_of_dense_operands_is_stored_whole(fmt, statement):
    c, d = _with_empty_rows(seed=1), _with_empty_rows(seed=2)
    result = alg.compile(statement, formats={"A": fmt})(C=c, D=d)
    want = c * d if "*" in statement else c + d
    assert isinstance(result, sparsetir.format.SparseTensor)
    assert result.nse == c.size                       # every coordinate, zeros included
    np.testing.assert_array_equal(result.to_dense(), want)
    np.testing.assert_array_equal(result.to_scipy().toarray(), want)


def test_a_whole_dcsr_result_holds_every_row_and_column():
    c = np.arange(6.).reshape(2, 3)
    result = alg.compile("A(i,j) = C(i,j) * D(i,j)", formats={"A": "DCSR"})(C=c, D=c)
    assert result.positions(0).tolist() == [0, 2] and result.coordinates(0).tolist() == [0, 1]
    assert result.positions(1).tolist() == [0, 3, 6]
    assert result.coordinates(1).tolist() == [0, 1, 2, 0, 1, 2]
    assert result.values.tolist() == (c * c).ravel().tolist()


@pytest.mark.parametrize("fmt", ["CSR", "DCSR", "COO"])
@pytest.mark.parametrize("statement, want", [
    ("A(i,j) = B(i,j) + 1", lambda b, c: b + 1),
    ("A(i,j) = B(i,j) + c(i)", lambda b, c: b + c[:, None]),
    ("A(i,j) = B(i,j) + C(i,k)", lambda b, c: b + b.sum(1, keepdims=True)),
])
def test_a_term_without_a_result_index_makes_a_whole_result(fmt, statement, want):
    b = _with_empty_rows()
    c = np.arange(1., 6.)
    operands = {"B": sp.csr_matrix(b)}
    if "c(i)" in statement:
        operands["c"] = c
    if "C(i,k)" in statement:
        operands["C"] = sp.csr_matrix(b)
    formats = {"A": fmt, "B": "CSR", **({"C": "CSR"} if "C" in operands else {})}
    result = alg.compile(statement, formats=formats)(**operands)
    assert result.nse == b.size
    np.testing.assert_allclose(result.to_dense(), want(b, c), rtol=1e-13)


@pytest.mark.parametrize("fmt", ["CSR", "DCSR", "COO"])
@pytest.mark.parametrize("b_fmt", ["CSR", "DCSR", "COO"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_sparse_operand_times_a_dense_one_keeps_its_pattern(fmt, b_fmt, dtype):
    b = sp.csr_matrix(_with_empty_rows().astype(dtype))
    d = np.random.default_rng(0).standard_normal(b.shape).astype(dtype)
    result = alg.compile("A(i,j) = B(i,j) * D(i,j)", formats={"A": fmt, "B": b_fmt},
                         dtype=dtype)(B=b, D=d)
    want = b.multiply(d).tocsr()
    assert result.nse == b.nnz
    assert result.to_scipy().nnz == want.nnz                # the same pattern
    np.testing.assert_allclose(result.to_dense(), want.toarray(), rtol=1e-6)
    if fmt == "DCSR":                                     # rows 0 and 2 are not stored
        assert result.coordinates(0).tolist() == [1, 3, 4]


def test_a_whole_result_past_memory_is_refused_before_allocating(monkeypatch):
    """Dense vectors of 46,341 elements: their outer product would hold 46341**2 entries (past
    int32: int64 coordinates), more than a machine of 16 GiB holds with its coordinates."""
    from sparsetir.algebra import sizes
    monkeypatch.setattr(sizes, "physical_memory", lambda: 16 * 2**30)
    b = np.ones(46341)
    k = alg.compile("A(i,j) = b(i) * c(j)", formats={"A": "DCSR"})
    with pytest.raises(sparsetir.SparseTIRMemoryError, match="2147488281 elements"):
        k(b=b, c=b)


def test_a_small_dense_outer_product_is_stored_whole():
    b, c = np.array([1., 0., 2.]), np.array([3., 4.])
    result = alg.compile("A(i,j) = b(i) * c(j)", formats={"A": "COO"})(b=b, c=c)
    np.testing.assert_array_equal(result.to_dense(), np.outer(b, c))
    assert result.nse == 6


_PAST_THE_END = """
import sys, numpy as np
import sparsetir.algebra as alg
import sparsetir.algebra.kernel as K
from sparsetir.format import SparseTensor
dense = np.zeros((4, 4)); dense[0, 1] = 5.0                 # rows 1..3 empty, at the end
B = SparseTensor.from_dense(dense, sys.argv[1])
read = K.read_operands
def poisoned(*args, **kwargs):       # the element after B's last position array: 2**30
    levels = read(*args, **kwargs)
    pos = levels["B"].pos[-1]
    backing = np.full(pos.size + 1, 2**30, pos.dtype)
    backing[:-1] = pos
    levels["B"].pos[-1] = backing[:-1]
    return levels
K.read_operands = poisoned
result = alg.compile("A(i,j) = B(i,j) + 1", formats={"B": sys.argv[1]})(B=B)
assert np.array_equal(result, dense + 1), result
print("ok")
"""


@pytest.mark.parametrize("fmt", ["DCSR", "DCSC", "COO"])
def test_a_dense_walk_never_reads_past_a_compressed_operands_positions(fmt, tmp_path):
    """Rows missing from a compressed outer level, after the last stored one: the lookup of
    the next level read pos[nnz + 1], one past the end, and binary-searched whatever range it
    found there (segfaults). The run is a process of its own: a regression crashes it."""
    import subprocess
    import sys
    script = tmp_path / "past_the_end.py"
    script.write_text(_PAST_THE_END)
    done = subprocess.run([sys.executable, str(script), fmt], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]
