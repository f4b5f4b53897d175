"""Emit a plan (``plan.py``) as TensorIR through TVM's IR builder.

The builder creates loop and block variables itself; the plan's placeholder variables are
mapped to them as they appear, and every expression is substituted before it is emitted. A
binary search becomes a ``while`` loop over two local ``(1,)`` buffers (``lo``, ``hi``) in the
block that requested it; its result is ``lo[0]``.

Example
-------
>>> # with IRBuilder() as ib:
>>> #     with Tb.prim_func(s_tir=True):
>>> #         ...
>>> #         Emitter().emit(plan)
"""

from __future__ import annotations

from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as Tb

from ..ir.utils import substitute
from .plan import BlockPlan, LoopPlan, Search, used_searches


class Emitter:
    """Emits plan items into the current IR builder frame."""

    def __init__(self):
        self.var_map = {}
        self.local_buffers = set()

    def subst(self, node):
        """``node`` with placeholders replaced by the builder's variables."""
        return substitute(node, self.var_map)

    def emit(self, items: list) -> None:
        """Emit plan items in order."""
        for item in items:
            if isinstance(item, LoopPlan):
                self._loop(item)
            elif isinstance(item, BlockPlan):
                self._block(item)
            else:
                self._stmt(self.subst(item))

    def _loop(self, loop: LoopPlan) -> None:
        with Tb.serial(0, self.subst(loop.extent)) as var:
            self.var_map[loop.var] = IRBuilder.name(loop.var.name, var)
            self.emit(loop.body)

    def _block(self, block: BlockPlan) -> None:
        with Tb.sblock(block.name):
            for iv in block.iter_vars:
                make = Tb.axis.reduce if iv.is_reduction else Tb.axis.spatial
                var = make(self.subst(iv.extent), self.subst(iv.loop_var))
                self.var_map[iv.var] = IRBuilder.name(iv.var.name, var)
            if block.annotations:
                Tb.sblock_attr(dict(block.annotations))
            for search in used_searches(block):
                self._search(search)
            if block.init:
                with Tb.init():
                    self.emit(block.init)
            self.emit(block.body)

    def _search(self, search: Search) -> None:
        name = search.result.name
        lo = IRBuilder.name(f"{name}_lo", Tb.sblock_alloc_buffer((1,), "int32", scope="local"))
        hi = IRBuilder.name(f"{name}_hi", Tb.sblock_alloc_buffer((1,), "int32", scope="local"))
        Tb.buffer_store(lo, self.subst(search.lo), [0])
        Tb.buffer_store(hi, self.subst(search.hi), [0])
        key = self.subst(search.key)
        with Tb.While(lo[0] < hi[0]):
            mid = tirx.floordiv(lo[0] + hi[0], 2)
            value = tirx.BufferLoad(search.buffer, [mid])
            go_right = value < key if search.side == "left" else value <= key
            with Tb.If(go_right):
                with Tb.Then():
                    Tb.buffer_store(lo, mid + 1, [0])
                with Tb.Else():
                    Tb.buffer_store(hi, mid, [0])
        self.local_buffers |= {lo, hi}
        self.var_map[search.result] = lo[0]

    def _stmt(self, stmt) -> None:
        if isinstance(stmt, tirx.BufferStore):
            Tb.buffer_store(stmt.buffer, stmt.value, list(stmt.indices))
        elif isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self._stmt(s)
        elif isinstance(stmt, tirx.IfThenElse):
            with Tb.If(stmt.condition):
                with Tb.Then():
                    self._stmt(stmt.then_case)
                if stmt.else_case is not None:
                    with Tb.Else():
                        self._stmt(stmt.else_case)
        elif isinstance(stmt, tirx.Evaluate):
            Tb.evaluate(stmt.value)
        else:
            raise TypeError(f"cannot emit {type(stmt).__name__}")
