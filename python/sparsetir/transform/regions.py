"""Keep block read/write regions free of block-local search buffers.

TVM infers the regions of an outer block from its inner blocks. When an inner block indexes a
buffer with the result of a binary search (``A[K_indices_pos_lo[0]]``), the inferred region
of every enclosing block mentions the local ``lo`` buffer, which is not declared there, and the
function is ill-formed. Where a region bound reads such a buffer, this pass widens that
dimension to the whole buffer, which is what the enclosing block may touch anyway.

Example
-------
>>> # func = widen_search_regions(func, {lo_buffer})
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx


def widen_search_regions(func: tirx.PrimFunc, local_buffers: set) -> tirx.PrimFunc:
    """Widen every region dimension whose bounds read one of ``local_buffers``."""
    if not local_buffers:
        return func

    def reads_local(expr) -> bool:
        hit = tvm_ffi.structural_walk(
            expr, (tvm.ir.TensorLoad, lambda load: tvm_ffi.VisitInterrupt(True)
                   if load.source in local_buffers else None), order="pre")
        return bool(getattr(hit, "value", False))

    def widen(region):
        buffer = region.source
        ranges = []
        for dim, rng in zip(buffer.shape, region.region):
            if reads_local(rng.min) or reads_local(rng.extent):
                rng = tvm.ir.Range.from_min_extent(tirx.const(0, "int32"), dim)
            ranges.append(rng)
        return tirx.BufferRegion(buffer, ranges)

    def on_block(block):
        return s_tir.SBlock(block.iter_vars, [widen(r) for r in block.reads],
                            [widen(r) for r in block.writes], block.name_hint, block.body,
                            block.init, block.alloc_buffers, block.match_buffers,
                            block.annotations)

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, on_block),
                                                 order="post"))
