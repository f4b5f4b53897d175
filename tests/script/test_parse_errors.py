"""Bad sparse kernels fail with a ``SparseScriptError`` that names the line and the problem.

Most kernels here are text parsed with ``from_source`` (source name ``<str>``): a small header
declares parameters, axes I (dense) and J (CSR under I), and buffers A over (I, J) and B over
(I,); each test appends a body and marks the offending line with ``# <-- error``. The last tests
decorate real functions, whose errors name this file and its line numbers.
"""

from __future__ import annotations

import contextlib
import inspect
import textwrap

import pytest

from sparsetir.script import SparseScriptError, from_source
from sparsetir.script import tir as T

MARK = "# <-- error"

HEADER = """\
@T.prim_func
def kernel(a: T.handle, b: T.handle, indptr: T.handle, indices: T.handle, m: T.int32,
           n: T.int32, nnz: T.int32):
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    B = T.match_sparse_buffer(b, (I,), "float32")
"""


@contextlib.contextmanager
def _raises_at(match: str, source_name: str, lines: list, first: int = 1):
    """Expect a ``SparseScriptError`` matching ``match`` that points at the line of ``lines``
    (numbered from ``first``) marked ``MARK``, naming ``source_name`` and quoting the line."""
    marked = [number for number, line in enumerate(lines, first) if line.rstrip().endswith(MARK)]
    assert len(marked) == 1, "mark exactly one line"
    with pytest.raises(SparseScriptError, match=match) as info:
        yield
    message = str(info.value)
    assert f"--> {source_name}:{marked[0]}:" in message, message
    assert lines[marked[0] - first].strip() in message, message


def expect_error_in_text(text: str, match: str) -> None:
    """Parsing ``text`` fails with a message matching ``match`` at the line marked ``MARK``."""
    lines = text.splitlines()
    with _raises_at(match, "<str>", lines):
        from_source(text)


def expect_error(body: str, match: str) -> None:
    """Like ``expect_error_in_text`` for ``body`` (unindented) appended to ``HEADER``."""
    expect_error_in_text(HEADER + textwrap.indent(textwrap.dedent(body), "    "), match)


def test_header_parses():
    assert from_source(HEADER).name == "kernel"


# ----------------------------------------------------------------------------------------------
# Sparse iterations


def test_fewer_names_than_axes():
    expect_error("""
        with T.sp_iter([I, J], "SR", "sum") as [i]:  # <-- error
            B[i] = A[i, 0]
        """, r"sparse iteration sum: `as \[i\]` names 1 variable for the 2 axes \(I, J\)")


def test_more_names_than_axes():
    expect_error("""
        with T.sp_iter([I], "S", "copy") as [i, j]:  # <-- error
            B[i] = 1.0
        """, r"`as \[i, j\]` names 2 variables for the 1 axes \(I\)")


def test_kinds_string_shorter_than_axes():
    expect_error("""
        with T.sp_iter([I, J], "S", "sum") as [i, j]:  # <-- error
            B[i] = A[i, j]
        """, r"kinds string 'S' needs one 'S' or 'R' for each of the 2 axes \(I, J\)")


def test_kinds_string_with_a_letter_other_than_s_or_r():
    expect_error("""
        with T.sp_iter([I, J], "SX", "sum") as [i, j]:  # <-- error
            B[i] = A[i, j]
        """, r"kinds string 'SX' has 'X'; use 'S' \(spatial\) or 'R' \(reduction\)")


def test_unknown_axis_in_an_iteration():
    expect_error("""
        with T.sp_iter([I, Q], "SR", "sum") as [i, j]:  # <-- error
            B[i] = 1.0
        """, "name Q is not defined")


def test_buffer_iterated_as_an_axis():
    expect_error("""
        with T.sp_iter([I, A], "SR", "sum") as [i, j]:  # <-- error
            B[i] = 1.0
        """, "sparse iteration sum: sparse buffer A is not an axis")


def test_init_outside_a_sparse_iteration():
    expect_error("""
        with T.init():  # <-- error
            B[0] = 0.0
        """, r"T.init\(\) must be directly inside a T.sp_iter")


def test_init_inside_an_if():
    expect_error("""
        with T.sp_iter([I, J], "SR", "sum") as [i, j]:
            if i > 0:
                with T.init():  # <-- error
                    B[i] = 0.0
            B[i] = B[i] + A[i, j]
        """, r"T.init\(\) must be directly inside a T.sp_iter")


def test_fused_axes_of_two_kinds():
    """Refused where it is written (it used to parse and fail only at lowering)."""
    expect_error("""
        with T.sp_iter([T.fuse(I, J)], "SR", "sum") as [i, j]:  # <-- error
            B[i] = B[i] + A[i, j]
        """, r"sparse iteration sum: fused axes \(I, J\): the variables must all be spatial or "
             "all be reductions")


@pytest.mark.parametrize("axes,message", [
    ("T.fuse(J, J)", "the chain must start at an axis without parent, not J"),
    ("T.fuse(I, I)", r"not a parent chain \(I's parent is none, not I\)"),
    ("T.fuse(I)", "fuse at least two axes"),
    ("T.fuse(I, B)", "SparseBuffer .* is not an axis"),
    ("T.attach(I, J)", "attached axis I: it must have a dense parent"),
])
def test_fused_or_attached_axes_that_break_the_rule(axes, message):
    expect_error(f"""
        with T.sp_iter([{axes}], "SS", "copy") as [i, j]:  # <-- error
            B[i] = 1.0
        """, message)


# ----------------------------------------------------------------------------------------------
# Axis declarations


def test_axis_with_an_undefined_parent():
    expect_error("""
        K = T.sparse_variable(Q, (n, nnz), (indptr, indices), "int32")  # <-- error
        """, "name Q is not defined: it is not a parameter, axis, sparse buffer or iteration "
             "variable in scope")


def test_axis_whose_parent_is_a_buffer():
    expect_error("""
        K = T.sparse_variable(A, (n, nnz), (indptr, indices), "int32")  # <-- error
        """, "the parent of axis K must be a declared axis, got sparse buffer A\n")


def test_axis_whose_parent_is_an_int():
    expect_error("""
        K = T.dense_variable(4, (n, nnz), indptr, "int32")  # <-- error
        """, "the parent of axis K must be a declared axis, got int 4")


def test_index_storage_wider_than_idtype():
    expect_error("""
        K = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32", indices_dtype="int64")  # <-- error
        """, "axis K: indices_dtype int64 is not narrower than idtype int32")


def test_index_storage_that_is_no_signed_integer():
    expect_error("""
        K = T.dense_variable(I, (n, nnz), indptr, "int32", indptr_dtype="uint8")  # <-- error
        """, "axis K: indptr_dtype must be one of int8, int16, int32, int64, got 'uint8'")


def test_axis_declared_twice():
    expect_error("""
        I = T.dense_fixed(n)  # <-- error
        """, "axis I is declared twice")


# ----------------------------------------------------------------------------------------------
# Buffer declarations


def test_match_sparse_buffer_on_a_local_name():
    expect_error("""
        c = m * 2
        C = T.match_sparse_buffer(c, (I,), "float32")  # <-- error
        """, r"sparse buffer C: expected a T.handle parameter of the function, "
             r"got expression m \* 2")


def test_match_sparse_buffer_on_a_scalar_parameter():
    expect_error("""
        C = T.match_sparse_buffer(m, (I,), "float32")  # <-- error
        """, "sparse buffer C: parameter m must be a T.handle")


# ----------------------------------------------------------------------------------------------
# Bodies


def test_unknown_buffer_in_a_load():
    expect_error("""
        with T.sp_iter([I, J], "SR", "sum") as [i, j]:
            B[i] = B[i] + Z[i, j]  # <-- error
        """, "name Z is not defined")


def test_unknown_buffer_in_a_store():
    expect_error("""
        with T.sp_iter([I, J], "SR", "sum") as [i, j]:
            Z[i] = A[i, j]  # <-- error
        """, "name Z is not defined")


def test_load_with_too_few_indices():
    expect_error("""
        with T.sp_iter([I, J], "SR", "sum") as [i, j]:
            B[i] = B[i] + A[i]  # <-- error
        """, r"sparse buffer A has 2 axes \(I, J\) but is indexed with 1 index")


def test_store_with_too_many_indices():
    expect_error("""
        with T.sp_iter([I, J], "SS", "copy") as [i, j]:
            B[i, j] = A[i, j]  # <-- error
        """, r"sparse buffer B has 1 axis \(I\) but is indexed with 2 indices")


def test_augmented_store_with_too_many_indices():
    expect_error("""
        with T.sp_iter([I, J], "SR", "sum") as [i, j]:
            B[i, j] += A[i, j]  # <-- error
        """, r"sparse buffer B has 1 axis \(I\) but is indexed with 2 indices")


def test_store_outside_a_sparse_iteration():
    expect_error("""
        B[0] = 1.0  # <-- error
        """, "buffer stores must be inside a T.sp_iter")


def test_store_into_an_axis():
    expect_error("""
        with T.sp_iter([I], "S", "fill") as [i]:
            I[i] = 1.0  # <-- error
        """, "cannot store into axis I: it is not a sparse buffer")


def test_store_of_an_int32_expression_into_a_float32_buffer():
    expect_error("""
        with T.sp_iter([I, J], "SS", "sum") as [i, j]:
            B[i] = i + j  # <-- error
        """, r"cannot store a value of type int32 into float32 sparse buffer B; "
             r"convert it with T.Cast\(\"float32\", ...\)")


# ----------------------------------------------------------------------------------------------
# Parameters


def test_parameter_without_annotation():
    expect_error_in_text(HEADER.replace("m: T.int32,", f"m,  {MARK}\n          "),
                         r"parameter m needs a type annotation \(T.handle or an integer type")


def test_parameter_with_a_float_annotation():
    expect_error_in_text(HEADER.replace("m: T.int32,", f"m: T.float32,  {MARK}\n          "),
                         "parameter m: unsupported annotation; use T.handle for arrays")


# ----------------------------------------------------------------------------------------------
# Decorated kernels: the message names this file and the line in it


def _expect_decorated_error(test, match: str):
    """Expect ``match`` at the line of ``test``'s own source that is marked ``MARK``."""
    lines, first = inspect.getsourcelines(test)
    return _raises_at(match, inspect.getsourcefile(test), lines, first)


def test_decorated_kernel_error_names_this_file_and_line():
    with _expect_decorated_error(test_decorated_kernel_error_names_this_file_and_line,
                                 "buffer stores must be inside a T.sp_iter"):
        @T.prim_func
        def store_outside(b: T.handle, m: T.int32):
            I = T.dense_fixed(m)
            B = T.match_sparse_buffer(b, (I,), "float32")
            B[0] = 1.0  # <-- error


def test_decorated_kernel_parameter_without_annotation():
    with _expect_decorated_error(test_decorated_kernel_parameter_without_annotation,
                                 "parameter m needs a type annotation"):
        @T.prim_func
        def unannotated(b: T.handle,
                        m):  # <-- error
            I = T.dense_fixed(m)
