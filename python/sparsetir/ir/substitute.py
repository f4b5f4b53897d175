"""Rebuild a Stage I function with variables replaced (used by ``specialize`` and passes).

TVM buffers carry their shape in their type, so substituting a size variable means making a
new coordinate-space view for every sparse buffer and pointing every access at it; this
module does that walk once for all node kinds.

Example
-------
>>> from tvm import tirx
>>> from sparsetir.ops.kernels import spmm as func
>>> feat_size = next(p for p in func.params if p.name == "feat_size")
>>> new_func = Substituter({feat_size: tirx.const(8, "int32")}).function(func)
>>> [line.strip() for line in new_func.script().splitlines() if "K = " in line]
['K = T.dense_fixed(8)']
"""

from __future__ import annotations

from .axis import AttachedAxis, Axis, FusedAxis
from .coiteration import CoiteratedAxis
from .buffer import BufferDomain, SparseBuffer
from .iteration import SparseIteration
from .node import replace
from .utils import substitute


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
            self.axes[axis.name] = replace(
                axis, parent=self.axis(axis.parent), length=self.expr(axis.length),
                nnz=self.expr(axis.nnz), nnz_cols=self.expr(axis.nnz_cols))
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
            return replace(axis, axis=self.axis(axis.axis), new_parent=self.axis(axis.new_parent))
        if isinstance(axis, FusedAxis):
            return replace(axis, group=[self.axis(a) for a in axis.group])
        if isinstance(axis, CoiteratedAxis):
            return replace(axis, axis=self.axis(axis.axis),
                           merge=axis.merge.rebuilt(self.buffer, self.axis))
        return self.axis(axis)

    def stmt(self, stmt):
        """Rebuild one body item."""
        if isinstance(stmt, SparseIteration):
            iter_vars = []
            for loop in stmt.loops:
                fused = None if loop[0].fused is None else self.iter_axis(loop[0].fused)
                iter_vars += [replace(v, axis=self.iter_axis(v.axis), fused=fused) for v in loop]
            init = None if stmt.init is None else [self.stmt(s) for s in stmt.init]
            return replace(stmt, sp_iter_vars=iter_vars, body=[self.stmt(s) for s in stmt.body],
                           init=init)
        if isinstance(stmt, BufferDomain):
            return replace(stmt, buffer=self.buffer(stmt.buffer), min=self.expr(stmt.min),
                           max=self.expr(stmt.max))
        return self.expr(stmt)

    def function(self, func, params=None):
        """Rebuild the ``SparseFunction`` ``func``; ``params`` replaces the parameter list when
        given."""
        axes = [self.axis(a) for a in func.axes]
        buffers = [self.buffer(b) for b in func.buffers]     # before the body: new views
        body = [self.stmt(s) for s in func.body]
        return replace(func, params=list(func.params if params is None else params), axes=axes,
                       buffers=buffers, body=body)
