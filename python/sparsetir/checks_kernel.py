"""The index checks of a kernel, compiled into a parallel CPU function of their own.

The call wrapper validates every index array before a kernel runs (``runtime.validate``).
Done with numpy, that costs several times a small kernel; compiled, each check is a flat loop
over the array that LLVM vectorises. ``compile_checks`` builds that function from a
``Signature``'s checks: row pointers first (start at 0, non-decreasing, end at ``nnz``), then
indices (in range, strictly increasing within a row when the axis is sorted) and declared value
domains. A failed check stops the function; the call wrapper then runs the numpy checks, whose
message names the row and position.

Example
-------
>>> # checks = compile_checks(signature)          # None when there is nothing to check
>>> # checks(indptr, indices, m, n, nnz)           # raises when an index array is invalid
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as Tb

from .runtime import (
    BufferParam,
    IndicesCheck,
    IndptrCheck,
    ScalarParam,
    ValueDomainCheck,
)
from .runtime.errors import CHECK_PREFIX
from .target import compile_module


class CompiledChecks:
    """A compiled check function and the positions of the call arguments it takes."""

    def __init__(self, function, buffer_positions: list, scalar_positions: list):
        self.function = function
        self.buffer_positions = buffer_positions
        self.scalar_positions = scalar_positions

    def __call__(self, values: list) -> bool:
        """Run the checks on a call's converted arguments; False when one fails."""
        try:
            self.function(*[values[i] for i in self.buffer_positions],
                          *[values[i] for i in self.scalar_positions])
        except Exception as err:  # noqa: BLE001  (a failed check, or anything else: recheck)
            if CHECK_PREFIX in str(err):
                return False
            raise
        return True


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
            order = sorted(signature.checks, key=lambda c: not isinstance(c, IndptrCheck))
            for check in order:
                _emit(check, buffers)
    return tvm.IRModule({"main": builder.get()})


def _assert(condition, what: str) -> None:
    with Tb.Assert(condition, [CHECK_PREFIX + what], "ValueError"):
        pass


def _count(start, stop, condition):
    """The number of ``i`` in ``[start, stop)`` where ``condition(i)`` holds: one flat loop
    that LLVM vectorises (a loop per row costs more than the check on short rows)."""
    counter = Tb.alloc_buffer((1,), "int32", scope="local")
    Tb.buffer_store(counter, tirx.const(0, "int32"), [0])
    with Tb.serial(start, tirx.max(start, stop)) as i:
        Tb.buffer_store(counter, counter[0] + tirx.Cast("int32", condition(i)), [0])
    return counter[0]


def _emit(check, buffers: dict) -> None:
    if isinstance(check, IndptrCheck):
        indptr = buffers[check.param]
        rows = indptr.shape[0] - 1
        _assert(tirx.all(rows >= 0, indptr[0] == 0, indptr[rows] == check.nnz), check.param)
        _assert(_count(0, rows, lambda r: indptr[r] > indptr[r + 1]) == 0, check.param)
    elif isinstance(check, ValueDomainCheck):
        values = buffers[check.param]
        _assert(_count(0, values.shape[0], lambda p: tirx.Or(
            values[p] < check.min, values[p] >= check.max)) == 0, check.param)
    else:
        _emit_indices(check, buffers)


def _emit_indices(check: IndicesCheck, buffers: dict) -> None:
    """In range everywhere; sorted: every descent ``indices[p-1] >= indices[p]`` sits at the
    start of a row (distinct row starts counted once)."""
    indices = buffers[check.param]
    total = indices.shape[0]
    _assert(_count(0, total, lambda p: tirx.Or(indices[p] < 0, indices[p] >= check.bound)) == 0,
            check.param)
    if not check.sorted:
        return
    with Tb.If(total > 1):
        with Tb.Then():
            _emit_sorted(check, buffers, indices, total)


def _emit_sorted(check: IndicesCheck, buffers: dict, indices, total) -> None:
    descents = _count(1, total, lambda p: indices[p - 1] >= indices[p])
    if check.indptr is not None:
        indptr = buffers[check.indptr]
        rows = indptr.shape[0] - 1

        def at_row_start(r):
            start = indptr[r]
            return tirx.all(indptr[r - 1] < start, start < total,
                            indices[tirx.max(start, 1) - 1] >= indices[tirx.min(start, total - 1)])

        allowed = _count(1, rows, at_row_start)
    elif check.width is not None:
        width = tirx.max(check.width, 1)
        rows = tirx.floordiv(total, width)
        allowed = _count(1, rows, lambda r: indices[r * width - 1] >= indices[r * width])
    else:
        allowed = tirx.const(0, "int32")
    _assert(descents == allowed, check.param)
