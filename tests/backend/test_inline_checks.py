"""Index checks made inside a kernel's loops (``backend.inline_checks``): the row-tiled CSR
SpMM so marked computes what scipy computes into outputs that held NaN, refuses every kind of
bad index array by name without reading through it, and a kernel the pass cannot vouch for
is refused when built."""

import numpy as np
import pytest
import tvm
from tvm import tirx

import sparsetir
from sparsetir import ArgumentError
from sparsetir.backend.inline_checks import (ROWS, TILES, check_indices_inline,
                                             mark_inline_index_checks)
from sparsetir.backend.pipeline import lower_blocks
from sparsetir.errors import LoweringError
from sparsetir.ir.attrs import INLINE_INDEX_CHECKS_ATTR
from sparsetir.ops.kernels import spmm, tiled_kernels
from sparsetir.schedule.operators import schedule_for, schedule_spmm_cpu
from sparsetir.script import tir as T
from sparsetir.transform.pipeline import stage3_passes
from ir_nodes import nodes
from sparse_inputs import skewed_csr

FEAT = 32


@pytest.fixture(scope="module", params=[("int32", 32, ROWS), ("int64", 64, ROWS),
                                        ("int32", 32, TILES), ("int64", 64, TILES)])
def checked(request):
    """The tiled SpMM checking its indices inside (per row or per tile), its index dtype and
    its feature count."""
    dtype, feat, per = request.param
    func = tiled_kernels(dtype)["spmm"].specialize({"feat_size": feat})
    scheduled = mark_inline_index_checks(schedule_spmm_cpu(sparsetir.lower_sparse_iter(func),
                                                           feat, prefetch=8), per)
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


def _row_loops(mod):
    """The loops over one row's positions (``indptr[r + 1] - indptr[r]``) of ``indptr``."""
    return [loop for loop in nodes(mod, tirx.For) if isinstance(loop.extent, tirx.Sub)
            and "indptr" in str(loop.extent.a)]


def _lowered(func, feat, schedule, per=ROWS):
    scheduled = mark_inline_index_checks(schedule(sparsetir.lower_sparse_iter(func), feat), per)
    return check_indices_inline(lower_blocks(stage3_passes("llvm")(scheduled)))


def _clamps(loop) -> list:
    """The clamps of column indices in ``loop``."""
    return [clamp for clamp in nodes(tvm.IRModule({"main": tirx.PrimFunc([], loop)}), tirx.Min)
            if "J_indices" in str(clamp)]


@pytest.mark.parametrize("kernel", ["spmm", "sddmm"])
def test_each_tile_is_checked_before_its_rows_and_its_loops_are_left_alone(kernel):
    """Marked per tile, the row-tiled kernels check a tile's indices in flat loops before its
    rows (the tile's own counts), and the loops over a row's nonzeros read them as they
    were, without a clamp; marked per row, those loops clamp what they read."""
    func = tiled_kernels()[kernel].specialize({"feat_size": FEAT})
    schedule = lambda mod, feat: schedule_for(kernel, mod, feat, "llvm")   # noqa: E731
    for per, tiled in ((TILES, True), (ROWS, False)):
        mod = _lowered(func, FEAT, schedule, per)
        names = {str(alloc.buffer.name) for alloc in nodes(mod, tirx.AllocBuffer)}
        assert ("tile_failures" in names) == tiled
        (nonzeros,) = [loop for loop in _row_loops(mod) if "J_indptr" in str(loop.extent.a)]
        assert bool(_clamps(nonzeros)) != tiled


def test_per_is_rows_or_tiles():
    func = tiled_kernels()["spmm"].specialize({"feat_size": FEAT})
    with pytest.raises(ValueError, match="per must be"):
        mark_inline_index_checks(sparsetir.lower_sparse_iter(func), "row")


def test_an_untiled_kernel_checks_each_row_inside_its_loop():
    """Marked per tile, a kernel without a loop over a tile's rows (rows in parallel) is
    checked per row: each row's loop counts and clamps its indices itself; the kernel
    matches scipy and refuses a bad index by name."""
    func = spmm.specialize({"feat_size": 16})
    mod = _lowered(func, 16, lambda mod, feat: mod, TILES)
    (nonzeros,) = _row_loops(mod)
    assert _clamps(nonzeros)
    kernel = sparsetir.build(mark_inline_index_checks(sparsetir.lower_sparse_iter(func), TILES),
                             "llvm")
    A = matrix(np.int32)
    m, n = A.shape
    X = np.random.default_rng(1).standard_normal((n, 16)).astype(np.float32)
    Y = np.full((m, 16), np.nan, np.float32)
    bound = kernel.bind(validate=False, m=m, n=n, nnz=A.nnz)
    bound(A.data, X, Y, A.indptr, A.indices)
    np.testing.assert_allclose(Y, A @ X, rtol=1e-5, atol=1e-5)
    bad = A.indices.copy()
    bad[A.indptr[7] + 2] = n
    with pytest.raises(ArgumentError, match="indices: an index out of range"):
        bound(A.data, X, Y, A.indptr, bad)
