"""Index checks made inside a kernel's loops (``backend.inline_checks``): the row-tiled CSR
SpMM so marked computes what scipy computes into outputs that held NaN, refuses every kind of
bad index array by name without reading through it, and a kernel the pass cannot vouch for
is refused when built."""

import numpy as np
import pytest

import sparsetir
from sparsetir import ArgumentError
from sparsetir.backend.inline_checks import mark_inline_index_checks
from sparsetir.errors import LoweringError
from sparsetir.ir.attrs import INLINE_INDEX_CHECKS_ATTR
from sparsetir.ops.kernels import tiled_kernels
from sparsetir.schedule.operators import schedule_spmm_cpu
from sparsetir.script import tir as T
from sparse_inputs import skewed_csr

FEAT = 32


@pytest.fixture(scope="module", params=[("int32", 32), ("int64", 64)])
def checked(request):
    """The tiled SpMM checking its indices inside, its index dtype and its feature count."""
    dtype, feat = request.param
    func = tiled_kernels(dtype)["spmm"].specialize({"feat_size": feat})
    scheduled = mark_inline_index_checks(schedule_spmm_cpu(sparsetir.lower_sparse_iter(func),
                                                           feat, prefetch=8))
    kernel = sparsetir.build(scheduled, "llvm", schedule="none")
    return kernel, np.dtype(dtype), feat


def matrix(dtype):
    """90 x 60, rows 4 and 89 empty, row 7 full."""
    A = skewed_csr(90, 60, seed=3, density=0.1)
    A.indptr, A.indices = A.indptr.astype(dtype), A.indices.astype(dtype)
    return A


def run(kernel, A, feat, tiles=4):
    """``A @ X`` by the kernel, bound without its call's checks (``validate=False``), into a
    NaN output; and X."""
    m, n = A.shape
    X = np.random.default_rng(0).standard_normal((n, feat)).astype(np.float32)
    Y = np.full((m, feat), np.nan, np.float32)
    tile_ptr = np.linspace(0, m, tiles + 1).astype(np.int32)
    bound = kernel.bind(validate=False, t=tiles, m=m, n=n, nnz=A.indices.size,
                        rows=np.arange(m, dtype=np.int32))
    bound(A.data, X, Y, tile_ptr, A.indptr, A.indices)
    return Y, X


def test_right_into_nan_outputs(checked):
    kernel, dtype, feat = checked
    A = matrix(dtype)
    Y, X = run(kernel, A, feat)
    np.testing.assert_allclose(Y, A @ X, rtol=1e-5, atol=1e-5)


BAD = {
    "an index past the columns": (lambda A: A.indices.__setitem__(A.indptr[10], 60),
                                  "indices: an index out of range"),
    "a negative index": (lambda A: A.indices.__setitem__(A.indptr[10 + 1] - 1, -1),
                         "indices: an index out of range"),
    "a huge index": (lambda A: A.indices.__setitem__(A.indptr[7], 2**30),
                     "indices: an index out of range"),
    "a row out of order": (lambda A: A.indices.__setitem__(
        slice(A.indptr[7], A.indptr[7] + 2), A.indices[A.indptr[7]:A.indptr[7] + 2][::-1]),
        "not increasing within its row"),
    "a repeated column": (lambda A: A.indices.__setitem__(A.indptr[7] + 1, A.indices[A.indptr[7]]),
                          "not increasing within its row"),
    "a falling row pointer": (lambda A: A.indptr.__setitem__(11, A.indptr[10] - 1),
                              "indptr: a row's pointers"),
    "a row pointer past nnz": (lambda A: A.indptr.__setitem__(11, 10**6),
                               "indptr: a row's pointers"),
}


@pytest.mark.parametrize("problem", sorted(BAD))
def test_bad_indices_are_refused_by_name(checked, problem):
    kernel, dtype, feat = checked
    A = matrix(dtype)
    spoil, message = BAD[problem]
    spoil(A)
    with pytest.raises(ArgumentError, match=message):
        run(kernel, A, feat)


def test_tiles_out_of_order_are_refused(checked):
    kernel, dtype, feat = checked
    A = matrix(dtype)
    m, n = A.shape
    bound = kernel.bind(validate=False, t=2, m=m, n=n, nnz=A.nnz,
                        rows=np.arange(m, dtype=np.int32))
    X, Y = np.ones((n, feat), np.float32), np.empty((m, feat), np.float32)
    with pytest.raises(ArgumentError, match="tile_ptr: a row's pointers"):
        bound(A.data, X, Y, np.int32([0, 60, 50]), A.indptr, A.indices)


def test_no_columns_with_nonzeros_is_refused(checked):
    kernel, dtype, feat = checked
    bound = kernel.bind(validate=False, t=1, m=1, n=0, nnz=1, rows=np.zeros(1, np.int32))
    with pytest.raises(ArgumentError, match="indptr: a row's pointers"):
        bound(np.ones(1, np.float32), np.ones((0, feat), np.float32),
              np.empty((1, feat), np.float32), np.int32([0, 1]), np.array([0, 1], dtype),
              np.zeros(1, dtype))


@T.prim_func
def ell_rows(a: T.handle, x: T.handle, y: T.handle, indices: T.handle, m: T.int32,
             n: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    I = T.dense_fixed(m)
    J = T.sparse_fixed(I, (n, 2), indices, "int32")
    J_detach = T.dense_fixed(n)
    A = T.match_sparse_buffer(a, (I, J), "float32")
    X = T.match_sparse_buffer(x, (J_detach,), "float32")
    Y = T.match_sparse_buffer(y, (I,), "float32")
    with T.sp_iter([I, J], "SR", "ell") as [i, j]:
        with T.init():
            Y[i] = 0.0
        Y[i] = Y[i] + A[i, j] * X[j]


def test_fixed_width_rows_are_refused():
    with pytest.raises(LoweringError, match="fixed-width rows"):
        mark_inline_index_checks(sparsetir.lower_sparse_iter(ell_rows))


def test_an_index_read_outside_a_row_loop_is_refused():
    func = tiled_kernels()["spmm"].specialize({"feat_size": FEAT})
    marked = mark_inline_index_checks(sparsetir.lower_sparse_iter(func))
    stray = marked["main"].with_attr(INLINE_INDEX_CHECKS_ATTR, [
        {**dict(entry), "indptr": "I_indptr"}             # J's indices under I's row loops
        for entry in marked["main"].attrs[INLINE_INDEX_CHECKS_ATTR]][1:])
    with pytest.raises(LoweringError, match="outside a loop over one row"):
        sparsetir.build(type(marked)({"main": stray}), "llvm")
