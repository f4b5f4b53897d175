"""Run a CUDA-scheduled sparsetir module on the CPU, one GPU thread after another.

``emulate(mod)`` takes a scheduled Stage II module (``default_schedule(mod, "cuda").mod``),
turns every loop bound to ``blockIdx``/``threadIdx`` into a serial loop, flattens it
(``lower_sparse_buffer``) and compiles it for llvm. What the result computes is what the GPU
computes if no two threads of a block race. With ``reverse=True`` each bound loop runs its
iterations last to first: a result that depends on the order in which blocks or threads run
(one thread reading what another writes) then usually differs between the two orders.
Reductions are decomposed first: TVM runs an init when the reduction variable is at its start,
which a reversed loop reaches last, while the GPU lowers a reduction over threads as a whole.
"""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx

import sparsetir
from sparsetir.driver.build_module import signature_of
from sparsetir.runtime import Kernel
from sparsetir.backend.target import compile_module


def serialize_threads(mod, reverse: bool = False):
    """``mod`` with every thread-bound loop made serial (iterating backwards if ``reverse``)."""

    def serial(loop: tirx.For):
        if loop.kind != tirx.ForKind.THREAD_BINDING:
            return loop
        body = loop.body
        if reverse:
            flipped = loop.min + loop.extent - 1 - (loop.loop_var - loop.min)
            body = tvm_ffi.structural_map(
                body, (tirx.Var, lambda v: flipped if v.same_as(loop.loop_var) else v),
                order="post")
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, body, None,
                        loop.annotations, loop.step)

    funcs = {gv: f.with_body(tvm_ffi.structural_map(f.body, (tirx.For, serial), order="post"))
             if isinstance(f, tirx.PrimFunc) else f for gv, f in mod.functions.items()}
    return type(mod)(funcs, attrs=mod.attrs)


def decompose_all_reductions(mod):
    """``mod`` with the init of every reduction block moved before its first reduction loop."""
    sch = s_tir.Schedule(mod)
    names = []
    tvm_ffi.structural_walk(mod["main"].body, (s_tir.SBlock, lambda b: names.append(b.name_hint)
                                               if b.init is not None else None), order="pre")
    for name in names:
        block = sch.get_sblock(name)
        realize = sch.get(block)
        loops = sch.get_loops(block)
        reduction_vars = {iv.var for iv in realize.iter_vars
                          if iv.iter_type == tirx.IterVar.CommReduce}
        if reduction_vars and loops:
            first = next((loop for loop in loops if _binds(sch, block, loop, reduction_vars)),
                         None)
            if first is not None:
                sch.decompose_reduction(block, first)
    return sch.mod


def _binds(sch, block, loop, reduction_vars) -> bool:
    """Whether ``loop`` feeds one of the block's reduction variables."""
    loop_var = sch.get(loop).loop_var
    found = []
    tvm_ffi.structural_walk(sch.mod["main"].body, (s_tir.SBlockRealize, lambda r: found.append(r)
                                                   if r.block.same_as(sch.get(block)) else None),
                            order="pre")
    for iv, value in zip(found[0].block.iter_vars, found[0].iter_values):
        if iv.var in reduction_vars:
            used = []
            tvm_ffi.structural_walk(value, (tirx.Var, used.append), order="pre")
            if any(v.same_as(loop_var) for v in used):
                return True
    return False


def emulate(mod, reverse: bool = False, target="llvm") -> Kernel:
    """A CPU ``Kernel`` computing what the CUDA-scheduled ``mod`` computes on a GPU, compiled
    for ``target`` (default: this machine's CPU; ``{"kind": "llvm"}``: any x86-64)."""
    flat = sparsetir.lower_sparse_buffer(serialize_threads(decompose_all_reductions(mod),
                                                           reverse))
    return Kernel(compile_module(flat, target), signature_of(flat["main"]), device="cpu")
