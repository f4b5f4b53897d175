"""Index arrays stored narrower than their axis computes (``indptr_dtype`` / ``indices_dtype``).

Zoo kernels whose axis ``J`` stores its arrays in 8 or 16 bits lower to Stage II with those
parameter dtypes and every read widened (golden IR), pass TVM's checks, and compute what
scipy/numpy compute (empty rows included, outputs starting as NaN); the call refuses arrays of
another dtype and sizes the arrays cannot hold, and lowering refuses what can never fit.
"""

import numpy as np
import pytest
import scipy.sparse
import tvm
import tvm_ffi
from tvm import tirx
from kernel_zoo import CASES

import sparsetir
from sparsetir.errors import ArgumentError, LoweringError
from sparsetir.script import from_source

CSR_AXIS = '(indptr, indices), "int32")'


def narrow(name: str, old: str, keywords: str):
    """Zoo kernel ``name`` with ``old`` (the end of axis J's declaration) given ``keywords``."""
    text = CASES[name].func.script()
    assert text.count(old) == 1
    return from_source(text.replace(old, old[:-1] + ", " + keywords + ")"))


KERNELS = {
    "csrmm": ("csrmm", CSR_AXIS, 'indptr_dtype="int16", indices_dtype="int8"'),
    "csrmm_dense_iter": ("csrmm_dense_iter", CSR_AXIS, 'indices_dtype="int8"'),
    "ellmm": ("ellmm", 'indices, "int32")', 'indices_dtype="int16"'),
    "segment_reduce": ("segment_reduce", 'indptr, "int32")', 'indptr_dtype="int8"'),
}


@pytest.fixture(scope="module")
def built():
    """name -> (Stage I kernel, lowered module, compiled kernel)."""
    out = {}
    for name in ("csrmm", "csrmm_dense_iter", "segment_reduce"):
        func = narrow(*KERNELS[name])
        mod = sparsetir.lower_sparse_iter(func)
        out[name] = (func, mod, sparsetir.build(mod, "llvm"))
    return out


@pytest.mark.parametrize("name", KERNELS)
def test_lowered_ir_matches_golden(name, golden):
    func = narrow(*KERNELS[name])
    assert from_source(func.script()).script() == func.script()        # keywords round trip
    mod = sparsetir.lower_sparse_iter(func)
    golden(mod.script())
    tvm.s_tir.Schedule(mod)                                            # TVM's checks, defaults
    tvm.ir.assert_structural_equal(mod, tvm.script.from_source(mod.script()))


def test_every_read_of_a_narrow_array_is_widened():
    mod = sparsetir.lower_sparse_iter(narrow(*KERNELS["csrmm_dense_iter"]))
    params = {p.name: p for p in mod["main"].params if tirx.is_buffer_var(p)}
    assert str(params["J_indices"].dtype) == "int8"
    parents = []

    def on_cast(cast):
        if isinstance(cast.value, tvm.ir.TensorLoad):
            parents.append(cast.value)

    tvm_ffi.structural_walk(mod["main"].body, (tirx.Cast, on_cast), order="pre")
    loads = []
    tvm_ffi.structural_walk(mod["main"].body, (tvm.ir.TensorLoad, loads.append), order="pre")
    narrow_loads = [ld for ld in loads if ld.source.same_as(params["J_indices"])]
    assert narrow_loads                              # the binary search reads the indices
    assert all(any(ld.same_as(p) for p in parents) for ld in narrow_loads)


def _csr(rows: int, cols: int, seed: int, col_limit: int | None = None):
    rng = np.random.default_rng(seed)
    dense = ((rng.random((rows, cols)) < 0.3) * rng.standard_normal((rows, cols)))
    dense = dense.astype(np.float32)
    dense[1] = 0                                     # an empty row
    if col_limit is not None:
        dense[:, col_limit:] = 0
    return scipy.sparse.csr_matrix(dense)


@pytest.mark.parametrize("name", ["csrmm", "csrmm_dense_iter"])
def test_spmm_with_narrow_arrays_equals_scipy(name, built):
    a = _csr(7, 11, 0)
    x = np.random.default_rng(1).standard_normal((11, 3)).astype(np.float32)
    y = np.full((7, 3), np.nan, np.float32)
    built[name][2](a.data, x, y, a.indptr.astype(np.int16 if name == "csrmm" else np.int32),
                   a.indices.astype(np.int8), 7, 11, 3, a.nnz)
    np.testing.assert_allclose(y, a @ x, rtol=1e-5, atol=1e-5)


def test_segment_reduce_with_an_8_bit_indptr(built):
    rng = np.random.default_rng(2)
    lengths = np.array([3, 0, 5, 1, 0, 4])
    indptr = np.r_[0, np.cumsum(lengths)].astype(np.int8)
    values = rng.standard_normal(int(lengths.sum())).astype(np.float32)
    out = np.full(6, np.nan, np.float32)
    built["segment_reduce"][2](values, out, indptr, 6, int(lengths.sum()))
    expected = [values[start:end].sum() for start, end in zip(indptr[:-1], indptr[1:])]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_the_call_refuses_what_the_arrays_cannot_hold(built):
    compiled = built["csrmm"][2]
    wide = _csr(5, 200, 3, col_limit=100)            # every coordinate fits 8 bits
    x = np.ones((200, 2), np.float32)
    y = np.full((5, 2), np.nan, np.float32)
    args = [wide.data, x, y, wide.indptr.astype(np.int16), wide.indices.astype(np.int8)]
    with pytest.raises(ArgumentError, match=r"axis J: its length \(n\) is more than the 128 "
                                            "coordinates that int8 indices indices can hold"):
        compiled(*args, 5, 200, 2, wide.nnz)
    assert np.isnan(y).all()
    with pytest.raises(ArgumentError, match="int32 does not match the kernel's int8"):
        compiled(*args[:4], wide.indices, 5, 200, 2, wide.nnz)
    compiled(args[0], x[:128], *args[2:], 5, 128, 2, wide.nnz)   # 128 columns fit
    np.testing.assert_allclose(y, wide[:, :128] @ x[:128], rtol=1e-5, atol=1e-5)
    indptr = np.array([0, 100, 100, 127], np.int8)       # 200 positions cannot be stored
    out = np.full(3, np.nan, np.float32)
    with pytest.raises(ArgumentError, match=r"its nnz \(nnz\) is more than 127, the largest "
                                            "position that int8 indptr indptr can hold"):
        built["segment_reduce"][2](np.ones(200, np.float32), out, indptr, 3, 200,
                                   validate=False)     # the kernel's own check, not the data's
    assert np.isnan(out).all()


def test_lowering_refuses_a_length_that_never_fits():
    func = narrow(*KERNELS["csrmm"]).specialize({"n": 200})
    with pytest.raises(LoweringError, match=r"axis J: its length \(200\) is more than the 128"):
        sparsetir.lower_sparse_iter(func)


def test_one_array_has_one_storage_type():
    text = CASES["csrmm"].func.script()
    text = text.replace("    J_detach = T.dense_fixed(n)\n",
                        "    J_detach = T.dense_fixed(n)\n    J2 = T.sparse_variable(I, (n, nnz),"
                        ' (indptr, indices), "int32", indices_dtype="int8")\n')
    with pytest.raises(LoweringError, match="indices is the indices of axes J and J2"):
        sparsetir.lower_sparse_iter(from_source(text))


COITERATION = """\
@T.prim_func
def add(a: T.handle, a_pos: T.handle, a_crd: T.handle, b: T.handle, b_pos: T.handle,
        b_crd: T.handle, c: T.handle, c_pos: T.handle, c_crd: T.handle, m: T.int32,
        n: T.int32, a_nnz: T.int32, b_nnz: T.int32, c_nnz: T.int32):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    I = T.dense_fixed(m)
    J = T.dense_fixed(n)
    A1 = T.sparse_variable(I, (n, a_nnz), (a_pos, a_crd), "int32"A_STORAGE)
    B1 = T.sparse_variable(I, (n, b_nnz), (b_pos, b_crd), "int32", indices_dtype="int8")
    C1 = T.sparse_variable(I, (n, c_nnz), (c_pos, c_crd), "int32")
    A = T.match_sparse_buffer(a, (I, A1), "float64")
    B = T.match_sparse_buffer(b, (I, B1), "float64")
    C = T.match_sparse_buffer(c, (I, C1), "float64")
    with T.sp_iter([I, T.coiterate(J, T.union(B, C))], "SS", "add") as [i, j]:
        A[i, j] = B[i, j] + C[i, j]
"""


def test_coiteration_reads_narrow_inputs_and_refuses_narrow_outputs():
    mod = sparsetir.lower_sparse_iter(from_source(COITERATION.replace("A_STORAGE", "")))
    for func in mod.functions.values():
        params = {p.name: p for p in func.params if tirx.is_buffer_var(p)}
        assert str(params["B1_indices"].dtype) == "int8"
        assert 'T.Cast("int32", B1_indices[' in func.script()
    with pytest.raises(LoweringError, match="axis A1: the kernel writes its indices, which is "
                                            "stored in int8"):
        sparsetir.lower_sparse_iter(from_source(
            COITERATION.replace("A_STORAGE", ', indices_dtype="int8"')))


def test_a_bound_kernel_takes_narrow_arrays_and_refuses_at_its_first_call(built):
    compiled = built["csrmm"][2]
    a = _csr(6, 9, 4)
    x = np.random.default_rng(5).standard_normal((9, 4)).astype(np.float32)
    fixed = dict(a=a.data, indptr=a.indptr.astype(np.int16), indices=a.indices.astype(np.int8),
                 m=6, feat_size=4, nnz=a.nnz)
    spmm = compiled.bind(n=9, **fixed)
    for _ in range(2):                               # the second call takes the fast path
        y = np.full((6, 4), np.nan, np.float32)
        spmm(x, y)
        np.testing.assert_allclose(y, a @ x, rtol=1e-5, atol=1e-5)
    too_wide = compiled.bind(n=200, **fixed)         # binding runs no kernel
    with pytest.raises(ArgumentError, match="more than the 128 coordinates"):
        too_wide(np.zeros((200, 4), np.float32), np.zeros((6, 4), np.float32))
