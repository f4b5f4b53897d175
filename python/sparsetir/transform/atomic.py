"""Honour the ``"atomic"`` block annotation: accumulations become atomic adds on CUDA.

A block annotated ``"atomic"`` (``sch.annotate(block, "atomic", True)``, as in SparseTIR's
RGCN schedule) may share its outputs with other threads. On CUDA every accumulation in it,
``X[idx] = X[idx] + v``, becomes ``atomicAdd(&X[idx], v)``; other stores (a plain copy) are
left as they are. The CPU backend has no atomic add: an atomic block is compiled as written
when no parallel loop encloses it (one thread, so the result is exact) and refused otherwise.
An atomic block must not carry a ``T.init`` (it would race with the other threads' adds):
``check_atomic_inits`` refuses one on Stage II, before inits are moved, unless the init keeps
the output as it is (``X[idx] = X[idx]``, what ``format_decompose`` gives a sub-kernel that adds
into an output another one initialised). ``lower_atomic_blocks`` removes such identity stores
everywhere: they do nothing alone and would overwrite other threads' adds.

Example
-------
>>> # sch.annotate(sch.get_sblock("csrmm1"), "atomic", True)
>>> # mod = LowerAtomicBlocks("cuda")(sparsetir.lower_sparse_buffer(sch.mod))
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script import tirx as T

from ..errors import AtomicBlockError
from ..ir.attrs import ATOMIC_ANNOTATION, annotated_true
from ..ir.utils import is_identity_store, structural_map


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
    _check_atomic_blocks(body, target_kind)
    body = structural_map(body, [(s_tir.SBlock, _without_identity_init),
                                 (tirx.BufferStore, lambda store: tirx.Evaluate(0)
                                  if is_identity_store(store) else store)], order="post")
    if target_kind != "cuda":
        return body

    def on_block(block):
        if not _is_atomic(block):
            return block
        new_body = structural_map(block.body, (tirx.BufferStore, _atomic_add),
                                          order="post")
        return s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint,
                            new_body, block.init, block.alloc_buffers, block.match_buffers,
                            block.annotations)

    return structural_map(body, (s_tir.SBlock, on_block), order="post")


def _check_atomic_blocks(body, target_kind: str) -> None:
    if target_kind == "cuda":
        return
    loops = []
    tvm_ffi.structural_walk(body, (tirx.For, lambda loop: loops.append(loop)
                                   if loop.kind == tirx.ForKind.PARALLEL else None), order="pre")
    for loop in loops:
        names = [b.name_hint for b in _atomic_blocks(loop.body)]
        if names:
            raise AtomicBlockError(
                f"block {names[0]} is annotated atomic and runs under the parallel loop "
                f"{loop.loop_var.name}: the CPU backend has no atomic add; parallelise a "
                "loop whose iterations write their own outputs instead")


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


def _atomic_add(store):
    """``atomicAdd(&X[idx], v)`` for ``X[idx] = X[idx] + v``; other stores unchanged."""
    value = store.value
    if not isinstance(value, tirx.Add):
        return store
    for own, other in ((value.a, value.b), (value.b, value.a)):
        if (isinstance(own, tvm.ir.TensorLoad) and own.source.same_as(store.buffer)
                and tvm_ffi.structural_equal(list(own.indices), list(store.indices))):
            target = tirx.BufferLoad(store.buffer, list(store.indices))
            return tirx.Evaluate(T.cuda.atomic_add(T.address_of(target), other))
    return store
