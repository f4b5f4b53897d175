"""The index checks of a kernel, compiled into a CPU function of their own.

The call wrapper validates every index array before a kernel runs (``runtime.validate``).
Done with numpy, that costs several times a small kernel; compiled, each check is a flat loop
over the array that LLVM vectorises. ``compile_checks`` builds that function from a
``Signature``'s checks: row pointers (start at 0, non-decreasing, end at ``nnz``), indices (in
range, strictly increasing within a row when the axis is sorted) and declared value domains,
all counted in one loop over the arrays (one parallel launch when they are long). The function
writes the number of failed checks into a one-element ``int64`` array it is given, the last
argument; it reads nothing outside the arrays whatever they hold, allocates nothing on the heap
and never raises, so a refused call costs no more than an accepted one and leaves nothing
behind. On a failure the call wrapper
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

from .signature import (
    BufferParam,
    IndicesCheck,
    IndptrCheck,
    ScalarParam,
    ValueDomainCheck,
)
from ..backend.inline_checks import row_starts_at_descent
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
    checks = signature.checks
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
            counts = Tb.alloc_buffer((len(checks),), "int64")
            sums = []
            for k, check in enumerate(checks):
                Tb.buffer_store(counts, tirx.const(0, "int64"), [k])
                sums += _terms(check, buffers, _Flag(counts, k))
            _count_sums(sums, counts)
            failed = [tirx.Cast("int64", counts[k] != 0) for k in range(len(checks))]
            Tb.buffer_store(violations, sum(failed[1:], failed[0]), [0])
    return tvm.IRModule({"main": builder.get()})


PARALLEL_PARTS = 16
"""Parts the check loop is cut into when long, run on the kernels' threads (``runtime.threads``)."""
PARALLEL_MIN = 1 << 16
"""Checks over this many elements or more, in all, run in parallel parts (a parallel launch
costs microseconds)."""
COUNT_DTYPE = "int32"
"""A part's counts: 32-bit lanes, twice as many to a vector as 64-bit ones (a part holds fewer
than 2**31 elements: ``nnz`` is int32)."""


@dataclasses.dataclass(frozen=True)
class _Sum:
    """``sign`` times the sum over ``i`` in ``[start, stop)`` of ``condition(i)`` (a bool, or a
    count of failures), added to the count of check number ``check``."""
    check: int
    start: object
    stop: object
    condition: object
    sign: int = 1


@dataclasses.dataclass(frozen=True)
class _Flag:
    """Adds one failure of check number ``check`` to ``counts`` where a scalar condition holds."""
    counts: object
    check: int

    def __call__(self, failed) -> None:
        count = self.counts[self.check] + tirx.Cast("int64", failed)
        Tb.buffer_store(self.counts, count, [self.check])

    def sum(self, start, stop, condition, sign: int = 1) -> _Sum:
        return _Sum(self.check, start, tirx.max(start, stop), condition, sign)


def _count_sums(sums: list, counts) -> None:
    """Add every sum to its check's count in one loop: flat loops that LLVM vectorises (a loop
    per row costs more than the check on short rows). From ``PARALLEL_MIN`` elements in all,
    the loop runs in ``PARALLEL_PARTS`` parts on the kernels' threads, each part taking its
    slice of every sum, so the checks cost one parallel launch (on a busy machine, one barrier
    that may wait for a parked thread), not one per check."""
    elements = sum((tirx.Cast("int64", s.stop - s.start) for s in sums[1:]),
                   tirx.Cast("int64", sums[0].stop - sums[0].start))
    with Tb.If(elements < PARALLEL_MIN):
        with Tb.Then():
            _count_parts(sums, counts, 1, Tb.serial)
        with Tb.Else():
            _count_parts(sums, counts, PARALLEL_PARTS, Tb.parallel)


def _count_parts(sums: list, counts, parts: int, loop) -> None:
    checks = int(counts.shape[0])
    partial = Tb.alloc_buffer((parts * checks,), "int64")
    with loop(0, parts) as part:
        local = Tb.alloc_buffer((checks,), COUNT_DTYPE, scope="local")
        for k in range(checks):
            Tb.buffer_store(local, tirx.const(0, COUNT_DTYPE), [k])
        for s in sums:
            step = tirx.floordiv(s.stop - s.start + parts - 1, parts)
            first = s.start + part * step
            with Tb.serial(first, tirx.max(first, tirx.min(first + step, s.stop))) as i:
                hit = tirx.Cast(COUNT_DTYPE, s.condition(i))
                Tb.buffer_store(local, local[s.check] + hit if s.sign > 0
                                else local[s.check] - hit, [s.check])
        for k in range(checks):
            Tb.buffer_store(partial, tirx.Cast("int64", local[k]), [part * checks + k])
    with Tb.serial(0, parts) as part:
        for k in range(checks):
            Tb.buffer_store(counts, counts[k] + partial[part * checks + k], [k])


def _terms(check, buffers: dict, flag: _Flag) -> list:
    """Emit ``check``'s scalar conditions through ``flag`` and return its sums (``_Sum``).

    Every read stays inside its array whatever the other arrays hold (a row pointer that
    locates an index is clamped first), so all checks run together; a check counts apart from
    the others, and fails when its count is not 0 (an invalid ``indptr`` can make the count
    of the indices' check negative)."""
    if isinstance(check, IndptrCheck):
        indptr = buffers[check.param]
        rows = indptr.shape[0] - 1
        with Tb.If(rows >= 0):       # loads are unconditional in TIR: read nothing outside
            with Tb.Then():
                flag(tirx.Or(indptr[0] != 0, indptr[rows] != check.nnz))
            with Tb.Else():
                flag(tirx.const(True, "bool"))
        return [flag.sum(0, rows, lambda r: indptr[r] > indptr[r + 1])]
    if isinstance(check, ValueDomainCheck):
        values = buffers[check.param]
        return [flag.sum(0, values.shape[0], lambda p: tirx.Or(
            values[p] < check.min, values[p] >= check.max))]
    return _indices_terms(check, buffers, flag)


def _indices_terms(check: IndicesCheck, buffers: dict, flag: _Flag) -> list:
    """In range everywhere; sorted: every descent ``indices[p-1] >= indices[p]`` sits at the
    start of a row (descents minus distinct row starts holding one must be 0). One pass over
    the array counts both (the loop is bound by memory bandwidth)."""
    indices = buffers[check.param]
    total = indices.shape[0]

    def out_of_range(p):
        return tirx.Or(indices[p] < 0, indices[p] >= check.bound)

    if not check.sorted:
        return [flag.sum(0, total, out_of_range)]
    with Tb.If(total > 0):
        with Tb.Then():
            flag(out_of_range(0))
    return [flag.sum(1, total, lambda p: tirx.Cast(COUNT_DTYPE, out_of_range(p))
                     + tirx.Cast(COUNT_DTYPE, _descends(check, indices[p - 1], indices[p])))] \
        + _row_starts(check, buffers, indices, total, flag)


def _row_starts(check: IndicesCheck, buffers: dict, indices, total, flag: _Flag) -> list:
    """The descents that start a row, each counted once, to subtract."""
    if check.indptr is not None:
        indptr = buffers[check.indptr]
        rows = indptr.shape[0] - 1
        rows = tirx.Select(total > 0, rows, tirx.const(1, str(rows.ty.dtype)))   # else none
        return [flag.sum(1, rows, lambda r: row_starts_at_descent(indptr, indices, r, 0, total),
                         sign=-1)]
    if check.width is not None:
        width = tirx.max(check.width, 1)
        return [flag.sum(1, tirx.floordiv(total, width),
                         lambda r: _descends(check, indices[r * width - 1], indices[r * width]),
                         sign=-1)]
    return []


def _descends(check: IndicesCheck, before, after):
    """Whether ``after`` breaks the order of a sorted row: in a row of fixed width (ELL) a
    slot may repeat the previous coordinate (padding), elsewhere coordinates increase."""
    return before > after if check.indptr is None and check.width is not None \
        else before >= after
