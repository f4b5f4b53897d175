"""Iteration forms beyond the reference set: iterations joined by an intermediate buffer, and
doubly compressed rows (a sparse row axis whose child is sparse too)."""

import numpy as np
import scipy.sparse

import sparsetir
from sparsetir.script import tir as T


@T.prim_func
def row_normalize(a: T.handle, b: T.handle, indptr: T.handle, indices: T.handle, m: T.int32,
                  n: T.int32, nnz: T.int32):
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    B = T.match_sparse_buffer(b, (I, J), "float32")
    S = T.alloc_sparse_buffer((I,), "float32")
    with T.sp_iter([I, J], "SR", "row_sum") as [i, j]:
        with T.init():
            S[i] = T.float32(0)
        S[i] = S[i] + A[i, j]
    with T.sp_iter([I, J], "SS", "scale") as [i, j]:
        B[i, j] = A[i, j] / S[i]


@T.prim_func
def dcsr_spmm(a: T.handle, x: T.handle, y: T.handle, row_ptr: T.handle, rows: T.handle,
              indptr: T.handle, indices: T.handle, m: T.int32, n: T.int32, nnz_rows: T.int32,
              nnz: T.int32, feat: T.int32):
    O = T.dense_fixed(1)
    I = T.sparse_variable(O, (m, nnz_rows), (row_ptr, rows), "int32")
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    I_out = T.dense_fixed(m)
    J_in = T.dense_fixed(n)
    K = T.dense_fixed(feat)
    A = T.match_sparse_buffer(a, (O, I, J), "float32")
    X = T.match_sparse_buffer(x, (J_in, K), "float32")
    Y = T.match_sparse_buffer(y, (I_out, K), "float32")
    with T.sp_iter([I_out, K], "SS", "zero") as [r, k]:
        Y[r, k] = T.float32(0)
    with T.sp_iter([O, I, J, K], "SSRS", "dcsr") as [o, i, j, k]:
        Y[i, k] = Y[i, k] + A[o, i, j] * X[j, k]


def _csr(rng, m, n):
    mat = scipy.sparse.random(m, n, density=0.3, format="csr", dtype=np.float32,
                              random_state=rng)
    mat = scipy.sparse.diags((np.arange(m) % 3 != 0).astype(np.float32)) @ mat  # empty rows
    mat = scipy.sparse.csr_matrix(mat)
    mat.data = rng.uniform(0.5, 1.5, mat.nnz).astype(np.float32)
    mat.sort_indices()
    return mat


def test_iterations_joined_by_an_intermediate_buffer():
    rng = np.random.default_rng(1)
    a = _csr(rng, 20, 15)
    out = np.full(a.nnz, np.nan, np.float32)
    kernel = sparsetir.build(row_normalize, "llvm")
    kernel(a.data, out, a.indptr.astype(np.int32), a.indices.astype(np.int32), 20, 15, a.nnz)
    sums = np.asarray(a.sum(axis=1)).ravel()
    rows = np.repeat(np.arange(20), np.diff(a.indptr))
    np.testing.assert_allclose(out, a.data / sums[rows], rtol=1e-5)


def test_doubly_compressed_rows():
    rng = np.random.default_rng(2)
    a = _csr(rng, 18, 11)
    present = np.flatnonzero(np.diff(a.indptr)).astype(np.int32)      # stored rows only
    indptr = np.concatenate([[0], np.cumsum(np.diff(a.indptr)[present])]).astype(np.int32)
    x = rng.standard_normal((11, 8)).astype(np.float32)
    y = np.full((18, 8), np.nan, np.float32)
    kernel = sparsetir.build(dcsr_spmm, "llvm")
    kernel(a.data, x, y, np.array([0, len(present)], np.int32), present, indptr,
           a.indices.astype(np.int32), 18, 11, len(present), a.nnz, 8)
    np.testing.assert_allclose(y, a @ x, rtol=1e-5, atol=1e-6)
