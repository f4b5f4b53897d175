"""Emit a plan (``plan.py``) as TensorIR through TVM's IR builder.

The builder creates loop and block variables and buffers itself; the plan's placeholders are
mapped to them as they appear, and every expression is substituted before it is emitted. A
search block runs its checks, then a binary search (a scan on a row that is not sorted) as a
``while`` loop over a local ``(2,)`` buffer allocated in the enclosing block (or the root):
``pos[0]`` ends as the position, which later blocks read.
Nothing is allocated inside a search block, so TVM's reduction analysis of an enclosing block
(``decompose_reduction``, ``rfactor``) sees only buffers that block owns. Intermediate buffers are allocated in the innermost block
that holds all their uses (``place_intermediates``).

``lower_sparse_iter`` calls it inside TVM's IR builder::

    with IRBuilder() as ib:
        with Tb.prim_func(s_tir=True):
            ...
            Emitter().emit_function(plan, intermediates)
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as Tb

from ..ir.utils import substitute
from .plan import BlockPlan, LoopPlan, free_vars
from ..errors import SparseTIRTypeError


class Emitter:
    """Emits plan items into the current IR builder frame."""

    def __init__(self):
        self.var_map = {}

    def subst(self, node):
        """``node`` with placeholders replaced by the builder's variables and buffers."""
        return substitute(node, self.var_map)

    def emit_function(self, plan: list, intermediates: list) -> None:
        """Emit a whole function body: root allocations, then the plan."""
        for buf in place_intermediates(plan, intermediates):
            self._alloc(buf)
        self._alloc_search_results(plan)
        self.emit(plan)

    def emit(self, items: list) -> None:
        """Emit plan items in order."""
        for item in items:
            if isinstance(item, LoopPlan):
                self._loop(item)
            elif isinstance(item, BlockPlan):
                self._block(item)
            else:
                self._stmt(self.subst(item))

    def _alloc(self, buf) -> None:
        self.var_map[buf] = IRBuilder.name(buf.name, Tb.sblock_alloc_buffer(
            list(buf.shape), str(buf.dtype), scope=str(buf.scope())))

    def _alloc_search_results(self, items: list) -> None:
        """Allocate the result of every search block in this scope (not in nested blocks)."""
        for item in items:
            if isinstance(item, LoopPlan):
                self._alloc_search_results(item.body)
            elif isinstance(item, BlockPlan) and item.search is not None and item.table is None:
                result = item.search.result
                pos = IRBuilder.name(result.name,
                                     Tb.sblock_alloc_buffer((2,), "int32", scope="local"))
                self.var_map[result] = tirx.BufferLoad(pos, [0])

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
            for result, table, index in block.table_lookups:
                self.var_map[result] = tirx.BufferLoad(self.var_map[table],
                                                       [self.var_map[index]])
            if block.search is not None:
                self._search(block)
                return
            for buf in block.allocs:
                self._alloc(buf)
            self._alloc_search_results(block.body)
            if block.init:
                with Tb.init():
                    self.emit(block.init)
            self.emit(block.checks)
            self.emit(block.body)

    def _search(self, block: BlockPlan) -> None:
        """A search: ``state[0]`` ends as the position, ``state[1]`` counts candidates.

        ``state`` is the local ``(2,)`` result buffer of the enclosing scope, or, for a
        preprocess search, a local buffer of the block whose ``state[0]`` is then stored in
        the table. The block's regions are explicit: it reads the searched range and its
        inputs and writes its result; ``state`` is read back only after this block wrote it,
        so it is not an input, and the block stays complete (a loop above it can be parallel).
        The block's checks (the coordinates selecting the searched row) run first.
        """
        search = block.search
        lo, hi, key = (self.subst(e) for e in (search.lo, search.hi, search.key))
        checks = [self.subst(c) for c in block.checks]
        inputs = []

        def on_load(load):
            if not any(tvm_ffi.structural_equal(load, seen) for seen in inputs):
                inputs.append(load)

        tvm_ffi.structural_walk([lo, hi, key] + [c.condition for c in checks],
                                (tvm.ir.TensorLoad, on_load), order="pre")
        Tb.reads(tirx.BufferRegion(search.buffer, [tvm.ir.Range.from_min_extent(lo, hi - lo)]),
                 *(tirx.BufferRegion(load.source, [tvm.ir.Range.from_min_extent(i, 1)
                                                   for i in load.indices]) for load in inputs))
        if block.table is None:
            state = self.var_map[search.result].source
            Tb.writes(tirx.BufferRegion(state, [tvm.ir.Range.from_min_extent(0, 2)]))
        else:
            table, row = self.var_map[block.table], self.var_map[block.iter_vars[0].var]
            Tb.writes(tirx.BufferRegion(table, [tvm.ir.Range.from_min_extent(row, 1)]))
            state = IRBuilder.name(f"{search.result.name}_state",
                                   Tb.sblock_alloc_buffer((2,), "int32", scope="local"))
        for check in checks:
            self._stmt(check)
        Tb.buffer_store(state, lo, [0])
        Tb.buffer_store(state, hi - lo, [1])
        with Tb.While(state[1] > 0):
            if search.side == "equal":
                _scan_step(search.buffer, state, key)
            else:
                _bisect_step(search.buffer, state, key, search.side)
        if block.table is not None:
            Tb.buffer_store(table, state[0], [row])

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
        elif isinstance(stmt, tirx.AssertStmt):
            with Tb.Assert(stmt.condition, [part.value for part in stmt.message_parts],
                           stmt.error_kind.value):
                pass
        else:
            raise SparseTIRTypeError(f"cannot emit {type(stmt).__name__}")


def _bisect_step(buffer, state, key, side: str) -> None:
    """Halve the candidates ``buffer[state[0]:state[0] + state[1]]`` around ``key``."""
    half = tirx.floordiv(state[1], 2)
    value = tirx.BufferLoad(buffer, [state[0] + half])
    go_right = value < key if side == "left" else value <= key
    with Tb.If(go_right):
        with Tb.Then():
            Tb.buffer_store(state, state[0] + half + 1, [0])
            Tb.buffer_store(state, state[1] - half - 1, [1])
        with Tb.Else():
            Tb.buffer_store(state, half, [1])


def _scan_step(buffer, state, key) -> None:
    """Stop at ``buffer[state[0]] == key``, else move to the next candidate."""
    with Tb.If(tirx.BufferLoad(buffer, [state[0]]) == key):
        with Tb.Then():
            Tb.buffer_store(state, 0, [1])
        with Tb.Else():
            Tb.buffer_store(state, state[0] + 1, [0])
            Tb.buffer_store(state, state[1] - 1, [1])


def place_intermediates(plan: list, buffers: list) -> list:
    """Give each buffer to the innermost block of ``plan`` that holds all its uses.

    Appends to ``BlockPlan.allocs``; returns the buffers that stay at the root (used by
    several top-level nests, or by none).
    """
    root = []
    for buf in buffers:
        owner, items = None, plan
        while True:
            holders = [b for b in _scope_blocks(items) if buf in free_vars([b])]
            direct = buf in _scope_vars(items)
            if direct or len(holders) != 1:
                break
            owner = holders[0]
            items = (owner.init or []) + owner.body
        if owner is None:
            root.append(buf)
        else:
            owner.allocs.append(buf)
    return root


def _scope_blocks(items: list) -> list:
    """The blocks directly in this scope (through loops, not through blocks)."""
    found = []
    for item in items:
        if isinstance(item, LoopPlan):
            found += _scope_blocks(item.body)
        elif isinstance(item, BlockPlan):
            found.append(item)
    return found


def _scope_vars(items: list) -> set:
    """Variables and buffers this scope uses itself: statements and loop extents."""
    used = set()
    for item in items:
        if isinstance(item, LoopPlan):
            used |= free_vars([item.extent]) | _scope_vars(item.body)
        elif not isinstance(item, BlockPlan):
            used |= free_vars([item])
    return used
