"""Walk and rebuild the sparse iterations of a Stage I body (nested iterations included).

A Stage I body is a list of ``SparseIteration``s (and ``BufferDomain``s at the top); an
iteration's ``body`` holds TIR statements and nested iterations. These helpers are the one
place that knows that nesting: passes, the printer's callers and ``sparsetir.Schedule`` use
them instead of recursing themselves.

Example
-------
>>> from tvm import tirx
>>> from sparsetir.ir.node import replace
>>> from sparsetir.stage1.bsr import bsr_rule
>>> from sparsetir.stage1.format_decompose import format_decompose
>>> from sparsetir.ops.kernels import spmm
>>> func = format_decompose(spmm, [bsr_rule("bsr", 4)])
>>> [it.name for it in iterations(func.body)]          # every iteration, outer first
['rewrite_A_bsr', 'spmm_init', 'spmm_bsr']
>>> body = map_iterations(func.body, lambda it: replace(it, annotations={})
...                       if it.name == "rewrite_A_bsr" else it)     # one iteration rebuilt
>>> [dict(it.annotations) for it in iterations(body)][0]
{}
>>> it = list(iterations(func.body))[-1]
>>> [type(s).__name__ for s in tir_stmts(it)]         # the body (a guarded store), the init
['IfThenElse', 'BufferStore']
>>> stores = [s for s in tir_stmts(it) if isinstance(s, tirx.BufferStore)]
>>> [s.buffer.name for s in stores]
['Y']
"""

from __future__ import annotations

from .iteration import SparseIteration
from .node import replace


def iterations(body):
    """Every ``SparseIteration`` of ``body``, nested ones included, each before those it
    holds."""
    for stmt in body:
        if isinstance(stmt, SparseIteration):
            yield stmt
            yield from iterations(stmt.body)


def map_iterations(body, fn) -> list:
    """``body`` with each ``SparseIteration`` ``it`` replaced by ``fn(it)``, nested ones first
    (``fn`` sees an iteration whose nested iterations are already mapped). An iteration whose
    nested iterations ``fn`` all returned unchanged is passed to ``fn`` as it was."""
    out = []
    for stmt in body:
        if isinstance(stmt, SparseIteration):
            inner = map_iterations(stmt.body, fn)
            if any(not new.same_as(old) for new, old in zip(inner, stmt.body)):
                stmt = replace(stmt, body=inner)
            stmt = fn(stmt)
        out.append(stmt)
    return out


def tir_stmts(it: SparseIteration) -> list:
    """The TIR statements of ``it`` (its body, then its ``init``), nested iterations'
    included."""
    out = []
    for stmt in list(it.body) + list(it.init or []):
        out += tir_stmts(stmt) if isinstance(stmt, SparseIteration) else [stmt]
    return out
