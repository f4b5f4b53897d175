"""Software prefetch of gathered rows: a nonzero loop asks for the row it will need ``D``
nonzeros ahead (CPU).

SpMM reads ``X[indices[p], :]`` and SDDMM ``Y[indices[p], :]`` for every nonzero ``p``: rows of
a large dense operand at addresses known only from ``indices``. No hardware prefetcher predicts
them, so each gather waits for memory, and two cores keep too few misses in flight to use the
bandwidth. ``indices`` is read-only and sequential, though: the row of nonzero ``p + D`` is
known ``D`` nonzeros early.

A loop annotated ``sparsetir.prefetch_distance = D`` (``sch.annotate(loop, PREFETCH, D)`` on
the Stage II loop over nonzeros) gets, at the top of its body, for every load
``B[f(idx[e])]`` in it from a buffer the function never writes, where ``idx`` is read-only and
``e`` depends on the loop variable: a prefetch of every cache line that the loops nested inside
read from ``B`` (at most ``MAX_LINES``), at the address the load has when ``idx[e]`` is replaced by ``idx[e + D]``,
guarded by ``e + D < len(idx)`` (``idx`` is read no further than its end; a prefetch never
faults). The run of positions ``e, e + 1, ...`` is the nonzeros in storage order, so near the
end of a row the prefetch already asks for the next row's first nonzeros.

Example
-------
``sch.annotate(nonzero_loop, PREFETCH, 8)``, then built for llvm (128 features)::

    for j in range(indptr[i + 1] - indptr[i]):
        if indptr[i] + j + 8 < nnz:
            prefetch(&X[indices[indptr[i] + j + 8] * 128 + 0]), ... (+16, +32, +48)
        for k in vectorized(64): Y[i * 128 + k] += A[...] * X[indices[indptr[i] + j] * 128 + k]

The CPU SpMM at 32 features (two cache lines a row):

>>> import sparsetir
>>> from sparsetir.ops.kernels import tiled_kernels
>>> from sparsetir.schedule.operators import schedule_spmm_cpu
>>> from sparsetir.transform.pipeline import stage3_passes
>>> from sparsetir.backend.pipeline import lower_blocks
>>> stage2 = sparsetir.lower_sparse_iter(tiled_kernels()["spmm"].specialize({"feat_size": 32}))
>>> mod = lower_blocks(stage3_passes("llvm")(schedule_spmm_cpu(stage2, 32, prefetch=8)))
>>> def lines(m, *keys):
...     return [line.strip() for line in m.script().splitlines()
...             if any(key in line for key in keys)]
>>> lines(mod, "T.prefetch")
[]
>>> lines(prefetch_gathers(mod), "T.prefetch")         # 8 nonzeros ahead
['T.prefetch(T.address_of(X[J_indices[J_indptr[I_indptr[o] + i] + j + 8] * 32]), 0, 3, 1)',
 'T.prefetch(T.address_of(X[J_indices[J_indptr[I_indptr[o] + i] + j + 8] * 32 + 16]), 0, 3, 1)']
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from ..ir.attrs import PREFETCH_ANNOTATION as PREFETCH
from ..ir.utils import substitute, uses_var
from ..schedule.cpu_target import CACHE_LINE_BYTES
from .index_loads import read_only_params

MAX_LINES = 16     # per gathered row: the first 1 KiB (more costs compile time, not speed)


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.PrefetchGathers")
def prefetch_gathers(func, _mod, _ctx):
    """The pass (see the module docstring); loops without the annotation are left alone."""
    readonly = list(read_only_params(func))

    def on_for(loop: tirx.For):
        if PREFETCH not in loop.annotations:
            return loop
        distance = int(loop.annotations[PREFETCH])
        annotations = {k: v for k, v in loop.annotations.items() if k != PREFETCH}
        prefetches = _prefetches(loop, distance, readonly)
        body = tirx.SeqStmt(prefetches + [loop.body]) if prefetches else loop.body
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body,
                        loop.thread_binding, annotations)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post"))


def _prefetches(loop: tirx.For, distance: int, readonly: list) -> list:
    """The guarded prefetch statements for the gathers in ``loop``'s body."""
    def is_readonly(buffer):
        return any(buffer.same_as(b) for b in readonly)

    inner_loops = {}
    tvm_ffi.structural_walk(loop.body, (tirx.For, lambda f: inner_loops.__setitem__(
        f.loop_var, f)), order="pre")
    loads = []
    tvm_ffi.structural_walk(loop.body, (tvm.ir.TensorLoad, loads.append), order="pre")
    statements, seen = [], []
    for load in loads:
        if not is_readonly(load.source) or len(load.indices) != 1:
            continue
        gather = _index_load(load.indices[0], loop.loop_var, is_readonly)
        if gather is None or any(tvm_ffi.structural_equal(load, s) for s in seen):
            continue
        seen.append(load)
        statement = _prefetch(load, gather, distance, inner_loops)
        if statement is not None:
            statements.append(statement)
    return statements


def _index_load(index, loop_var, is_readonly):
    """The read-only 1-D load inside ``index`` whose position depends on ``loop_var``."""
    found = []

    def on_load(load):
        if is_readonly(load.source) and len(load.indices) == 1 and uses_var(load.indices[0],
                                                                          loop_var):
            found.append(load)

    tvm_ffi.structural_walk(index, (tvm.ir.TensorLoad, on_load), order="pre")
    return found[0] if len(found) == 1 else None


def _prefetch(load, gather, distance: int, inner_loops: dict):
    """``if e + D < len(idx): prefetch(...)`` for one gathered load, or None when the span the
    inner loops read is not a constant run of elements."""
    position = gather.indices[0]
    ahead = tirx.BufferLoad(gather.source, [position + distance])
    index = _replace_load(load.indices[0], gather, ahead)
    inner = [(var, loop) for var, loop in inner_loops.items() if uses_var(index, var)]
    if any(not isinstance(loop.extent, tirx.IntImm) for _, loop in inner):
        return None
    analyzer = tvm.sym.Analyzer()
    first = analyzer.simplify(substitute(index, {var: loop.min for var, loop in inner}))
    last = substitute(index, {var: loop.min + loop.extent - 1 for var, loop in inner})
    span = analyzer.simplify(last - first + 1)
    if not isinstance(span, tirx.IntImm) or int(span) <= 0:
        return None
    per_line = max(1, CACHE_LINE_BYTES // load.source.dtype.itemsize)
    # read (0), keep in all cache levels (3), data cache (1)
    lines = [tirx.Evaluate(T.call_intrin("void", "tirx.prefetch", T.address_of(
        tirx.BufferLoad(load.source, [first + offset])), 0, 3, 1))
        for offset in range(0, min(int(span), MAX_LINES * per_line), per_line)]
    length = tirx.Cast(str(position.ty.dtype), gather.source.shape[0])
    in_range = position + distance < length
    return tirx.IfThenElse(in_range, tirx.SeqStmt(lines) if len(lines) > 1 else lines[0], None)


def _replace_load(expr, old, new):
    def on_load(load):
        return new if load.same_as(old) else load

    return tvm_ffi.structural_map(expr, (tvm.ir.TensorLoad, on_load), order="post")
