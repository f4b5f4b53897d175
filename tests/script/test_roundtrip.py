"""Printing and parsing Stage I functions: round trips of the kernel zoo and of every construct.

A round trip is ``from_source(func.script())``: the result must be structurally equal to
``func`` and print to the same text. Structural equality is only a useful oracle if it can
fail, so kernels that differ in one detail are checked to be unequal.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx

import kernel_zoo
import sparsetir
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError
from sparsetir.ir import BufferDomain, SparseIteration
from sparsetir.script import from_source
from sparsetir.script import tir as T

NAMES = list(kernel_zoo.CASES)


def _kernel(name: str):
    return kernel_zoo.CASES[name].func


def _assert_round_trip(func) -> None:
    """``func`` prints, parses back to an equal function, and that one prints the same text."""
    text = func.script()
    reparsed = from_source(text)
    tvm.ir.assert_structural_equal(func, reparsed)
    assert reparsed.script() == text


# ----------------------------------------------------------------------------------------------
# The kernel zoo


@pytest.mark.parametrize("name", NAMES)
def test_zoo_kernel_round_trips(name):
    _assert_round_trip(_kernel(name))


@pytest.mark.parametrize("name", NAMES)
def test_two_parses_of_a_zoo_kernel_are_equal(name):
    text = _kernel(name).script()
    assert tvm_ffi.structural_equal(from_source(text), from_source(text))


def _size_values(func) -> dict:
    """Values for (at most two) integer parameters that are the length of a dense_fixed axis."""
    names = []
    for axis in func.axes:
        length = axis.length
        if (axis.kind == "dense_fixed" and isinstance(length, tirx.Var)
                and length.name not in names):
            names.append(length.name)
    assert names, f"{func.name} has no dense_fixed axis of parameter length"
    return {name: 7 + k for k, name in enumerate(names[:2])}


@pytest.mark.parametrize("name", NAMES)
def test_specialized_zoo_kernel_round_trips(name):
    func = _kernel(name)
    _assert_round_trip(func.specialize(_size_values(func)))


@pytest.mark.parametrize("name", NAMES)
def test_specialize_removes_the_parameters(name):
    func = _kernel(name)
    values = _size_values(func)
    spec = func.specialize(values)
    assert [p.name for p in spec.params] == [p.name for p in func.params if p.name not in values]
    for param in values:
        with pytest.raises(KeyError):
            spec.get_param(param)


@pytest.mark.parametrize("name", NAMES)
def test_specialize_puts_the_constants_in_axes_and_buffers(name):
    func = _kernel(name)
    values = _size_values(func)
    spec = func.specialize(values)
    replaced = 0
    for axis in func.axes:
        for field in ("length", "nnz", "nnz_cols"):
            old = getattr(axis, field)
            if isinstance(old, tirx.Var) and old.name in values:
                new = getattr(spec.get_axis(axis.name), field)
                assert isinstance(new, tirx.IntImm) and new.value == values[old.name]
                replaced += 1
    assert replaced >= len(values)
    for buf in spec.buffers:
        shape = list(buf.view.shape)
        assert [str(x) for x in shape] == [str(a.length) for a in buf.axes]
        assert not any(isinstance(x, tirx.Var) and x.name in values for x in shape)
    for value in values.values():
        assert f"T.dense_fixed({value})" in spec.script()


# ----------------------------------------------------------------------------------------------
# Structural equality can fail

MUTATIONS = {
    # what differs: (kernel, text of the original, text of the variant)
    "index": ("csrmm", "A[i, j] * B[j, k]", "A[i, j] * B[i, k]"),
    "kinds": ("csrmm", '"SRS"', '"SSS"'),
    "axis length": ("csrmm", "K = T.dense_fixed(feat_size)", "K = T.dense_fixed(m)"),
    "buffer dtype": ("rgcn_homo_forward", 'E = T.match_sparse_buffer(etype, (I, J), "int32")',
                     'E = T.match_sparse_buffer(etype, (I, J), "int64")'),
    "iteration name": ("csrmm", '"SRS", "csrmm")', '"SRS", "csrmm_v2")'),
    "index storage": ("csrmm", '(indptr, indices), "int32")',
                      '(indptr, indices), "int32", indices_dtype="int8")'),
}


@pytest.mark.parametrize("what", MUTATIONS)
def test_kernels_differing_in_one_detail_are_not_equal(what):
    name, old, new = MUTATIONS[what]
    text = _kernel(name).script()
    assert text.count(old) == 1
    variant = from_source(text.replace(old, new))
    assert not tvm_ffi.structural_equal(_kernel(name), variant)
    assert not tvm_ffi.structural_equal(from_source(text), variant)


# ----------------------------------------------------------------------------------------------
# Lookups


def test_params_are_in_call_order_with_their_types():
    params = kernel_zoo.csrmm.params
    assert [p.name for p in params] == ["a", "b", "c", "indptr", "indices", "m", "n",
                                        "feat_size", "nnz"]
    assert [isinstance(p.ty, tvm.ir.PointerType) for p in params] == [True] * 5 + [False] * 4
    assert all(str(p.ty.dtype) == "int32" for p in params[5:])


def test_attrs():
    assert dict(kernel_zoo.csrmm.attrs) == {"global_symbol": "main", "tir.noalias": True}


def test_get_axis():
    axis = kernel_zoo.csrmm.get_axis("J")
    assert (axis.name, axis.kind, axis.parent.name) == ("J", "sparse_variable", "I")
    assert (axis.indptr.name, axis.indices.name) == ("indptr", "indices")


def test_get_buffer():
    buf = kernel_zoo.csrmm.get_buffer("B")
    assert [a.name for a in buf.axes] == ["J_detach", "K"]
    assert (buf.dtype, buf.handle.name) == ("float32", "b")


def test_get_axis_of_an_unknown_name_raises_key_error():
    with pytest.raises(KeyError, match="no axis 'Q'"):
        kernel_zoo.csrmm.get_axis("Q")


def test_get_buffer_of_an_unknown_name_raises_key_error():
    with pytest.raises(KeyError, match="no sparse buffer 'Q'"):
        kernel_zoo.csrmm.get_buffer("Q")


# ----------------------------------------------------------------------------------------------
# Every construct survives the round trip


@T.prim_func
def features(a: T.handle, b: T.handle, c: T.handle, indptr: T.handle, indices: T.handle,
             ell_indices: T.handle, m: T.int32, n: T.int32, nnz: T.int32):
    T.func_attr({"global_symbol": "features"})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32", sorted=False)
    K = T.sparse_fixed(I, (n, 4), ell_indices, "int32", sorted=False)
    A = T.match_sparse_buffer(a, (I, J), "float32", default_value=T.float32(-1))
    B = T.match_sparse_buffer(b, (I,), "float32")
    C = T.match_sparse_buffer(c, (I, K), "int32")
    T.assume_buffer_domain(C, (0, 10))
    with T.iter([I, J], "SR", "row_max") as [i, j]:
        T.sp_iter_attr({"sparse.hint": 3, "note": "first"})
        with T.init():
            B[i] = T.min_value("float32")
        if A[i, j] > T.float32(0):
            B[i] += A[i, j]
        else:
            B[i] = T.max(B[i], A[i, j])
    with T.sp_iter([I, K], "SS", "clip") as [i, k]:
        if C[i, k] > 9:
            C[i, k] = 9


def _iteration(func, name: str) -> SparseIteration:
    return next(s for s in func.body if isinstance(s, SparseIteration) and s.name == name)


def test_features_kernel_round_trips():
    _assert_round_trip(features)


def test_specialized_features_kernel_round_trips():
    _assert_round_trip(features.specialize({"m": 16, "n": 32}))


def test_iter_is_an_alias_of_sp_iter():
    text = features.script()
    assert "T.sp_iter([I, J]" in text
    tvm.ir.assert_structural_equal(from_source(text.replace("T.sp_iter(", "T.iter(")), features)


def test_iter_attr_is_an_alias_of_sp_iter_attr():
    text = features.script()
    assert "T.sp_iter_attr({" in text and "T.iter_attr" not in text
    tvm.ir.assert_structural_equal(
        from_source(text.replace("T.sp_iter_attr(", "T.iter_attr(")), features)


@T.prim_func
def bodyless_description(a: T.handle, indptr: T.handle, indices: T.handle, m: T.int32,
                         n: T.int32, nnz: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    with T.sp_iter([I, J], "SS", "describe") as [i, j]:
        T.iter_attr({"role": "description"})
        T.evaluate(0)
    T.evaluate(0)


def test_bodyless_description_parses_prints_and_round_trips():
    """SparseTIR's format descriptions: T.evaluate(0) as an iteration's whole body (kept,
    printed) and as the function's last statement (an empty body, dropped)."""
    it = _iteration(bodyless_description, "describe")
    assert len(it.body) == 1 and isinstance(it.body[0], tirx.Evaluate)
    assert dict(it.annotations) == {"role": "description"}
    assert len(bodyless_description.body) == 1
    assert "        T.evaluate(0)\n" in bodyless_description.script()
    _assert_round_trip(bodyless_description)


def test_sp_iter_attr_annotations_survive():
    it = _iteration(from_source(features.script()), "row_max")
    assert dict(it.annotations) == {"sparse.hint": 3, "note": "first"}
    assert not _iteration(features, "clip").annotations


def test_assume_buffer_domain_survives():
    (domain,) = [s for s in from_source(features.script()).body if isinstance(s, BufferDomain)]
    assert (domain.buffer.name, domain.min.value, domain.max.value) == ("C", 0, 10)


def test_default_value_survives():
    value = from_source(features.script()).get_buffer("A").default_value
    assert isinstance(value, tirx.FloatImm)
    assert (str(value.ty.dtype), value.value) == ("float32", -1.0)
    assert from_source(features.script()).get_buffer("B").default_value is None


def test_init_with_min_value_survives():
    (store,) = _iteration(from_source(features.script()), "row_max").init
    assert isinstance(store, tirx.BufferStore) and store.buffer.name == "B"
    tvm.ir.assert_structural_equal(store.value, tirx.min_value("float32"))


def test_if_statements_survive():
    row_max = _iteration(from_source(features.script()), "row_max")
    clip = _iteration(from_source(features.script()), "clip")
    (branch,) = row_max.body
    assert isinstance(branch, tirx.IfThenElse) and branch.else_case is not None
    (branch,) = clip.body
    assert isinstance(branch, tirx.IfThenElse) and branch.else_case is None


def test_augmented_assignment_parses_to_the_long_form():
    text = features.script()
    long_form = "B[i] = B[i] + A[i, j]"
    assert text.count(long_form) == 1
    short = from_source(text.replace(long_form, "B[i] += A[i, j]"))
    tvm.ir.assert_structural_equal(short, features)


def test_unsorted_axes_survive():
    text = features.script()
    assert text.count("sorted=False") == 2
    reparsed = from_source(text)
    assert not reparsed.get_axis("J").sorted and not reparsed.get_axis("K").sorted
    assert reparsed.get_axis("I").sorted


def test_index_storage_types_survive():
    text = features.script().replace('"int32", sorted=False)',
                                     '"int32", sorted=False, indices_dtype="int16")', 1)
    narrow = from_source(text)
    _assert_round_trip(narrow)
    assert narrow.get_axis("J").stored_dtype("indices") == "int16"
    assert narrow.get_axis("J").stored_dtype("indptr") == "int32"
    # the storage type of idtype itself is the default, printed as nothing
    same = from_source(text.replace('indices_dtype="int16"', 'indices_dtype="int32"'))
    tvm.ir.assert_structural_equal(same, features)


def test_sorted_flag_takes_part_in_equality():
    text = features.script()
    sorted_j = from_source(text.replace('"int32", sorted=False)', '"int32")', 1))
    assert not tvm_ffi.structural_equal(sorted_j, features)


@pytest.mark.parametrize("length", [1, 2])
def test_a_load_of_a_one_element_buffer_keeps_its_index(length):
    """TVM prints a load of a one-element buffer as the bare name (``Y`` for ``Y[o]``), which
    parsed back as the buffer itself ("unsupported operand type(s) for +: 'SparseBuffer'")."""
    @T.prim_func
    def row_sums(a: T.handle, y: T.handle, indptr: T.handle, indices: T.handle, m: T.int32,
                 n: T.int32, nnz: T.int32) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        O = T.dense_fixed(length)
        I = T.dense_fixed(m)
        J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
        A = T.match_sparse_buffer(a, (I, J), "float32")
        Y = T.match_sparse_buffer(y, (O,), "float32")
        with T.sp_iter([O, I, J], "SRR", "total") as [o, i, j]:
            with T.init():
                Y[o] = 0.0
            Y[o] = Y[o] + A[i, j]

    assert "Y[o] = Y[o] + A[i, j]" in row_sums.script()
    _assert_round_trip(row_sums)


def test_specialize_takes_numpy_integers_and_refuses_values_past_the_parameter():
    """Sizes read from numpy arrays are numpy integers; a value past int32 is named, not a
    TVM check failure."""
    func = _kernel("csrmm")
    spec = func.specialize({"feat_size": np.int64(8)})
    assert "T.dense_fixed(8)" in spec.script()
    with pytest.raises(SparseTIRValueError, match=r"parameter m is int32: 1099511627776 does "):
        func.specialize({"m": 2 ** 40})
    with pytest.raises(SparseTIRTypeError, match="expected an integer"):
        func.specialize({"m": np.float64(4)})


@T.prim_func
def unsigned_size(x: T.handle, n: T.uint32) -> None:
    I = T.dense_fixed(n)
    X = T.match_sparse_buffer(x, (I,), "float32")
    with T.sp_iter([I], "S", "fill") as [i]:
        X[i] = T.float32(1)


def test_specialize_takes_the_whole_range_of_an_unsigned_parameter():
    assert "4294967295" in unsigned_size.specialize({"n": 2**32 - 1}).script()
    with pytest.raises(SparseTIRValueError, match="parameter n is uint32: -1 does not fit"):
        unsigned_size.specialize({"n": -1})


@pytest.mark.parametrize("value", ["two\nlines", 'a "quote", a \\ and a\ttab, é', float("inf"),
                                   float("-inf"), 2.5])
def test_annotations_that_need_escaping_round_trip(value):
    """What ``Schedule.annotate`` accepts prints as text that parses back: strings with
    newlines, quotes and backslashes, and infinite floats."""
    sch = sparsetir.Schedule(_kernel("csrmm"))
    sch.annotate("csrmm", "note", value)
    _assert_round_trip(sch.func)
    assert dict(from_source(sch.func.script()).body[0].annotations)["note"] == value


def test_a_nan_annotation_round_trips():
    sch = sparsetir.Schedule(_kernel("csrmm"))
    sch.annotate("csrmm", "note", float("nan"))
    assert np.isnan(dict(from_source(sch.func.script()).body[0].annotations)["note"])
