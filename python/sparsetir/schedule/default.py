"""Default schedules: what ``build`` applies to a kernel nobody scheduled.

CPU: the outermost loop of every nest whose rows are owned (``sparsetir.rows_owned``, set by
``lower_sparse_iter`` when each outer iteration writes its own outputs) runs in parallel; the
innermost loop of a block is vectorised when it is spatial, has a constant extent and is the
last index of every store (field guide §11.4: a symbolic extent stays scalar, so ``specialize``
the feature size first).

CUDA: the outermost loop of each owned nest goes to ``blockIdx.x`` and the innermost
spatial loop of fixed extent (features) to ``threadIdx.x``; a nest whose rows are not owned
runs in one thread.

Example
-------
>>> # sch = default_schedule(sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 64})))
>>> # sch.mod  -> rows parallel, features vectorised
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..transform.lower_sparse_iter import PARALLEL_ANNOTATION

VECTOR_LANES = 16


def default_schedule(mod: tvm.IRModule, target_kind: str = "llvm") -> s_tir.Schedule:
    """Schedule every block of ``mod["main"]`` for ``target_kind`` ("llvm" or "cuda")."""
    sch = s_tir.Schedule(mod, enable_check=False)
    blocks = _blocks(sch.mod["main"])
    if target_kind == "cuda":
        _schedule_cuda(sch, blocks)
    else:
        _schedule_cpu(sch, blocks)
    return sch


def is_scheduled(mod: tvm.IRModule) -> bool:
    """Whether any loop of ``mod`` is parallel, vectorised, unrolled or bound to a thread."""
    found = tvm_ffi.structural_walk(
        mod["main"].body,
        (tirx.For, lambda f: tvm_ffi.VisitInterrupt(True)
         if f.kind != tirx.ForKind.SERIAL or f.thread_binding is not None else None),
        order="pre")
    return bool(getattr(found, "value", False))


def _blocks(func) -> list:
    """(block, realize) pairs in pre-order, the root excluded."""
    found = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlockRealize, found.append), order="pre")
    return [(r.block, r) for r in found if r.block.name_hint != "root"]


def _owned_roots(blocks) -> list:
    return [b.name_hint for b, _ in blocks if PARALLEL_ANNOTATION in b.annotations]


def _vector_loop(sch, block, realize):
    """The innermost loop of ``block`` if it can carry vector (or thread) lanes."""
    loops = sch.get_loops(sch.get_sblock(block.name_hint))
    if not loops or not block.iter_vars:
        return None
    loop = sch.get(loops[-1])
    iv = block.iter_vars[-1]
    if iv.iter_type != tirx.IterVar.DataPar or not realize.iter_values[-1].same_as(loop.loop_var):
        return None
    if _reads_memory(loop.extent):
        return None
    stores = []
    tvm_ffi.structural_walk(block.body, (tirx.BufferStore, stores.append), order="pre")
    if not stores or not all(s.indices and s.indices[-1].same_as(iv.var) for s in stores):
        return None
    return loops[-1]


def _reads_memory(expr) -> bool:
    found = tvm_ffi.structural_walk(
        expr, (tvm.ir.TensorLoad, lambda _: tvm_ffi.VisitInterrupt(True)), order="pre")
    return bool(getattr(found, "value", False))


def _schedule_cpu(sch, blocks) -> None:
    for block, realize in blocks:
        loop_rv = _vector_loop(sch, block, realize)
        if loop_rv is None:
            continue
        extent = sch.get(loop_rv).extent
        if not isinstance(extent, tirx.IntImm):
            continue
        if extent.value > VECTOR_LANES and extent.value % VECTOR_LANES == 0:
            loop_rv = sch.split(loop_rv, [None, VECTOR_LANES])[1]
        elif extent.value > 4 * VECTOR_LANES:
            continue
        sch.vectorize(loop_rv)
    for name in _owned_roots(blocks):
        sch.parallel(sch.get_loops(sch.get_sblock(name))[0])


def _schedule_cuda(sch, blocks) -> None:
    owned = set(_owned_roots(blocks))
    for block, realize in blocks:
        loop_rv = _vector_loop(sch, block, realize)
        if loop_rv is not None and not _inside_unowned(block.name_hint, blocks, owned):
            sch.bind(loop_rv, "threadIdx.x")
    for block, realize in blocks:
        if _is_top_level(realize, blocks):
            if block.name_hint in owned:
                sch.bind(sch.get_loops(sch.get_sblock(block.name_hint))[0], "blockIdx.x")
            else:
                rv = sch.get_sblock(block.name_hint)
                sch.bind(sch.add_unit_loop(rv), "blockIdx.x")


def _is_top_level(realize, blocks) -> bool:
    return not any(b is not realize.block and _contains(b, realize) for b, _ in blocks)


def _contains(block, realize) -> bool:
    found = tvm_ffi.structural_walk(
        block.body, (s_tir.SBlockRealize, lambda r: tvm_ffi.VisitInterrupt(True)
                     if r.same_as(realize) else None), order="pre")
    return bool(getattr(found, "value", False))


def _inside_unowned(name, blocks, owned) -> bool:
    for block, realize in blocks:
        if _is_top_level(realize, blocks) and block.name_hint not in owned:
            if block.name_hint == name or any(
                    inner.name_hint == name and _contains(block, r) for inner, r in blocks):
                return True
    return False
