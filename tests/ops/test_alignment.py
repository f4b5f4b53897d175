"""Gathered operands copied to a cache-line boundary (``ops.alignment``): results unchanged,
the copy only where it pays, nothing returned refers to it."""

import numpy as np
import pytest
import scipy.sparse

import sparsetir.ops as ops
from sparsetir.ops.alignment import CACHE_LINE, MIN_REUSE, gather_ready
from sparsetir.runtime.threads import thread_count


def off_boundary(shape, offset_bytes=16, seed=0):
    """A float32 array of ``shape`` starting ``offset_bytes`` past a 64-byte boundary."""
    size = int(np.prod(shape))
    buffer = np.empty(size + CACHE_LINE, np.float32)
    start = (-buffer.ctypes.data % CACHE_LINE + offset_bytes) // 4
    array = buffer[start:start + size].reshape(shape)
    array[:] = np.random.default_rng(seed).standard_normal(shape)
    assert array.ctypes.data % CACHE_LINE == offset_bytes
    return array


def dense_rows_matrix(m=300, n=100, per_row=48, seed=1):
    """Every row holds ``per_row`` nonzeros (so each of the n columns is gathered ~120 times),
    but every seventh row is empty."""
    rng = np.random.default_rng(seed)
    rows = [np.sort(rng.choice(n, per_row, replace=False)) if r % 7 else np.array([], int)
            for r in range(m)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    indices = np.concatenate(rows)
    return scipy.sparse.csr_matrix((rng.uniform(0.5, 1.5, indices.size).astype(np.float32),
                                    indices, indptr), shape=(m, n))


@pytest.mark.parametrize("feat", [16, 32, 64, 128])
@pytest.mark.parametrize("offset", [0, 16, 48])
def test_spmm_and_sddmm_off_the_boundary_equal_scipy(feat, offset):
    A = dense_rows_matrix()
    M = ops.SparseMatrix(A)
    X = off_boundary((A.shape[1], feat), offset)
    copied = gather_ready(X, 0, A.nnz) is not X                      # the copied path runs
    assert copied == (offset != 0 and feat >= 64 and A.nnz >= MIN_REUSE * thread_count() * 100)
    out = np.full((A.shape[0], feat), np.nan, np.float32)
    assert ops.spmm(M, X, out=out) is out
    np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(ops.spmm(A, X), A @ X, rtol=1e-5, atol=1e-4)   # plain call
    U = off_boundary((A.shape[0], feat), offset, seed=2)
    values = np.full(A.nnz, np.nan, np.float32)
    ops.sddmm(M, U, X, out=values)
    coo = A.tocoo()
    np.testing.assert_allclose(values, np.einsum("ij,ij->i", U[coo.row], X[coo.col]),
                               rtol=1e-5, atol=1e-4)


def test_copies_only_where_rows_are_gathered_often():
    X = off_boundary((100, 64))
    enough = MIN_REUSE * thread_count() * 100
    copied = gather_ready(X, 0, gathers=enough)
    assert copied is not X and copied.ctypes.data % CACHE_LINE == 0
    np.testing.assert_array_equal(copied, X)
    assert gather_ready(X, 0, gathers=enough - 1) is X               # too few gathers
    assert gather_ready(X, 0, gathers=None) is X                     # unknown matrix
    short = off_boundary((100, 32))                                  # 128-byte rows
    assert gather_ready(short, 0, 10**6) is short
    aligned = off_boundary((100, 64), 0)
    assert gather_ready(aligned, 0, 10**6) is aligned
    assert gather_ready(X.astype(np.float64), 0, 10**6).dtype == np.float64


def test_two_operands_get_two_buffers_and_results_never_share_them():
    X, Y = off_boundary((100, 64)), off_boundary((100, 64), seed=3)
    a, b = gather_ready(X, 0, 10**6), gather_ready(Y, 1, 10**6)
    assert not np.shares_memory(a, b)
    A = dense_rows_matrix(m=100, n=100, per_row=60)
    result = ops.spmm(ops.SparseMatrix(A), X)
    assert not np.shares_memory(result, gather_ready(X, 0, 10**6))
