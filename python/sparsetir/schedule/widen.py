"""Running sums of half-precision outputs held in float32.

A Stage I kernel with a bfloat16 or float16 output computes in float32 and rounds at its
store (``ops.generic_kernels``): ``Y = bf16(f32(Y) + msg)``. As written, a reduction would
round its running value at every step. Its schedule keeps that running value in a buffer of
its own (``cache_write``: a register tile, or one scalar), written back to ``Y`` once;
:func:`widen_accumulators` gives such buffers the accumulator's dtype, so the sum is rounded
once, at the write-back: a store into the buffer drops its rounding cast, a load that widens it
drops its widening cast, and the write-back rounds. Nothing else changes.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.generic_kernels import gspmm_kernel
>>> func = gspmm_kernel("copy_lhs", "sum", "bfloat16", (16,), (True,), (True,))
>>> sch = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(func))
>>> update = sch.get_sblock("gspmm2")
>>> edges, features = sch.get_loops(update)[-2:]
>>> sch.reorder(features, edges)
>>> acc = sch.cache_write(update, 0, "global"); sch.reverse_compute_at(acc, features)
>>> init = sch.decompose_reduction(update, edges)
>>> def allocations(m):
...     return [line.strip() for line in m.script().splitlines() if "Y_global = " in line]
>>> allocations(sch.mod)
['Y_global = T.sblock_alloc_buffer((1, 16), "bfloat16")']
>>> allocations(widen_accumulators(sch.mod))      # float32, TVMScript's default dtype
['Y_global = T.sblock_alloc_buffer((1, 16))']
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx

from ..ir.utils import structural_map

HALF_DTYPES = ("bfloat16", "float16")


def stores_half(sch, block) -> bool:
    """Whether ``block`` (of the schedule ``sch``) stores into a bfloat16 or float16 buffer:
    its schedule must keep the running value in a buffer of its own for this pass to widen."""
    return str(sch.get(block).writes[0].source.dtype) in HALF_DTYPES


def widen_accumulators(mod: tvm.IRModule, dtype: str = "float32") -> tvm.IRModule:
    """``mod`` with every block-allocated bfloat16/float16 buffer held in ``dtype`` (see the
    module docstring)."""
    funcs = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(_widen_body(func.body, dtype))
        funcs[gv] = func
    return tvm.IRModule(funcs, attrs=mod.attrs)


def _widen_body(body, dtype: str):
    wide = {}                               # half buffer -> its float32 twin

    def on_block(block):
        allocs = [wide.setdefault(buf, buf.with_dtype(dtype)) if str(buf.dtype) in HALF_DTYPES
                  else buf for buf in block.alloc_buffers]
        return s_tir.SBlock(block.iter_vars, [_region(r, wide) for r in block.reads],
                            [_region(r, wide) for r in block.writes], block.name_hint,
                            block.body, block.init, allocs, block.match_buffers,
                            block.annotations)

    # blocks first (pre-order), so the loads and stores below see every widened buffer
    body = structural_map(body, (s_tir.SBlock, on_block), order="pre")
    if not wide:
        return body

    def on_load(load):
        if load.source not in wide:
            return load
        return tirx.Cast(str(load.source.dtype),
                         tirx.BufferLoad(wide[load.source], list(load.indices)))

    def on_cast(cast):
        inner = cast.value              # f32(half(load of a widened buffer)) -> the load
        if str(cast.ty.dtype) == dtype and isinstance(inner, tirx.Cast) \
                and isinstance(inner.value, tvm.ir.TensorLoad) \
                and inner.value.source in wide.values():
            return inner.value
        return cast

    def on_store(store):
        if store.buffer not in wide:
            return store
        value = store.value             # half(x) with x already in dtype -> x
        if isinstance(value, tirx.Cast) and str(value.value.ty.dtype) == dtype:
            value = value.value
        elif str(value.ty.dtype) != dtype:
            value = tirx.Cast(dtype, value)
        return tirx.BufferStore(wide[store.buffer], value, list(store.indices))

    return structural_map(body, [(tvm.ir.TensorLoad, on_load), (tirx.Cast, on_cast),
                                 (tirx.BufferStore, on_store)], order="post")


def _region(region, wide: dict):
    if region.source not in wide:
        return region
    return tirx.BufferRegion(wide[region.source], list(region.region))
