"""CPU schedules of the generalised operators (``ops.generic_kernels``).

Both walk row tiles in parallel, as the ``spmm``/``sddmm`` schedules do (``operators``).
``gspmm``: the feature loops are fused into one, and when a register tile divides it
(``operators.spmm_lanes``) each tile of the output row is reduced in vector registers while
the row's in-edges are walked, whatever the reduction (sum, max, min). ``gsddmm``: the fused
feature loop is vectorised by register tiles; a ``dot`` sums its last dimension in a register.
A bfloat16 or float16 output's running value is always kept in a buffer of its own (a scalar
where no register tile fits), held in float32 (``widen``): a sum is rounded once, at its store.
A half-precision ``dot`` widens the operand of the row (the same for every edge of the row) once
per row, into a float32 row of its own, instead of at every edge: LLVM does not hoist the
conversion out of the edge loop. bfloat16 SDDMM, 2 threads, whole calls (medians of 200,
two runs each, idle Intel VM): at 64 features facebook 0.57-0.58 -> 0.49-0.50 ms, email-Enron
1.38-1.43 -> 1.21-1.26, pubmed 0.63-0.66 -> 0.62; at 32 features 0-10% (facebook 0.40 -> 0.36).

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.ops.generic_kernels import gspmm_kernel
>>> func = gspmm_kernel("copy_lhs", "sum", "float32", (16,), (True,), (True,))
>>> mod = schedule_gspmm_cpu(sparsetir.lower_sparse_iter(func))
>>> kernel = sparsetir.build(mod, "llvm", schedule="none", cache=True)
>>> [p.name for p in kernel.signature.params]
['x', 'y', 'tile_ptr', 'rows', 'indptr', 'indices', 't', 'm', 'n', 'nnz']
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> tile_ptr, rows = np.int32([0, 6]), np.arange(6, dtype=np.int32)     # one row tile
>>> kernel(X, Y, tile_ptr, rows, A.indptr, A.indices, 1, 6, 5, A.nnz)
>>> np.allclose(Y, (A != 0).astype(np.float32) @ X)      # copy_lhs, sum
True
"""

from __future__ import annotations

import tvm
import tvm_ffi

from ..ir.attrs import PREFETCH_ANNOTATION
from ..ir.utils import uses_var
from .operators import accumulate_in_registers, spmm_lanes
from .widen import HALF_DTYPES, stores_half, widen_accumulators


def _fused_features(sch, loops: list):
    """The feature loops as one loop (None when there are none)."""
    if not loops:
        return None
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


def _tile_lanes(sch, loops: list) -> int:
    """The register tile of the fused feature loops: one that divides the innermost block,
    so a tile never crosses into the next index of an outer block (an operand broadcast over
    the inner block reads one value per outer index; TVM's vectoriser gets a tile that
    crosses wrong: ``(n, H, F)`` against ``(nnz, H, 1)`` with F = 12 gave wrong sums)."""
    return spmm_lanes(int(sch.get(loops[-1]).extent)) if loops else 1



def schedule_gspmm_cpu(mod: tvm.IRModule, block: str = "gspmm",
                       prefetch: int = 0) -> tvm.IRModule:
    """Row tiles in parallel; the in-edge loop reduces register tiles of the fused feature
    loop when a tile divides it (``block``: the kernel's name, ``gspmm`` or ``gspmm_arg``);
    with ``prefetch``, the in-edge loop prefetches the source rows it gathers that many edges
    ahead (``operators.prefetch_distance``)."""
    sch = tvm.s_tir.Schedule(mod)
    (tiles,) = sch.get_loops(sch.get_sblock(f"{block}0"))
    update = sch.get_sblock(f"{block}2")
    edges, *features = sch.get_loops(update)
    sch.parallel(tiles)
    if prefetch:
        sch.annotate(edges, PREFETCH_ANNOTATION, prefetch)
    lanes = _tile_lanes(sch, features)
    fused = _fused_features(sch, features)
    if block != "gspmm":
        return sch.mod
    if fused is not None and lanes > 1:
        accumulate_in_registers(sch, update, [edges], fused, lanes)
    elif stores_half(sch, update):          # one scalar running value per output element
        if fused is not None:
            sch.reorder(fused, edges)
        accumulator = sch.cache_write(update, 0, "global")
        if fused is not None:
            sch.reverse_compute_at(accumulator, fused)
        sch.decompose_reduction(update, edges)
    return widen_accumulators(sch.mod)


WIDENED_ROW_LIMIT = 4096
"""The most values of a row a half-precision ``dot`` widens into a buffer of its own (16 KiB of
float32 on the stack of the thread that runs the row); a longer row is widened where it is read."""


def _widen_row_operand(sch, update, edges) -> None:
    """Read ``update``'s half-precision operands whose region does not depend on the edge
    (the iteration of the ``edges`` loop) through a buffer filled before that loop
    (``cache_read``: the row's part, in the row's block), which ``widen_accumulators`` then
    holds in float32; rows of more than ``WIDENED_ROW_LIMIT`` values are left alone."""
    block = sch.get(update)
    extent = sch.get(edges).extent
    edge = next(iv.var for iv in block.iter_vars
                if tvm_ffi.structural_equal(iv.dom.extent, extent))
    rows = [index for index, read in enumerate(block.reads)
            if str(read.source.dtype) in HALF_DTYPES and _row_values(read) <= WIDENED_ROW_LIMIT
            and not any(uses_var(r.min, edge) or uses_var(r.extent, edge) for r in read.region)]
    for index in reversed(rows):        # cache_read keeps the other reads' positions
        sch.cache_read(update, index, "global")


def _row_values(read) -> float:
    """The values of one row of the buffer ``read`` reads (its shape past the first axis;
    infinite when a size is not a constant)."""
    sizes = read.source.shape[1:]
    if not all(isinstance(size, tvm.tirx.IntImm) for size in sizes):
        return float("inf")
    count = 1
    for size in sizes:
        count *= int(size)
    return count


def schedule_gsddmm_cpu(mod: tvm.IRModule, dot: bool, prefetch: int = 0) -> tvm.IRModule:
    """Row tiles in parallel; the fused feature loop vectorised by register tiles; a dot's
    sum starts from a zero moved out of its loop, so it stays in a register; with
    ``prefetch``, the edge loop prefetches the source rows it gathers that many edges ahead."""
    sch = tvm.s_tir.Schedule(mod)
    (tiles,) = sch.get_loops(sch.get_sblock("gsddmm0"))
    update = sch.get_sblock("gsddmm2")
    edges, *loops = sch.get_loops(update)
    sch.parallel(tiles)
    if prefetch:
        sch.annotate(edges, PREFETCH_ANNOTATION, prefetch)
    if dot:
        _widen_row_operand(sch, update, edges)
        if stores_half(sch, update):
            sch.reverse_compute_at(sch.cache_write(update, 0, "global"),
                                   sch.get_loops(update)[-2])
        sch.decompose_reduction(update, loops[-1])
        return widen_accumulators(sch.mod)
    lanes = _tile_lanes(sch, loops)
    fused = _fused_features(sch, loops)
    if fused is not None:
        if lanes > 1:
            sch.vectorize(sch.split(fused, [None, lanes])[1])
    return sch.mod
