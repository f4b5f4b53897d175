"""Rewrite Stage I bodies (coordinate space) into Stage II statements (position space).

Every iteration variable has, once its block is planned, an ``IterInfo``: its position on its
axis, its flat storage offset, and its coordinate. An access ``A[e0, e1, ...]`` is resolved axis
by axis (see ``layout.stage2_indices``):

* ``e_t`` is a variable iterating that very axis, under the same parent: its position is used;
* otherwise ``e_t`` is a coordinate (variables replaced by their coordinates): on a dense axis
  it is the position; on a sparse axis it is looked up by binary search in the row, and when it
  is absent a load yields the buffer's default value and a store does nothing.

Example
-------
SpMM's ``Y[i, k] + A[i, j] * X[j, k]``: ``i``, ``j`` and ``k`` iterate the axes of ``Y`` and
``A``, so their positions index them; ``X``'s rows are on another axis (``J_detach``), so ``j``
reads there as its coordinate:

>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> text = sparsetir.lower_sparse_iter(csrmm).script()
>>> [line.strip() for line in text.splitlines() if "Y[vi, vk] = Y" in line]
['Y[vi, vk] = Y[vi, vk] + A[J_indptr[vi] + vj] * X[J_indices[J_indptr[vi] + vj], vk]']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.buffer import SparseBuffer
from ..ir.utils import structural_map
from .coordinate_checks import assertion
from .layout import row_range, stage2_indices
from .plan import BlockPlan
from ..errors import SparseTIRValueError


@dataclass
class IterInfo:
    """Where a Stage I iteration variable stands, in Stage II terms."""

    axis: object                 # the declared Axis it iterates
    attached: bool               # iterated through T.attach
    parent_var: Optional[tirx.Var]
    pos: tvm.ir.Expr
    off: tvm.ir.Expr
    coord: tvm.ir.Expr


class AccessRewriter:
    """Rewrites the statements of one block.

    Parameters
    ----------
    lowering : object
        Gives ``sparse_buffer(view)``, ``stage2_buffer(name)``, ``indptr(axis)``,
        ``indices(axis)`` and ``simplify(expr)``.
    env : dict
        Stage I iteration Var -> IterInfo, for every variable bound around the block.
    block : BlockPlan
        Where binary searches are requested.
    """

    def __init__(self, lowering, env: dict, block: BlockPlan):
        self.lowering = lowering
        self.env = env
        self.block = block
        self.checks = []        # the coordinate checks this rewriter's statements need

    def stmt(self, stmt):
        """The Stage II form of a Stage I TIR statement."""
        mapped = structural_map(stmt, [(tvm.ir.TensorLoad, self._load),
                                       (tirx.BufferStore, self._store)])
        return self.coordinates(mapped)

    def coordinates(self, node):
        """Replace iteration variables by their coordinates."""
        return structural_map(node, (tirx.Var, lambda v: self.env[v].coord if v in self.env else v))

    def _load(self, load):
        buf = self.lowering.sparse_buffer(load.source)
        if buf is None:
            return load
        indices, guards = self.resolve(buf, list(load.indices))
        value = tirx.BufferLoad(self.lowering.stage2_buffer(buf.name), indices)
        for guard in reversed(guards):
            value = tirx.if_then_else(guard, value, buf.default())
        return value

    def _store(self, store):
        buf = self.lowering.sparse_buffer(store.buffer)
        if buf is None:
            return store
        indices, guards = self.resolve(buf, list(store.indices))
        result = tirx.BufferStore(self.lowering.stage2_buffer(buf.name), store.value, indices)
        for guard in reversed(guards):
            result = tirx.IfThenElse(guard, result, None)
        return result

    def resolve(self, buf: SparseBuffer, indices: list) -> tuple:
        """Stage II indices of ``buf[indices]`` and the guards that say the element exists.

        A computed coordinate that cannot be proven on its axis gets a check in the block
        (``coordinate_checks``), evaluated only where the lookups before it hit. A lookup on a
        later axis reads the row the earlier coordinates select (``indptr[row]``), so its
        search block runs the checks made so far first: no index is read before it is checked.
        """
        guards, checks = [], []

        def position_at(t, parent_offset):
            axis, index = buf.axes[t], indices[t]
            direct = self._direct_position(buf, indices, t)
            if direct is not None:
                return direct
            coord = self.lowering.simplify(self.coordinates(index))
            check = self._check_on_axis(buf, indices, t, coord, parent_offset, guards)
            if check is not None:
                checks.append(check)
            if not axis.is_sparse:
                return coord
            if not axis.sorted:
                raise SparseTIRValueError(f"sparse buffer {buf.name}: finding a coordinate on axis "
                                 f"{axis.name} needs a binary search, but the axis is declared "
                                 "sorted=False; iterate that axis instead")
            start, end = row_range(axis, parent_offset, self.lowering.indptr)
            for guard in reversed(guards):   # an earlier lookup missed: the row past the last
                end = tirx.if_then_else(guard, end, start)     # one, no indptr[row + 1] read
            found = self.block.request_search(self.lowering.indices(axis), start, end, coord,
                                              requires=checks)
            guards.append(found < end)
            guards.append(tirx.BufferLoad(self.lowering.indices(axis), [found]) == coord)
            return found - start

        dims = stage2_indices(buf, position_at, self.lowering.indptr)
        return [self.lowering.simplify(d) for d in dims], guards

    def _check_on_axis(self, buf, indices, t, coord, parent_offset, guards):
        """The assertion that coordinate ``t`` lies on its axis (None when proven); it is
        also added to the block's checks and to ``self.checks``."""
        axis = buf.axes[t]
        if axis.kind == "dense_variable":
            start, end = row_range(axis, parent_offset, self.lowering.indptr)
            bound, bound_text = end - start, f"the length of its row of {axis.name}"
        else:
            bound, bound_text = axis.length, str(axis.length)
        what = f"coordinate {indices[t]} of {buf.name} on axis {axis.name}"
        condition = self.lowering.checker.condition(coord, self.lowering.simplify(bound), what)
        if condition is None:
            return None
        if guards:
            condition = tirx.Or(tirx.Not(tirx.all(*guards)), condition)
        check = assertion(condition, f"{what} must lie in [0, {bound_text})")
        for checks in (self.block.checks, self.checks):
            if not any(tvm_ffi.structural_equal(check, other) for other in checks):
                checks.append(check)
        return check

    def _direct_position(self, buf: SparseBuffer, indices: list, t: int):
        """The iterated position when ``indices[t]`` iterates ``buf.axes[t]`` in its row."""
        var = indices[t]
        info = self.env.get(var) if isinstance(var, tirx.Var) else None
        if info is None or info.attached or info.axis.name != buf.axes[t].name:
            return None
        if buf.axes[t].parent is not None:
            parent = indices[t - 1]
            if info.parent_var is None or not isinstance(parent, tirx.Var) \
                    or not parent.same_as(info.parent_var):
                return None
        return info.pos
