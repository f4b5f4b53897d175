"""Declarations refused by name, where they used to reach a kernel or TVM's code generation:
a value domain the kernel itself can break (``T.assume_buffer_domain`` on a buffer it writes:
the coordinates read back were trusted, and read out of bounds; or on an intermediate, which
nothing checks), an iteration over no axis (a bare ``IndexError``), a negative length (lowered,
built, then refused at the call as "-3 = -3"), a dtype TVM parses but cannot compile
(``float33``, an ``InternalError`` in code generation), and a co-iteration whose assembled
output reuses an input's axis (a bare ``KeyError``)."""

import numpy as np
import pytest

import sparsetir
from sparsetir.errors import LoweringError, SparseScriptError
from sparsetir.script import tir as T


def _parse(source: str):
    return sparsetir.script.from_source(source)


WRITE_THEN_GATHER = """
@T.prim_func
def overwrite({params}x: T.handle, y: T.handle, m: T.int32, n: T.int32, v: T.int32) -> None:
    T.func_attr({{"global_symbol": "main", "tir.noalias": True}})
    I = T.dense_fixed(m)
    N = T.dense_fixed(n)
    E = {declare_e}
    X = T.match_sparse_buffer(x, (N,), "float32")
    Y = T.match_sparse_buffer(y, (I,), "float32")
    T.assume_buffer_domain(E, (0, n))
    with T.sp_iter([I], "S", "write") as [i]:
        E[i] = v
    with T.sp_iter([I], "S", "gather") as [i]:
        Y[i] = X[E[i]]
"""


@pytest.mark.parametrize("params, declare_e, message", [
    ("e: T.handle, ", 'T.match_sparse_buffer(e, (I,), "int32")',
     r"T.assume_buffer_domain\(E, ...\): the kernel writes E"),
    ("", 'T.alloc_sparse_buffer((I,), "int32")', "E is not a parameter, so no call can check")],
    ids=["parameter", "intermediate"])
def test_a_domain_on_a_buffer_the_kernel_writes_is_refused(params, declare_e, message):
    func = _parse(WRITE_THEN_GATHER.format(params=params, declare_e=declare_e))
    with pytest.raises(LoweringError, match=message):
        sparsetir.lower_sparse_iter(func)


def test_a_domain_on_a_parameter_only_read_still_holds():
    @T.prim_func
    def gather(e: T.handle, x: T.handle, y: T.handle, m: T.int32, n: T.int32) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        I = T.dense_fixed(m)
        N = T.dense_fixed(n)
        E = T.match_sparse_buffer(e, (I,), "int32")
        X = T.match_sparse_buffer(x, (N,), "float32")
        Y = T.match_sparse_buffer(y, (I,), "float32")
        T.assume_buffer_domain(E, (0, n))
        with T.sp_iter([I], "S", "gather") as [i]:
            Y[i] = X[E[i]]

    kernel = sparsetir.build(gather, "llvm")
    e, x = np.int32([3, 0, 2]), np.float32([10, 11, 12, 13])
    y = np.full(3, np.nan, np.float32)
    kernel(e, x, y, 3, 4)
    np.testing.assert_array_equal(y, [13, 10, 12])
    with pytest.raises(sparsetir.ArgumentError):
        kernel(np.int32([4, 0, 2]), x, y, 3, 4)


HEADER = '''
@T.prim_func
def f(x: T.handle, m: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
'''


@pytest.mark.parametrize("body, message", [
    ('''    I = T.dense_fixed(m)
    X = T.match_sparse_buffer(x, (I,), "float32")
    with T.sp_iter([], "", "nothing") as []:
        X[0] = 1.0
''', "sparse iteration nothing iterates no axis"),
    ('''    I = T.dense_fixed(-3)
    X = T.match_sparse_buffer(x, (I,), "float32")
    with T.sp_iter([I], "S", "fill") as [i]:
        X[i] = 1.0
''', "axis I: length is -3; sizes are 0 or more"),
    ('''    I = T.dense_fixed(m)
    X = T.match_sparse_buffer(x, (I,), "float33")
    with T.sp_iter([I], "S", "fill") as [i]:
        X[i] = T.Cast("float33", 1)
''', "buffer X: dtype 'float33' is no scalar type TVM compiles")])
def test_bad_declarations_are_refused_where_they_are_written(body, message):
    with pytest.raises(SparseScriptError, match=message):
        _parse(HEADER + body)


def test_a_co_iteration_output_over_an_input_axis_is_refused():
    @T.prim_func
    def masked(b_vals: T.handle, b_pos: T.handle, b_crd: T.handle, c_vals: T.handle,
               c_pos: T.handle, c_crd: T.handle, y: T.handle, m: T.int32, n: T.int32,
               nb: T.int32, nc: T.int32) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        I = T.dense_fixed(m)
        J = T.dense_fixed(n)
        B1 = T.sparse_variable(I, (n, nb), (b_pos, b_crd), "int32")
        C1 = T.sparse_variable(I, (n, nc), (c_pos, c_crd), "int32")
        B = T.match_sparse_buffer(b_vals, (I, B1), "float32")
        C = T.match_sparse_buffer(c_vals, (I, C1), "float32")
        Y = T.match_sparse_buffer(y, (I, C1), "float32")
        with T.sp_iter([I, T.coiterate(J, T.intersect(B, C))], "SS", "mask") as [i, j]:
            Y[i, j] = B[i, j] * C[i, j]

    with pytest.raises(LoweringError, match="the output Y is stored over axis C1, whose index "
                                            "arrays an input reads too"):
        sparsetir.lower_sparse_iter(masked)
