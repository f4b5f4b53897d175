"""Gathered operands copied to a cache-line boundary (``ops.alignment``) by the compiled
parallel copy (``ops.line_copy``): results unchanged, the copy only where it pays, on the
kernels' threads, nothing returned refers to it."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse
import tvm_ffi
from tvm import tirx

import sparsetir.ops as ops
from sparsetir.driver.build_module import scheduled_stage2
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError
from sparsetir.ops import alignment
from sparsetir.ops.arrays import LINED_BYTES, empty_on_line
from sparsetir.ops.alignment import MIN_REUSE, REUSE_PER_L2, gather_ready, reuse_to_copy
from sparsetir.ops.line_copy import copy_lines, line_copy
from sparsetir.runtime.threads import SERIAL_BYTES
from sparsetir.schedule.cpu_target import CACHE_LINE_BYTES, LINE_FLOATS, vectors_are_lines
from sparsetir.schedule.operators import l2_cache_bytes


def off_boundary(shape, offset_bytes=16, seed=0):
    """A float32 array of ``shape`` starting ``offset_bytes`` past a 64-byte boundary."""
    size = int(np.prod(shape))
    buffer = np.empty(size + CACHE_LINE_BYTES, np.float32)
    start = (-buffer.ctypes.data % CACHE_LINE_BYTES + offset_bytes) // 4
    array = buffer[start:start + size].reshape(shape)
    array[:] = np.random.default_rng(seed).standard_normal(shape)
    assert array.ctypes.data % CACHE_LINE_BYTES == offset_bytes
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


@pytest.fixture
def avx512(monkeypatch):
    """The copy rule decides as on an AVX-512 CPU, whose vector registers are whole lines (the
    kernels still compile for this one)."""
    monkeypatch.setattr(alignment, "vectors_are_lines", lambda: True)


@pytest.fixture
def copies(monkeypatch):
    """The sizes of the copies ``gather_ready`` makes while the test runs."""
    made = []

    def counted(source, target):
        made.append(source.size)
        copy_lines(source, target)

    monkeypatch.setattr(alignment, "copy_lines", counted)
    return made


@pytest.mark.parametrize("feat", [16, 24, 32, 64, 128])
@pytest.mark.parametrize("offset", [0, 16, 32, 48])
def test_spmm_and_sddmm_off_the_boundary_equal_scipy(feat, offset, copies, avx512):
    A = dense_rows_matrix()
    M = ops.SparseMatrix(A)
    X = off_boundary((A.shape[1], feat), offset)
    whole_lines = offset != 0 and feat % LINE_FLOATS == 0        # 24 features: 96-byte rows
    out = np.full((A.shape[0], feat), np.nan, np.float32)
    for _ in range(3):                   # the general path, then the prepared short path
        assert ops.spmm(M, X, out=out) is out
        np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(ops.spmm(A, X), A @ X, rtol=1e-5, atol=1e-4)  # plain call
    assert copies == []                  # SpMM never copies X (its kernels may realign it)
    U = off_boundary((A.shape[0], feat), offset, seed=2)
    values = np.full(A.nnz, np.nan, np.float32)
    copies.clear()
    ops.sddmm(M, U, X, out=values)
    assert copies == ([X.size] if whole_lines else [])   # the gathered Y only, not X's rows
    coo = A.tocoo()
    np.testing.assert_allclose(values, np.einsum("ij,ij->i", U[coo.row], X[coo.col]),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("rows, feat", [(1, 16), (7, 48), (5000, 32)])   # the last on threads
@pytest.mark.parametrize("offsets", [(0, 0), (16, 0), (32, 16), (48, 32)])
def test_copy_lines_equals_numpy(rows, feat, offsets):
    source = off_boundary((rows, feat), offsets[0], seed=rows)
    target = off_boundary((rows, feat), offsets[1])
    target[:] = np.nan
    before = source.copy()
    copy_lines(source, target)
    np.testing.assert_array_equal(target, source)
    np.testing.assert_array_equal(source, before)
    assert (rows * feat * 4 > SERIAL_BYTES) == (rows == 5000)


def test_copy_lines_refuses_what_it_cannot_copy():
    with pytest.raises(SparseTIRValueError, match="whole lines of 16 floats"):
        copy_lines(np.ones(24, np.float32), np.empty(24, np.float32))
    with pytest.raises(SparseTIRValueError, match="sizes 32 and 16"):
        copy_lines(np.ones(32, np.float32), np.empty(16, np.float32))
    with pytest.raises(SparseTIRTypeError, match="C-contiguous"):
        copy_lines(np.ones((8, 16), np.float32), np.empty((16, 8), np.float32).T)


def test_line_copy_is_a_parallel_loop_over_lines_with_vector_lines():
    loops = []
    tvm_ffi.structural_walk(scheduled_stage2(line_copy, "llvm")["main"].body,
                            (tirx.For, loops.append), order="pre")
    assert [loop.kind for loop in loops] == [tirx.ForKind.PARALLEL, tirx.ForKind.VECTORIZED]
    assert str(loops[0].extent) == "lines" and int(loops[1].extent) == LINE_FLOATS


_ON_TWO_THREADS = """
import json, numpy as np, sparsetir.ops
from sparsetir.ops.line_copy import copy_lines
from sparsetir.runtime import threads
source = np.random.default_rng(0).standard_normal((4000, 64)).astype(np.float32)
target = np.full_like(source, np.nan)
before = threads.pool_launches()
copy_lines(source, target)
print(json.dumps({"pool": threads.cooperate_with_torch().pool,
                  "launches": threads.pool_launches() - before,
                  "team": threads.last_launch_threads(),
                  "equal": bool(np.array_equal(source, target))}))
"""


def test_the_copy_runs_on_the_kernels_threads():
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("TVM_BIND_THREADS", "TVM_THREAD_POOL_SPIN_COUNT",
                                "TVM_EXCLUDE_WORKER0")}
    environment["TVM_NUM_THREADS"] = "2"
    done = subprocess.run([sys.executable, "-c", _ON_TWO_THREADS], env=environment,
                          capture_output=True, text=True, timeout=300, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if found.pop("pool") != "tasks":
        pytest.skip("sparsetir's task pool is unavailable here (TVM's pool runs the kernels)")
    assert found == {"launches": 1, "team": 2, "equal": True}


def test_copies_only_where_rows_are_gathered_often(avx512):
    X = off_boundary((100, 64))
    enough = int(np.ceil(reuse_to_copy(X.nbytes) * 100))
    copied = gather_ready(X, gathers=enough)
    assert copied is not X and copied.ctypes.data % CACHE_LINE_BYTES == 0
    np.testing.assert_array_equal(copied, X)
    assert gather_ready(X, gathers=enough - 1) is X                 # too few gathers
    assert gather_ready(X, gathers=None) is X                       # unknown matrix
    lines = off_boundary((100, 16))                                 # 64-byte rows: copied
    assert gather_ready(lines, 10**6) is not lines
    short = off_boundary((100, 24))                                 # 96 bytes: not whole lines
    assert gather_ready(short, 10**6) is short
    aligned = off_boundary((100, 64), 0)
    assert gather_ready(aligned, 10**6) is aligned
    assert gather_ready(X.astype(np.float64), 10**6).dtype == np.float64
    base = np.empty(2 * LINE_FLOATS, np.float32)
    offset = -base.ctypes.data % CACHE_LINE_BYTES + 16
    empty = np.ndarray((0, 64), np.float32, buffer=base, offset=offset)
    assert empty.ctypes.data % CACHE_LINE_BYTES == 16              # no rows, off the boundary
    assert gather_ready(empty, 10**6) is empty
    large = off_boundary((2 * l2_cache_bytes() // 256 + 1, 64))    # beyond two L2 caches
    assert gather_ready(large, 10**9) is large


@pytest.mark.parametrize("lanes", [8, 4])
def test_nothing_is_copied_where_a_vector_is_not_a_whole_line(lanes, monkeypatch, copies):
    """AVX2 (or SSE): a row off a line straddles with every other vector at most, and the copy
    costs more than it saves; SDDMM still gives numpy's numbers from the row where it is."""
    monkeypatch.setattr(alignment, "vectors_are_lines", lambda: vectors_are_lines(lanes))
    X = off_boundary((100, 64))
    assert gather_ready(X, gathers=10**6) is X
    A = dense_rows_matrix(m=100, n=100, per_row=60)
    U = off_boundary((100, 64), seed=4)
    values = np.full(A.nnz, np.nan, np.float32)
    ops.sddmm(ops.SparseMatrix(A), U, X, out=values)
    assert copies == []
    coo = A.tocoo()
    np.testing.assert_allclose(values, np.einsum("ij,ij->i", U[coo.row], X[coo.col]),
                               rtol=1e-5, atol=1e-4)


def test_the_reuse_that_pays_grows_with_the_operand():
    l2 = l2_cache_bytes()
    assert reuse_to_copy(1024) == MIN_REUSE
    assert reuse_to_copy(l2) == REUSE_PER_L2
    assert reuse_to_copy(2 * l2) == 2 * REUSE_PER_L2


def test_results_never_share_the_buffer_and_calls_reuse_it(avx512):
    A = dense_rows_matrix(m=100, n=100, per_row=60)
    M = ops.SparseMatrix(A)
    X, Z = off_boundary((100, 64)), off_boundary((100, 32), seed=3)
    first = ops.spmm(M, X)
    second = ops.spmm(M, Z)                       # a second copy into the same buffer
    buffer = gather_ready(X, 10**6)
    assert not np.shares_memory(first, buffer) and not np.shares_memory(second, buffer)
    np.testing.assert_allclose(first, A @ X, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(second, A @ Z, rtol=1e-5, atol=1e-4)


def test_results_start_on_a_line_so_a_chained_call_copies_nothing(copies, avx512):
    """An operator's numpy result of 64 KiB or more starts on a cache line (as a torch
    tensor does), so feeding it to the next call, whose rows it gathers, needs no copy; the
    chained result is the chained scipy product, empty rows included."""
    A = dense_rows_matrix(m=600, n=600, per_row=40)
    M = ops.SparseMatrix(A)
    X = off_boundary((600, 32))
    first = ops.spmm(M, X)
    results = [first, ops.spmm(A, X), ops.sddmm(M, X, X), ops.spmm(M, X, weighted=False),
               ops.gspmm(M, "copy_lhs", "sum", X, None), ops.copy_u_sum(M, X.astype(np.float64))]
    assert [r.ctypes.data % CACHE_LINE_BYTES for r in results] == [0] * len(results)
    copies.clear()
    ops.sddmm(M, X, first)                     # SDDMM copies a gathered Y off the line, but
    assert copies == []                        # `first` is on one
    second = ops.spmm(M, first)
    np.testing.assert_allclose(second, A @ (A @ X.astype(np.float64)), rtol=1e-4, atol=1e-3)
    assert not second[::7].any()               # every seventh row is empty


@pytest.mark.parametrize("shape, dtype", [((LINED_BYTES // 4,), np.float32),
                                          ((1000, 17), np.float64), ((3, 5, 70000), np.int8),
                                          (LINED_BYTES, np.bool_)])
def test_a_result_from_64_kib_starts_on_a_line(shape, dtype):
    array = empty_on_line(shape, dtype)
    assert array.nbytes >= LINED_BYTES and array.ctypes.data % CACHE_LINE_BYTES == 0
    assert array.dtype == dtype and array.flags.c_contiguous and array.flags.writeable
    assert array.shape == ((shape,) if isinstance(shape, int) else shape)
    array[...] = 1                              # the whole view is writable memory of its own
    assert array.base.nbytes == array.nbytes + CACHE_LINE_BYTES


@pytest.mark.parametrize("shape", [(LINED_BYTES // 4 - 1,), (0, 5000), ()])
def test_a_smaller_result_is_numpys_own(shape):
    """Below ``LINED_BYTES`` a result is numpy's ``np.empty``: it owns its memory."""
    array = empty_on_line(shape)
    assert array.shape == shape and array.nbytes < LINED_BYTES and array.flags.owndata


def test_a_zero_width_product_is_zeros_on_a_line():
    """``gather_mm`` over zero inner features gives zeros (not what the memory held), placed
    like every large result."""
    out = ops.gather_mm(np.ones((20000, 0), np.float32), np.ones((3, 0, 32), np.float32),
                        idx_b=np.zeros(20000, np.int64))
    assert out.shape == (20000, 32) and out.ctypes.data % CACHE_LINE_BYTES == 0 and not out.any()
