"""Keep block read/write regions free of buffers the block itself allocates.

TVM infers the regions of an outer block from its inner blocks. When an inner block indexes a
buffer with a value held in a local buffer (``A[J_indices_pos[0]]``, a binary search's
result), the inferred region of every enclosing block that allocates that local buffer, or
contains the block that does, mentions a buffer not declared there, and the function is
ill-formed. This pass widens such a region dimension to the whole buffer, which is what the
enclosing block may touch anyway.

Example
-------
``lower_sparse_iter`` applies it to every function it emits, so a second time changes nothing:

>>> import sparsetir
>>> from sparsetir.ops.kernels import sddmm_fused
>>> func = sparsetir.lower_sparse_iter(sddmm_fused)["main"]
>>> tvm_ffi.structural_equal(widen_local_regions(func), func)
True
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..ir.utils import structural_map


def widen_local_regions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Widen every region dimension whose bounds read a buffer allocated inside its block."""

    def on_block(block):
        inside = set()
        tvm_ffi.structural_walk(block, (s_tir.SBlock, lambda b: inside.update(b.alloc_buffers)),
                                order="pre")
        if not inside:
            return block

        def reads_inside(expr) -> bool:
            hit = tvm_ffi.structural_walk(
                expr, (tvm.ir.TensorLoad, lambda load: tvm_ffi.VisitInterrupt(True)
                       if load.source in inside else None), order="pre")
            return bool(getattr(hit, "value", False))

        def widen(region):
            ranges = []
            for dim, rng in zip(region.source.shape, region.region):
                if reads_inside(rng.min) or reads_inside(rng.extent):
                    rng = tvm.ir.Range.from_min_extent(tirx.const(0, "int32"), dim)
                ranges.append(rng)
            return tirx.BufferRegion(region.source, ranges)

        return s_tir.SBlock(block.iter_vars, [widen(r) for r in block.reads],
                            [widen(r) for r in block.writes], block.name_hint, block.body,
                            block.init, block.alloc_buffers, block.match_buffers,
                            block.annotations)

    return func.with_body(structural_map(func.body, (s_tir.SBlock, on_block),
                                                 order="post"))
