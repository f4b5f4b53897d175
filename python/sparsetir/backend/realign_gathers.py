"""Gathered rows realigned in registers: a row that starts off a cache line is loaded as the
whole lines it spans and shifted into place, instead of as vectors that each straddle two
lines (CPU).

A kernel that gathers rows of a float32 operand (SpMM's ``X``) loads each row as 64-byte
vectors. numpy puts a large array 16 bytes past a line (glibc's ``mmap``), so when a row is a
whole number of lines every vector of every row straddles two: twice the L1 accesses, and the
kernel ran 1.5-2x slower than on the same rows on lines where they come from the L2 cache.
Copying the operand onto lines first (``ops.alignment``) costs the copy, and the copy's lines
then move between the cores' caches. This pass (run by the ``sparsetir`` pipeline) rewrites
every loop annotated ``REALIGN_ANNOTATION`` into a choice made each time the loop is entered
(once a row), from the gathered buffer's address: at ``s`` elements past a line (``s`` in
``SHIFTS``), the loop whose lane loops

    for l in vectorized(L): ... X[base + l] ...             (L a multiple of VECTOR)

read the row from vectors on lines,

    X_row[0:L] = shuffle(X[base - s : base - s + VECTOR], ..., X[base - s + L : ...])[s : s + L]
    for l in vectorized(L): ... X_row[l] ...

(LLVM keeps ``X_row``, a stack array, in registers and makes the shuffle ``valignd`` or
``vpermt2ps``); on a line, or anywhere else, the loop as it was. The first vector starts up to
``s`` elements before the row and the last ends up to ``VECTOR - s`` after it: both inside the
lines the row's first and last elements are on, so inside the operand's first and last lines
and never on another page (a memory checker such as valgrind reports these reads; the values
read outside the row are never used).

Measured (weighted SpMM, X 16 bytes past a line, 2 threads, Intel VM, medians, 2026-11-29,
before -> after): facebook 0.144-0.147 -> 0.107-0.136 ms at 32 features, 0.24-0.29 -> 0.18-0.20
at 64, 0.49-0.53 -> 0.38-0.39 at 128, 1.07-1.16 -> 0.91-0.97 at 256 (before: the copy); pubmed
at 32 features 0.23-0.25 -> 0.18-0.19; pubmed's other cases and email-Enron within the runs'
spread (their rows come from L3, where the lines a row spans, not the split loads, bind).
On AMD Zen 3 (AVX2: 32-byte vectors, of which only every other one straddles two lines) the
realigned loop was slower, 1.10-1.12x on pubmed and email-Enron at 64 and 128 features (calls
alternating in one process, 2026-11-30): the schedules annotate no loop there.
A lane loop whose gathered load sits under a condition (hyb's padding mask) is left as it is:
the line loads would run ahead of the test.

Example
-------
``schedule.operators`` annotates the CPU SpMM's loop over nonzeros (``sch.annotate(nonzeros,
REALIGN_ANNOTATION, 1)``) where a vector register is a whole line (AVX-512:
``schedule.operators.realigns_gathers``); the pass runs after block lowering, before code
generation. A row that starts 4, 8 or 12 floats past a line is loaded as whole lines, shifted
in registers:

>>> import sparsetir
>>> from sparsetir.ops.kernels import tiled_kernels
>>> from sparsetir.schedule.cpu_target import host_target
>>> from sparsetir.schedule.operators import schedule_spmm_cpu
>>> from sparsetir.transform.pipeline import stage3_passes
>>> from sparsetir.backend.pipeline import lower_blocks
>>> stage2 = sparsetir.lower_sparse_iter(tiled_kernels()["spmm"].specialize({"feat_size": 32}))
>>> with host_target({"kind": "llvm", "mcpu": "skylake-avx512"}):      # scheduled for AVX-512
...     scheduled = schedule_spmm_cpu(stage2, 32, prefetch=8)
>>> mod = lower_blocks(stage3_passes("llvm")(scheduled))
>>> def lines(m, *keys):
...     return [line.strip() for line in m.script().splitlines()
...             if any(key in line for key in keys)]
>>> len(lines(mod, "T.Shuffle")), len(lines(realign_gathers(mod), "T.Shuffle"))
(0, 3)
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from ..ir.attrs import REALIGN_ANNOTATION
from ..ir.utils import substitute, uses_var
from ..schedule.cpu_target import CACHE_LINE_BYTES
from .index_loads import read_only_params
from .parallel_scratch import ScratchRewriter, binds_threads, with_body
from .vector_reductions import LANES as VECTOR

SHIFTS = (4, 8, 12)
"""Elements past a line a realigned loop is made for: the 16-byte steps where an allocator puts
arrays (glibc, numpy); an operand elsewhere (a slice 4 bytes in) takes the loop as it was."""


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.RealignGathers")
def realign_gathers(func, _mod, _ctx):
    """The pass (see the module docstring)."""
    if binds_threads(func.body):
        return func
    gathered = {p for p in read_only_params(func) if str(p.dtype) == "float32"}
    return func.with_body(_Rewriter(gathered).function_body(func.body))


class _Rewriter(ScratchRewriter):
    def __init__(self, gathered: set):
        super().__init__()
        self.gathered = gathered

    def loop(self, node):
        if REALIGN_ANNOTATION not in node.annotations:
            return None
        return self._choice(with_body(node, node.body, {
            key: value for key, value in node.annotations.items() if key != REALIGN_ANNOTATION}))

    def _choice(self, loop):
        """``loop`` as the choice between its realigned forms and itself, or ``loop`` when none
        of its lane loops gathers from one buffer at ``base + lane``, or it binds variables of
        its own besides its loops' (each copy would bind them again)."""
        sites, binds = [], []
        tvm_ffi.structural_walk(loop, (tirx.For, lambda f: sites.append(f)
                                       if self._gather(f) is not None else None), order="pre")
        tvm_ffi.structural_walk(loop, ((tirx.LetStmt, tirx.Bind, tirx.AllocBuffer),
                                       binds.append), order="pre")
        sources = {self._gather(site)[0] for site in sites}
        if len(sources) != 1 or binds:
            return self.stmt(loop)
        (source,) = sources
        if not isinstance(source.elem_offset, tirx.IntImm) or int(source.elem_offset) != 0:
            return self.stmt(loop)
        choice = self.stmt(loop)
        for shift in reversed(SHIFTS):
            realigned = _fresh_loops(tvm_ffi.structural_map(
                loop, (tirx.For, lambda f, s=shift: self._realigned(f, s)), order="post"))
            choice = tirx.IfThenElse(_starts_at(source, shift * source.dtype.itemsize),
                                     realigned, choice)
        return choice

    def _gather(self, loop):
        """``(buffer, load)``: the one load of a gathered buffer (a read-only float32 parameter)
        whose place depends on the lane, at ``base + lane`` with ``base`` a multiple of
        ``VECTOR``, in the lane loop ``loop``, under no condition; or None."""
        if loop.kind != tirx.ForKind.VECTORIZED or not isinstance(loop.extent, tirx.IntImm) \
                or int(loop.extent) % VECTOR or not isinstance(loop.min, tirx.IntImm) \
                or int(loop.min) != 0 or _has_condition(loop.body):
            return None
        loads = []
        tvm_ffi.structural_walk(loop.body, (tvm.ir.TensorLoad, lambda load: loads.append(load)
                                            if any(load.source.same_as(b) for b in self.gathered)
                                            and uses_var(load.indices, loop.loop_var)
                                            else None), order="pre")
        if not loads or any(not tvm_ffi.structural_equal(load, loads[0]) for load in loads):
            return None
        if len(loads[0].indices) != 1:
            return None
        index = loads[0].indices[0]
        base = substitute(index, {loop.loop_var: tirx.const(0, loop.loop_var.ty)})
        analyzer = tvm.sym.Analyzer()
        # rows a whole number of vectors apart: every line load then holds part of the row
        if not analyzer.can_prove_equal(index - base, loop.loop_var) \
                or not analyzer.can_prove_equal(tirx.floormod(base, VECTOR), 0):
            return None
        return loads[0].source, loads[0]

    def _realigned(self, loop, shift: int):
        """The lane loop ``loop`` reading its gathered row from a register copy of the lines
        the row spans (any other loop as it is)."""
        found = self._gather(loop)
        if found is None:
            return loop
        source, load = found
        lanes = int(loop.extent)
        base = substitute(load.indices[0], {loop.loop_var: tirx.const(0, loop.loop_var.ty)})
        row = tirx.decl_buffer((lanes,), "float32", f"{source.name}_row", scope="global")
        self.pending.append(row)
        start = base - shift
        lines = [tirx.BufferLoad(source, [tirx.Ramp(start + VECTOR * t, 1, VECTOR)])
                 for t in range(lanes // VECTOR + 1)]
        fill = tirx.BufferStore(row, tirx.Shuffle(lines, [shift + lane for lane in range(lanes)]),
                                [tirx.Ramp(tirx.const(0, "int32"), 1, lanes)])
        body = tvm_ffi.structural_map(
            loop.body, (tvm.ir.TensorLoad, lambda other: row[loop.loop_var]
                        if tvm_ffi.structural_equal(other, load) else other), order="post")
        return tirx.SeqStmt([fill, with_body(loop, body)])


def _has_condition(body) -> bool:
    """Whether ``body`` tests anything (an ``if``, a select): a load under the test must not be
    moved ahead of it."""
    found = tvm_ffi.structural_walk(body, ((tirx.IfThenElse, tirx.Select), lambda _node:
                                           tvm_ffi.VisitInterrupt(True)), order="pre")
    if found is not None:
        return True
    calls = []
    tvm_ffi.structural_walk(body, (tvm.ir.Call, lambda call: calls.append(call)
                                   if getattr(call.op, "name", "") == "tirx.if_then_else"
                                   else None), order="pre")
    return bool(calls)


def _starts_at(source, offset: int):
    """Whether ``source``'s first element is ``offset`` bytes past a cache line's boundary:
    its address's low bits, read by masking the pointer (LLVM's ``ptrmask``) and asking
    whether what is left is null, bit by bit (TIR has no pointer-to-integer cast)."""
    start = T.address_of(tirx.BufferLoad(source, [0]))

    def masked_null(mask: int):
        return T.isnullptr(T.call_llvm_pure_intrin(start.ty, "llvm.ptrmask", start,
                                                   tirx.const(mask, "int64")))
    condition = masked_null((CACHE_LINE_BYTES - 1) & ~offset)
    for bit in (b for b in (1, 2, 4, 8, 16, 32) if offset & b):
        condition = tirx.And(condition, tirx.Not(masked_null(bit)))
    return condition


def _fresh_loops(stmt):
    """``stmt`` with a new variable for each of its loops (each loop of a copy must have its
    own)."""
    def renamed(loop):
        var = tirx.Var(loop.loop_var.name, loop.loop_var.ty)
        return with_body(tirx.For(var, loop.min, loop.extent, loop.kind, loop.body,
                                  loop.thread_binding, loop.annotations),
                         substitute(loop.body, {loop.loop_var: var}))
    return tvm_ffi.structural_map(stmt, (tirx.For, renamed), order="post")
