"""Kernels from MLIR encodings: ``declare``, ``encoded_spmm`` and ``encoded_sddmm``, index
arrays in their widths.

Every kernel is lowered, checked by TVM's schedule (defaults), built for LLVM and called on a
``SparseTensor``'s own arrays (index dtypes from the encoding's widths, 8 and 16 bits
included); ``Y`` starts as NaN and the matrix has empty rows and columns.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import tvm
import tvm_ffi
from tvm import tirx

import sparsetir
from sparsetir.errors import ArgumentError, SparseTIRValueError
from sparsetir.format import (Encoding, SparseTensor, TiledLayout, apply_tiled_layout, declare,
                              encoded_sddmm, encoded_spmm)
from sparsetir.ops.kernels import spmm as hand_written_spmm   # the product's CSR SpMM

M, N, FEAT = 9, 10, 5


def two_of_four(dense):
    """``dense`` with at most two nonzeros in each group of four columns (2:4 data)."""
    out = dense.copy()
    for row in out:
        for start in range(0, N, 4):
            group = row[start:start + 4]
            group[np.flatnonzero(group)[2:]] = 0
    return out


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(26)
    dense = ((rng.random((M, N)) < 0.35) * rng.standard_normal((M, N))).astype(np.float32)
    dense[3] = 0                      # an empty row
    dense[:, 6] = 0                   # an empty column
    x = rng.standard_normal((N, FEAT)).astype(np.float32)
    return dense, x


def built(enc):
    """The kernel of ``enc``, lowered (index arrays in its widths) and built (TVM's checks
    on)."""
    kernel = encoded_spmm(enc, feat_size=FEAT)
    mod = sparsetir.lower_sparse_iter(kernel.func)
    tvm.s_tir.Schedule(mod)                     # TVM's own checks, defaults
    return kernel, mod, sparsetir.build(mod, "llvm")


ENCODINGS = {
    "CSR": Encoding.named("CSR"),
    "CSR pos16 crd8": Encoding.named("CSR", pos_width=16, crd_width=8),
    "CSR pos32": Encoding.parse("#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, "
                                "j : compressed), posWidth = 32, crdWidth = 32 }>"),
    "CSC crd16": Encoding.named("CSC", crd_width=16),
    "BSR 2x4": Encoding.named("BSR", block=(2, 4)),
    "BSR 3x4 8-bit": Encoding.named("BSR", block=(3, 4), pos_width=8, crd_width=8),
    "BSR 2x4 column-major blocks": Encoding.parse(
        "#sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 4 : "
        "compressed, j mod 4 : dense, i mod 2 : dense) }>"),
    "BSC 2x4": Encoding.named("BSC", block=(2, 4)),
    "DCSR": Encoding.named("DCSR"),
    "DCSR pos8 crd16": Encoding.named("DCSR", pos_width=8, crd_width=16),
    "DCSC": Encoding.named("DCSC"),
    "COO (AoS)": Encoding.named("COO"),
    "COO (SoA) crd16": Encoding.named("COO_SOA", crd_width=16),
    "2:4 crd8": Encoding.named("2:4", crd_width=8),
    "2:4": Encoding.named("2:4"),
    "dense": Encoding.named("dense"),
}


@pytest.mark.parametrize("name", ENCODINGS)
def test_spmm_from_encoding_equals_scipy(name, data):
    enc = ENCODINGS[name]
    dense, x = data
    if enc.levels[-1].type.kind == "structured":
        dense = two_of_four(dense)
    tensor = SparseTensor.from_dense(dense, enc)
    kernel, mod, compiled = built(enc)
    y = np.full((M, FEAT), np.nan, np.float32)
    args = kernel.arguments(tensor, x, y)
    compiled(*args)
    np.testing.assert_allclose(y, scipy.sparse.csr_matrix(dense) @ x, rtol=1e-5, atol=1e-5)
    # the index arrays are the tensor's own storage (no copy), in the encoding's widths
    params = {p.name: p for p in mod["main"].params if tirx.is_buffer_var(p)}
    stored = tensor.storage()[1]
    for level in range(enc.lvl_rank):
        if tensor.coordinates(level) is not None and enc.levels[level].type.kind != "dense":
            assert tensor.coordinates(level).dtype == enc.crd_dtype
            assert any(a is stored[level] for a in args)
    for param in params.values():
        if "indices" in param.name:
            assert str(param.dtype) == str(enc.crd_dtype)
        if "indptr" in param.name:
            assert str(param.dtype) == str(enc.pos_dtype)


@pytest.mark.parametrize("name", ENCODINGS)
def test_sddmm_from_encoding_at_every_stored_position(name, data):
    """``out[p] = X[row(p)] . Y[col(p)]`` at every slot the tensor stores (explicit zeros and
    block padding included; a slot outside the matrix gets 0), in the value order."""
    enc = ENCODINGS[name]
    dense = two_of_four(data[0]) if enc.levels[-1].type.kind == "structured" else data[0]
    tensor = SparseTensor.from_dense(dense, enc)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((M, FEAT)).astype(np.float32)
    y = rng.standard_normal((N, FEAT)).astype(np.float32)
    kernel = encoded_sddmm(enc, feat_size=FEAT)
    mod = sparsetir.lower_sparse_iter(kernel.func)
    tvm.s_tir.Schedule(mod)                     # TVM's own checks, defaults
    out = np.full(tensor.nse, np.nan, np.float32)
    sparsetir.build(mod, "llvm")(*kernel.arguments(tensor, x, y, out=out))
    rows, cols = enc.to_dims(tensor.lvl_coords())
    inside = (rows < M) & (cols < N)
    expected = np.where(inside, np.einsum("pk,pk->p", x[np.minimum(rows, M - 1)],
                                          y[np.minimum(cols, N - 1)]), 0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    if enc.lvl_rank == 2 and enc.levels[1].type.kind == "compressed" and name.startswith("CSR"):
        pattern = scipy.sparse.csr_matrix(dense)
        sampled = (x @ y.T)[pattern.nonzero()]          # scipy's order is CSR's
        np.testing.assert_allclose(out, sampled, rtol=1e-5, atol=1e-5)


def test_sddmm_arguments_need_out_and_spmm_refuses_it(data):
    tensor = SparseTensor.from_dense(data[0], Encoding.named("CSR"))
    x, y = np.zeros((M, FEAT), np.float32), np.zeros((N, FEAT), np.float32)
    with pytest.raises(SparseTIRValueError, match="pass out="):
        encoded_sddmm("CSR", feat_size=FEAT).arguments(tensor, x, y)
    with pytest.raises(SparseTIRValueError, match="takes no out"):
        encoded_spmm("CSR", feat_size=FEAT).arguments(tensor, y, x, out=np.zeros(tensor.nse))
    with pytest.raises(SparseTIRValueError, match="float32 or float64"):
        encoded_sddmm("CSR", dtype="int8")


def test_csr_encoding_declares_the_hand_written_kernel():
    enc = Encoding.named("CSR", pos_width=32, crd_width=32)
    tvm.ir.assert_structural_equal(encoded_spmm(enc).func, hand_written_spmm)


def test_float64_and_unspecialised_kernel(data):
    dense, x = data
    enc = Encoding.named("BSR", block=(2, 4), crd_width=16)
    kernel = encoded_spmm(enc, dtype="float64")
    compiled = sparsetir.build(sparsetir.lower_sparse_iter(kernel.func), "llvm")
    tensor = SparseTensor.from_dense(dense.astype(np.float64), enc)
    x64 = x.astype(np.float64)
    y = np.full((M, FEAT), np.nan)
    compiled(*kernel.arguments(tensor, x64, y))          # feat_size from x
    np.testing.assert_allclose(y, dense.astype(np.float64) @ x64, rtol=1e-12, atol=1e-12)
    with pytest.raises(SparseTIRValueError, match="takes feat_size from a 2-D x"):
        kernel.arguments(tensor, x64.ravel(), y)


def test_x_in_a_tiled_layout_under_an_int64_kernel(data):
    dense, x = data
    enc = Encoding.named("CSC")                                # native widths: int64 indices
    layout = TiledLayout.parse("{0,1:T(4,2)(2,1)}")
    kernel = encoded_spmm(enc, feat_size=FEAT)
    mod = apply_tiled_layout(sparsetir.lower_sparse_iter(kernel.func), "x", layout)
    y = np.full((M, FEAT), np.nan, np.float32)
    sparsetir.build(mod, "llvm")(*kernel.arguments(SparseTensor.from_dense(dense, enc),
                                                   layout.to_physical(x, fill=np.nan), y))
    np.testing.assert_allclose(y, dense @ x, rtol=1e-5, atol=1e-5)


def test_native_widths_compute_with_int64():
    decl = declare(Encoding.named("CSR"))
    assert decl.idtype == "int64"
    assert decl.lines[1] == 'J = T.sparse_variable(I, (n, nnz), (a_pos1, a_crd1), "int64")'


def test_narrow_index_loads_are_widened():
    kernel = encoded_spmm(Encoding.named("CSR", pos_width=16, crd_width=8), feat_size=4)
    assert kernel.declaration.lines[1] == (
        'J = T.sparse_variable(I, (n, nnz), (a_pos1, a_crd1), "int32", indptr_dtype="int16", '
        'indices_dtype="int8")')
    mod = sparsetir.lower_sparse_iter(kernel.func)
    params = {p.name: p for p in mod["main"].params if tirx.is_buffer_var(p)}
    assert str(params["J_indptr"].dtype) == "int16" and str(params["J_indices"].dtype) == "int8"
    loads = []
    tvm_ffi.structural_walk(mod["main"].body, (tvm.ir.TensorLoad, loads.append), order="pre")
    x_rows = [load.indices[0] for load in loads if load.source.name == "X"]
    assert x_rows
    for row in x_rows:                # X[T.Cast("int32", J_indices[...]), k]
        assert isinstance(row, tirx.Cast) and str(row.ty.dtype) == "int32"
        assert row.value.source.same_as(params["J_indices"])


def test_bad_coordinates_in_8_bits_are_refused_at_the_call(data):
    dense, x = data
    enc = Encoding.named("CSR", pos_width=16, crd_width=8)
    tensor = SparseTensor.from_dense(dense, enc)
    kernel, _, compiled = built(enc)
    args = kernel.arguments(tensor, x, np.zeros((M, FEAT), np.float32))
    crd = args[4].copy()
    crd[0] = N + 3
    with pytest.raises(ArgumentError, match="out of range"):
        compiled(*args[:4], crd, *args[5:])
    with pytest.raises(ArgumentError, match="int32 does not match the kernel's int8"):
        compiled(*args[:4], args[4].astype(np.int32), *args[5:])


def test_8_bit_coordinates_of_200_columns_are_refused_at_the_call():
    enc = Encoding.named("CSR", pos_width=16, crd_width=8)
    kernel, _, compiled = built(enc)
    wide = np.zeros((4, 200), np.float32)
    wide[0, 5] = wide[2, 100] = 1.0                    # every coordinate fits 8 bits
    tensor = SparseTensor.from_dense(wide, enc)
    x = np.ones((200, FEAT), np.float32)
    y = np.full((4, FEAT), np.nan, np.float32)
    with pytest.raises(ArgumentError, match=r"axis J: its length \(n\) is more than the 128 "
                                            "coordinates that int8 indices a_crd1 can hold"):
        compiled(*kernel.arguments(tensor, x, y))
    assert np.isnan(y).all()                           # nothing ran
    narrow = SparseTensor.from_dense(wide[:, :128], enc)
    compiled(*kernel.arguments(narrow, x[:128], y))     # 128 columns: all fit
    np.testing.assert_allclose(y, wide[:, :128] @ x[:128])


@pytest.mark.parametrize("text, words", [
    ("#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : loose_compressed) }>",
     "level 1 (d1 : loose_compressed)"),
    ("#sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, i mod 2 : dense, "
     "j : compressed) }>", "level 2 (d1 : compressed)"),
    ("#sparse_tensor.encoding<{ map = (i : #sparse_tensor<slice(1, 4, 1)>, j : "
     "#sparse_tensor<slice(0, 8, 1)>) -> (i : dense, j : compressed) }>", "slices and symbols"),
    ("#sparse_tensor.encoding<{ map = [s0](i, j) -> (s0 * 3 * i : dense, i : dense, "
     "j : compressed) }>", "slices and symbols"),
])
def test_encodings_without_stage_i_axes_are_refused_by_level(text, words):
    with pytest.raises(SparseTIRValueError, match="convert") as err:
        declare(Encoding.named(text))
    assert words in str(err.value)


def test_other_refusals(data):
    with pytest.raises(SparseTIRValueError, match="2 dimensions"):
        declare(Encoding.named("CSF", rank=3))
    decl = declare(Encoding.named("CSR"))
    other = SparseTensor.from_dense(data[0], Encoding.named("CSC"))
    with pytest.raises(SparseTIRValueError, match="tensor must be a SparseTensor in"):
        decl.arguments(other)


def test_the_example_checks_every_format_against_scipy():
    path = Path(__file__).resolve().parents[2] / "examples" / "mlir_encodings.py"
    spec = importlib.util.spec_from_file_location("mlir_encodings", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    errors = example.run(rows=10, cols=13, feat=5)      # asserts against scipy itself
    assert set(errors) == {(name, layout) for name in example.ENCODINGS
                           for layout in ("row-major", example.X_LAYOUT)}
    assert max(errors.values()) < 1e-4
