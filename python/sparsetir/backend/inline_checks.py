r"""A kernel's index checks made inside its loops, where the kernel reads the indices anyway.

The call of a compiled kernel validates its index arrays before the kernel runs
(``runtime.compiled_checks``): a pass over ``indptr`` and ``indices`` of its own. Where the
arrays are the caller's and may change between calls (the plain call, ``ops.plain``), that pass
runs at every call, and on a graph whose indices have left the caches since the last call it
costs a tenth of an SpMM at 128 features (arxiv size, int64 indices: 1.1-1.5 ms of 17-20 ms).
The kernel itself reads every row pointer and every index once; checked there, nothing is
read twice, for a few instructions a nonzero.

``mark_inline_index_checks`` records, on a scheduled Stage II function, the index checks its
root block declares (``ir.attrs.index_checks``: CSR axes, sorted or not); the pass
``check_indices_inline`` (run by the ``sparsetir`` pipeline once blocks are lowered, before
``report_parallel_checks``) then finds, for each, every loop over one row's positions
(``for j in range(indptr[r + 1] - indptr[r])``) and makes it

* assert, before the loop, ``0 <= indptr[r] <= indptr[r + 1] <= nnz`` (the row's positions
  are inside ``indices``; and ``bound > 0`` for a row with entries);
* count, in the loop, the indices outside ``[0, bound)`` (one unsigned comparison) and, for a
  sorted axis, those not above the one before them in the row (kept in a register, -1 before
  the row's first), without a test or a branch;
* read every index it uses clamped into ``[0, bound)`` (an unsigned minimum), so that a bad
  index never reads outside the gathered operand;
* assert, after the loop, that it counted none.

Arithmetic, not tests, in the loop: ``realign_gathers`` and ``prefetch_gathers`` still apply,
and LLVM keeps the count in a register (the count's buffer is allocated once per parallel
iteration, as ``parallel_scratch`` places scratch buffers). A failed assertion stops the tile
and the call raises ``ArgumentError`` once the parallel loop ends (``report_parallel_checks``),
with the output partly written. Every load of a checked ``indices`` array must be
``indices[indptr[r] + j]`` inside such a loop: the pass refuses a function with any other (it
could not vouch for it). What the loops cannot see is left to the caller: that the first row
pointer is 0 and the last ``nnz``, and that the row tiles start at row 0 (``ops.plain_calls``
checks those few values itself).

What it costs (the tiled SpMM, kernel alone, checked over unchecked, 2 threads, Intel VM,
medians of alternating calls): about 10 instructions a nonzero, which a row of 32 features
does not hide (pubmed 1.28x, arxiv-size R-MAT graph 1.21-1.24x) and a row of 128 mostly does
(R-MAT 1.02-1.06x, pubmed 0.97x); ``ops.plain.checks_inline`` says where the plain call uses
it.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import tiled_kernels
>>> from sparsetir.schedule.operators import schedule_spmm_cpu
>>> from sparsetir.transform.pipeline import stage3_passes
>>> from sparsetir.backend.pipeline import lower_blocks
>>> stage2 = sparsetir.lower_sparse_iter(tiled_kernels()["spmm"].specialize({"feat_size": 32}))
>>> scheduled = mark_inline_index_checks(schedule_spmm_cpu(stage2, 32))
>>> mod = check_indices_inline(lower_blocks(stage3_passes("llvm")(scheduled)))
>>> import re
>>> for line in mod.script().splitlines():
...     if "assert" in line:
...         print(re.search(r'\["(.*)"\]', line).group(1))
tile_ptr: a row's pointers out of order or outside [0, m]
indptr: a row's pointers out of order or outside [0, nnz]
indices: an index out of range [0, n) or not increasing within its row
rows: an index out of range [0, m)
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..ir.attrs import INLINE_INDEX_CHECKS_ATTR, index_checks, param_names
from ..lower.coordinate_checks import assertion
from .parallel_scratch import ScratchRewriter, with_body


def mark_inline_index_checks(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with its ``main``'s index checks recorded for ``check_indices_inline`` (the
    buffers by their Stage II names). Refuses an ELL axis (fixed-width rows), whose rows the
    pass does not find."""
    func = mod["main"]
    stage2_names = {stage1: stage2 for stage2, stage1 in param_names(func).items()}
    recorded = []
    for check in index_checks(func):
        if not check.indptr:
            raise LoweringError(f"the index checks of axis {check.axis} ({check.indices}, "
                                "fixed-width rows) cannot be made inside the kernel's loops")
        recorded.append({"indptr": stage2_names[check.indptr],
                         "indices": stage2_names[check.indices],
                         "indptr_name": check.indptr, "indices_name": check.indices,
                         "nnz": check.nnz, "bound": check.bound, "sorted": check.sorted})
    return tvm.IRModule({"main": func.with_attr(INLINE_INDEX_CHECKS_ATTR, recorded)})


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.CheckIndicesInline")
def check_indices_inline(func, _mod, _ctx):
    """The pass (see the module docstring); a function without the mark is left alone."""
    recorded = func.attrs.get(INLINE_INDEX_CHECKS_ATTR) if func.attrs else None
    if not recorded:
        return func
    params = {p.name: p for p in func.params if tirx.is_buffer_var(p)}
    body = func.body
    for check in recorded:
        body = _check_axis(body, params[str(check["indptr"])], params[str(check["indices"])],
                           check)
    return func.with_body(body)


def _check_axis(body, indptr, indices, check):
    """``body`` with the checks of one axis around and in each loop over a row of it."""
    rewriter = _AxisChecks(indptr, indices, check)
    checked = rewriter.function_body(body)
    unvouched = []
    tvm_ffi.structural_walk(checked, (tvm.ir.TensorLoad, lambda load: unvouched.append(load) if
                                      load.source.same_as(indices) and not any(
                                          load.same_as(v) for v in rewriter.vouched) else None),
                            order="pre")
    if unvouched:
        raise LoweringError(
            f"{check['indices_name']} is read as {unvouched[0]}, outside a loop over one row's "
            f"positions (for j in range({check['indptr_name']}[r + 1] - "
            f"{check['indptr_name']}[r])): its checks cannot be made inside the kernel")
    return checked


class _AxisChecks(ScratchRewriter):
    """Rewrites each loop over one row of an axis; the failure counts live at the top of the
    enclosing parallel loop's body (a buffer allocated inside a loop would be allocated at
    every iteration, and stay in memory)."""

    def __init__(self, indptr, indices, check):
        super().__init__()
        self.indptr, self.indices, self.check = indptr, indices, check
        self.analyzer = tvm.sym.Analyzer()
        self.vouched = []           # the loads of indices the checks cover

    def _row(self, loop):
        """``r`` when ``loop`` runs over ``indptr[r + 1] - indptr[r]``, else None."""
        extent = loop.extent
        if not isinstance(extent, tirx.Sub):
            return None
        end, start = extent.a, extent.b
        if not (_loads(end, self.indptr) and _loads(start, self.indptr)):
            return None
        if not self.analyzer.can_prove_equal(end.indices[0] - start.indices[0], 1):
            return None
        return start.indices[0]

    def loop(self, node):
        row = self._row(node)
        if row is None:
            return None
        check, indices = self.check, self.indices
        lo = tirx.BufferLoad(self.indptr, [row])
        hi = tirx.BufferLoad(self.indptr, [row + 1])
        j = node.loop_var
        position = lo + _as(j, lo.ty.dtype)
        index = tirx.BufferLoad(indices, [position])
        dtype = str(index.ty.dtype)
        unsigned = "u" + dtype
        zero = tirx.const(0, dtype)
        bound = _as(check["bound"], dtype)
        row_ok = tirx.all(tirx.const(0, lo.ty.dtype) <= lo, lo <= hi,
                          hi <= _as(check["nnz"], lo.ty.dtype), tirx.Or(lo == hi, zero < bound))
        # 0 <= index < bound as one unsigned comparison (a negative index wraps past bound)
        failed = [tirx.Cast("int32", tirx.Cast(unsigned, bound) <= tirx.Cast(unsigned, index))]
        self.vouched.append(index)
        keep = []
        previous = tirx.decl_buffer((1,), dtype, name="previous")
        if bool(check["sorted"]):
            # the row's last index so far, in a register (-1 before its first)
            failed.append(tirx.Cast("int32", index <= previous[0]))
            keep.append(tirx.BufferStore(previous, index, [0]))
            self.pending.append(previous)

        def clamped(load):
            """A read of the row's index clamped into range, by an unsigned minimum
            (arithmetic, not a test: passes such as ``realign_gathers`` leave a loop with a
            test alone)."""
            if not _position_is(load, indices, position, self.analyzer):
                return load
            self.vouched.append(load)
            return tirx.Cast(dtype, tirx.min(tirx.Cast(unsigned, load), tirx.Cast(
                unsigned, bound - tirx.const(1, dtype))))

        body = tvm_ffi.structural_map(self.stmt(node.body), (tvm.ir.TensorLoad, clamped),
                                      order="post")
        failures = tirx.decl_buffer((1,), "int32", name="failures")
        self.pending.append(failures)
        total = failed[0]
        for term in failed[1:]:
            total = total + term
        count = tirx.BufferStore(failures, failures[0] + total, [0])
        in_order = " or not increasing within its row" if bool(check["sorted"]) else ""
        start = [tirx.BufferStore(previous, tirx.const(-1, dtype), [0])] if keep else []
        return tirx.SeqStmt([
            assertion(row_ok, f"{check['indptr_name']}: a row's pointers out of order or "
                      f"outside [0, {check['nnz']}]"),
            tirx.BufferStore(failures, tirx.const(0, "int32"), [0]), *start,
            with_body(node, tirx.SeqStmt([count, *keep, body])),
            assertion(failures[0] == 0, f"{check['indices_name']}: an index out of range "
                      f"[0, {check['bound']}){in_order}")])


def _loads(expr, buffer) -> bool:
    """Whether ``expr`` is a 1-D load of ``buffer``."""
    return isinstance(expr, tvm.ir.TensorLoad) and expr.source.same_as(buffer) \
        and len(expr.indices) == 1


def _position_is(load, indices, position, analyzer) -> bool:
    """Whether ``load`` reads ``indices`` at ``position``."""
    return _loads(load, indices) and analyzer.can_prove_equal(
        _as(load.indices[0], position.ty.dtype), position)


def _as(expr, dtype):
    """``expr`` cast to ``dtype`` where it is of another."""
    return expr if str(expr.ty.dtype) == str(dtype) else tirx.Cast(str(dtype), expr)
