"""The index checks of a kernel, compiled into a CPU function of their own.

The call wrapper validates every index array before a kernel runs (``runtime.validate``).
Done with numpy, that costs several times a small kernel; compiled, each check is a flat loop
over the array that LLVM vectorises. ``compile_checks`` builds that function from a
``Signature``'s checks: row pointers first (start at 0, non-decreasing, end at ``nnz``), then
indices (in range, strictly increasing within a row when the axis is sorted) and declared value
domains. The function counts violations into a one-element ``int64`` array it is given, the
last argument, and skips the remaining checks once one has failed (a later check may index
with an array an earlier one refused); it allocates nothing and never raises, so a refused call
costs no more than an accepted one and leaves nothing behind. On a failure the call wrapper
runs the numpy checks, whose message names the row and position.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.kernels import spmm
>>> from sparsetir.runtime.arguments import tensor_of
>>> kernel = sparsetir.build(spmm.specialize({"feat_size": 16}), "llvm", cache=True)
>>> kernel.signature.checks
(IndptrCheck(param='indptr', nnz=nnz), IndicesCheck(param='indices', bound=n, indptr='indptr', width=None, sorted=True))
>>> checks = compile_checks(kernel.signature)          # None when there is nothing to check
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> def values(indices):                              # a call's converted arguments
...     return [tensor_of(a) for a in (A.data, X, Y, A.indptr, indices)] + [6, 5, A.nnz]
>>> checks(values(A.indices)), checks(values(A.indices + 5))   # False: an invalid index array
(True, False)
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as Tb

from .acceptance import Acceptance
from .native_call import native_plan
from .signature import (
    BufferParam,
    IndicesCheck,
    IndptrCheck,
    ScalarParam,
    ValueDomainCheck,
)
from ..backend.target import compile_module


class CompiledChecks:
    """A compiled check function and the positions of the call arguments it takes."""

    def __init__(self, function, buffer_positions: list, scalar_positions: list):
        self.function = function
        self.buffer_positions = buffer_positions
        self.scalar_positions = scalar_positions

    def __call__(self, values: list) -> bool:
        """Run the checks on a call's converted arguments; False when one fails."""
        violations = np.zeros(1, np.int64)     # one per call: threads may share the kernel
        self.function(*[values[i] for i in self.buffer_positions],
                      *[values[i] for i in self.scalar_positions], violations)
        return not violations[0]

    def native(self, values: list, free: dict):
        """The checks as a C plan (``native_call.native_plan``) for a bound kernel's calls, and
        which of a call's free arguments it takes: ``(plan, picks)``.

        ``values``: the kernel's converted values, None where a call passes the argument;
        ``free``: kernel position -> (index among a call's free arguments, its
        ``Acceptance``). The plan takes ``[args[k] for k in picks]`` and a one-element int64
        violations array last, and returns False (nothing run) when it declines them. ``plan``
        is None where the native call is not available or a checked array is bound as a
        torch tensor.
        """
        positions = self.buffer_positions + self.scalar_positions
        passed = [values[i] for i in positions] + [None]
        picks, accepts = [], []
        for slot, i in enumerate(self.buffer_positions):
            if i in free:
                index, accept = free[i]
                picks.append(index)
                accepts.append(dataclasses.replace(accept, position=slot))
        accepts.append(Acceptance(BufferParam("violations", "int64", 1, True), len(positions),
                                  1, (), 8, accepts[0].device if accepts else tvm.cpu()))
        return native_plan(self.function, passed, accepts, []), picks


def compile_checks(signature, executable=None) -> CompiledChecks | None:
    """The compiled form of ``signature.checks`` for the host CPU, or None if it has none.

    ``executable`` is a module compiled earlier from the same signature (``checks_module``),
    loaded from a cache: it is used instead of compiling again.
    """
    if not signature.checks:
        return None
    buffer_positions, scalar_positions = _positions(signature)
    if executable is None:
        executable = compile_module(checks_module(signature), "llvm")
    return CompiledChecks(executable["main"], buffer_positions, scalar_positions)


def _positions(signature) -> tuple:
    params = list(signature.params)
    names = [c.param for c in signature.checks] + [c.indptr for c in signature.checks
                                                   if isinstance(c, IndicesCheck) and c.indptr]
    buffer_positions = [i for i, p in enumerate(params)
                        if isinstance(p, BufferParam) and p.name in names]
    scalar_positions = [i for i, p in enumerate(params) if isinstance(p, ScalarParam)]
    return buffer_positions, scalar_positions


def checks_module(signature) -> tvm.IRModule:
    """The check function of ``signature`` (which must have checks) as TIR."""
    buffer_positions, scalar_positions = _positions(signature)
    params = list(signature.params)
    with IRBuilder() as builder:
        with Tb.prim_func():
            Tb.func_name("check_indices")
            Tb.func_attr({"tir.noalias": True})
            buffers = {}
            for i in buffer_positions:
                param = params[i]
                handle = Tb.arg(param.name, Tb.handle())
                buffers[param.name] = Tb.match_buffer(
                    handle, [param.length], param.dtype,
                    align=tvm.runtime.DataType(param.dtype).bits // 8)
            for i in scalar_positions:
                Tb.arg(params[i].name, params[i].var)
            violations = Tb.match_buffer(Tb.arg("violations", Tb.handle()), [1], "int64")
            Tb.buffer_store(violations, tirx.const(0, "int64"), [0])
            for check in sorted(signature.checks, key=lambda c: not isinstance(c, IndptrCheck)):
                with Tb.If(violations[0] == 0):      # an earlier check failed: stop
                    with Tb.Then():
                        _emit(check, buffers, violations)
    return tvm.IRModule({"main": builder.get()})


PARALLEL_PARTS = 16
"""Parts a long check loop is cut into, run on the kernels' threads (``runtime.threads``)."""
PARALLEL_MIN = 1 << 16
"""Loops this long or longer run in parallel parts (a parallel launch costs microseconds)."""
COUNT_DTYPE = "int32"
"""A part's count: 32-bit lanes, twice as many to a vector as 64-bit ones (a part holds fewer
than 2**31 elements: ``nnz`` is int32)."""


def _count(violations, start, stop, condition, sign: int = 1) -> None:
    """Add (``sign`` 1) or subtract (-1) the sum over ``i`` in ``[start, stop)`` of
    ``condition(i)`` (a bool, or a count of failures) to ``violations[0]``: flat loops that
    LLVM vectorises (a loop per row costs more than the check on short rows); from
    ``PARALLEL_MIN`` elements on, in ``PARALLEL_PARTS`` parts on the kernels' threads, each
    summing into its own slot."""
    stop = tirx.max(start, stop)
    with Tb.If(stop - start < PARALLEL_MIN):
        with Tb.Then():
            _count_range(violations, 0, start, stop, condition, sign)
        with Tb.Else():
            parts = Tb.alloc_buffer((PARALLEL_PARTS,), "int64")
            step = tirx.floordiv(stop - start + PARALLEL_PARTS - 1, PARALLEL_PARTS)
            with Tb.parallel(0, PARALLEL_PARTS) as part:
                local = Tb.alloc_buffer((1,), COUNT_DTYPE, scope="local")
                Tb.buffer_store(local, tirx.const(0, COUNT_DTYPE), [0])
                first = start + part * step
                _count_range(local, 0, first, tirx.min(first + step, stop), condition, sign)
                Tb.buffer_store(parts, tirx.Cast("int64", local[0]), [part])
            with Tb.serial(0, PARALLEL_PARTS) as part:
                Tb.buffer_store(violations, violations[0] + parts[part], [0])


def _count_range(total, slot, start, stop, condition, sign: int) -> None:
    """``total[slot] += sign * (sum of condition(i) for i in [start, stop))``."""
    with Tb.serial(start, tirx.max(start, stop)) as i:
        hit = tirx.Cast(str(total.dtype), condition(i))
        Tb.buffer_store(total, total[slot] + hit if sign > 0 else total[slot] - hit, [slot])


def _flag(violations, failed) -> None:
    """Count one violation where the scalar condition ``failed`` holds."""
    Tb.buffer_store(violations, violations[0] + tirx.Cast("int64", failed), [0])


def _emit(check, buffers: dict, violations) -> None:
    if isinstance(check, IndptrCheck):
        indptr = buffers[check.param]
        rows = indptr.shape[0] - 1
        with Tb.If(rows >= 0):       # loads are unconditional in TIR: read nothing outside
            with Tb.Then():
                _flag(violations, tirx.Or(indptr[0] != 0, indptr[rows] != check.nnz))
                _count(violations, 0, rows, lambda r: indptr[r] > indptr[r + 1])
            with Tb.Else():
                _flag(violations, tirx.const(True, "bool"))
    elif isinstance(check, ValueDomainCheck):
        values = buffers[check.param]
        _count(violations, 0, values.shape[0], lambda p: tirx.Or(
            values[p] < check.min, values[p] >= check.max))
    else:
        _emit_indices(check, buffers, violations)


def _emit_indices(check: IndicesCheck, buffers: dict, violations) -> None:
    """In range everywhere; sorted: every descent ``indices[p-1] >= indices[p]`` sits at the
    start of a row (descents minus distinct row starts holding one must be 0). One pass over
    the array counts both (the loop is bound by memory bandwidth)."""
    indices = buffers[check.param]
    total = indices.shape[0]

    def out_of_range(p):
        return tirx.Or(indices[p] < 0, indices[p] >= check.bound)

    if not check.sorted:
        _count(violations, 0, total, out_of_range)
        return
    with Tb.If(total > 0):
        with Tb.Then():
            _flag(violations, out_of_range(0))
            _count(violations, 1, total, lambda p: tirx.Cast("int32", out_of_range(p))
                   + tirx.Cast("int32", _descends(check, indices[p - 1], indices[p])))
            _subtract_row_starts(check, buffers, indices, total, violations)


def _subtract_row_starts(check: IndicesCheck, buffers: dict, indices, total, violations) -> None:
    """Subtract the descents that start a row, each counted once."""
    if check.indptr is not None:
        indptr = buffers[check.indptr]
        rows = indptr.shape[0] - 1

        def at_row_start(r):
            start = indptr[r]        # in [0, total] once the row pointer passed its check
            before = tirx.max(tirx.min(start, total), 1) - 1
            return tirx.all(indptr[r - 1] < start, start < total,
                            indices[before] >= indices[tirx.min(tirx.max(start, 0), total - 1)])

        _count(violations, 1, rows, at_row_start, sign=-1)
    elif check.width is not None:
        width = tirx.max(check.width, 1)
        _count(violations, 1, tirx.floordiv(total, width),
               lambda r: _descends(check, indices[r * width - 1], indices[r * width]), sign=-1)


def _descends(check: IndicesCheck, before, after):
    """Whether ``after`` breaks the order of a sorted row: in a row of fixed width (ELL) a
    slot may repeat the previous coordinate (padding), elsewhere coordinates increase."""
    return before > after if check.indptr is None and check.width is not None \
        else before >= after
