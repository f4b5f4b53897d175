"""Dot products in vector registers: a serial reduction over a constant extent becomes partial
sums in lanes (CPU).

SDDMM computes, per nonzero, ``out[p] = out[p] + x[i, k] * y[j, k]`` over ``k``: one chain of
scalar fused multiply-adds, each waiting for the last (about 4 cycles per feature). Splitting
the sum into ``LANES`` partial sums lets the CPU run them as one vector: this pass (run by the
``sparsetir`` pipeline on code without GPU thread bindings) rewrites every serial loop

    for k in range(K):  Y[idx] = Y[idx] + e(k)        (K a multiple of LANES, idx fixed in k)

into (``W``: 4, 2 or 1 times ``LANES``, the most that divides ``K``)

    for l in vectorized(W): acc[l] = 0
    for k0 in range(K // W):
        for l in vectorized(W): acc[l] = acc[l] + e(k0 * W + l)
    for l in vectorized(LANES): acc[l] = (acc[l] + acc[l + LANES]) + ...   (when W > LANES)
    for l in vectorized(8): acc[l] = acc[l] + acc[l + 8]      (then 4 and 2: halvings)
    Y[idx] = Y[idx] + (acc[0] + acc[1])

``W / LANES`` independent vector accumulators shorten the chain of dependent fused
multiply-adds (4 cycles each) by as much. ``acc`` is allocated once at the top of the enclosing
parallel loop's body, as a "global" buffer of constant size: TVM makes that a stack array, which
LLVM keeps in registers (a "local" buffer goes through TVM's workspace allocator, a call each
time, and stays in memory). The sum is reassociated, as ``rfactor`` would: results differ from
the serial order by rounding only.

Example
-------
After block lowering, before code generation, SDDMM's dot products at 32 features:

>>> import sparsetir
>>> from sparsetir.ops.kernels import tiled_kernels
>>> from sparsetir.schedule.operators import schedule_sddmm_cpu
>>> from sparsetir.transform.pipeline import stage3_passes
>>> from sparsetir.backend.pipeline import lower_blocks
>>> stage2 = sparsetir.lower_sparse_iter(tiled_kernels()["sddmm"].specialize({"feat_size": 32}))
>>> mod = lower_blocks(stage3_passes("llvm")(schedule_sddmm_cpu(stage2, 32)))
>>> def inner_loops(m):
...     return [line.strip() for line in m.script().splitlines() if "for " in line][3:]
>>> inner_loops(mod)
['for k in range(32):']
>>> inner_loops(vectorize_reductions(mod))
['for lane in T.vectorized(32):', 'for k_o in range(1):', 'for lane_a in T.vectorized(32):',
 'for lane_f in T.vectorized(16):', 'for lane_h8 in T.vectorized(8):',
 'for lane_h4 in T.vectorized(4):', 'for lane_h2 in T.vectorized(2):']
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import substitute, uses_var
from .parallel_scratch import ScratchRewriter, binds_threads

LANES = 16


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.VectorizeReductions")
def vectorize_reductions(func, _mod, _ctx):
    """The pass (see the module docstring)."""
    if binds_threads(func.body):
        return func
    return func.with_body(_Rewriter().function_body(func.body))


class _Rewriter(ScratchRewriter):
    def loop(self, node):
        if node.kind == tirx.ForKind.VECTORIZED:   # lanes already: leave what is inside
            return node
        return self._reduction(node)

    def _reduction(self, loop):
        store = loop.body
        if loop.kind != tirx.ForKind.SERIAL or not isinstance(loop.extent, tirx.IntImm) \
                or not _is_zero(loop.min) or int(loop.extent) % LANES != 0 \
                or not isinstance(store, tirx.BufferStore) or store.value.ty.dtype.lanes != 1 \
                or str(store.value.ty.dtype) not in ("float32", "float64"):
            return None
        value = store.value
        if not isinstance(value, tirx.Add) or not _same_element(value.a, store) \
                or _reads(value.b, store.buffer) or uses_var(store.indices, loop.loop_var) \
                or any(_reads(i, store.buffer) for i in store.indices):
            return None
        dtype = str(store.value.ty.dtype)
        extent = int(loop.extent)
        lanes = next(count * LANES for count in (4, 2, 1) if extent % (count * LANES) == 0)
        acc = tirx.decl_buffer((lanes,), dtype, f"{store.buffer.name}_lanes", scope="global")
        self.pending.append(acc)
        lane = tirx.Var("lane", loop.loop_var.ty)
        outer = tirx.Var(loop.loop_var.name + "_o", loop.loop_var.ty)
        zero = tirx.For(lane, 0, lanes, tirx.ForKind.VECTORIZED,
                        tirx.BufferStore(acc, tirx.const(0, dtype), [lane]))
        term = substitute(value.b, {loop.loop_var: outer * lanes + lane})
        accumulate = tirx.For(outer, 0, extent // lanes, tirx.ForKind.SERIAL,
                              tirx.For(lane, 0, lanes, tirx.ForKind.VECTORIZED,
                                       tirx.BufferStore(acc, acc[lane] + term, [lane])))
        steps = [zero, _fresh_lane(accumulate)]
        if lanes > LANES:   # independent vectors (shorter FMA chains): fold them into one
            fold = tirx.Var("lane_f", loop.loop_var.ty)
            steps.append(tirx.For(fold, 0, LANES, tirx.ForKind.VECTORIZED, tirx.BufferStore(
                acc, _tree_sum([acc[fold + v * LANES] for v in range(lanes // LANES)]),
                [fold])))
        steps += _halvings(acc, LANES, loop.loop_var.ty)
        finish = tirx.BufferStore(store.buffer, value.a + (acc[0] + acc[1]),
                                  list(store.indices))
        return tirx.SeqStmt(steps + [finish])


def _fresh_lane(loop):
    """The two lane loops may not share one variable."""
    inner = loop.body
    lane = tirx.Var("lane_a", inner.loop_var.ty)
    new_inner = tirx.For(lane, inner.min, inner.extent, inner.kind,
                         substitute(inner.body, {inner.loop_var: lane}))
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, new_inner)


def _halvings(acc, width: int, index_type) -> list:
    """Loops that fold the upper half of ``acc[:width]`` onto its lower half, as one vector
    addition each, until two lanes are left (``acc[0] + acc[1]`` is then the sum): LLVM makes
    each an extract and an add (about 8 instructions for 16 lanes, where a sum of the 16 lanes
    as scalars took about 25 shuffles and adds per nonzero)."""
    loops = []
    while width > 2:
        width //= 2
        lane = tirx.Var(f"lane_h{width}", index_type)
        loops.append(tirx.For(lane, 0, width, tirx.ForKind.VECTORIZED,
                              tirx.BufferStore(acc, acc[lane] + acc[lane + width], [lane])))
    return loops


def _tree_sum(terms: list):
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] for i in range(0, len(terms), 2)]
    return terms[0]


def _is_zero(expr) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr) == 0


def _same_element(load, store) -> bool:
    return isinstance(load, tvm.ir.TensorLoad) and load.source.same_as(store.buffer) \
        and tvm_ffi.structural_equal(list(load.indices), list(store.indices))


def _reads(expr, buffer) -> bool:
    found = tvm_ffi.structural_walk(expr, (tvm.ir.TensorLoad, lambda load: tvm_ffi.VisitInterrupt(
        True) if load.source.same_as(buffer) else None), order="pre")
    return bool(getattr(found, "value", False))

