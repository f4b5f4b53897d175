"""The hyb SpMM of ``sparsetir.ops``: the CSR kernel decomposed into column partitions x ELL
buckets by ``format_decompose``, its sub-kernels fused into one parallel loop over row tiles.

``HybLayout.of(matrix, parts, widths, tiles)`` converts a ``SparseMatrix`` once
(``column_part_hyb``; row tiles cut where the nonzeros are balanced, the same rows in every
bucket); ``hyb_kernel`` builds (or fetches from the cache) the decomposed kernel for a feature
size; ``HybLayout.arguments`` lays out a call, after ``check_tiles`` has made sure that no two
threads of the CPU kernel add into one row. ``schedule_hyb_cuda`` gives the same function a
GPU schedule (one launch after horizontal fusion, atomic adds).

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.ops import SparseMatrix
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> M = SparseMatrix(A)
>>> layout = HybLayout.of(M, parts=2, widths=(1, 2), tiles=2)
>>> kernel, func = hyb_kernel(layout.config, feat_size=16)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> kernel(*layout.arguments(func.params, M, X, Y))              # Y = A @ X
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import tvm

from ..format import check_csr, column_part_hyb
from ..schedule import default_schedule
from ..lower import lower_sparse_iter
from ..stage1.format_decompose import format_decompose, remove_preprocess
from ..schedule.accumulator import start_from_output
from ..stage1.hyb import ell_bucket_rule
from ..driver.build_module import build
from ..ir.attrs import (ATOMIC_ANNOTATION, FUSE_ANNOTATION, PREFETCH_ANNOTATION,
                        TILE_ROWS_ANNOTATION)
from .kernels import spmm
from ..schedule.operators import accumulate_in_registers, schedule_zeroing, spmm_lanes
from ..errors import SparseTIRValueError


@dataclass(frozen=True)
class HybConfig:
    """The shape of a hyb decomposition: column partitions, bucket widths, row tiles."""
    parts: int
    widths: tuple
    tiles: int

    def rule_names(self) -> list:
        return [f"p{p}b{b}" for p in range(self.parts) for b in range(len(self.widths))]


def hyb_function(config: HybConfig, feat_size: int):
    """The decomposed Stage I function (compute only) for ``feat_size`` features."""
    rules = [ell_bucket_rule(name, config.widths[index % len(config.widths)], config.tiles)
             for index, name in enumerate(config.rule_names())]
    compute = remove_preprocess(format_decompose(spmm, rules))
    return compute.specialize({"feat_size": feat_size})


def schedule_hyb_cpu(mod: tvm.IRModule, config: HybConfig, prefetch: int = 0) -> tvm.IRModule:
    """Every bucket's loop over row tiles in parallel, marked for horizontal fusion and as
    owning its tile's rows (``TILE_ROWS_ANNOTATION``: ``build(..., horizontal_fuse=True)`` then
    merges them without atomics, so call the kernel through ``hyb_kernel`` or with
    ``HybLayout.arguments``, which check the tiles), and, as in the CSR
    kernel (``schedules.schedule_spmm_cpu``), each register tile of an output row summed in a
    row-local accumulator: loaded from Y (earlier buckets added into it,
    ``transform.accumulator``), walked over the row's ELL entries, written back once. With
    ``prefetch``, the loop over a row's entries prefetches the X rows that many entries
    ahead. The zeroing nest runs its rows in parallel, its features vectorised."""
    sch = tvm.s_tir.Schedule(mod)
    inits = []
    for name in config.rule_names():
        tile = sch.get_sblock(f"spmm_{name}0")
        update = sch.get_sblock(f"spmm_{name}1")
        _, entries, features = sch.get_loops(update)[-3:]
        lanes = spmm_lanes(int(sch.get(features).extent))
        if prefetch:
            sch.annotate(entries, PREFETCH_ANNOTATION, prefetch)
        sch.parallel(sch.get_loops(tile)[0])
        sch.annotate(tile, FUSE_ANNOTATION, True)
        sch.annotate(tile, TILE_ROWS_ANNOTATION, True)        # check_tiles makes it true
        if lanes > 1:
            init = accumulate_in_registers(sch, update, [entries], features, lanes)
            inits.append(sch.get(init).name_hint)
    schedule_zeroing(sch)
    return start_from_output(sch.mod, inits) if inits else sch.mod


def schedule_hyb_cuda(mod: tvm.IRModule, config: HybConfig) -> tvm.IRModule:
    """Every bucket: row tiles to ``blockIdx.x``, features to ``threadIdx.x``, adds atomic (a
    row's parts in other buckets and partitions run in other blocks at the same time); the
    zeroing nest gets the default CUDA schedule. Build with ``horizontal_fuse=True`` for one
    launch."""
    sch = tvm.s_tir.Schedule(mod)
    for name in config.rule_names():
        (tiles,) = sch.get_loops(sch.get_sblock(f"spmm_{name}0"))
        update = sch.get_sblock(f"spmm_{name}1")
        rows, nonzeros, features = sch.get_loops(update)
        sch.reorder(features, rows, nonzeros)
        sch.bind(tiles, "blockIdx.x")
        sch.bind(features, "threadIdx.x")
        sch.annotate(update, ATOMIC_ANNOTATION, True)
        sch.annotate(sch.get_sblock(f"spmm_{name}0"), FUSE_ANNOTATION, True)
    return default_schedule(sch.mod, "cuda").mod


def hyb_kernel(config: HybConfig, feat_size: int, target: str = "llvm", prefetch: int = 0):
    """``(kernel, func)``: the compiled hyb SpMM (CPU, horizontally fused), from the kernel
    cache, with its row tiles checked at every validated call (``check_tiles``), and the Stage
    I function it was made from (its ``params`` order the call's arguments,
    ``HybLayout.arguments``); ``prefetch`` as in ``schedule_hyb_cpu``."""
    func = hyb_function(config, feat_size)
    scheduled = schedule_hyb_cpu(lower_sparse_iter(func), config, prefetch)
    kernel = build(scheduled, target, schedule="none", horizontal_fuse=True, cache=True)
    reads = [f"{array}_{name}" for name in config.rule_names() for array in ("tile_ptr", "rows")]
    return kernel.with_argument_check(functools.partial(_check_tiles, config),
                                      [*reads, "m"]), func


def _check_tiles(config: HybConfig, arguments: dict) -> None:
    """``check_tiles`` as a hyb kernel's argument check (a module-level function: it pickles)."""
    check_tiles(config, arguments, arguments["m"])


@dataclass
class HybLayout:
    """A matrix converted for one ``HybConfig``: the arrays of every bucket."""
    config: HybConfig
    arrays: dict

    @classmethod
    def of(cls, matrix, parts: int, widths: tuple, tiles: int) -> "HybLayout":
        m, n = matrix.shape
        config = HybConfig(parts, tuple(widths), tiles)
        hyb = column_part_hyb(m, n, matrix.storage("indptr"), matrix.storage("indices"),
                              parts, list(widths), data=matrix.storage("data"))
        bounds, _ = matrix.row_tiles(tiles)      # the same rows per tile in every bucket
        arrays = {}
        for name, bucket in zip(config.rule_names(), [b for part in hyb for b in part]):
            suffix = f"_{name}"
            arrays.update({
                "a" + suffix: bucket.data, "rows" + suffix: bucket.row_indices,
                "cols" + suffix: bucket.col_indices, "mask" + suffix: bucket.mask,
                "tile_ptr" + suffix: np.searchsorted(bucket.row_indices, bounds)
                .astype(np.int32),
                "nrows" + suffix: int(bucket.row_indices.size)})
        return cls(config, arrays)

    def arguments(self, params, matrix, x, y) -> list:
        """The call arguments of the hyb kernel, by parameter name, after checking that its
        row tiles are safe to run in parallel (``check_tiles``)."""
        m, n = matrix.shape
        check_tiles(self.config, self.arrays, m)
        values = dict(self.arrays, a=matrix.storage("data"), x=x, y=y,
                      indptr=matrix.storage("indptr"), indices=matrix.storage("indices"),
                      m=m, n=n, nnz=matrix.nnz)
        return [values[p.name] for p in params]


def check_tiles(config: HybConfig, arrays: dict, num_rows: int) -> None:
    """Refuse (``ValueError`` naming ``tile_ptr_<bucket>``) row tiles under which two threads
    of the CPU hyb kernel would add into one output row.

    The kernel runs tile ``t`` of every bucket in one thread, adding into ``Y`` without
    atomics (``schedule_hyb_cpu``), so every row must be in one tile only: the same tile in
    every bucket, and all the ELL rows (pieces) of a long row in the same tile. Tiles cut at
    the same rows in every bucket (``HybLayout.of``, or ``sparsetir.format.row_tiles`` with one
    ``tile_rows``) are. Each ``tile_ptr_<bucket>`` is also checked to be a pointer array of
    ``config.tiles + 1`` entries over its bucket's ``rows_<bucket>``.

    Example
    -------
    >>> import scipy.sparse
    >>> from sparsetir.ops import SparseMatrix
    >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32,
    ...                         random_state=0)
    >>> layout = HybLayout.of(SparseMatrix(A), parts=2, widths=(1, 2), tiles=2)
    >>> check_tiles(layout.config, layout.arrays, 6)       # as arguments() does: tiles safe
    >>> layout.arrays["rows_p0b1"].tolist(), layout.arrays["tile_ptr_p0b1"].tolist()
    ([4, 5, 5], [0, 1, 3])
    >>> bad = dict(layout.arrays, tile_ptr_p0b1=np.int32([0, 2, 3]))   # row 5 split in two
    >>> check_tiles(layout.config, bad, 6)
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRValueError: tile_ptr_p0b1 puts row 5 in tile 0, but tile 1 writes that row too: ...
    """
    rows_all, tiles_all, bucket_all = [], [], []
    names = config.rule_names()
    for b, name in enumerate(names):
        try:
            tile_ptr, rows = check_csr(arrays["tile_ptr_" + name], arrays["rows_" + name],
                                       (config.tiles, num_rows))
        except ValueError as err:
            raise type(err)(f"tile_ptr_{name} over rows_{name} is no row tiling of "
                            f"{config.tiles} tiles: {err}") from None
        rows_all.append(rows)
        tiles_all.append(np.repeat(np.arange(config.tiles), np.diff(tile_ptr)))
        bucket_all.append(np.full(rows.size, b))
    rows, tiles = np.concatenate(rows_all), np.concatenate(tiles_all)
    owner = np.empty(num_rows, np.int64)
    owner[rows] = tiles                   # one of each row's tiles: all of them when one
    clash = np.flatnonzero(owner[rows] != tiles)
    if clash.size:
        p = int(clash[0])
        row, name = int(rows[p]), names[int(np.concatenate(bucket_all)[p])]
        raise SparseTIRValueError(
            f"tile_ptr_{name} puts row {row} in tile {tiles[p]}, but tile {owner[row]} "
            "writes that row too: the hyb kernel runs every tile in a thread of its own, so "
            "each row must be in one tile, the same in every bucket (cut every bucket's tiles "
            "at the same rows, as HybLayout.of and sparsetir.format.row_tiles do)")
