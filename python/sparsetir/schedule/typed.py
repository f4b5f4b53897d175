"""CPU schedules of the typed products (``ops.typed_kernels``), and the register tiles they use.

``gather_mm``: rows in parallel. A block of rows sums its outputs in registers (one
accumulator per row and feature tile, ``accumulate_in_registers``) while the reduction over
``D1`` runs outside the rows of the block, so the block's fused multiply-adds are independent
chains instead of one chain per row; the feature tile is vectorised. The block's relation
indices are copied first (``cache_read``) into a small local array, so that the loop over
``D1`` does not reload them behind the test for the last, partial block.

``relation_outer`` (the weight gradient): relations in parallel; for each relation, a tile of
``D1`` sums ``tile x D2`` outer-product entries in registers while the relation's rows are
walked once per tile. Where those rows are scattered over ``a`` (``gather_mm`` with unsorted
indices) the walk prefetches the rows ``GATHER_PREFETCH`` ahead (``transform.prefetch``):
measured on one core at N = 20000, D1 = 128, D2 = 16, that takes float32 from 1.19 to 0.70 ms
and float64 from 4.9 to 2.8 ms (8 ahead: 0.74 and 3.4 ms); for rows in order it gains
nothing, and is left out.

A feature tile is all of ``D2`` when it takes at most four 512-bit vectors, else the widest
of those that divides ``D2``; with no such tile the feature loop stays as it is (correct, not
vectorised). bfloat16 and float16 products sum in float32 accumulators (``widen``), so their
tiles are sized by float32's 4 bytes; with no tile, each output element still sums in a
float32 scalar of its own. Accumulators take at most ``ACCUMULATORS`` vectors: measured at N = 20000 on one
core (AMD EPYC, AVX-512), 16 vectors run up to 2x slower than 8 (LLVM no longer keeps them in
registers), and 8 are as fast as or faster than fewer, up to 1.2x faster than one row at a
time for ``D1`` = 128.

Example
-------
>>> from sparsetir.schedule.typed import feature_tile, register_rows
>>> feature_tile(16, 4), feature_tile(96, 4), feature_tile(100, 8)
(16, 32, 0)
>>> register_rows(16, 4), register_rows(16, 8), register_rows(64, 4)
(8, 4, 2)
"""

from __future__ import annotations

import tvm

from ..ir.attrs import PREFETCH_ANNOTATION
from .operators import accumulate_in_registers
from .widen import stores_half, widen_accumulators

VECTOR_BYTES = 64
TILE_VECTORS = 4
ACCUMULATORS = 8
GATHER_PREFETCH = 16


def feature_tile(size: int, itemsize: int) -> int:
    """Lanes of the vectorised feature tile for ``size`` features of ``itemsize`` bytes; 0
    when no tile fits (see the module docstring)."""
    widest = TILE_VECTORS * VECTOR_BYTES // itemsize
    if 0 < size <= widest:
        return size
    return next((lanes for lanes in (widest, widest // 2, widest // 4)
                 if size % lanes == 0), 0)


def register_rows(lanes: int, itemsize: int) -> int:
    """How many rows (or ``D1`` entries) of ``lanes`` features share the registers at once:
    ``ACCUMULATORS`` vectors in all."""
    vectors = -(-lanes * itemsize // VECTOR_BYTES)
    return max(1, ACCUMULATORS // vectors)


def schedule_gather_mm_cpu(mod: tvm.IRModule, d2: int, itemsize: int) -> tvm.IRModule:
    """Blocks of rows in parallel, each block's feature tiles summed in registers."""
    sch = tvm.s_tir.Schedule(mod)
    update = sch.get_sblock("gather_mm0")
    rows, relation, features, reduction = sch.get_loops(update)
    lanes = feature_tile(d2, itemsize)
    if not lanes:
        sch.parallel(rows)
        if stores_half(sch, update):
            sch.reorder(features, relation)
            sch.reverse_compute_at(sch.cache_write(update, 0, "global"), features)
            sch.decompose_reduction(update, relation)
        return widen_accumulators(sch.mod)
    blocks, row = sch.split(rows, [None, register_rows(lanes, itemsize)])
    sch.reorder(row, relation, reduction, features)    # the helper splits features last
    sch.parallel(blocks)
    accumulate_in_registers(sch, update, [relation, reduction, row], features, lanes)
    sch.unroll(row)
    reads = [region.source.name for region in sch.get(update).reads]
    sch.compute_at(sch.cache_read(update, reads.index("R_indices"), "global"), blocks)
    return widen_accumulators(sch.mod)



def schedule_relation_outer_cpu(mod: tvm.IRModule, d1: int, d2: int, itemsize: int,
                                gathered: bool = False) -> tvm.IRModule:
    """Relations in parallel; ``D1`` tiles of outer-product sums in registers. ``gathered``:
    a relation's rows are scattered over ``a`` and ``g`` (``gather_mm`` with unsorted
    indices), so the loop over them prefetches the rows ``GATHER_PREFETCH`` ahead."""
    sch = tvm.s_tir.Schedule(mod)
    (relations,) = sch.get_loops(sch.get_sblock("relation_outer0"))
    update = sch.get_sblock("relation_outer1")
    rows, entries, features = sch.get_loops(update)
    sch.parallel(relations)
    if gathered:
        sch.annotate(rows, PREFETCH_ANNOTATION, GATHER_PREFETCH)
    lanes = feature_tile(d2, itemsize)
    if not lanes:
        if stores_half(sch, update):
            sch.reorder(entries, features, rows)
            sch.reverse_compute_at(sch.cache_write(update, 0, "global"), features)
            sch.decompose_reduction(update, rows)
        return widen_accumulators(sch.mod)
    tile = register_rows(lanes, itemsize)
    while d1 % tile:            # a tile that divides D1: no test in the loop over rows
        tile //= 2
    entry_tiles, entry = sch.split(entries, [None, tile])
    sch.reorder(entry_tiles, rows, entry)
    accumulate_in_registers(sch, update, [rows, entry], features, lanes)
    sch.unroll(entry)
    return widen_accumulators(sch.mod)
