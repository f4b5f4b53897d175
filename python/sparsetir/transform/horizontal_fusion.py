"""Horizontal fusion: consecutive sub-kernels of one function become one launch (Stage III).

The sub-kernels of a format decomposition (one per ELL bucket, per column partition...) are
separate top-level loop nests. A schedule marks the ones that may share a launch by annotating
a block of each with ``"horizontal_fuse"`` (SparseTIR marked functions with that attribute);
``horizontal_fuse`` merges runs of consecutive marked nests:

* CPU: nests whose outermost loops are ``parallel`` with the same extent become one parallel
  loop whose body runs each nest's body in turn, so the thread pool starts once. This is safe
  when iteration ``t`` of every nest writes only what no other iteration of any of them touches,
  as for the hyb row tiles of ``transform.hyb`` (tile ``t`` owns the same rows in every bucket).
* CUDA: nests whose outermost loops are bound to ``blockIdx.x`` become one loop over the sum of
  their extents; block ``b`` runs the nest whose range holds ``b`` (SparseTIR's
  ``horizontal_fuse``). Blocks of different nests run concurrently, so an output they share
  must be written with atomics (the ``"atomic"`` block annotation). The nests must use the same
  ``threadIdx`` extents: a launch has one.

``build(..., horizontal_fuse=True)`` applies it after scheduling and ``lower_sparse_buffer``.

Example
-------
>>> # sch.annotate(sch.get_sblock("spmm_p0b00"), "horizontal_fuse", True)   (each sub-kernel)
>>> # fused = horizontal_fuse(lower_sparse_buffer(sch.mod), "llvm")
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..ir.utils import substitute
from .errors import LoweringError
from .loop_signature import top_level_nests


FUSE_ANNOTATION = "horizontal_fuse"


class HorizontalFusionError(LoweringError):
    """Nests that cannot share one launch."""


def horizontal_fuse(mod: tvm.IRModule, target_kind: str = "llvm") -> tvm.IRModule:
    """``mod`` with every run of fusable top-level nests merged (see the module docstring)."""
    func = mod["main"]
    nests = top_level_nests(func)
    fusable = _is_block_x_loop if target_kind == "cuda" else _is_parallel_loop
    merge = _merge_by_ranges if target_kind == "cuda" else _merge_same_range
    out, run = [], []
    for nest in nests + [None]:
        if nest is not None and fusable(nest) and (not run or target_kind == "cuda"
                                                   or _same_extent(run[0], nest)):
            run.append(nest)
            continue
        if run:
            out.append(merge(run) if len(run) > 1 else run[0])
            run = []
        if nest is not None and fusable(nest):
            run.append(nest)
        elif nest is not None:
            out.append(nest)
    if len(out) == len(nests):
        return mod
    realize = func.body
    root = realize.block
    body = tirx.SeqStmt(out) if len(out) > 1 else out[0]
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body,
                            root.init, root.alloc_buffers, root.match_buffers, root.annotations)
    new_func = func.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate,
                                                  new_root))
    return tvm.IRModule({"main": new_func})


def _is_parallel_loop(stmt) -> bool:
    return isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL and _marked(stmt)


def _is_block_x_loop(stmt) -> bool:
    return isinstance(stmt, tirx.For) and stmt.thread_binding is not None \
        and stmt.thread_binding.thread_tag == "blockIdx.x" and _marked(stmt)


def _marked(stmt) -> bool:
    found = tvm_ffi.structural_walk(stmt, (s_tir.SBlock, lambda b: tvm_ffi.VisitInterrupt(True)
                                           if b.annotations and FUSE_ANNOTATION in b.annotations
                                           else None), order="pre")
    return bool(getattr(found, "value", False))


def _same_extent(a, b) -> bool:
    return tvm_ffi.structural_equal(a.extent, b.extent) and tvm_ffi.structural_equal(a.min, b.min)


def _merge_same_range(loops: list):
    var = tirx.Var("fused", loops[0].loop_var.ty)
    bodies = [substitute(loop.body, {loop.loop_var: var}) for loop in loops]
    return tirx.For(var, loops[0].min, loops[0].extent, tirx.ForKind.PARALLEL,
                    tirx.SeqStmt(bodies))


def _merge_by_ranges(loops: list):
    extents = [_thread_extents(loop) for loop in loops]
    if any(e != extents[0] for e in extents):
        raise HorizontalFusionError(f"the nests to fuse bind threads differently ({extents}); "
                                    "give them the same threadIdx extents")
    first = loops[0]
    var = tirx.Var("fused_bx", first.loop_var.ty)
    analyzer = tvm.sym.Analyzer()
    bodies, start = [], tirx.const(0, first.loop_var.ty)
    for loop in loops:
        end = analyzer.simplify(start + loop.extent)
        inner = substitute(loop.body, {loop.loop_var: var - start + loop.min})
        bodies.append(tirx.IfThenElse(tirx.all(start <= var, var < end), inner, None))
        start = end
    binding = tirx.IterVar(tvm.ir.Range.from_min_extent(0, start), var,
                           first.thread_binding.iter_type, "blockIdx.x")
    return tirx.For(var, tirx.const(0, first.loop_var.ty), start, tirx.ForKind.THREAD_BINDING,
                    tirx.SeqStmt(bodies), binding)


def _thread_extents(loop) -> dict:
    found = {}

    def on_for(node):
        if node.thread_binding is not None and node.thread_binding.thread_tag != "blockIdx.x":
            found[str(node.thread_binding.thread_tag)] = str(node.extent)

    tvm_ffi.structural_walk(loop.body, (tirx.For, on_for), order="pre")
    return found
