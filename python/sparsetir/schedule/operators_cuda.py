"""CUDA schedules for the ``sparsetir.ops`` kernels, and the cost model that sizes them.

Each schedule takes the Stage II module of a kernel in ``kernels.CUDA_KERNELS``
(``lower_sparse_iter`` of it, feature size specialised) and schedules it with TVM's checked
primitives.

**SpMM** (``spmm``, ``spmm_unweighted``; CSR row split). Each row goes to a group of ``lanes``
threads (``threadIdx.x``; a warp when the feature size allows), ``rows`` groups per block
(``threadIdx.y``), blocks over the rows (``blockIdx.x``); the walk of a row is unrolled by
``ROW_UNROLL`` nonzeros (guarded), so that a warp has several gathered rows in flight. Lane
``t`` of group ``g`` owns the contiguous features
``g * lanes * chunks * vec + (t * chunks + c) * vec + v`` for ``c < chunks``, ``v < vec``:
each nonzero costs
``chunks`` loads of X, ``vec`` wide (``float4`` when ``vec`` is 4) and coalesced over the lanes
when ``chunks`` is 1, and the lane's features accumulate in registers (``cache_write`` to
``local``) while the row is walked, written back with ``vec``-wide stores. (A lane's features
are contiguous because the write-back covers one interval of the row per lane.) Past 128
features a row goes to ``groups`` warps (``threadIdx.z``), each walking it for 128 features of
its own, so that every load is one coalesced ``float4`` per lane (H200, 256 features: faster in
every case of the run; the whole call with segments, e.g. email-Enron 0.68x -> 1.08x,
facebook 1.12x -> 1.30x cuSPARSE).

**SpMM over row segments** (``spmm_segments``, ``spmm_unweighted_segments``): the same, a
segment (at most ``max_nnz`` nonzeros of one row, ``sparsetir.format.row_segments``) in place of
a row, so that no warp walks a long row alone; the output is zeroed by a launch of its own
(``vec``-wide stores: scalar ones took 104 us of the 507 us call on the arxiv-size graph at 256
features, ``ncu``) and each segment's register sum is added to its row with one atomic add per
feature, or stored where the segment is its row's only one (``seg_rows`` must never decrease;
the call checks it).

**SDDMM** (``sddmm_fused``; edge-parallel). Each nonzero goes to a group of ``lanes`` threads
(``threadIdx.x``), ``rows`` nonzeros per block (``threadIdx.y``). The group finds the nonzero's
row (the binary search ``sddmm_fused`` lowers to, moved into the thread with ``compute_at``),
each lane multiplies its ``chunks`` x ``vec`` features of X's row and Y's column with
``vec``-wide loads into ``vec`` partial sums (``rfactor`` over the lane-and-vector axis), and the
partial sums are added across the lanes by a reduction over ``threadIdx.x``, which TVM lowers to
warp shuffles (``__shfl_down_sync``). The result goes through a local buffer (``cache_write``),
so that TVM guards the store by the lane and the nonzero bound (``tx == 0 and p < nnz``): written
straight to global memory, TVM 0.27 drops the single-clause bound from the reduction's
write-back and the last block would store past the end of ``out``.

**SDDMM over row segments** (``sddmm_segments``): a segment to a group of lanes instead of a
nonzero; the group reads the segment's row from ``seg_rows`` once and walks its nonzeros, each
dot product reduced by shuffles as above. No search per nonzero (17 dependent loads on a graph
of 132k rows) and every result written once: H200, segments of 32, 2.0-2.6x cuSPARSE on the
proteins-size graph where the searching kernel was 0.41-0.73x.

**Cost model** (``spmm_layout``, ``sddmm_layout``; ``F`` the feature size): ``lanes`` is a power
of two dividing ``F`` (no lane is ever idle or masked), ``vec`` the widest of 4, 2, 1 dividing
what is left, and every block holds ``THREADS_PER_BLOCK`` threads
(``rows = 256 // (groups * lanes)``).
SpMM takes the most lanes first (up to a warp, so one row is one warp from ``F = 32`` on: a row
can hold many nonzeros, and lanes are what walks it in parallel), then ``vec``. SDDMM takes the
widest ``vec`` first, then up to 32 lanes: a nonzero's dot product is only ``F`` long, and fewer
lanes per nonzero means fewer shuffle steps and more nonzeros per warp for the same bytes loaded.

Vector accesses need the dense operands and the SpMM output to start at a multiple of
``4 * vec`` bytes (every row then does, ``F`` being a multiple of ``vec``). Fresh torch CUDA
tensors do (256-byte aligned); a view starting inside another tensor may not: ``build`` records
the width of every vector access in the kernel's signature (``with_vector_alignment``), and the
call stages such a view into an aligned copy.

Example
-------
>>> spmm_layout(256), spmm_layout(32), spmm_layout(1)
(Layout(lanes=32, vec=4, chunks=1, rows=4, groups=2), \
Layout(lanes=32, vec=1, chunks=1, rows=8, groups=1), \
Layout(lanes=1, vec=1, chunks=1, rows=256, groups=1))
>>> sddmm_layout(32), sddmm_layout(256)
(Layout(lanes=8, vec=4, chunks=1, rows=32, groups=1), \
Layout(lanes=32, vec=4, chunks=2, rows=8, groups=1))
>>> import sparsetir
>>> from sparsetir.ops import kernels
>>> mod = sparsetir.lower_sparse_iter(kernels.spmm.specialize({"feat_size": 256}))
>>> scheduled = schedule_spmm_cuda(mod, 256)
>>> [line.strip() for line in scheduled.script().splitlines() if "thread_binding" in line]
['for i_0 in T.thread_binding((m + 3) // 4, thread="blockIdx.x"):', \
'for i_1 in T.thread_binding(4, thread="threadIdx.y"):', \
'for k_0 in T.thread_binding(2, thread="threadIdx.z"):', \
'for k_1 in T.thread_binding(32, thread="threadIdx.x"):']
>>> kernel = sparsetir.build(scheduled, "cuda", schedule="none", cache=True)  # nvcc, no GPU
"""

from __future__ import annotations

from typing import NamedTuple

import tvm

from ..ir.attrs import LOWERED_LOOPS_ATTR
from .accumulator import add_into_output
from .segment_stores import store_single_segments
from ..errors import SparseTIRValueError

WARP_SIZE = 32
ROW_UNROLL = 4
"""Nonzeros a CSR row's walk takes per unrolled step: a warp then has several gathered rows in
flight. H200, the same run: faster in all 24 weighted cases (6 graphs x 32-256 features),
geomean 0.49x -> 0.64x cuSPARSE's speed (``docs/benchmark.md``)."""
SEGMENT_UNROLL = 1
"""The same for row segments, which hold few nonzeros: unrolled by 4, faster in 15 of 24 cases
and slower in 9 (segments of 32), geomean 1.61x -> 1.65x: no clear gain, left off."""
THREADS_PER_BLOCK = 256
MAX_GROUPS = 4
"""At most this many warps share a row's features (``Layout.groups``): a block then still
holds two rows. Measured on an H200 with 2 (256 features) only."""
VECTOR_WIDTHS = (4, 2, 1)


class Layout(NamedTuple):
    """How a feature loop of ``groups * lanes * vec * chunks`` features is spread over threads,
    and how many rows (SpMM) or nonzeros (SDDMM) one block of ``THREADS_PER_BLOCK`` threads
    takes. ``groups`` (``threadIdx.z``) split a row's features between that many groups of
    lanes, each with its own interval of ``lanes * vec * chunks`` features."""

    lanes: int
    vec: int
    chunks: int
    rows: int
    groups: int = 1


def _widest_vector(count: int) -> int:
    return next(width for width in VECTOR_WIDTHS if count % width == 0)


def _lanes(count: int) -> int:
    """The largest power of two dividing ``count``, at most a warp."""
    return min(WARP_SIZE, count & -count)


def _layout(feat_size: int, lanes: int, vec: int, groups: int = 1) -> Layout:
    return Layout(lanes, vec, feat_size // (groups * lanes * vec),
                  THREADS_PER_BLOCK // (groups * lanes), groups)


def spmm_layout(feat_size: int) -> Layout:
    """The SpMM layout: as many lanes as divide ``feat_size`` (up to 32), then vectors; past
    one warp of ``float4`` (128 features), groups of such warps (a power of two, at most
    ``MAX_GROUPS``) rather than chunks, the rest in chunks."""
    lanes = _lanes(feat_size)
    vec = _widest_vector(feat_size // lanes)
    warps = feat_size // (lanes * vec)
    full_warp = lanes * vec == WARP_SIZE * VECTOR_WIDTHS[0]
    return _layout(feat_size, lanes, vec, min(warps & -warps, MAX_GROUPS) if full_warp else 1)


def sddmm_layout(feat_size: int) -> Layout:
    """The SDDMM layout: the widest vector dividing ``feat_size``, then lanes (up to 32)."""
    vec = _widest_vector(feat_size)
    return _layout(feat_size, _lanes(feat_size // vec), vec)


def _expect(mod: tvm.IRModule, loops: dict, kernel: str) -> None:
    """Refuse a module that is not the Stage II form of ``kernels.CUDA_KERNELS[kernel]``."""
    found = {name: list(names) for name, names in mod["main"].attrs[LOWERED_LOOPS_ATTR].items()}
    if found != loops:
        raise SparseTIRValueError(f"the CUDA {kernel} schedule takes lower_sparse_iter of "
                         f"kernels.CUDA_KERNELS[{kernel!r}] (loops {loops}), not loops {found}")


def schedule_spmm_cuda(mod: tvm.IRModule, feat_size: int,
                       unroll: int = ROW_UNROLL) -> tvm.IRModule:
    """CSR row split (see the module docstring) of ``spmm`` or ``spmm_unweighted``, the walk
    of a row unrolled ``unroll`` nonzeros at a time."""
    _expect(mod, {"spmm0": ["i"], "spmm1": ["j", "k"]}, "spmm")
    layout = spmm_layout(feat_size)
    sch = tvm.s_tir.Schedule(mod)
    write_back, _ = _rows_to_warps(sch, layout, unroll)
    sch.vectorize(sch.split(sch.get_loops(write_back)[-1], [None, layout.vec])[1])
    return sch.mod


def schedule_spmm_segments_cuda(mod: tvm.IRModule, feat_size: int,
                                unroll: int = SEGMENT_UNROLL) -> tvm.IRModule:
    """Row segments (``spmm_segments``, ``spmm_unweighted_segments``) as CSR rows: each
    segment to a group of lanes summing in registers, the sum added to its output row with one
    atomic add per feature (``accumulator.add_into_output``), or stored where the segment is its
    row's only one (``segment_stores``: the call then checks that ``seg_rows`` never
    decreases); the zeroing nest before it, one ``vec``-wide store of the output per
    thread."""
    _expect(mod, {"spmm0": ["o", "i"], "spmm1": ["j", "k"], "zero0": ["i", "k"]},
            "spmm_segments")
    sch = tvm.s_tir.Schedule(mod)
    layout = spmm_layout(feat_size)
    _, nonzeros = _rows_to_warps(sch, layout, unroll)
    init = sch.decompose_reduction(sch.get_sblock("spmm1"), nonzeros)
    rows, features = sch.get_loops("zero0")
    features, vector = sch.split(features, [None, layout.vec])
    block_x, thread_x = sch.split(sch.fuse(rows, features), [None, THREADS_PER_BLOCK])
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_x, "threadIdx.x")
    sch.vectorize(vector)
    return store_single_segments(add_into_output(sch.mod, [sch.get(init).name_hint]))


def _rows_to_warps(sch: tvm.s_tir.Schedule, layout: Layout, unroll: int = 1):
    """Bind the rows of ``spmm0`` (its first loop) to blocks and ``threadIdx.y``, the features
    of ``spmm1`` to lanes walking the row with ``vec``-wide loads, ``unroll`` nonzeros per
    unrolled step, summed in a local cache; returns the cache's write-back block (in the lane
    loop) and the loop over the row's (steps of) nonzeros."""
    update = sch.get_sblock("spmm1")
    rows = sch.get_loops(sch.get_sblock("spmm0"))[0]
    block_x, thread_y = sch.split(rows, [None, layout.rows])
    nonzeros, features = sch.get_loops(update)[-2:]
    group, lane, chunks, vector = sch.split(
        features, [layout.groups, layout.lanes, layout.chunks, layout.vec])
    sch.reorder(group, lane, nonzeros, chunks, vector)
    if unroll > 1:
        nonzeros, unrolled = sch.split(nonzeros, [None, unroll])
        sch.unroll(unrolled)
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_y, "threadIdx.y")
    if layout.groups > 1:
        sch.bind(group, "threadIdx.z")
    sch.bind(lane, "threadIdx.x")
    sch.vectorize(vector)
    write_back = sch.cache_write(update, 0, "local")
    sch.reverse_compute_at(write_back, lane, preserve_unit_loops=True)
    return write_back, nonzeros


def schedule_sddmm_cuda(mod: tvm.IRModule, feat_size: int) -> tvm.IRModule:
    """Edge-parallel SDDMM with a warp-shuffle reduction (see the module docstring) of
    ``sddmm_fused``."""
    _expect(mod, {"sddmm0_search0": ["j"], "sddmm0": ["j", "k"]}, "sddmm")
    layout = sddmm_layout(feat_size)
    sch = tvm.s_tir.Schedule(mod)
    dot = sch.get_sblock("sddmm0")
    search = sch.get_sblock("sddmm0_search0")
    partial, nonzeros = _dot_over_lanes(sch, dot, layout)
    block_x, thread_y = sch.split(nonzeros, [None, layout.rows])
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_y, "threadIdx.y")
    result = sch.cache_write(dot, 0, "local")
    sch.reverse_compute_at(result, thread_y)
    sch.compute_at(partial, thread_y, preserve_unit_loops=True)
    sch.compute_at(search, thread_y)
    sch.set_scope(search, 0, "local")
    _vectorize_partial_sums(sch, partial, layout)
    return sch.mod


def schedule_sddmm_segments_cuda(mod: tvm.IRModule, feat_size: int) -> tvm.IRModule:
    """SDDMM over row segments (``sddmm_segments``): each segment to a group of lanes, as
    ``schedule_sddmm_cuda`` gives a nonzero, which walks the segment's nonzeros one after
    another, each dot product summed over the lanes by warp shuffles; the row comes from
    ``seg_rows``, not from a search. The sum is staged (``reindex``) before ``rfactor`` in a
    buffer indexed by the nonzero's place in its segment: factored on a block that writes
    ``out[seg_ptr[o] + j]`` itself, the per-thread partial sums would be indexed by that
    position, which TVM cannot bound from below, and would sit in local memory instead of
    registers."""
    _expect(mod, {"sddmm0": ["o", "i"], "sddmm1": ["j", "k"]}, "sddmm_segments")
    layout = sddmm_layout(feat_size)
    sch = tvm.s_tir.Schedule(mod)
    dot = sch.get_sblock("sddmm1")
    segments = sch.get_loops(sch.get_sblock("sddmm0"))[0]
    result = sch.reindex(dot, ("write", 0))
    sch.set_scope(dot, 0, "local")
    partial, nonzeros = _dot_over_lanes(sch, dot, layout)
    block_x, thread_y = sch.split(segments, [None, layout.rows])
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_y, "threadIdx.y")
    sch.reverse_compute_at(result, nonzeros)
    sch.compute_at(partial, nonzeros, preserve_unit_loops=True)
    _vectorize_partial_sums(sch, partial, layout)
    return sch.mod


def _dot_over_lanes(sch: tvm.s_tir.Schedule, dot, layout: Layout) -> tuple:
    """Split the feature loop of ``dot`` (its last) into ``chunks`` x ``lanes * vec``, factor
    the sum over lanes and vectors into ``local`` partial sums (``rfactor``) and bind the
    lanes of the final sum to ``threadIdx.x`` (TVM lowers it to warp shuffles); returns the
    partial-sum block and ``dot``'s loop over nonzeros."""
    features = sch.get_loops(dot)[-1]
    _, lane_vector = sch.split(features, [layout.chunks, layout.lanes * layout.vec])
    partial = sch.rfactor(lane_vector, factor_axis=0)
    sch.set_scope(partial, 0, "local")
    nonzeros, lane_vector = sch.get_loops(dot)[-2:]
    sch.bind(sch.split(lane_vector, [layout.lanes, layout.vec])[0], "threadIdx.x")
    return partial, nonzeros


def _vectorize_partial_sums(sch: tvm.s_tir.Schedule, partial, layout: Layout) -> None:
    """The partial sums, moved under their nonzero, over lanes (``threadIdx.x``), each lane
    ``chunks`` steps of ``vec``-wide loads."""
    lane_vector, unit, chunks = sch.get_loops(partial)[-3:]
    lane, vector = sch.split(lane_vector, [layout.lanes, layout.vec])
    sch.reorder(lane, unit, chunks, vector)
    sch.bind(lane, "threadIdx.x")
    sch.vectorize(vector)


CUDA_SCHEDULES = {"spmm": schedule_spmm_cuda, "spmm_unweighted": schedule_spmm_cuda,
                  "sddmm": schedule_sddmm_cuda,
                  "spmm_segments": schedule_spmm_segments_cuda,
                  "spmm_unweighted_segments": schedule_spmm_segments_cuda,
                  "sddmm_segments": schedule_sddmm_segments_cuda}
"""The CUDA schedule of each kernel of ``kernels.CUDA_KERNELS``, by its name there."""
