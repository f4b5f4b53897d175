"""Run a CUDA-scheduled sparsetir module on the CPU, one GPU thread after another.

``emulate(mod)`` takes a scheduled Stage II module (``default_schedule(mod, "cuda").mod``),
turns every loop bound to ``blockIdx``/``threadIdx`` into a serial loop, flattens it
(``lower_sparse_buffer``) and compiles it for llvm. What the result computes is what the GPU
computes if no two threads of a block race. With ``reverse=True`` each bound loop runs its
iterations last to first: a result that depends on the order in which blocks or threads run
(one thread reading what another writes) then usually differs between the two orders.
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

import sparsetir
from sparsetir.build import signature_of
from sparsetir.runtime import Kernel
from sparsetir.target import compile_module


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


def emulate(mod, reverse: bool = False) -> Kernel:
    """A CPU ``Kernel`` computing what the CUDA-scheduled ``mod`` computes on a GPU."""
    flat = sparsetir.lower_sparse_buffer(serialize_threads(mod, reverse))
    return Kernel(compile_module(flat, "llvm"), signature_of(flat["main"]), device="cpu")
