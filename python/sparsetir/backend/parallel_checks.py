"""Checks inside a parallel loop that fail are reported after the loop, whatever the threads.

A failing assertion ends the parallel task it runs in, and TVM's launcher returns the task's
error to the caller, except when the pool has a single thread (``TVM_NUM_THREADS=1``: a
one-core machine, a child after ``fork``), where it runs the loop inline and drops the error:
the kernel then returns as if it had succeeded, its output half written. This pass (run by the
``sparsetir`` pipeline once blocks are lowered) gives every outermost parallel loop that holds
assertions a flag set before each of them fails, and after the loop asserts that the flag is
clear, with the message of the check that set it.

Example
-------
>>> # for i in T.parallel(m):              flag = 0
>>> #     assert c, "msg"          ->      for i in T.parallel(m):
>>> #     ...                                  if not c: flag = 1
>>> #                                          assert c, "msg"
>>> #                                          ...
>>> #                                      assert flag != 1, "msg"
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
    """``loop`` with its assertions setting the flag, between the flag and its reports
    (``loop`` itself when it has none)."""
    flag = tirx.decl_buffer((1,), "int32", name="check_failed")
    codes = {}

    def on_assert(check):
        codes[len(codes) + 1] = check
        set_flag = tirx.BufferStore(flag, tirx.const(len(codes), "int32"), [0])
        return tirx.SeqStmt([tirx.IfThenElse(tirx.Not(check.condition), set_flag, None), check])

    body = tvm_ffi.structural_map(loop.body, (tirx.AssertStmt, on_assert), order="post")
    if not codes:
        return loop
    flagged = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body,
                       loop.thread_binding, loop.annotations)
    reports = [tirx.AssertStmt(tirx.BufferLoad(flag, [0]) != code, check.error_kind,
                               list(check.message_parts))
               for code, check in codes.items()]
    return tirx.SeqStmt([tirx.AllocBuffer(flag),
                         tirx.BufferStore(flag, tirx.const(0, "int32"), [0]), flagged]
                        + reports)
