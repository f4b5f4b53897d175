"""A ``SparseMatrix`` far wider than its nonzeros (a sampled batch of rows over all of a graph's
nodes) costs what its nonzeros and rows cost when it is made. Before: its graph tensors held a
count per column, made by copying ``storage("out_degrees")`` (itself a sealed copy), so
3 x 2**26 with 2 nonzeros took about 1 GB and seconds."""

import os

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparsetir.ops.graph_tensors import graph_tensors


def _resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _wide(rows: int, cols: int) -> scipy.sparse.csr_matrix:
    """Rows 1 and the last empty; the first and last columns and a few between used."""
    entries = {(0, 0): 1.5, (0, cols - 1): -2.0, (2, cols // 2): 0.5, (2, cols - 1): 3.0,
               (rows - 2, 7): 4.0}
    at_rows, at_cols = zip(*entries)
    return scipy.sparse.csr_matrix((np.float32(list(entries.values())), (at_rows, at_cols)),
                                   shape=(rows, cols))


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc/self/statm")
def test_making_a_wide_matrix_costs_its_nonzeros_not_its_columns():
    A = _wide(3, 2**25)
    before = _resident_mb()
    M = ops.SparseMatrix(A)                           # torch is loaded: graph tensors made
    grown = _resident_mb() - before
    assert grown < 64, f"{grown:.0f} MB resident for {M.nnz} nonzeros"
    assert graph_tensors(M).out_degrees.shape == (2**25,)


def test_a_wide_matrix_computes_what_scipy_does():
    A = _wide(6, 2**20)
    M = ops.SparseMatrix(A)
    degrees = np.bincount(A.indices, minlength=A.shape[1])
    arrays = graph_tensors(M)
    np.testing.assert_array_equal(arrays.out_degrees.numpy(), degrees)
    np.testing.assert_array_equal(M.out_degrees(), degrees)
    np.testing.assert_array_equal(arrays.in_degrees.numpy(), np.diff(A.indptr))
    arrays.out_degrees[0] = 99                        # their own: the matrix's stay
    assert M.out_degrees()[0] == 1 and M.derived("out_degrees")[0] == 1
    rng = np.random.default_rng(0)
    X = rng.standard_normal((A.shape[1], 8)).astype(np.float32)
    U = rng.standard_normal((A.shape[0], 8)).astype(np.float32)
    for _ in range(3):                                # the general path, then the short one
        out = np.full((A.shape[0], 8), np.nan, np.float32)
        ops.spmm(M, X, out=out)
        np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-5)
        out = np.full((A.shape[0], 8), np.nan, np.float32)
        ops.spmm(M, torch.from_numpy(X), out=torch.from_numpy(out), weighted=False)
        np.testing.assert_allclose(out, (A != 0) @ X, rtol=1e-5, atol=1e-5)
        values = np.full(A.nnz, np.nan, np.float32)
        ops.sddmm(M, U, X, out=values)
        coo = A.tocoo()
        np.testing.assert_allclose(values, np.einsum("ij,ij->i", U[coo.row], X[coo.col]),
                                   rtol=1e-5, atol=1e-5)
