"""Rebuild a Stage I function with variables replaced (used by ``specialize`` and passes).

TVM buffers carry their shape in their type, so substituting a size variable means making a
new coordinate-space view for every sparse buffer and pointing every access at it; this
module does that walk once for all node kinds.

Example
-------
>>> from tvm import tirx
>>> # new_func = Substituter({m: tirx.const(8, "int32")}).function(func)
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .axis import AttachedAxis, Axis, FusedAxis
from .buffer import BufferDomain, SparseBuffer
from .function import SparseFunction
from .iteration import SparseIteration, SpIterVar
from .utils import substitute, var_dtype


class Substituter:
    """Replace variables by expressions throughout a ``SparseFunction``.

    Parameters
    ----------
    var_map : dict
        ``tirx.Var`` to replacement ``PrimExpr``.
    """

    def __init__(self, var_map: dict):
        self.var_map = dict(var_map)
        self.axes: dict = {}
        self.buffers: dict = {}

    def expr(self, value):
        """Substitute in a PrimExpr or TIR statement (None passes through)."""
        return substitute(value, self.var_map)

    def axis(self, axis: Axis) -> Axis:
        """The rebuilt axis (memoised by name, so shared parents stay shared)."""
        if axis is None:
            return None
        if axis.name not in self.axes:
            self.axes[axis.name] = Axis(
                axis.name, axis.kind, self.axis(axis.parent), self.expr(axis.length),
                self.expr(axis.nnz), self.expr(axis.nnz_cols), axis.indptr, axis.indices,
                axis.idtype, axis.sorted)
        return self.axes[axis.name]

    def buffer(self, buf: SparseBuffer) -> SparseBuffer:
        """The rebuilt buffer with a new view; later accesses are redirected to it."""
        if buf.name not in self.buffers:
            new = SparseBuffer.create(buf.name, [self.axis(a) for a in buf.axes], buf.dtype,
                                      handle=buf.handle, scope=buf.scope,
                                      extra_storage=self.expr(buf.extra_storage),
                                      default_value=self.expr(buf.default_value))
            self.var_map[buf.view] = new.view
            self.buffers[buf.name] = new
        return self.buffers[buf.name]

    def iter_axis(self, axis):
        """Rebuild what an iteration variable iterates (plain, attached or fused)."""
        if isinstance(axis, AttachedAxis):
            return AttachedAxis(self.axis(axis.axis), self.axis(axis.new_parent))
        if isinstance(axis, FusedAxis):
            return FusedAxis([self.axis(a) for a in axis.group])
        return self.axis(axis)

    def stmt(self, stmt):
        """Rebuild one body item."""
        if isinstance(stmt, SparseIteration):
            fused = {}
            iter_vars = []
            for v in stmt.sp_iter_vars:
                group = None
                if v.fused is not None:
                    key = tuple(a.name for a in v.fused.group)
                    if key not in fused:
                        fused[key] = self.iter_axis(v.fused)
                    group = fused[key]
                iter_vars.append(SpIterVar(v.var, self.iter_axis(v.axis), v.is_reduction, group))
            init = None if stmt.init is None else [self.stmt(s) for s in stmt.init]
            return SparseIteration(stmt.name, iter_vars, [self.stmt(s) for s in stmt.body], init,
                                   dict(stmt.annotations))
        if isinstance(stmt, BufferDomain):
            return BufferDomain(self.buffer(stmt.buffer), self.expr(stmt.min), self.expr(stmt.max))
        return self.expr(stmt)

    def function(self, func: SparseFunction, params=None) -> SparseFunction:
        """Rebuild ``func``; ``params`` replaces the parameter list when given."""
        axes = [self.axis(a) for a in func.axes]
        buffers = [self.buffer(b) for b in func.buffers]
        body = [self.stmt(s) for s in func.body]
        return SparseFunction(func.name, list(func.params if params is None else params), axes,
                              buffers, body, dict(func.attrs))


def specialize(func: SparseFunction, values: dict) -> SparseFunction:
    """Bind integer parameters of ``func`` (see ``SparseFunction.specialize``)."""
    var_map = {}
    for key, value in values.items():
        param = func.get_param(key) if isinstance(key, str) else key
        if not any(param.same_as(p) for p in func.params):
            raise KeyError(f"{param} is not a parameter of {func.name}")
        dtype = var_dtype(param)
        if dtype == "handle":
            raise TypeError(f"parameter {param.name} is a handle; only integer parameters "
                            "can be specialized")
        if isinstance(value, bool) or not isinstance(value, (int, tvm.ir.Expr)):
            raise TypeError(f"parameter {param.name}: expected an integer, got {value!r}")
        var_map[param] = tirx.const(value, dtype) if isinstance(value, int) else value
    kept = [p for p in func.params if p not in var_map]
    return Substituter(var_map).function(func, params=kept)
