"""``SparseMatrix.reorder``: renumbered nodes, the same products read back through ``perm``."""

import numpy as np
import pytest
import scipy.sparse

from sparsetir import ops
from sparsetir.data import rmat_graph
from sparsetir.errors import SparseTIRValueError


@pytest.mark.parametrize("method", ["rcm", "degree", "metis"])
def test_reordered_products_are_the_originals_renumbered(method):
    A = rmat_graph(3000, 20000, seed=1)                 # has empty rows
    A.data = np.random.default_rng(0).uniform(0.5, 1.5, A.nnz).astype(np.float32)
    M = ops.SparseMatrix(A)
    B, perm = M.reorder(method)
    assert sorted(perm.tolist()) == list(range(3000)) and not perm.flags.writeable
    assert B.nnz == M.nnz
    X = np.random.default_rng(1).standard_normal((3000, 16)).astype(np.float32)
    Y = np.full((3000, 16), np.nan, np.float32)
    Y[perm] = ops.spmm(B, X[perm])
    np.testing.assert_allclose(Y, A @ X, rtol=1e-4, atol=1e-4)
    U = np.random.default_rng(2).standard_normal((3000, 16)).astype(np.float32)
    before = scipy.sparse.csr_matrix((ops.sddmm(M, U, X), M.indices, M.indptr), shape=A.shape)
    after = scipy.sparse.csr_matrix((ops.sddmm(B, U[perm], X[perm]), B.indices, B.indptr),
                                    shape=A.shape)
    np.testing.assert_allclose(after.toarray(), before[perm][:, perm].toarray(), rtol=1e-4,
                               atol=1e-4)


def test_rcm_narrows_the_band():
    A = rmat_graph(2000, 12000, seed=3)
    B, _ = ops.SparseMatrix(A).reorder("rcm")
    band = lambda M: np.abs(np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))  # noqa: E731
                            - M.indices).mean()
    assert band(B) < band(A) / 2


def test_parallel_edges_still_count_after_a_reorder():
    A = scipy.sparse.csr_matrix((np.float32([1, 2, 3]), [1, 1, 0], [0, 2, 3]), shape=(2, 2))
    M = ops.SparseMatrix(A)                              # row 0 holds column 1 twice
    X = np.float32([[1.0], [10.0]])
    for method in ("degree", "rcm"):
        B, perm = M.reorder(method)
        Y = np.empty((2, 1), np.float32)
        Y[perm] = ops.spmm(B, X[perm], weighted=False)
        np.testing.assert_array_equal(Y, ops.spmm(M, X, weighted=False))   # [[20], [1]]
        Y[perm] = ops.spmm(B, X[perm])
        np.testing.assert_array_equal(Y, A @ X)


def test_from_csr_values_keep_their_gradient_through_a_reorder():
    import torch
    A = rmat_graph(500, 3000, seed=4)
    w = torch.rand(A.nnz, dtype=torch.float64, requires_grad=True)
    M = ops.SparseMatrix.from_csr(A.indptr, A.indices, w, A.shape)
    B, perm = M.reorder("rcm")
    X = torch.rand(500, 8, dtype=torch.float64)
    Y = torch.empty(500, 8, dtype=torch.float64)
    Y[torch.from_numpy(perm)] = ops.spmm(B, X[torch.from_numpy(perm)])
    expected = ops.spmm(M, X)
    torch.testing.assert_close(Y, expected)
    (Y * X[:, :1]).sum().backward()
    reordered_grad = w.grad.clone()
    w.grad = None
    (expected * X[:, :1]).sum().backward()
    torch.testing.assert_close(reordered_grad, w.grad)
    assert reordered_grad.abs().sum() > 0


def test_from_csr_values_keep_their_gradient_and_updates_through_a_transpose():
    """transposed() held a numpy copy of the values: spmm on it lost w's gradient silently
    and kept the values w had when the transpose was first made."""
    import torch
    A = rmat_graph(300, 2000, seed=5)
    assert (np.bincount(A.indices, minlength=300) == 0).any()     # empty rows of the transpose
    w = torch.rand(A.nnz, dtype=torch.float64, requires_grad=True)
    M = ops.SparseMatrix.from_csr(A.indptr, A.indices, w, A.shape)
    X = torch.rand(300, 4, dtype=torch.float64)
    w_ref = w.detach().clone().requires_grad_()
    rows = torch.from_numpy(np.repeat(np.arange(300), np.diff(A.indptr)))
    coordinates = torch.stack([rows, torch.from_numpy(A.indices.astype(np.int64))])

    def reference():
        return torch.sparse_coo_tensor(coordinates, w_ref, A.shape).to_dense().T @ X

    result = ops.spmm(M.transposed()[0], X)
    torch.testing.assert_close(result, reference())
    (result * X[:, :1]).sum().backward()
    (reference() * X[:, :1]).sum().backward()
    torch.testing.assert_close(w.grad, w_ref.grad)
    with torch.no_grad():
        w.mul_(10)
        w_ref.mul_(10)
    torch.testing.assert_close(ops.spmm(M.transposed()[0], X), reference())


def test_an_empty_matrix_reorders_to_itself():
    B, perm = ops.SparseMatrix(scipy.sparse.csr_matrix((0, 0), dtype=np.float32)).reorder()
    assert B.shape == (0, 0) and perm.size == 0


def test_what_reorder_refuses():
    M = ops.SparseMatrix(scipy.sparse.random(5, 7, density=0.3, format="csr", dtype=np.float32))
    with pytest.raises(SparseTIRValueError, match="square"):
        M.reorder()
    square = ops.SparseMatrix(scipy.sparse.identity(4, np.float32, format="csr"))
    with pytest.raises(SparseTIRValueError, match="no reordering 'random'"):
        square.reorder("random")


def test_from_csr_parallel_edges_stay_edges_of_their_own_whatever_the_values():
    """``from_csr`` keeps a repeated column as an edge of its own: its reorder keeps it so, with
    numpy values as with a torch tensor (numpy values were merged into one entry counted twice,
    so ``sddmm`` on ``B`` had fewer values than on ``M``)."""
    import torch
    indptr, indices = [0, 2, 3, 5, 5], [1, 1, 0, 0, 3]          # (0, 1) twice
    values = np.float32([1, 2, 3, 4, 5])
    A = scipy.sparse.csr_matrix((values, indices, indptr), shape=(4, 4))   # duplicates kept
    w = torch.from_numpy(values.copy()).requires_grad_()
    made = {"numpy": ops.SparseMatrix.from_csr(indptr, indices, values, (4, 4)),
            "torch": ops.SparseMatrix.from_csr(indptr, indices, w, (4, 4))}
    rng = np.random.default_rng(5)
    X, U = (rng.standard_normal((4, 3)).astype(np.float32) for _ in range(2))
    rows = np.repeat(np.arange(4), np.diff(indptr))
    expected_scores = (U[rows] * X[indices]).sum(1)   # row-major already: by (row, column)
    reordered = {}
    for kind, M in made.items():
        B, perm = M.reorder("rcm")
        reordered[kind] = B
        assert B.nnz == M.nnz == 5 and B.multiplicity is None
        Y = np.empty((4, 3), np.float32)
        with torch.no_grad():
            Y[perm] = np.asarray(ops.spmm(B, torch.from_numpy(X[perm])))
            scores = np.asarray(ops.sddmm(B, torch.from_numpy(U[perm]),
                                          torch.from_numpy(X[perm])))
        np.testing.assert_allclose(Y, A @ X, rtol=1e-5, atol=1e-5)
        assert scores.shape == (M.nnz,)
        old_rows, old_cols = perm[np.repeat(np.arange(4), np.diff(B.indptr))], perm[B.indices]
        by_old = np.lexsort((old_cols, old_rows))       # B's edges in M's numbering, sorted
        np.testing.assert_array_equal(old_rows[by_old], rows)
        np.testing.assert_array_equal(old_cols[by_old], indices)
        np.testing.assert_allclose(scores[by_old], expected_scores, rtol=1e-5, atol=1e-6)
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(reordered["numpy"], name),
                                      getattr(reordered["torch"], name))
    ops.spmm(reordered["torch"], torch.from_numpy(X[perm])).sum().backward()
    torch.testing.assert_close(w.grad, torch.from_numpy(X[indices].sum(1)))  # d/dw: x_u


def test_the_backward_passes_transpose_is_made_once_and_matches_scipys():
    """``transposed_pattern_matrix`` (what the backward passes read) is the matrix of
    ``transposed_pattern``, the same object every call, equal to scipy's transpose; the public
    permutation stays a fresh read-only copy per call."""
    A = scipy.sparse.random(40, 30, density=0.1, format="csr", dtype=np.float32,
                            random_state=7)
    keep = np.ones(40, np.float32)
    keep[5] = 0                                          # an empty row: an empty column of T
    A = (scipy.sparse.diags(keep) @ A).tocsr()
    A.eliminate_zeros()
    M = ops.SparseMatrix(A)
    T = M.transposed_pattern_matrix()
    assert T is M.transposed_pattern_matrix() is M.transposed_pattern()[0]
    np.testing.assert_array_equal(T.to_scipy().toarray(), A.T.toarray())
    first, second = M.transposed_pattern()[1], M.transposed_pattern()[1]
    assert first is not second and not first.flags.writeable
    np.testing.assert_array_equal(first, second)
