"""Accumulators that start from what the output already holds.

A sub-kernel of ``format_decompose`` adds into an output that another sub-kernel has started
(a row split over column partitions or over several ELL rows): its reduction's init keeps
the output as it is, ``Y[r, k] = Y[r, k]``. To sum such a row in registers the schedule does
what it does for any reduction, ``cache_write`` into a small buffer then
``decompose_reduction``, but TVM rewrites every ``Y`` of the block, so the init becomes
``Y_cache[r, k] = Y_cache[r, k]``: the accumulator would start from uninitialised memory.
:func:`start_from_output` gives such an init back its meaning: it loads the accumulator
from the output (``Y_cache[r, k] = Y[r, k]``), the only change to TVM's result.

Example
-------
>>> # acc = sch.cache_write(update, 0, "global"); sch.reverse_compute_at(acc, tile)
>>> # init = sch.decompose_reduction(update, nonzeros)
>>> # mod = start_from_output(sch.mod, init, sch.get(acc).writes[0].source)
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..ir.utils import structural_map


def start_from_output(mod: tvm.IRModule, init_names, output) -> tvm.IRModule:
    """``mod`` with the identity stores of the blocks named in ``init_names`` (the inits
    ``decompose_reduction`` made, ``C[idx] = C[idx]`` into a cache ``C`` of ``output``)
    loading ``output[idx]`` instead. A block of that name that is not such an identity store
    is refused with a ValueError."""
    names = set(init_names)
    found = set()

    def on_block(block):
        if block.name_hint not in names:
            return block
        store = block.body
        if not (isinstance(store, tirx.BufferStore) and isinstance(store.value, tvm.ir.TensorLoad)
                and store.value.source.same_as(store.buffer)
                and tvm_ffi.structural_equal(list(store.value.indices), list(store.indices))):
            raise ValueError(f"block {block.name_hint} is not an init that keeps its cache as "
                             "it is (C[idx] = C[idx])")
        found.add(block.name_hint)
        indices = list(store.indices)
        load = tirx.BufferLoad(output, indices)
        reads = [tirx.BufferRegion(output, [tvm.ir.Range.from_min_extent(i, 1) for i in indices])]
        return s_tir.SBlock(block.iter_vars, reads, block.writes, block.name_hint,
                            tirx.BufferStore(store.buffer, load, indices), block.init,
                            block.alloc_buffers, block.match_buffers, block.annotations)

    funcs = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(structural_map(func.body, (s_tir.SBlock, on_block)))
        funcs[gv] = func
    missing = names - found
    if missing:
        raise ValueError(f"no init block named {', '.join(sorted(missing))}")
    return tvm.IRModule(funcs, attrs=mod.attrs)
