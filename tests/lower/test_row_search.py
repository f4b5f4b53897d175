"""Coordinates looked up by binary search: hits read the element, misses give the default value.

``ewmul`` iterates A's nonzeros and reads B at the same coordinates; B has its own pattern, so a
lookup misses wherever B has no entry. Both patterns have empty rows.
"""

import numpy as np
import pytest
import scipy.sparse
import tvm
import tvm_ffi
from tvm import tirx

import sparsetir
from sparsetir.script import tir as T


@T.prim_func
def ewmul(a: T.handle, b: T.handle, c: T.handle, indptr_a: T.handle, indices_a: T.handle,
          indptr_b: T.handle, indices_b: T.handle, m: T.int32, n: T.int32, nnz_a: T.int32,
          nnz_b: T.int32):
    I = T.dense_fixed(m)
    JA = T.sparse_variable(I, (n, nnz_a), (indptr_a, indices_a), "int32")
    JB = T.sparse_variable(I, (n, nnz_b), (indptr_b, indices_b), "int32")
    A = T.match_sparse_buffer(a, (I, JA), "float32")
    B = T.match_sparse_buffer(b, (I, JB), "float32")
    C = T.match_sparse_buffer(c, (I, JA), "float32")
    with T.sp_iter([I, JA], "SS", "ewmul") as [i, j]:
        C[i, j] = A[i, j] * B[i, j] + B[i, j]


@T.prim_func
def ewmul_default_one(a: T.handle, b: T.handle, c: T.handle, indptr_a: T.handle,
                      indices_a: T.handle, indptr_b: T.handle, indices_b: T.handle, m: T.int32,
                      n: T.int32, nnz_a: T.int32, nnz_b: T.int32):
    I = T.dense_fixed(m)
    JA = T.sparse_variable(I, (n, nnz_a), (indptr_a, indices_a), "int32")
    JB = T.sparse_variable(I, (n, nnz_b), (indptr_b, indices_b), "int32")
    A = T.match_sparse_buffer(a, (I, JA), "float32")
    B = T.match_sparse_buffer(b, (I, JB), "float32", default_value=T.float32(1))
    C = T.match_sparse_buffer(c, (I, JA), "float32")
    with T.sp_iter([I, JA], "SS", "ewmul") as [i, j]:
        C[i, j] = A[i, j] * B[i, j]


def _pattern(rng, m, n, density):
    mat = scipy.sparse.random(m, n, density=density, format="csr", dtype=np.float32,
                              random_state=rng)
    mat.data[:] = rng.standard_normal(mat.nnz)
    mat[::5] = 0                                   # empty rows
    mat.eliminate_zeros()
    mat.sort_indices()
    return mat


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(7)
    return _pattern(rng, 40, 30, 0.2), _pattern(rng, 40, 30, 0.2)


def _run(func, a, b):
    kernel = sparsetir.build(func, "llvm")
    out = np.full(a.nnz, np.nan, np.float32)
    i32 = lambda x: x.astype(np.int32)  # noqa: E731
    kernel(a.data, b.data, out, i32(a.indptr), i32(a.indices), i32(b.indptr), i32(b.indices),
           a.shape[0], a.shape[1], a.nnz, b.nnz)
    return out


def _b_at_a_pattern(a, b, missing):
    dense_b = b.toarray()
    present = (b != 0).toarray()
    rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    hit = present[rows, a.indices]
    return np.where(hit, dense_b[rows, a.indices], missing), hit


def test_misses_read_zero_and_hits_read_the_element(operands):
    a, b = operands
    b_vals, hit = _b_at_a_pattern(a, b, 0.0)
    assert hit.any() and not hit.all()            # the data has both hits and misses
    np.testing.assert_allclose(_run(ewmul, a, b), a.data * b_vals + b_vals,
                               rtol=1e-5, atol=1e-7)  # fused multiply-add rounds once


def test_misses_read_the_buffer_default_value(operands):
    a, b = operands
    b_vals, _ = _b_at_a_pattern(a, b, 1.0)
    np.testing.assert_allclose(_run(ewmul_default_one, a, b), a.data * b_vals, rtol=1e-6)


def test_repeated_lookup_is_searched_once():
    lowered = sparsetir.lower_sparse_iter(ewmul)
    loops = []
    tvm_ffi.structural_walk(lowered["main"].body, (tirx.While, loops.append), order="pre")
    assert len(loops) == 1                         # B[i, j] appears twice, one search


def test_lookup_on_an_unsorted_axis_is_refused():
    text = ewmul.script().replace('(indptr_b, indices_b), "int32")',
                                  '(indptr_b, indices_b), "int32", sorted=False)')
    unsorted = sparsetir.script.from_source(text)
    with pytest.raises(ValueError, match="JB.*sorted=False"):
        sparsetir.lower_sparse_iter(unsorted)


# A dense-iterated SDDMM: j runs over all columns and C[i, j] (sparse) is found by search; the
# native T.init stores through that search, so it must run after it.
@T.prim_func
def sddmm_dense_iter(a: T.handle, b: T.handle, c: T.handle, indptr: T.handle,
                     indices: T.handle, m: T.int32, n: T.int32, feat_size: T.int32,
                     nnz: T.int32):
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    A = T.match_sparse_buffer(a, (I, K), "float32")
    B = T.match_sparse_buffer(b, (J_detach, K), "float32")
    C = T.match_sparse_buffer(c, (I, J), "float32")
    with T.sp_iter([I, J_detach, K], "SSR", "sddmm_dense_iter") as [i, j, k]:
        with T.init():
            C[i, j] = T.float32(0)
        C[i, j] = C[i, j] + A[i, k] * B[j, k]


@pytest.mark.parametrize("feat_size", [8, 0])
@pytest.mark.parametrize("parallel", [False, True])
def test_init_that_stores_through_a_search_runs_after_it(operands, feat_size, parallel):
    a, _ = operands
    m, n = a.shape
    rng = np.random.default_rng(3)
    x = rng.standard_normal((m, feat_size)).astype(np.float32)
    y = rng.standard_normal((n, feat_size)).astype(np.float32)
    mod = sparsetir.lower_sparse_iter(sddmm_dense_iter)
    if parallel:
        sch = tvm.s_tir.Schedule(mod)
        sch.parallel(sch.get_loops(sch.get_sblock("sddmm_dense_iter0"))[0])
        mod = sch.mod
    kernel = sparsetir.build(mod, "llvm")
    rows = np.repeat(np.arange(m), np.diff(a.indptr))
    expected = np.einsum("ef,ef->e", x[rows], y[a.indices])
    for _ in range(6):                             # the old bug gave NaN or crashed at random
        out = np.full(a.nnz, np.nan, np.float32)
        kernel(x, y, out, a.indptr.astype(np.int32), a.indices.astype(np.int32), m, n,
               feat_size, a.nnz)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def _blocks_in_order(mod) -> list:
    found = []
    tvm_ffi.structural_walk(mod["main"].body, (tvm.s_tir.SBlock, found.append), order="pre")
    return found


def test_search_runs_once_per_row_and_column_not_per_feature():
    # the lookup of C[i, j] depends on (i, j): its block sits under loop j, before the
    # feature loop, and the compute block holds no while loop
    lowered = sparsetir.lower_sparse_iter(sddmm_dense_iter)
    sch = tvm.s_tir.Schedule(lowered)
    search = sch.get_sblock("sddmm_dense_iter0_search0")
    compute = sch.get_sblock("sddmm_dense_iter0")
    assert [sch.get(loop).loop_var.name for loop in sch.get_loops(search)] == ["i", "j"]
    assert [sch.get(loop).loop_var.name for loop in sch.get_loops(compute)] == ["i", "j", "k"]
    whiles = []
    tvm_ffi.structural_walk(sch.get(compute), (tirx.While, whiles.append), order="pre")
    assert not whiles


def test_row_search_of_a_fused_loop_is_a_preprocess_nest():
    from kernel_zoo import CASES
    lowered = sparsetir.lower_sparse_iter(CASES["fused_sddmm"].func)
    blocks = _blocks_in_order(lowered)
    assert [b.name_hint for b in blocks] == ["root", "fused_sddmm0_search0", "fused_sddmm0"]
    assert "preprocess" in blocks[1].annotations
    sch = tvm.s_tir.Schedule(lowered)
    _, k = sch.get_loops(sch.get_sblock("fused_sddmm0"))
    sch.rfactor(sch.split(k, [None, 4])[1], 0)     # a plain reduction: rfactor accepts it
