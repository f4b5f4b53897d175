"""``sddmm`` gives its values in the caller's nonzero order: ``A.indices`` for a scipy or torch
CSR matrix whose columns are unsorted within rows (it gave the sorted copy's order), one value
per stored entry when entries repeat, ``A.tocoo()`` for other scipy formats; a
``SparseMatrix`` keeps its own sorted order and records where each caller entry went in
``source_order``. References are computed by numpy in the caller's order."""

import copy
import pickle

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops

FEAT = 8


def unsorted_csr(duplicates=False, seed=0):
    """40 x 30 CSR whose rows hold shuffled columns, every fourth row empty (and, with
    ``duplicates``, some column twice in a row)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 9, 40)
    lengths[::4] = 0
    rows = [rng.permutation(30)[:k] for k in lengths]
    if duplicates:
        rows = [np.append(r, r[:1]) if r.size else r for r in rows]
    indices = np.concatenate(rows).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int32)
    data = rng.standard_normal(indices.size).astype(np.float32)
    A = scipy.sparse.csr_matrix((data, indices, indptr), shape=(40, 30))
    assert not A.has_sorted_indices or duplicates
    return A


def operands(seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((40, FEAT)).astype(np.float32),
            rng.standard_normal((30, FEAT)).astype(np.float32))


def reference(rows, cols, X, Y):
    """X[i] . Y[j] for each (i, j) in the caller's order."""
    return np.einsum("pk,pk->p", X[rows], Y[cols])


def csr_rows(A):
    return np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))


@pytest.mark.parametrize("duplicates", [False, True])
def test_scipy_csr_gets_values_in_its_own_order(duplicates):
    A = unsorted_csr(duplicates)
    X, Y = operands()
    want = reference(csr_rows(A), A.indices, X, Y)
    np.testing.assert_allclose(ops.sddmm(A, X, Y), want, rtol=1e-5, atol=1e-5)
    out = np.full(A.nnz, np.nan, np.float32)               # one value per stored entry
    assert ops.sddmm(A, X, Y, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    strided = np.full(2 * A.nnz, np.nan, np.float32)
    ops.sddmm(A, X, Y, out=strided[::2])
    np.testing.assert_allclose(strided[::2], want, rtol=1e-5, atol=1e-5)
    assert np.isnan(strided[1::2]).all()
    torch_out = torch.full((A.nnz,), float("nan"))
    ops.sddmm(A, torch.from_numpy(X), torch.from_numpy(Y), out=torch_out)
    np.testing.assert_allclose(torch_out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_torch_csr_gets_values_in_its_own_order():
    A = unsorted_csr()
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                 torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data), size=A.shape)
    X, Y = operands()
    got = ops.sddmm(At, torch.from_numpy(X), torch.from_numpy(Y))
    np.testing.assert_allclose(got.numpy(), reference(csr_rows(A), A.indices, X, Y),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", ["coo", "csc", "lil"])
def test_other_scipy_formats_get_the_order_of_tocoo(fmt):
    coo = unsorted_csr(duplicates=fmt == "coo").tocoo()
    order = np.random.default_rng(3).permutation(coo.nnz)
    A = scipy.sparse.coo_matrix((coo.data[order], (coo.row[order], coo.col[order])),
                                shape=coo.shape).asformat(fmt)
    X, Y = operands()
    caller = A.tocoo()
    np.testing.assert_allclose(ops.sddmm(A, X, Y), reference(caller.row, caller.col, X, Y),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("coalesced", [False, True])
def test_torch_coo_gets_its_stored_order(coalesced):
    """One value per stored entry, in stored order (that of ``coalesce()`` once coalesced), as
    DGL gives one per edge of a multigraph."""
    coo = unsorted_csr().tocoo()
    order = np.random.default_rng(4).permutation(coo.nnz)
    At = torch.sparse_coo_tensor(np.stack([coo.row[order], coo.col[order]]),
                                 coo.data[order], size=coo.shape)
    At = At.coalesce() if coalesced else At
    X, Y = operands()
    indices = At._indices().numpy()        # pylint: disable=protected-access
    got = ops.sddmm(At, torch.from_numpy(X), torch.from_numpy(Y))
    np.testing.assert_allclose(got.numpy(), reference(indices[0], indices[1], X, Y),
                               rtol=1e-5, atol=1e-5)


def test_torch_coo_parallel_edges_count_in_unweighted_spmm():
    rows, cols = np.array([0, 0, 2]), np.array([1, 1, 0])          # edge (0, 1) twice; row 1 empty
    At = torch.sparse_coo_tensor(np.stack([rows, cols]), np.float32([10, 10, 1]), size=(3, 2))
    X = torch.ones(2, 1)
    for weighted, expected in ((False, [[2], [0], [1]]), (True, [[20], [0], [1]])):
        out = torch.full((3, 1), float("nan"))
        ops.spmm(At, X, out=out, weighted=weighted)
        np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("duplicates", [False, True])
def test_sparse_matrix_keeps_its_order_and_records_the_callers(duplicates):
    A = unsorted_csr(duplicates)
    M = ops.SparseMatrix(A)
    X, Y = operands()
    rows = csr_rows(A)
    order = M.source_order
    assert order.dtype == np.int64 and order.size == A.nnz and not order.flags.writeable
    m_rows = np.repeat(np.arange(40), np.diff(M.indptr))
    np.testing.assert_array_equal(M.indices[order], A.indices)     # where each entry went
    np.testing.assert_array_equal(m_rows[order], rows)
    assert np.all(np.diff(M.indices)[np.diff(m_rows) == 0] > 0)    # sorted, no duplicates
    np.testing.assert_allclose(M.to_scipy().toarray(), A.toarray(), rtol=1e-6)
    out = np.full(M.nnz, np.nan, np.float32)                      # M's own order
    for _ in range(2):                                             # cold, then prepared
        ops.sddmm(M, X, Y, out=out)
        np.testing.assert_allclose(out, reference(m_rows, M.indices, X, Y), rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_allclose(out[order], reference(rows, A.indices, X, Y), rtol=1e-5,
                                   atol=1e-5)
    for twin in (copy.deepcopy(M), pickle.loads(pickle.dumps(M))):
        np.testing.assert_array_equal(twin.source_order, order)


def test_sorted_input_needs_no_order():
    A = unsorted_csr()
    A.sort_indices()
    assert ops.SparseMatrix(A).source_order is None
    assert ops.SparseMatrix(ops.SparseMatrix(unsorted_csr())).source_order is None
