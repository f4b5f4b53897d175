"""Default CPU schedule: owned rows in parallel, constant-extent feature loops vectorised."""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..ir.attrs import PARALLEL_ANNOTATION
from .common import innermost_spatial_loop, nest_blocks, try_primitive

VECTOR_LANES = 16


def _vector_loop(sch, block, realize):
    """The innermost loop of ``block`` if it can carry vector lanes."""
    loop_rv = innermost_spatial_loop(sch, block, realize)
    if loop_rv is None:
        return None
    iv = block.iter_vars[-1]
    stores = []
    tvm_ffi.structural_walk(block.body, (tirx.BufferStore, stores.append), order="pre")
    if not stores or not all(s.indices and s.indices[-1].same_as(iv.var) for s in stores):
        return None
    return loop_rv


def schedule_cpu(sch, nests: list) -> None:
    """Vectorise feature loops and parallelise owned rows in the nests numbered ``nests``."""
    for nest in nest_blocks(sch, nests):
        for block, realize in nest:
            loop_rv = _vector_loop(sch, block, realize)
            if loop_rv is None:
                continue
            extent = sch.get(loop_rv).extent
            if not isinstance(extent, tirx.IntImm) or extent.value < 2 \
                    or _has_while(sch.get(loop_rv)):
                continue              # nothing to vectorise (TVM refuses extent 0 at build)
            if extent.value > VECTOR_LANES and extent.value % VECTOR_LANES == 0:
                loop_rv = sch.split(loop_rv, [None, VECTOR_LANES])[1]
            elif extent.value > 4 * VECTOR_LANES:
                continue
            try_primitive(sch.vectorize, loop_rv)
        for block, _ in nest:
            if PARALLEL_ANNOTATION in block.annotations:
                try_primitive(sch.parallel, sch.get_loops(sch.get_sblock(block.name_hint))[0])


def _has_while(loop) -> bool:
    """A binary search under the loop: TVM cannot vectorise around a while loop."""
    found = tvm_ffi.structural_walk(loop, (tirx.While, lambda _: tvm_ffi.VisitInterrupt(True)),
                                    order="pre")
    return bool(getattr(found, "value", False))
