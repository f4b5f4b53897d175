"""Checks inside a parallel loop stop their iteration without raising; the loop's end reports.

An assertion that fails inside a parallel loop cannot raise as itself: TVM's launcher turns a
failed task into a ``RuntimeError`` ("Task 1 error: ..."), losing the error kind that makes
the call raise ``ArgumentError`` (``errors.ARGUMENT_ERROR_KIND``), and a pool of one thread
(``TVM_NUM_THREADS=1``: a one-core machine, a child after ``fork``) runs the loop inline and
drops the error, so the kernel returns as if it had succeeded. This pass (run by the
``sparsetir`` pipeline once blocks are lowered) rewrites every parallel loop holding
assertions: each iteration gets a ``failed`` flag of its own, a failing check sets it to the
check's number instead of raising, and everything the iteration would run after that point
is skipped (later statements and loop iterations test the flag; a ``while`` loop ends). After
the loop, assertions of the original kinds and messages report the check that failed.

Example
-------
In outline::

    for i in T.parallel(m):              check_failed = 0
        assert c, "msg"          ->      for i in T.parallel(m):
        rest                                 failed = 0
                                             if not c: failed = 1
                                             if failed == 0: rest
                                             if failed != 0: check_failed = failed
                                         assert check_failed != 1, "msg"

The check of a computed index (``transform.specialize_buffer``) in SpMM's parallel row loop:

>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm
>>> from sparsetir.schedule.default import default_schedule
>>> from sparsetir.transform.pipeline import stage3_passes
>>> from sparsetir.transform.specialize_buffer import specialize_buffer
>>> from sparsetir.backend.pipeline import lower_blocks
>>> stage2 = specialize_buffer(sparsetir.lower_sparse_iter(spmm.specialize({"feat_size": 16})),
...                            "J_indices", lambda i, j: (j,))
>>> mod = lower_blocks(stage3_passes("llvm")(default_schedule(stage2).mod))
>>> def lines(m):
...     return [line.strip().split(", (")[0] for line in m.script().splitlines()
...             if "parallel" in line or "assert" in line or "failed" in line]
>>> lines(mod)
['for i in T.parallel(m):', 'assert j < n']
>>> lines(report_parallel_checks(mod))
['check_failed: T.int32 = 0', 'for i in T.parallel(m):', 'iteration_failed: T.int32 = 0',
 'if iteration_failed == 0:', 'if iteration_failed == 0:', 'iteration_failed = 1',
 'if iteration_failed == 0:', 'if not iteration_failed == 0:',
 'check_failed = iteration_failed', 'assert check_failed != 1']
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.ReportParallelChecks")
def report_parallel_checks(func, _mod, _ctx):
    """The pass (see the module docstring)."""
    return func.with_body(_rewrite(func.body))


def _rewrite(stmt):
    return tvm_ffi.structural_map(stmt, (tirx.For, lambda loop: _flagged(loop) if loop.kind
                                         == tirx.ForKind.PARALLEL else loop), order="post")


def _flagged(loop):
    """``loop`` with its assertions setting the iteration's flag, followed by the reports
    (``loop`` itself when it has none)."""
    shared = tirx.decl_buffer((1,), "int32", name="check_failed")
    failed = tirx.decl_buffer((1,), "int32", name="iteration_failed")
    checks = []

    def on_assert(check):
        checks.append(check)
        return tirx.IfThenElse(tirx.Not(check.condition),
                               tirx.BufferStore(failed, tirx.const(len(checks), "int32"), [0]),
                               None)

    body = tvm_ffi.structural_map(loop.body, (tirx.AssertStmt, on_assert), order="post")
    if not checks:
        return loop
    ok = tirx.BufferLoad(failed, [0]) == 0
    body = _skip_after_failure(body, failed, ok)
    iteration = tirx.SeqStmt([
        tirx.AllocBuffer(failed), tirx.BufferStore(failed, tirx.const(0, "int32"), [0]), body,
        tirx.IfThenElse(tirx.Not(ok), tirx.BufferStore(shared, tirx.BufferLoad(failed, [0]),
                                                       [0]), None)])
    flagged = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, iteration,
                       loop.thread_binding, loop.annotations)
    reports = [tirx.AssertStmt(tirx.BufferLoad(shared, [0]) != code, check.error_kind,
                               list(check.message_parts))
               for code, check in enumerate(checks, start=1)]
    return tirx.SeqStmt([tirx.AllocBuffer(shared),
                         tirx.BufferStore(shared, tirx.const(0, "int32"), [0]), flagged]
                        + reports)


def _skip_after_failure(stmt, failed, ok):
    """``stmt`` with what runs after a store to ``failed`` guarded by ``ok`` (the flag is
    clear): the rest of each sequence, each later iteration of a loop, the next test of a
    ``while`` loop."""

    def sets_flag(node) -> bool:
        found = []
        tvm_ffi.structural_walk(node, (tirx.BufferStore, lambda s: found.append(
            s.buffer.same_as(failed))), order="pre")
        return any(found)

    def on_seq(seq):
        items = list(seq.seq)
        for k, item in enumerate(items[:-1]):
            if sets_flag(item):
                rest = items[k + 1:]
                rest = rest[0] if len(rest) == 1 else tirx.SeqStmt(rest)
                return tirx.SeqStmt(items[:k + 1] + [tirx.IfThenElse(ok, on_seq(rest) if
                                                                     isinstance(rest, tirx.SeqStmt)
                                                                     else rest, None)])
        return seq

    def on_for(node):
        if not sets_flag(node.body):
            return node
        return tirx.For(node.loop_var, node.min, node.extent, node.kind,
                        tirx.IfThenElse(ok, node.body, None), node.thread_binding,
                        node.annotations)

    def on_while(node):
        if not sets_flag(node.body):
            return node
        return tirx.While(tirx.And(ok, node.condition), node.body)

    return tvm_ffi.structural_map(stmt, [(tirx.SeqStmt, on_seq), (tirx.For, on_for),
                                         (tirx.While, on_while)], order="post")
