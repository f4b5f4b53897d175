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

from ..ir.axis import AttachedAxis, Axis, FusedAxis
from .declarations import (
    AxisDecl,
    BufferDecl,
    DomainDecl,
    FuncAttrDecl,
    InitDecl,
    IterAttrDecl,
    SpIterDecl,
)
from .parser import prim_func  # noqa: F401  (T.prim_func)

globals().update({name: getattr(_tvm_tirx, name) for name in dir(_tvm_tirx)
                  if not name.startswith("_") and name not in {
                      "prim_func", "init", "func_attr", "iter", "fuse", "attach", "evaluate"}})


def dense_fixed(length, idtype: str = "int32") -> AxisDecl:
    """A dense axis of ``length`` positions."""
    return AxisDecl("dense_fixed", None, length, idtype=idtype)


def dense_variable(parent, shape, indptr, idtype: str = "int32") -> AxisDecl:
    """A dense axis whose rows have ``indptr[r+1]-indptr[r]`` positions; ``shape=(length, nnz)``."""
    length, nnz = _pair(shape, "dense_variable", "(length, nnz)")
    return AxisDecl("dense_variable", parent, length, nnz=nnz, indptr=indptr, idtype=idtype)


def sparse_fixed(parent, shape, indices, idtype: str = "int32", sorted: bool = True) -> AxisDecl:
    """A sparse axis with ``nnz_cols`` stored columns per row; ``shape=(length, nnz_cols)``."""
    length, nnz_cols = _pair(shape, "sparse_fixed", "(length, nnz_cols)")
    return AxisDecl("sparse_fixed", parent, length, nnz_cols=nnz_cols, indices=indices,
                    idtype=idtype, sorted=sorted)


def sparse_variable(parent, shape, data, idtype: str = "int32", sorted: bool = True) -> AxisDecl:
    """A CSR axis; ``shape=(length, nnz)``, ``data=(indptr, indices)``."""
    length, nnz = _pair(shape, "sparse_variable", "(length, nnz)")
    indptr, indices = _pair(data, "sparse_variable", "(indptr, indices)")
    return AxisDecl("sparse_variable", parent, length, nnz=nnz, indptr=indptr, indices=indices,
                    idtype=idtype, sorted=sorted)


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


def func_attr(attrs: dict) -> FuncAttrDecl:
    """Function attributes."""
    return FuncAttrDecl(attrs)


def fuse(*axes) -> FusedAxis:
    """Iterate a parent chain of axes as one loop over the positions of the last one."""
    if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
        axes = tuple(axes[0])
    if len(axes) < 2:
        raise ValueError("T.fuse needs at least two axes")
    for axis in axes:
        if not isinstance(axis, Axis):
            raise TypeError(f"T.fuse takes axes, got {type(axis).__name__}")
    for outer, inner in zip(axes, axes[1:]):
        if inner.parent is None or inner.parent.name != outer.name:
            raise ValueError(f"T.fuse: axis {inner.name} is not a child of {outer.name}")
    return FusedAxis(list(axes))


def attach(axis, new_parent) -> AttachedAxis:
    """Iterate ``axis`` with the coordinate of ``new_parent`` selecting its row."""
    if not isinstance(axis, Axis) or not isinstance(new_parent, Axis):
        raise TypeError("T.attach takes two axes")
    if axis.parent is None or axis.parent.is_sparse:
        raise ValueError(f"T.attach: axis {axis.name} must have a dense parent")
    return AttachedAxis(axis, new_parent)


def _pair(value, where: str, form: str):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"T.{where}: expected {form}, got {value!r}")
    return value[0], value[1]
