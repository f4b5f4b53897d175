"""Tell TVM which conditions every thread of a CUDA block evaluates alike.

TVM's ``ThreadSync`` refuses to put a ``__syncthreads()`` inside an ``if`` ("Cannot insert syncs
inside condition"), since threads that skip the branch would never reach the barrier. An
``if`` whose condition depends only on ``blockIdx`` variables and scalar parameters (a
horizontally fused kernel's ``if blockIdx.x < 32``, choosing the nest a block runs) is taken
by all threads of a block or by none, so a barrier inside it is safe. This pass wraps such a
condition, where its branches touch shared memory or reduce across threads (where a barrier
may be needed), in ``T.tvm_thread_invariant``, TVM's own marker for it, which ``ThreadSync``
honours and code generation prints as the condition itself (in one more pair of parentheses).
Conditions that read memory or use any other variable are left alone.

Example
-------
With ``bx`` bound to ``blockIdx.x``::

    if bx < 32:  ->  if T.tvm_thread_invariant(bx < 32):
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.MarkUniformConditions")
def mark_uniform_conditions(func, _mod, _ctx):
    """The pass (see the module docstring)."""
    scalars = {p for p in func.params if not tirx.is_buffer_var(p)}
    uniform = set(scalars)
    tvm_ffi.structural_walk(func.body, [
        (tirx.For, lambda loop: uniform.add(loop.loop_var) if _binds_block(loop.thread_binding)
         else None),
        (tirx.AttrStmt, lambda attr: uniform.add(attr.node.var)
         if attr.attr_key == "thread_extent" and _binds_block(attr.node) else None)],
        order="pre")
    if len(uniform) == len(scalars):                   # no blockIdx: not a CUDA kernel
        return func

    def on_if(stmt):
        if not (_only_uses(stmt.condition, uniform) and _may_need_barrier(stmt)):
            return stmt
        return tirx.IfThenElse(T.tvm_thread_invariant(stmt.condition), stmt.then_case,
                               stmt.else_case)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.IfThenElse, on_if),
                                                 order="post"))


def _binds_block(binding) -> bool:
    """Whether the IterVar ``binding`` (of a loop or ``T.launch_thread``) is a blockIdx."""
    return isinstance(binding, tirx.IterVar) and str(binding.thread_tag).startswith("blockIdx.")


def _may_need_barrier(stmt) -> bool:
    """Whether ``stmt`` touches shared memory or reduces across threads (which TVM lowers
    through shared memory): the only places ``ThreadSync`` puts a barrier."""
    allreduce = tvm.ir.Op.get("tirx.tvm_thread_allreduce")
    found = []

    def on_buffer(buffer):
        if buffer.scope().startswith("shared"):
            found.append(buffer)

    tvm_ffi.structural_walk(stmt, [
        (tirx.BufferStore, lambda store: on_buffer(store.buffer)),
        (tvm.ir.TensorLoad, lambda load: on_buffer(load.source)),
        (tvm.ir.Call, lambda call: found.append(call) if call.op.same_as(allreduce) else None)],
        order="pre")
    return bool(found)


def _only_uses(expr, allowed: set) -> bool:
    """Whether ``expr`` reads no memory, calls nothing, and its variables are all in
    ``allowed``."""
    bad = []
    tvm_ffi.structural_walk(expr, [
        (tirx.Var, lambda v: bad.append(v) if v not in allowed else None),
        ((tvm.ir.TensorLoad, tvm.ir.Call), bad.append)], order="pre")
    return not bad
