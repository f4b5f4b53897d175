"""The ``T`` namespace of sparse kernels: ``from sparsetir.script import tir as T``.

Everything TVM's own ``tvm.script.tirx`` offers inside a kernel body (``T.float32``, ``T.exp``,
``T.max``, ``T.min_value``, ``T.if_then_else``, ``T.Cast``, ``T.evaluate``, ...) is available
unchanged; the sparse constructs below are added, and ``T.prim_func`` parses a sparse kernel into
a ``sparsetir.ir.SparseFunction``.

Example
-------
>>> from sparsetir.script import tir as T
>>> @T.prim_func
... def csr_reduce(a: T.handle, b: T.handle, indptr: T.handle, indices: T.handle,
...                n: T.int32, m: T.int32, nnz: T.int32):
...     I = T.dense_fixed(n)
...     J = T.sparse_variable(I, (m, nnz), (indptr, indices), "int32")
...     A = T.match_sparse_buffer(a, (I, J), "float32")
...     B = T.match_sparse_buffer(b, (I,), "float32")
...     with T.sp_iter([I, J], "SR", "csr_reduce") as [i, j]:
...         with T.init():
...             B[i] = 0.0
...         B[i] = B[i] + A[i, j]
"""
# pylint: disable=invalid-name,redefined-builtin,unused-argument
from __future__ import annotations

from tvm import tirx as _tirx
from tvm.script import tirx as _tvm_tirx

from ..ir.axis import AttachedAxis, FusedAxis
from .declarations import (
    AxisDecl,
    BufferDecl,
    DomainDecl,
    FuncAttrDecl,
    InitDecl,
    IterAttrDecl,
    SpIterDecl,
)
from . import parser as _parser
from ..errors import SparseTIRTypeError

globals().update({name: getattr(_tvm_tirx, name) for name in dir(_tvm_tirx)
                  if not name.startswith("_") and name not in {
                      "prim_func", "init", "func_attr", "iter", "iter_attr", "fuse", "attach",
                      "evaluate"}})


def prim_func(func=None):
    """Decorator: parse a Python function written in sparse TVMScript.

    Returns a ``sparsetir.ir.SparseFunction``. Errors raise ``SparseScriptError`` with the
    line and column of the offending code.
    """
    if func is None:
        return prim_func
    return _parser.parse_function(func)


prim_func.dispatch_token = _parser.TOKEN


def dense_fixed(length, idtype: str = "int32") -> AxisDecl:
    """A dense axis of ``length`` positions."""
    return AxisDecl("dense_fixed", None, length, idtype=idtype)


def dense_variable(parent, shape, indptr, idtype: str = "int32",
                   indptr_dtype: str | None = None) -> AxisDecl:
    """A dense axis whose rows have ``indptr[r+1]-indptr[r]`` positions; ``shape=(length, nnz)``;
    ``indptr_dtype``: the type ``indptr`` is stored in when narrower than ``idtype``."""
    length, nnz = _pair(shape, "dense_variable", "(length, nnz)")
    return AxisDecl("dense_variable", parent, length, nnz=nnz, indptr=indptr, idtype=idtype,
                    indptr_dtype=indptr_dtype)


def sparse_fixed(parent, shape, indices, idtype: str = "int32", sorted: bool = True,
                 indices_dtype: str | None = None) -> AxisDecl:
    """A sparse axis with ``nnz_cols`` stored columns per row; ``shape=(length, nnz_cols)``;
    ``indices_dtype``: the type ``indices`` is stored in when narrower than ``idtype``."""
    length, nnz_cols = _pair(shape, "sparse_fixed", "(length, nnz_cols)")
    return AxisDecl("sparse_fixed", parent, length, nnz_cols=nnz_cols, indices=indices,
                    idtype=idtype, sorted=sorted, indices_dtype=indices_dtype)


def sparse_variable(parent, shape, data, idtype: str = "int32", sorted: bool = True,
                    indptr_dtype: str | None = None,
                    indices_dtype: str | None = None) -> AxisDecl:
    """A CSR axis; ``shape=(length, nnz)``, ``data=(indptr, indices)``; ``indptr_dtype`` /
    ``indices_dtype``: the types the arrays are stored in when narrower than ``idtype``
    (``T.sparse_variable(I, (n, nnz), (indptr, indices), indices_dtype="int8")``)."""
    length, nnz = _pair(shape, "sparse_variable", "(length, nnz)")
    indptr, indices = _pair(data, "sparse_variable", "(indptr, indices)")
    return AxisDecl("sparse_variable", parent, length, nnz=nnz, indptr=indptr, indices=indices,
                    idtype=idtype, sorted=sorted, indptr_dtype=indptr_dtype,
                    indices_dtype=indices_dtype)


def match_sparse_buffer(param, axes, dtype: str = "float32", extra_storage=None,
                        default_value=None) -> BufferDecl:
    """Bind the handle parameter ``param`` to a sparse buffer over ``axes``."""
    return BufferDecl(axes, dtype, handle=param, extra_storage=extra_storage,
                      default_value=default_value)


def alloc_sparse_buffer(axes, dtype: str = "float32", scope: str = "global",
                        default_value=None) -> BufferDecl:
    """An intermediate sparse buffer over ``axes``."""
    return BufferDecl(axes, dtype, scope=scope, default_value=default_value)


def assume_buffer_domain(buffer, domain) -> DomainDecl:
    """Promise that every value of ``buffer`` lies in ``[domain[0], domain[1])``."""
    return DomainDecl(buffer, domain)


def sp_iter(axes, kinds: str, name: str = "sp_iter") -> SpIterDecl:
    """``with T.sp_iter([I, J], "SR", "name") as [i, j]:`` iterates positions of the axes."""
    return SpIterDecl(axes, kinds, name)


iter = sp_iter


def evaluate(value) -> _tirx.Evaluate:
    """``T.evaluate(expr)``: a statement that evaluates ``expr``. Outside a ``T.sp_iter``,
    ``T.evaluate(0)`` is the empty body SparseTIR's format descriptions end with, and is
    skipped."""
    return _tirx.Evaluate(value)


def init() -> InitDecl:
    """``with T.init():`` the initial value of every output element of the iteration."""
    return InitDecl()


def sp_iter_attr(attrs: dict) -> IterAttrDecl:
    """Annotate the enclosing sparse iteration."""
    return IterAttrDecl(attrs)


iter_attr = sp_iter_attr


def func_attr(attrs: dict) -> FuncAttrDecl:
    """Function attributes."""
    return FuncAttrDecl(attrs)


def fuse(*axes) -> FusedAxis:
    """Iterate a parent chain of axes, from an axis without parent, as one loop over the
    positions of the last one (the rule: ``sparsetir.ir.check_fused_group``)."""
    if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
        axes = tuple(axes[0])
    return FusedAxis(group=list(axes))


def attach(axis, new_parent) -> AttachedAxis:
    """Iterate ``axis`` (whose parent is dense) with the coordinate of ``new_parent`` selecting
    its row."""
    return AttachedAxis(axis=axis, new_parent=new_parent)


def _pair(value, where: str, form: str):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise SparseTIRTypeError(f"T.{where}: expected {form}, got {value!r}")
    return value[0], value[1]


from .coiteration import coiterate, intersect, union  # noqa: E402  (co-iteration, issue #27)
