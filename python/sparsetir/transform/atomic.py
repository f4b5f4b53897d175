"""Honour the ``"atomic"`` block annotation: accumulations become atomic adds (CUDA and CPU).

A block annotated ``"atomic"`` (``sch.annotate(block, "atomic", True)``, as in SparseTIR's
RGCN schedule, or ``T.sp_iter_attr({"atomic": True})`` on its iteration) may share its outputs
with other threads. On CUDA every accumulation in it, ``X[idx] = X[idx] + v``, becomes
``atomicAdd(&X[idx], v)``; other stores (a plain copy) are left as they are.

On the CPU (TVM 0.27's backend has no atomic add) the accumulations of an atomic block under a
parallel loop become calls of ``sparsetir_atomic_add_<dtype>`` (``backend.cpu_atomics``, a
compare-and-swap loop in C); an atomic block that no parallel loop encloses is compiled as
written (one thread: exact). A top-level nest whose outermost loop is serial, binds a
variable of an atomic block, and stores to shared buffers only by accumulating in atomic blocks
gets that loop made parallel: TVM's checked ``parallel`` refuses such a loop (its block reads
what it writes), and the atomic adds are what make it safe. A CSC SpMV, columns outer:

    with T.sp_iter([I_out], "S", "zero") as [i]:        # the output zeroed in the kernel
        Y[i] = T.float32(0)
    with T.sp_iter([J, I], "RS", "spmv") as [j, i]:     # no T.init
        T.sp_iter_attr({"atomic": True})
        Y[i] = Y[i] + A[j, i] * X[j]                    # columns in parallel, atomic adds

An atomic block must not carry a ``T.init`` (it would race with the other threads' adds):
``check_atomic_inits`` refuses one on Stage II, before inits are moved, unless the init keeps
the output as it is (``X[idx] = X[idx]``, what ``format_decompose`` gives a sub-kernel that adds
into an output another one initialised). ``lower_atomic_blocks`` removes such identity stores
everywhere: they do nothing alone and would overwrite other threads' adds.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> sch = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 16})))
>>> sch.annotate(sch.get_sblock("spmm1"), "atomic", True)
>>> mod = LowerAtomicBlocks("cuda")(sparsetir.lower_sparse_buffer(sch.mod))
>>> [line.strip() for line in mod.script().splitlines() if "atomic_add" in line]
['T.cuda.atomic_add(T.address_of(Y[vi * 16 + vk]), A[J_indptr[vi] + vj] * X[J_indices[J_indptr[vi] + vj] * 16 + vk])']

The Stage II block still has its ``T.init``, which ``check_atomic_inits`` refuses:

>>> check_atomic_inits(sch.mod)
Traceback (most recent call last):
...
sparsetir.errors.AtomicBlockError: block spmm1 is annotated atomic but has a T.init; ...
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script import tirx as T

from ..errors import AtomicBlockError
from ..ir.attrs import ATOMIC_ANNOTATION, annotated_true
from ..ir.utils import added_value, is_identity_store, structural_map


CPU_ATOMIC_PREFIX = "sparsetir_atomic_add_"
"""The CPU's atomic adds are ``sparsetir_atomic_add_<dtype>`` (``src/cpu_atomics``, loaded by
``backend.cpu_atomics``)."""
CPU_ATOMIC_DTYPES = ("float32", "float64", "int32", "int64")


def CheckAtomicInits() -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.CheckAtomicInits`` (``check_atomic_inits``; the module is
    returned unchanged)."""
    def check(mod, _ctx):
        check_atomic_inits(mod)
        return mod

    return tvm.transform.module_pass(check, opt_level=0, name="sparsetir.CheckAtomicInits")


def LowerAtomicBlocks(target_kind: str) -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.LowerAtomicBlocks`` (``lower_atomic_blocks`` for ``target_kind``)."""
    return tvm.transform.module_pass(lambda mod, _ctx: lower_atomic_blocks(mod, target_kind),
                                     opt_level=0, name="sparsetir.LowerAtomicBlocks")


def check_atomic_inits(mod: tvm.IRModule) -> None:
    """Refuse an ``"atomic"`` block that has a ``T.init`` (run on Stage II, before
    ``lower_sparse_buffer`` moves inits into blocks of their own, which would still race with
    the other threads' adds)."""
    for func in mod.functions.values():
        if isinstance(func, tirx.PrimFunc):
            for block in _atomic_blocks(func.body):
                if block.init is not None and not is_identity_store(block.init):
                    raise AtomicBlockError(
                        f"block {block.name_hint} is annotated atomic but has a T.init; "
                        "decompose_reduction it and make sure the init runs before any thread "
                        "adds (for example in a nest of its own)")


def lower_atomic_blocks(mod: tvm.IRModule, target_kind: str) -> tvm.IRModule:
    """``mod`` with the accumulations of ``"atomic"`` blocks made atomic for ``target_kind``."""
    funcs = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(_lower(func.body, target_kind))
        funcs[gv] = func
    return tvm.IRModule(funcs, attrs=mod.attrs)


def _lower(body, target_kind: str):
    body = structural_map(body, [(s_tir.SBlock, _without_identity_init),
                                 (tirx.BufferStore, lambda store: tirx.Evaluate(0)
                                  if is_identity_store(store) else store)], order="post")
    if target_kind == "cuda":
        return structural_map(body, (s_tir.SBlock, lambda block: _with_atomic_adds(
            block, lambda buf, indices, value: T.cuda.atomic_add(
                T.address_of(tirx.BufferLoad(buf, indices)), value))), order="post")
    body = _parallelise_atomic_nests(body)

    def on_loop(loop):
        if loop.kind != tirx.ForKind.PARALLEL:
            return loop
        new_body = structural_map(loop.body, (s_tir.SBlock, lambda block: _with_atomic_adds(
            block, cpu_atomic_add)), order="post")
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, new_body,
                        loop.thread_binding, loop.annotations, loop.step)

    return structural_map(body, (tirx.For, on_loop), order="post")


def _with_atomic_adds(block, make_add):
    """``block`` with each accumulation of its body (an ``"atomic"`` block) replaced by
    ``make_add(buffer, indices, value)``."""
    if not _is_atomic(block):
        return block

    def on_store(store):
        value = added_value(store)
        if value is None:
            return store
        return tirx.Evaluate(make_add(store.buffer, list(store.indices), value))

    new_body = structural_map(block.body, (tirx.BufferStore, on_store), order="post")
    return s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, new_body,
                        block.init, block.alloc_buffers, block.match_buffers, block.annotations)


def _parallelise_atomic_nests(body):
    """``body`` (the root realize) with the outermost loop of every top-level nest that only
    accumulates atomically into shared buffers made parallel (module docstring)."""
    if not isinstance(body, s_tir.SBlockRealize):
        return body
    root = body.block
    nests = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    chosen = [nest for nest in nests if _runs_atomically(nest)]
    if not chosen:
        return body

    def on_loop(loop):
        if not any(loop.same_as(nest) for nest in chosen):
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.PARALLEL,
                        loop.body, None, loop.annotations, loop.step)

    return tvm_ffi.structural_map(body, (tirx.For, on_loop), order="post")


def _runs_atomically(nest) -> bool:
    """Whether ``nest`` is a serial loop binding a variable of an atomic block, and every
    store under it to a buffer it does not allocate accumulates inside an atomic block."""
    if not (isinstance(nest, tirx.For) and nest.kind == tirx.ForKind.SERIAL
            and nest.thread_binding is None):
        return False
    own, stores, atomic_stores, bound = set(), [], [], []

    def on_realize(realize):
        if _is_atomic(realize.block):
            for value in realize.iter_values:
                tvm_ffi.structural_walk(value, (tirx.Var, lambda v: bound.append(v)
                                                if v.same_as(nest.loop_var) else None),
                                        order="pre")
            tvm_ffi.structural_walk(realize.block.body, (tirx.BufferStore, atomic_stores.append),
                                    order="pre")

    tvm_ffi.structural_walk(nest, [
        (s_tir.SBlock, lambda b: own.update(b.alloc_buffers)),
        (tirx.AllocBuffer, lambda a: own.add(a.buffer)),
        (s_tir.SBlockRealize, on_realize),
        (tirx.BufferStore, stores.append)], order="pre")
    shared = [s for s in stores if s.buffer not in own]
    return bool(bound) and all(any(s.same_as(a) for a in atomic_stores)
                               and added_value(s) is not None for s in shared)


def _without_identity_init(block):
    """(Post-order: the identity store of the init is already ``Evaluate(0)``.)"""
    if block.init is None or not isinstance(block.init, tirx.Evaluate):
        return block
    return s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, block.body,
                        None, block.alloc_buffers, block.match_buffers, block.annotations)


def _is_atomic(block) -> bool:
    return annotated_true(block, ATOMIC_ANNOTATION)


def _atomic_blocks(node) -> list:
    found = []
    tvm_ffi.structural_walk(node, (s_tir.SBlock, lambda b: found.append(b)
                                   if _is_atomic(b) else None), order="pre")
    return found


def cpu_atomic_add(buffer, indices, value):
    """The call adding ``value`` to ``buffer[indices]`` atomically on the CPU."""
    dtype = str(buffer.dtype)
    if dtype not in CPU_ATOMIC_DTYPES:
        raise AtomicBlockError(
            f"buffer {buffer.name} is {dtype}: atomic adds on the CPU exist for "
            f"{', '.join(CPU_ATOMIC_DTYPES)} only")
    target = tirx.BufferLoad(buffer, list(indices))
    return T.call_extern("int32", CPU_ATOMIC_PREFIX + dtype, T.address_of(target), value)
