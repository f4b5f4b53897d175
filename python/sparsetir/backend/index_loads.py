"""Loads of read-only index arrays bound once per loop iteration (``LetStmt``), not per use.

Lowered sparse kernels read ``indptr[i]`` and ``indices[indptr[i] + j]`` deep inside their
feature loops. LLVM would hoist those loads, but inside a parallel loop TVM's outlined body has
lost the parameters' ``noalias``: every store to the output may change the index arrays, so each
is reloaded after every store, and the output element cannot stay in a register (SDDMM's dot
product then runs at the speed of a store-to-load round trip per feature).

A kernel never writes its inputs (the call wrapper refuses a written argument that overlaps
another), so a load from a buffer the function never stores to gives the same value wherever
it runs. This pass (run by the ``sparsetir`` pipeline after block lowering) first moves a test
that does not change in a loop of constant extent out of it (``if c: for k: ...``, as for the
padding mask of an ELL bucket), then binds each such scalar load to a variable at the top of the body of the
innermost loop its index depends on (or of the ``if`` branch it sits in), when it is used under
a loop nested there and at least one use runs unconditionally in every iteration (so binding
it early reads nothing the original did not read; a use after an assertion runs only if the
assertion held, so a load the assertion protects stays after it).

Example
-------
In outline::

    for j in range(indptr[i + 1] - indptr[i]):
        for k in range(32): C[indptr[i] + j] += X[i, k] * Y[indices[indptr[i] + j], k]

becomes, inside the loop over ``i``::

    indptr_0 = indptr[i]
    for j in range(indptr[i + 1] - indptr_0):
        indices_1 = indices[indptr_0 + j]
        for k in range(32): C[indptr_0 + j] += X[i, k] * Y[indices_1, k]

The CPU SpMM at 32 features:

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
>>> lines(mod, "T.let")
[]
>>> lines(hoist_index_loads(mod), "T.let")
['I_indptr_4: T.let[T.int32] = I_indptr[o]',
 'J_indptr_2: T.let[T.int32] = J_indptr[I_indptr_4 + i]',
 'I_indices_3: T.let[T.int32] = I_indices[I_indptr_4 + i]',
 'A_0: T.let[T.float32] = A[J_indptr_2 + j]',
 'J_indices_1: T.let[T.int32] = J_indices[J_indptr_2 + j]']
"""

from __future__ import annotations

import itertools

import tvm
import tvm_ffi
from tvm import tirx


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.HoistIndexLoads")
def hoist_index_loads(func, _mod, _ctx):
    """The pass (see the module docstring)."""
    readonly = read_only_params(func)
    if not readonly:
        return func
    return func.with_body(_Hoister(readonly).stmt(func.body))


def read_only_params(func) -> set:
    params = {p for p in func.params if tirx.is_buffer_var(p)}
    written = set()
    tvm_ffi.structural_walk(func.body, (tirx.BufferStore, lambda s: written.add(s.buffer)),
                            order="pre")

    prefetched = []      # address_of(X[...]) given to a prefetch, which reads nothing into X

    def on_call(call):   # address_of(C[...]) hands C to code that may write it (atomics)
        if getattr(call.op, "name", "") == "tirx.prefetch":
            prefetched.extend(arg for arg in call.args if isinstance(arg, tvm.ir.Call))
            return
        if any(call.same_as(p) for p in prefetched):
            return
        for arg in call.args:
            if isinstance(arg, tvm.ir.TensorLoad):
                written.add(arg.source)

    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, on_call), order="pre")
    return {p for p in params if not any(p.same_as(w) for w in written)}


class _Hoister:
    def __init__(self, readonly: set):
        self.readonly = readonly
        self.counter = itertools.count()

    def stmt(self, node):
        if isinstance(node, tirx.For):
            body = self.stmt(node.body)
            unswitched = _unswitched(node, body)
            if unswitched is not None:
                return tirx.IfThenElse(unswitched.condition,
                                       self._hoist_into(None, unswitched.then_case), None)
            if node.kind != tirx.ForKind.VECTORIZED:
                body = self._hoist_into(node.loop_var, body)
            return tirx.For(node.loop_var, node.min, node.extent, node.kind, body,
                            node.thread_binding, node.annotations)
        if isinstance(node, tirx.SeqStmt):
            return tirx.SeqStmt([self.stmt(s) for s in node.seq])
        if isinstance(node, tirx.IfThenElse):   # a branch is a scope of its own
            return tirx.IfThenElse(node.condition, self._hoist_into(None, self.stmt(
                node.then_case)), self._hoist_into(None, self.stmt(node.else_case))
                if node.else_case is not None else None)
        if isinstance(node, tirx.While):
            return tirx.While(node.condition, self.stmt(node.body))
        if isinstance(node, tirx.AttrStmt):
            return tirx.AttrStmt(node.node, node.attr_key, node.value, self.stmt(node.body))
        return node

    def _hoist_into(self, loop_var, body):
        inner = _defined_vars(body)
        uses = _Uses()
        uses.stmt(body, conditional=False, nested=False)
        chosen = []
        for load, (unconditional, nested) in uses.items():
            if not (unconditional and nested) or not self._hoistable(load, loop_var, inner):
                continue
            chosen.append(load)
        if not chosen:
            return body
        chosen.sort(key=lambda load: len(str(load)))
        lets, mapping = [], []
        for load in chosen:
            value = _replaced(load, mapping)
            var = tirx.Var(f"{load.source.name}_{next(self.counter)}", load.ty.dtype)
            lets.append(tirx.LetStmt(var, value))
            mapping.append((load, var))
        return tirx.SeqStmt(lets + [_replaced(body, mapping)])

    def _hoistable(self, load, loop_var, inner: set) -> bool:
        # bfloat16 stays unbound: TVM's BF16ComputeLegalize retypes the load but not the
        # variable bound to it (a Bind whose types differ fails its check)
        if not any(load.source.same_as(b) for b in self.readonly) or load.ty.dtype.lanes != 1 \
                or str(load.ty.dtype) == "bfloat16":
            return False
        free, nested_ok = [], []
        tvm_ffi.structural_walk(load, (tirx.Var, free.append), order="pre")
        tvm_ffi.structural_walk(load, (tvm.ir.TensorLoad, lambda inner_load: nested_ok.append(
            any(inner_load.source.same_as(b) for b in self.readonly))), order="pre")
        uses_loop = loop_var is None or any(v.same_as(loop_var) for v in free)
        return all(nested_ok) and uses_loop \
            and not any(v in inner for v in free if loop_var is None or not v.same_as(loop_var))


class _Uses:
    """Every load in a loop body, with whether some use runs in every iteration
    (``unconditional``) and whether some use sits under a nested loop (``nested``)."""

    def __init__(self):
        self.entries = []   # [load, unconditional, nested]

    def items(self):
        return [(load, (u, n)) for load, u, n in self.entries]

    def stmt(self, node, conditional: bool, nested: bool):
        if isinstance(node, tirx.SeqStmt):
            for s in node.seq:
                self.stmt(s, conditional, nested)
                conditional = conditional or _asserts(s)   # what follows runs if it held
        elif isinstance(node, tirx.For):
            self.expr(node.min, conditional, nested)
            self.expr(node.extent, conditional, nested)
            always = isinstance(node.extent, tirx.IntImm) and int(node.extent) > 0
            self.stmt(node.body, conditional or not always, True)
        elif isinstance(node, tirx.IfThenElse):
            self.expr(node.condition, conditional, nested)
            self.stmt(node.then_case, True, nested)
            if node.else_case is not None:
                self.stmt(node.else_case, True, nested)
        elif isinstance(node, tirx.While):
            self.expr(node.condition, conditional, nested)
            self.stmt(node.body, True, True)
        elif isinstance(node, tirx.AttrStmt):
            self.expr(node.value, conditional, nested)
            self.stmt(node.body, conditional, nested)
        elif isinstance(node, tirx.BufferStore):
            for e in list(node.indices) + [node.value]:
                self.expr(e, conditional, nested)
        elif isinstance(node, (tirx.LetStmt, tirx.Bind)):
            self.expr(node.value, conditional, nested)
        elif isinstance(node, tirx.Evaluate):
            self.expr(node.value, conditional, nested)
        elif isinstance(node, tirx.AssertStmt):
            self.expr(node.condition, conditional, nested)

    def expr(self, node, conditional: bool, nested: bool):
        lazy = []

        def on_lazy(e):   # operands that may not be evaluated
            if isinstance(e, (tirx.Select, tvm.ir.Call, tirx.And, tirx.Or)):
                lazy.append(e)

        tvm_ffi.structural_walk(node, ((tirx.Select, tvm.ir.Call, tirx.And, tirx.Or), on_lazy),
                                order="pre")
        guarded = []
        for e in lazy:
            tvm_ffi.structural_walk(e, (tvm.ir.TensorLoad, guarded.append), order="pre")
        loads = []
        tvm_ffi.structural_walk(node, (tvm.ir.TensorLoad, loads.append), order="pre")
        for load in loads:
            maybe = conditional or any(load.same_as(g) for g in guarded)
            self._record(load, not maybe, nested)

    def _record(self, load, unconditional: bool, nested: bool):
        for entry in self.entries:
            if tvm_ffi.structural_equal(entry[0], load):
                entry[1] = entry[1] or unconditional
                entry[2] = entry[2] or nested
                return
        self.entries.append([load, unconditional, nested])


def _asserts(stmt) -> bool:
    found = tvm_ffi.structural_walk(stmt, (tirx.AssertStmt, lambda _: tvm_ffi.VisitInterrupt(
        True)), order="pre")
    return bool(getattr(found, "value", False))


def _unswitched(loop, body):
    """``if c: for ...: S`` for ``for ...: if c: S`` when ``c`` does not change in the loop and
    the loop always runs (a constant extent above 0), else None."""
    if not isinstance(body, tirx.IfThenElse) or body.else_case is not None \
            or not isinstance(loop.extent, tirx.IntImm) or int(loop.extent) <= 0 \
            or loop.thread_binding is not None:
        return None
    inner = _defined_vars(body.then_case) | {loop.loop_var}
    used = []
    tvm_ffi.structural_walk(body.condition, (tirx.Var, used.append), order="pre")
    if any(v in inner for v in used):
        return None
    return tirx.IfThenElse(body.condition, tirx.For(
        loop.loop_var, loop.min, loop.extent, loop.kind, body.then_case, loop.thread_binding,
        loop.annotations), None)


def _defined_vars(body) -> set:
    defined = set()
    tvm_ffi.structural_walk(body, (tirx.For, lambda f: defined.add(f.loop_var)), order="pre")
    tvm_ffi.structural_walk(body, ((tirx.LetStmt, tirx.Bind), lambda s: defined.add(s.var)),
                            order="pre")
    return defined


def _replaced(node, mapping: list):
    if not mapping:
        return node

    def on_load(load):
        for old, var in mapping:
            if tvm_ffi.structural_equal(old, load):
                return var
        return load

    return tvm_ffi.structural_map(node, (tvm.ir.TensorLoad, on_load), order="post")
