"""The walk that CPU loop passes share: statements rewritten loop by loop, with the scratch
buffers a rewrite needs allocated once at the top of the enclosing parallel loop's body (or of
the function), where TVM makes a "global" buffer of constant size a stack array that LLVM
keeps in registers (``vector_reductions``, ``realign_gathers``).

Example
-------
>>> from tvm.script import tirx as T
>>> @T.prim_func
... def func(a: T.Buffer((32,), "float32")):
...     for i in T.parallel(4):
...         for j in range(8):
...             a[i * 8 + j] = a[i * 8 + j] * T.float32(2)
>>> class Unroller(ScratchRewriter):
...     def loop(self, node):                          # a replacement, or None to walk on
...         self.pending.append(tirx.decl_buffer((8,), "float32", "scratch"))
...         return with_body(node, self.stmt(node.body), {"pragma_unroll_explicit": 1})
>>> print(Unroller().function_body(func.body))         # scratch: at the parallel loop's top
for i in T.parallel(4):
    scratch = T.alloc_buffer((8,))
    for j in T.serial(8, annotations={"pragma_unroll_explicit": 1}):
        a = T.Buffer((32,))
        a[i * 8 + j] = a[i * 8 + j] * T.float32(2.0)
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx


class ScratchRewriter:
    """Walks a function body; ``loop`` may replace any loop that is not parallel (None: keep
    walking into it); buffers appended to ``pending`` meanwhile are allocated at the top of the
    enclosing parallel loop's body, or of the function."""

    def __init__(self):
        self.pending = []

    def loop(self, node):   # pylint: disable=unused-argument
        """The replacement of the loop ``node`` (not parallel), or None."""
        return None

    def function_body(self, body):
        """``body`` rewritten, with the scratch buffers no parallel loop took allocated first."""
        body = self.stmt(body)
        if self.pending:
            body = tirx.SeqStmt([tirx.AllocBuffer(b) for b in self.pending] + [body])
        return body

    def stmt(self, node):
        if isinstance(node, tirx.For):
            if node.kind == tirx.ForKind.PARALLEL:
                outer, self.pending = self.pending, []
                body = self.stmt(node.body)
                if self.pending:
                    body = tirx.SeqStmt([tirx.AllocBuffer(b) for b in self.pending] + [body])
                self.pending = outer
                return with_body(node, body)
            replaced = self.loop(node)
            if replaced is not None:
                return replaced
            return with_body(node, self.stmt(node.body))
        if isinstance(node, tirx.SeqStmt):
            return tirx.SeqStmt([self.stmt(s) for s in node.seq])
        if isinstance(node, tirx.IfThenElse):
            return tirx.IfThenElse(node.condition, self.stmt(node.then_case),
                                   self.stmt(node.else_case) if node.else_case is not None
                                   else None)
        if isinstance(node, tirx.AttrStmt):
            return tirx.AttrStmt(node.node, node.attr_key, node.value, self.stmt(node.body))
        if isinstance(node, tirx.While):
            return tirx.While(node.condition, self.stmt(node.body))
        return node


def with_body(loop, body, annotations=None):
    """``loop`` with ``body`` (and ``annotations``, where given)."""
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding,
                    loop.annotations if annotations is None else annotations)


def binds_threads(node) -> bool:
    """Whether ``node`` has a loop bound to a GPU thread axis, scheduled or lowered (GPU code:
    the CPU passes leave it)."""
    def visit(node):
        if isinstance(node, tirx.For) and (node.kind == tirx.ForKind.THREAD_BINDING
                                           or node.thread_binding is not None):
            return tvm_ffi.VisitInterrupt(node)
        if isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent":
            return tvm_ffi.VisitInterrupt(node)
        return None

    return tvm_ffi.structural_walk(node, ((tirx.For, tirx.AttrStmt), visit), order="pre") \
        is not None
