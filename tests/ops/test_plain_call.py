"""The plain call (``ops/plain.py``): a scipy CSR matrix or torch sparse CSR tensor passed to
``spmm``/``sddmm`` on every call, read in place and checked by the kernel at every call."""

import warnings

import numpy as np
import pytest
import scipy.sparse
import torch

from sparsetir import ops
from sparsetir.errors import SparseTIRError
from sparsetir.ops.plain import PlainCSR

warnings.filterwarnings("ignore", "Sparse (CSR tensor support|invariant checks)")


def _matrix(m=700, n=500, density=0.03, seed=0):
    """Float32 CSR with every fourth row empty, canonical (sorted, no duplicates)."""
    rng = np.random.default_rng(seed)
    A = scipy.sparse.random(m, n, density=density, format="csr", dtype=np.float32,
                            random_state=rng)
    A = (scipy.sparse.diags((np.arange(m) % 4 != 0).astype(np.float32)) @ A).tocsr()
    A.eliminate_zeros()
    A.sort_indices()
    A.indptr, A.indices = A.indptr.astype(np.int32), A.indices.astype(np.int32)
    return A


def _torch_csr(A, index_dtype=torch.int64):
    return torch.sparse_csr_tensor(torch.from_numpy(A.indptr).to(index_dtype),
                                   torch.from_numpy(A.indices).to(index_dtype),
                                   torch.from_numpy(A.data), A.shape)


def _sddmm_reference(A, X, Y):
    coo = A.tocoo()
    return np.einsum("ij,ij->i", X[coo.row], Y[coo.col])


def _spmm_into_nan(A, X, **kwargs):
    out = np.full((A.shape[0], X.shape[1]), np.nan, np.float32)
    ops.spmm(A, X, out=out, **kwargs)
    return out


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("feat", [32, 7])
def test_plain_scipy_spmm_and_sddmm_match_scipy(index_dtype, feat):
    A = _matrix()
    A.indptr, A.indices = A.indptr.astype(index_dtype), A.indices.astype(index_dtype)
    assert PlainCSR.of(A) is not None
    rng = np.random.default_rng(1)
    X = rng.standard_normal((500, feat)).astype(np.float32)
    U = rng.standard_normal((700, feat)).astype(np.float32)
    np.testing.assert_allclose(_spmm_into_nan(A, X), A @ X, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_spmm_into_nan(A, X, weighted=False), (A != 0) @ X,
                               rtol=1e-5, atol=1e-5)
    values = np.full(A.nnz, np.nan, np.float32)
    ops.sddmm(A, U, X, out=values)
    np.testing.assert_allclose(values, _sddmm_reference(A, U, X), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_plain_torch_csr_matches_scipy(index_dtype):
    A = _matrix(seed=2)
    T = _torch_csr(A, index_dtype)
    assert PlainCSR.of(T) is not None
    X = torch.randn(500, 16)
    np.testing.assert_allclose(ops.spmm(T, X).numpy(), A @ X.numpy(), rtol=1e-5, atol=1e-5)
    U = torch.randn(700, 16)
    np.testing.assert_allclose(ops.sddmm(T, U, X).numpy(),
                               _sddmm_reference(A, U.numpy(), X.numpy()), rtol=1e-5, atol=1e-5)


def test_an_index_changed_in_place_between_calls_is_seen():
    A = _matrix(seed=3)
    X = np.random.default_rng(4).standard_normal((500, 32)).astype(np.float32)
    np.testing.assert_allclose(_spmm_into_nan(A, X), A @ X, rtol=1e-5, atol=1e-5)
    ends = A.indptr[1:] - 1
    row = int(np.flatnonzero((np.diff(A.indptr) > 0) & (A.indices[ends] < 499))[0])
    start = ends[row]                                           # the row's last entry
    A.indices[start] = 499                                      # still valid: another column
    expected = scipy.sparse.csr_matrix((A.data, A.indices, A.indptr), shape=A.shape) @ X
    np.testing.assert_allclose(_spmm_into_nan(A, X), expected, rtol=1e-5, atol=1e-5)
    A.indices[start] = 500                                      # out of range: refused
    with pytest.raises(SparseTIRError, match="500"):
        ops.spmm(A, X)
    A.indices[start] = 499
    A.indptr[row + 1] = A.indptr[row] - 1                       # indptr falls: refused
    with pytest.raises(SparseTIRError, match="indptr"):
        ops.spmm(A, X)


def test_torch_indices_changed_in_place_are_seen():
    A = _matrix(seed=5)
    T = _torch_csr(A)
    X = torch.randn(500, 8)
    ops.spmm(T, X)
    T.col_indices()[0] = 10_000
    with pytest.raises(SparseTIRError, match="10000"):
        ops.spmm(T, X)


def test_unsorted_and_repeated_columns_take_the_wrapped_path():
    A = _matrix(seed=6)
    X = np.random.default_rng(7).standard_normal((500, 8)).astype(np.float32)
    # scipy does not know these rows are out of order: the kernel's checks find it
    assert A.has_canonical_format                               # found (and kept) before
    row = int(np.flatnonzero(np.diff(A.indptr) >= 2)[0])
    lo = A.indptr[row]
    A.indices[lo:lo + 2] = A.indices[lo:lo + 2][::-1].copy()
    A.data[lo:lo + 2] = A.data[lo:lo + 2][::-1].copy()
    assert PlainCSR.of(A) is not None
    expected = scipy.sparse.csr_matrix((A.data, A.indices, A.indptr), shape=A.shape) @ X
    np.testing.assert_allclose(_spmm_into_nan(A, X), expected, rtol=1e-5, atol=1e-5)
    values = ops.sddmm(A, np.ones((700, 8), np.float32), X)     # in the caller's order
    np.testing.assert_allclose(values[lo:lo + 2], X[A.indices[lo:lo + 2]].sum(axis=1),
                               rtol=1e-5)
    duplicated = scipy.sparse.csr_matrix(
        (np.float32([1, 2, 3]), [1, 1, 0], [0, 2, 3]), shape=(2, 2))   # row 0: column 1 twice
    np.testing.assert_allclose(ops.spmm(duplicated, np.eye(2, dtype=np.float32)),
                               [[0, 3], [3, 0]])


def test_what_the_plain_call_leaves_to_the_wrapped_path():
    A = _matrix(seed=8)
    assert PlainCSR.of(A.astype(np.float64)) is None                 # float64: wrapped
    assert PlainCSR.of(A.tocsc()) is None
    mixed = A.copy()
    mixed.indptr = mixed.indptr.astype(np.int64)
    assert PlainCSR.of(mixed) is None                                # two index dtypes
    assert PlainCSR.of(_torch_csr(A).to_sparse_coo()) is None
    assert PlainCSR.of(ops.SparseMatrix(A)) is None
    vector = scipy.sparse.csr_array(np.float32([1, 0, 2]))          # 1-D: named by the wrapped path
    assert PlainCSR.of(vector) is None
    with pytest.raises(SparseTIRError, match="2 dimensions, got 1"):
        ops.spmm(vector, np.ones((3, 2), np.float32))


def test_row_tiles_stay_in_range_whatever_indptr_holds():
    A = _matrix(seed=9)
    indptr = A.indptr.copy()
    indptr[5] = 10**6                                            # broken, and not monotone
    tiles = PlainCSR(A.shape, indptr, A.indices, A.data).tile_ptr(16)
    assert tiles[0] == 0 and tiles[-1] == 700 and (np.diff(tiles) >= 0).all()
