"""Calls of ``sparsetir.ops.spmm``/``sddmm`` by operator name on a 90 x 60 matrix with 16
features, their seeded operands and scipy's results, shared by the tests of the calls' short
paths (``ops/test_numpy_calls``, ``ops/test_plain_calls``)."""

import numpy as np
import scipy.sparse

import sparsetir.ops as ops

M_ROWS, N_COLS, FEAT = 90, 60, 16


def expected(A, op, X, Y):
    """scipy's result (float64) of operator ``op`` on ``A`` (a scipy CSR matrix)."""
    A = scipy.sparse.csr_matrix((A.data.astype(np.float64), A.indices, A.indptr), A.shape)
    if op == "sddmm":
        coo = A.tocoo()
        return np.einsum("ij,ij->i", X[coo.row], Y[coo.col])
    if op == "spmm_unweighted":
        A.data[:] = 1
    return A @ X


def call(A, op, X, Y, out=None):
    """``op`` ("spmm", "spmm_unweighted" or "sddmm") as a user calls it."""
    if op == "sddmm":
        return ops.sddmm(A, X, Y, out=out)
    return ops.spmm(A, X, out=out, weighted=op == "spmm")


def operands(op, seed=0):
    """``(X, Y)`` for ``op``: Y is None for SpMM."""
    rng = np.random.default_rng(seed)
    if op == "sddmm":
        return (rng.standard_normal((M_ROWS, FEAT)).astype(np.float32),
                rng.standard_normal((N_COLS, FEAT)).astype(np.float32))
    return rng.standard_normal((N_COLS, FEAT)).astype(np.float32), None


def nan_out(A, op):
    """An output for ``op`` on ``A`` that holds NaN before the call."""
    return np.full(A.nnz if op == "sddmm" else (M_ROWS, FEAT), np.nan, np.float32)
