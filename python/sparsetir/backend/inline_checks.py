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

Marked ``per=TILES``, a loop over a tile's rows inside the parallel loop (``for i``, whose
row loops all read row ``e(i)``, stepping by 1) is instead preceded by the checks of the
whole tile: its row pointers in order inside ``[0, nnz]``, and one flat loop over its
positions ``[indptr[e(first)], indptr[e(last) + 1])`` counting the indices out of range and
the descents that do not start a row (``runtime.compiled_checks`` counts the same way). That
loop vectorises and leaves the tile's indices in the cache; the rows' loops are left as they
were, without a count or a clamp. A loop with no such tile around it is checked per row.

What it costs (the tiled kernels, kernel alone, checked over unchecked, 2 threads, Intel VM,
medians of alternating calls, int64 indices): per row, about 10 instructions a nonzero,
which a row of 32 features does not hide (SpMM: pubmed 1.28x, arxiv-size R-MAT graph
1.21-1.24x; SDDMM 1.50x) and a row of 128 mostly does (SpMM on R-MAT 1.02-1.06x); per tile, a
read of the tile's indices before its rows, at memory speed (SpMM on R-MAT 1.14x at 32
features, 1.07x at 128; pubmed 1.16x and 1.08x; SDDMM on R-MAT 1.04x at both).
``ops.plain.checks_inline`` says where the plain call uses which.

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
from ..ir.utils import substitute, uses_var
from .parallel_scratch import ScratchRewriter, with_body


ROWS = "rows"
"""Each loop over a row's nonzeros checks the indices it reads (``mark_inline_index_checks``)."""
TILES = "tiles"
"""Each tile's indices are checked in flat loops before its rows, which read them unchecked."""


def mark_inline_index_checks(mod: tvm.IRModule, per: str = ROWS) -> tvm.IRModule:
    """``mod`` with its ``main``'s index checks recorded for ``check_indices_inline`` (the
    buffers by their Stage II names), to be made ``per`` row (``ROWS``) or, inside a
    parallel loop over tiles of rows, per tile (``TILES``; rows where a loop has no tile).
    Refuses an ELL axis (fixed-width rows), whose rows the pass does not find."""
    if per not in (ROWS, TILES):
        raise ValueError(f"per must be {ROWS!r} or {TILES!r}, not {per!r}")
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
                         "nnz": check.nnz, "bound": check.bound, "sorted": check.sorted,
                         "per": per})
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
    """Rewrites each loop over one row of an axis, or each loop over a tile's rows inside a
    parallel loop; the failure counts live at the top of the enclosing parallel loop's body
    (a buffer allocated inside a loop would be allocated at every iteration, and stay in
    memory)."""

    def __init__(self, indptr, indices, check):
        super().__init__()
        self.indptr, self.indices, self.check = indptr, indices, check
        self.analyzer = tvm.sym.Analyzer()
        self.vouched = []           # the loads of indices the checks cover
        self.parallel = 0           # parallel loops around the statement being rewritten

    def stmt(self, node):
        inside = isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL
        self.parallel += inside
        try:
            return super().stmt(node)
        finally:
            self.parallel -= inside

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
        if self.parallel and str(self.check.get("per", ROWS)) == TILES:
            tile = self._tile(node)
            if tile is not None:
                return tile
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

    def _tile(self, node):
        """``node`` preceded by the checks of all its rows at once, when it is a loop over a
        tile's rows: every loop over one row's positions inside it reads the same row ``e``,
        which steps by 1 with ``node``'s variable and uses no variable or buffer made inside
        ``node`` (so it is known before it); else None. The rows of the tile are then
        ``[e(first), e(last) + 1)``, their positions ``[indptr[e(first)], indptr[e(last) +
        1])``: one flat loop over those (vectorised, and it leaves them in the cache for the
        kernel) checks every index, and the loops inside run as they were, unclamped."""
        inner, bound_inside, made_inside, read = [], [], [], []
        tvm_ffi.structural_walk(node.body, (tirx.For, inner.append), order="pre")
        tvm_ffi.structural_walk(node.body, (tirx.LetStmt, lambda let: bound_inside.append(
            let.var)), order="pre")
        for kind in (tirx.AllocBuffer, tirx.DeclBuffer):
            tvm_ffi.structural_walk(node.body, (kind, lambda made: made_inside.append(
                made.buffer)), order="pre")
        row_loops = [(loop, self._row(loop)) for loop in inner]
        row_loops = [(loop, row) for loop, row in row_loops if row is not None]
        if not row_loops:
            return None
        i, row = node.loop_var, row_loops[0][1]
        bound_inside += [loop.loop_var for loop in inner]
        tvm_ffi.structural_walk(row, (tvm.ir.TensorLoad, read.append), order="pre")
        if any(not tvm.ir.structural_equal(other, row) for _, other in row_loops[1:]) \
                or any(uses_var(row, var) for var in bound_inside) \
                or any(load.source.same_as(made) for load in read for made in made_inside) \
                or not self.analyzer.can_prove_equal(substitute(row, {i: i + 1}) - row, 1):
            return None            # the row is not known before the loop: checked per row
        for loop, _ in row_loops:
            position = tirx.BufferLoad(self.indptr, [row]) + _as(loop.loop_var,
                                                                  str(self.indptr.dtype))
            tvm_ffi.structural_walk(loop.body, (tvm.ir.TensorLoad, lambda load, at=position:
                                                self.vouched.append(load) if _position_is(
                                                    load, self.indices, at, self.analyzer)
                                                else None), order="pre")
        first = substitute(row, {i: node.min})
        return tirx.SeqStmt([*self._tile_checks(first, first + node.extent), node])

    def _tile_checks(self, first, stop):
        """The checks of rows ``[first, stop)`` (clamped into ``indptr``): their pointers in
        order inside ``[0, nnz]``, and every index of their positions ``[a, b)`` in range
        and, sorted, above the one before it unless it starts a row (descents minus the
        distinct row starts that hold one must be 0, as ``runtime.compiled_checks`` counts)."""
        check, indptr, indices = self.check, self.indptr, self.indices
        pointer = str(indptr.dtype)
        simplify = self.analyzer.simplify
        last = _as(indptr.shape[0] - 1, pointer)
        bindings = []

        def bind(name, value):
            var = tirx.Var(name, pointer)
            bindings.append(tirx.LetStmt(var, simplify(value)))
            return var

        first = bind("tile_first", tirx.min(tirx.max(_as(first, pointer),
                                                     tirx.const(0, pointer)), last))
        stop = bind("tile_stop", tirx.min(tirx.max(_as(stop, pointer), first), last))
        a = bind("tile_start", tirx.BufferLoad(indptr, [first]))
        b = bind("tile_end", tirx.BufferLoad(indptr, [stop]))
        one = tirx.const(1, pointer)
        counts = tirx.decl_buffer((2,), "int32", name="tile_failures")
        self.pending.append(counts)

        def add(slot, term, sign=1):
            term = tirx.Cast("int32", term)
            return tirx.BufferStore(counts, counts[slot] + term if sign > 0
                                    else counts[slot] - term, [slot])

        def loop(name, start, extent, body_of):
            var = tirx.Var(name, pointer)
            return tirx.For(var, start, tirx.max(extent, tirx.const(0, pointer)),
                            tirx.ForKind.SERIAL, body_of(var))

        dtype = str(indices.dtype)
        unsigned, bound = "u" + dtype, _as(check["bound"], dtype)

        def out_of_range(q):
            return tirx.Cast(unsigned, bound) <= tirx.Cast(unsigned, tirx.BufferLoad(indices, [q]))

        def descends(q):
            return tirx.BufferLoad(indices, [q - one]) >= tirx.BufferLoad(indices, [q])

        in_order = bool(check["sorted"])
        pointers = f"{check['indptr_name']}: a row's pointers out of order or outside " \
            f"[0, {check['nnz']}]"
        stmts = [
            *bindings,
            assertion(tirx.all(tirx.const(0, pointer) <= a, a <= b,
                               b <= _as(check["nnz"], pointer),
                               tirx.Or(a == b, tirx.const(0, dtype) < bound)), pointers),
            tirx.BufferStore(counts, tirx.const(0, "int32"), [0]),
            loop("r", first, stop - first,
                 lambda r: add(0, tirx.BufferLoad(indptr, [r]) > tirx.BufferLoad(indptr, [r + one]))),
            assertion(counts[0] == 0, pointers),
            tirx.BufferStore(counts, tirx.const(0, "int32"), [1]),
            tirx.IfThenElse(a < b, add(1, out_of_range(a)), None),
            loop("q", a + one, b - a - one, lambda q: add(1, tirx.Cast("int32", out_of_range(q))
                                                           + tirx.Cast("int32", descends(q)))
                 if in_order else add(1, out_of_range(q)))]
        if in_order:
            stmts.append(tirx.IfThenElse(a < b, loop(
                "r", first + one, stop - first - one,
                lambda r: add(1, row_starts_at_descent(indptr, indices, r, a, b), -1)), None))
        order = " or not increasing within its row" if in_order else ""
        stmts.append(assertion(counts[1] == 0, f"{check['indices_name']}: an index out of "
                               f"range [0, {check['bound']}){order}"))
        tvm_ffi.structural_walk(tirx.SeqStmt(stmts), (tvm.ir.TensorLoad, lambda load: (
            self.vouched.append(load) if load.source.same_as(indices) else None)), order="pre")
        return stmts


def row_starts_at_descent(indptr, indices, r, start, end):
    """Whether row ``r`` (``r >= 1``) is the first of the rows starting at its position
    ``indptr[r]``, that position lies in ``(start, end)`` and ``indices`` descends there
    (``indices[p - 1] >= indices[p]``: allowed where a row starts). The two reads of
    ``indices`` are clamped into ``[start, end)``, so the expression reads nothing outside
    it whatever ``indptr`` holds (``end > start`` where it is evaluated). Counted over the
    rows and subtracted from the descents over ``(start, end)``, it leaves those inside a row.

    Example
    -------
    >>> from tvm import tirx
    >>> indptr = tirx.decl_buffer((5,), "int32", name="indptr")
    >>> indices = tirx.decl_buffer((9,), "int32", name="indices")
    >>> r = tirx.Var("r", "int32")
    >>> str(row_starts_at_descent(indptr, indices, r, 0, 9)).count("indices")
    2
    """
    position = tirx.BufferLoad(indptr, [r])
    one = tirx.const(1, str(position.ty.dtype))
    before = tirx.max(tirx.min(position, end), start + one) - one
    at = tirx.min(tirx.max(position, start), end - one)
    return tirx.all(tirx.BufferLoad(indptr, [r - one]) < position, position < end,
                    tirx.BufferLoad(indices, [before]) >= tirx.BufferLoad(indices, [at]))


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
