"""Print a ``SparseFunction`` as TVMScript that ``from_source`` parses back.

Expressions are printed by TVM itself (``expr.script()``), so bodies read exactly like TIR;
this module lays out the declarations and the nesting of sparse iterations around them.
Importing it registers ``script`` as what ``SparseFunction.script()`` returns, so that
``sparsetir.ir`` never imports the front end.

Example
-------
>>> from sparsetir.ops.kernels import spmm
>>> print(spmm.specialize({"feat_size": 16}).script())
# from sparsetir.script import tir as T
<BLANKLINE>
@T.prim_func
def spmm(a: T.handle, x: T.handle, ..., m: T.int32, n: T.int32, nnz: T.int32):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(16)
    A = T.match_sparse_buffer(a, (I, J), "float32")
    ...
    with T.sp_iter([I, J, K], "SRS", "spmm") as [i, j, k]:
        with T.init():
            Y[i, k] = T.float32(0.0)
        Y[i, k] = Y[i, k] + A[i, j] * X[j, k]
"""

from __future__ import annotations

import json
import math

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.axis import AttachedAxis, Axis
from ..ir.coiteration import CoiteratedAxis
from ..ir.buffer import BufferDomain, SparseBuffer
from ..ir.function import SparseFunction, register_printer
from ..ir.iteration import SparseIteration
from ..ir.utils import var_dtype
from ..errors import SparseTIRTypeError

INDENT = "    "


def script(func: SparseFunction) -> str:
    """The TVMScript text of ``func``."""
    lines = ["# from sparsetir.script import tir as T", "", "@T.prim_func"]
    params = ", ".join(f"{p.name}: T.{_param_type(p)}" for p in func.params)
    lines.append(f"def {func.name}({params}):")
    body = []
    if func.attrs:
        body.append(f"T.func_attr({_literal(dict(func.attrs))})")
    body += [f"{axis.name} = {_axis(axis)}" for axis in func.axes]
    body += [f"{buf.name} = {_buffer(buf)}" for buf in func.buffers]
    for stmt in func.body:
        body += _stmt(stmt)
    if not body:
        body = ["pass"]
    lines += [INDENT + line for line in body]
    return "\n".join(lines) + "\n"


def _param_type(param: tirx.Var) -> str:
    return var_dtype(param)


def _axis(axis: Axis) -> str:
    idtype = f'"{axis.idtype}"'
    flags = "" if axis.sorted else ", sorted=False"
    for role in ("indptr", "indices"):
        stored = getattr(axis, f"{role}_dtype")
        if stored is not None:
            flags += f', {role}_dtype="{stored}"'
    if axis.kind == "dense_fixed":
        extra = "" if axis.idtype == "int32" else f", {idtype}"
        return f"T.dense_fixed({format_expr(axis.length)}{extra})"
    parent = axis.parent.name
    if axis.kind == "dense_variable":
        return (f"T.dense_variable({parent}, ({format_expr(axis.length)}, {format_expr(axis.nnz)}), "
                f"{axis.indptr.name}, {idtype}{flags})")
    if axis.kind == "sparse_fixed":
        return (f"T.sparse_fixed({parent}, ({format_expr(axis.length)}, {format_expr(axis.nnz_cols)}), "
                f"{axis.indices.name}, {idtype}{flags})")
    return (f"T.sparse_variable({parent}, ({format_expr(axis.length)}, {format_expr(axis.nnz)}), "
            f"({axis.indptr.name}, {axis.indices.name}), {idtype}{flags})")


def _buffer(buf: SparseBuffer) -> str:
    axes = _tuple([axis.name for axis in buf.axes])
    extras = ""
    if buf.extra_storage is not None:
        extras += f", extra_storage={format_expr(buf.extra_storage)}"
    if buf.default_value is not None:
        extras += f", default_value={format_expr(buf.default_value)}"
    if buf.handle is not None:
        return f'T.match_sparse_buffer({buf.handle.name}, {axes}, "{buf.dtype}"{extras})'
    return f'T.alloc_sparse_buffer({axes}, "{buf.dtype}", "{buf.scope}"{extras})'


def _stmt(stmt) -> list:
    if isinstance(stmt, SparseIteration):
        return _iteration(stmt)
    if isinstance(stmt, BufferDomain):
        return [f"T.assume_buffer_domain({stmt.buffer.name}, "
                f"({format_expr(stmt.min)}, {format_expr(stmt.max)}))"]
    return _tir_stmt(stmt)


def _iteration(it: SparseIteration) -> list:
    axes = []
    for v, *_ in it.loops:
        if v.fused is not None:
            axes.append(f"T.fuse({', '.join(v.fused.names)})")
        elif isinstance(v.axis, CoiteratedAxis):
            axes.append(v.axis.script())
        elif isinstance(v.axis, AttachedAxis):
            axes.append(f"T.attach({v.axis.axis.name}, {v.axis.new_parent.name})")
        else:
            axes.append(v.axis.name)
    names = ", ".join(v.var.name for v in it.sp_iter_vars)
    head = f'with T.sp_iter([{", ".join(axes)}], "{it.kinds}", "{it.name}") as [{names}]:'
    body = []
    if it.annotations:
        body.append(f"T.sp_iter_attr({_literal(dict(it.annotations))})")
    if it.init is not None:
        body.append("with T.init():")
        body += _indent(_stmts(it.init))
    body += _stmts(it.body)
    return [head] + _indent(body or ["pass"])


def _stmts(stmts) -> list:
    lines = []
    for stmt in stmts:
        lines += _stmt(stmt)
    return lines


def _tir_stmt(stmt) -> list:
    if isinstance(stmt, tirx.BufferStore):
        indices = ", ".join(format_expr(i) for i in stmt.indices)
        return [f"{stmt.buffer.name}[{indices}] = {format_expr(stmt.value)}"]
    if isinstance(stmt, tirx.SeqStmt):
        return _stmts(list(stmt.seq))
    if isinstance(stmt, tirx.IfThenElse):
        lines = [f"if {format_expr(stmt.condition)}:"] + _indent(_tir_stmt(stmt.then_case))
        if stmt.else_case is not None:
            lines += ["else:"] + _indent(_tir_stmt(stmt.else_case))
        return lines
    if isinstance(stmt, tirx.Evaluate):
        return [f"T.evaluate({format_expr(stmt.value)})"]
    raise SparseTIRTypeError(f"cannot print {type(stmt).__name__} in a sparse kernel")


def _indent(lines: list) -> list:
    return [INDENT + line for line in lines]


def format_expr(expr) -> str:
    """TVMScript text of an expression (int32 constants as plain integers)."""
    if isinstance(expr, tirx.IntImm) and str(expr.ty.dtype) == "int32":
        return str(expr.value)
    return tvm_ffi.structural_map(expr, (tvm.ir.TensorLoad, _with_index), order="post") \
        .script().strip()


def _with_index(load):
    """TVM prints a load of a one-element buffer without its index (``Y`` for ``Y[o]``), which
    does not parse back as a sparse buffer's load: such a load is printed from a stand-in of
    the same name and dtype whose length is not known to be 1."""
    buffer = load.source
    if not all(isinstance(size, tirx.IntImm) and size.value == 1 for size in buffer.shape):
        return load
    shape = [tirx.Var("n", "int32") for _ in buffer.shape]
    return tirx.BufferLoad(tirx.decl_buffer(shape, buffer.dtype, name=buffer.name),
                           list(load.indices))


def _tuple(names: list) -> str:
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


def _literal(value) -> str:
    """A Python literal for an attribute value (dicts, strings, numbers, booleans)."""
    if hasattr(value, "items"):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):          # escapes (newlines too) that Python reads back
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'      # float("inf"), float("-inf"), float("nan")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)) or hasattr(value, "__len__"):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, tvm.ir.Expr):
        return format_expr(value)
    return repr(value)


register_printer(script)
