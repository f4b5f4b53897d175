"""A ``SparseMatrix`` cannot be changed once made, and parallel edges count as DGL counts them.

Kernels bound to a matrix keep its arrays (checked once, at construction): reassigning
``M.indices`` used to hand unchecked indices to the next kernel bound (a segfault) and
reassigning ``M.data`` gave stale values to feature sizes already bound.
"""
import pickle
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse

import sparsetir.ops as ops


def matrix_with_parallel_edges():
    """3x4, row 0 holds (0, 1) twice and (0, 3); row 1 is empty; row 2 holds (2, 0) three times."""
    rows = np.array([0, 0, 2, 0, 2, 2])
    cols = np.array([1, 3, 0, 1, 0, 0])
    vals = np.float32([0.5, 2.0, 1.0, 0.25, 1.0, 1.0])
    return scipy.sparse.coo_matrix((vals, (rows, cols)), shape=(3, 4))


@pytest.mark.parametrize("field", ["shape", "indptr", "indices", "data", "nnz",
                                   "source_order", "multiplicity"])
def test_fields_cannot_be_reassigned(field):
    M = ops.SparseMatrix(matrix_with_parallel_edges())
    before = getattr(M, field)
    with pytest.raises(AttributeError, match=f"SparseMatrix.{field} cannot be changed"):
        setattr(M, field, np.zeros(3, np.int32))
    assert getattr(M, field) is before


@pytest.mark.parametrize("source", ["coo", "csr"])
def test_unweighted_spmm_counts_parallel_edges(source):
    A = matrix_with_parallel_edges()
    if source == "csr":                      # the same entries as CSR, duplicates kept
        A = scipy.sparse.csr_matrix((np.float32([0.5, 2.0, 0.25, 1, 1, 1]),
                                     [1, 3, 1, 0, 0, 0], [0, 3, 3, 6]), shape=(3, 4))
    X = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    pattern = scipy.sparse.coo_matrix(A)
    counts = scipy.sparse.coo_matrix((np.ones(pattern.nnz), (pattern.row, pattern.col)),
                                     shape=A.shape).toarray()      # duplicates add up
    expected = counts @ X
    out = np.full((3, 5), np.nan, np.float32)
    np.testing.assert_allclose(ops.spmm(A, X, out=out, weighted=False), expected, rtol=1e-5,
                               atol=1e-6)
    M = ops.SparseMatrix(A)
    np.testing.assert_array_equal(M.multiplicity, [2, 1, 3])
    for matrix in (M, pickle.loads(pickle.dumps(M))):
        np.testing.assert_allclose(ops.spmm(matrix, X, weighted=False), expected, rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(ops.spmm(matrix, X), A.toarray() @ X, rtol=1e-5, atol=1e-6)


def test_no_parallel_edges_no_multiplicity():
    A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=1)
    assert ops.SparseMatrix(A).multiplicity is None


def test_writing_the_public_arrays_through_torch_cannot_reach_kernels():
    """``torch.from_numpy`` ignores numpy's read-only flag: writing far-out-of-range indices
    into ``M.indices`` (or ``M.indptr``) through it used to segfault the next ``spmm``, since
    the kernels read those very arrays, checked once. They read private sealed copies now."""
    script = """
import warnings, numpy as np, scipy.sparse, torch, sparsetir.ops as ops
A = scipy.sparse.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
M = ops.SparseMatrix(A)
X = np.ones((20, 4), np.float32)
ops.spmm(M, X)                                           # bound for 4 features
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.from_numpy(M.indices).fill_(10**8)
    torch.from_numpy(M.indptr).fill_(10**8)
for feat in (4, 8):                                      # already bound, and newly bound
    X = np.ones((20, feat), np.float32)
    assert np.allclose(ops.spmm(M, X), A @ X, atol=1e-5)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_copy_keeps_the_parallel_edges():
    M = ops.SparseMatrix(matrix_with_parallel_edges())
    copy = ops.SparseMatrix(M)
    np.testing.assert_array_equal(copy.multiplicity, M.multiplicity)
    X = np.ones((4, 2), np.float32)
    np.testing.assert_allclose(ops.spmm(copy, X, weighted=False), ops.spmm(M, X, weighted=False))



@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copies_keep_a_values_tensor_and_its_gradient(how):
    """A ``from_csr`` values tensor requiring grad stays a tensor requiring grad in a pickled
    or deep-copied matrix (it came back as the numpy data: spmm on the copy gave values no
    gradient, silently); the copy's numbers are the original's."""
    import copy                                          # pylint: disable=import-outside-toplevel
    import torch                                         # pylint: disable=import-outside-toplevel
    A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=2)
    w = torch.rand(A.nnz, requires_grad=True)
    M = ops.SparseMatrix.from_csr(A.indptr, A.indices, w, A.shape)
    same = pickle.loads(pickle.dumps(M)) if how == "pickle" else copy.deepcopy(M)
    assert torch.is_tensor(same.values) and same.values.requires_grad
    X = torch.randn(5, 3)
    y = ops.spmm(same, X)
    assert torch.allclose(y, ops.spmm(M, X), atol=1e-6)
    y.sum().backward()
    assert np.allclose(same.values.grad.numpy(), X.sum(1).numpy()[A.indices], atol=1e-5)
