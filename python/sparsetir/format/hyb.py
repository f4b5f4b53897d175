"""Column-partitioned hybrid format (hyb): CSR split into column ranges, each bucketed as ELL."""

from __future__ import annotations

import numpy as np

from .checks import (as_index, check_csr, check_size, count, floor_div, index_array, index_type,
                     value_array)
from .ell import _ell_pieces, check_buckets
from ..errors import SparseTIRValueError

MAX_BUCKETS = 2**20            # num_col_parts * len(buckets): EllBuckets built one by one


def column_part_hyb(num_rows, num_cols, indptr, indices, num_col_parts, buckets, data=None,
                    idtype=np.int32) -> list:
    """Column-partitioned bucketed ELL, indexed ``[partition][bucket]`` -> ``EllBucket``.

    The columns are cut into ``num_col_parts`` contiguous ranges of
    ``ceil(num_cols / num_col_parts)`` columns (the last ranges may be short or empty).
    Partition ``p`` holds, for every row, the nonzeros whose column is in range ``p``, with
    their GLOBAL column ids; each partition is then bucketed exactly as ``csr_to_ell``
    (a row's length being its count in that partition). Like SparseTIR's
    ``column_part_hyb``, which returns ``(row_indices, col_indices, mask)`` as three nested
    lists; here each ``[p][b]`` is one ``EllBucket`` (``mask`` int8, padding slots repeat
    the row's last real column instead of 0 and hold the value 0, ``data`` filled when
    given). Inputs are checked as ``sparsetir.format.checks`` says; the sizes are
    ``num_rows`` and ``num_cols``, and ``num_col_parts * len(buckets)`` is at most
    ``MAX_BUCKETS`` (2**20).

    Example
    -------
    >>> parts = column_part_hyb(2, 4, [0, 3, 4], [0, 1, 3, 2], 2, [1, 2])
    >>> [[b.row_indices.tolist() for b in part] for part in parts]
    [[[], [0]], [[0, 1], []]]
    >>> parts[0][1].col_indices.tolist(), parts[1][0].col_indices.tolist()
    ([[0, 1]], [[3], [2]])
    """
    idtype = index_type(idtype)
    parts = count("num_col_parts", num_col_parts)
    widths = check_buckets(buckets)
    if parts * widths.size > MAX_BUCKETS:
        raise SparseTIRValueError(f"num_col_parts = {parts} with {widths.size} buckets would build "
                         f"{parts * widths.size} EllBuckets, more than MAX_BUCKETS = 2**20")
    indptr, indices = check_csr(indptr, indices, (num_rows, num_cols), ("num_rows", "num_cols"))
    data = None if data is None else value_array("data", data, indices.size)
    rows, cols = indptr.size - 1, int(num_cols)
    part_size = max(1, -(-cols // parts))
    part_of = floor_div(indices, part_size)
    # Stable, so each (partition, row) run keeps its CSR order; small keys sort by radix.
    key_type = np.int16 if parts < 2 ** 15 else np.int64
    order = np.argsort(part_of.astype(key_type), kind="stable")
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    sorted_part, sorted_row = part_of[order], row_of[order]
    # Segments: the runs of one (partition, row) in that order.
    new = np.ones(order.size, bool)
    new[1:] = (sorted_part[1:] != sorted_part[:-1]) | (sorted_row[1:] != sorted_row[:-1])
    seg_start = np.flatnonzero(new)
    seg_len = np.diff(np.append(seg_start, order.size))
    seg_part, seg_row = sorted_part[seg_start], sorted_row[seg_start]
    bounds = np.searchsorted(seg_part, np.arange(parts + 1))
    sorted_cols = indices[order]
    sorted_vals = None if data is None else data[order]
    out = []
    for p in range(parts):
        s = slice(bounds[p], bounds[p + 1])
        pieces = _ell_pieces(seg_row[s], seg_start[s], seg_len[s], sorted_cols, sorted_vals,
                             widths, idtype, ("the row ids (num_rows)",
                                              "the column ids in indices"))
        out.append([bucket for bucket, _ in pieces])
    return out


def row_tiles(row_indices, num_rows, tile_rows, idtype=np.int32) -> np.ndarray:
    """``tile_indptr`` (idtype, ``ceil(num_rows / tile_rows) + 1`` entries) over the sorted
    ``row_indices`` of a bucket: ``tile_indptr[t]`` counts the entries below
    ``t * tile_rows``, so tile ``t``'s ELL rows are ``tile_indptr[t]:tile_indptr[t + 1]``.

    Tiles cut this way at the same ``tile_rows`` own the same rows in every bucket, which the
    hyb kernels assume (``sparsetir.ops.hyb.check_tiles``). A ``tile_indptr`` of 2**40
    entries or more is refused.

    Example
    -------
    >>> row_tiles([0, 0, 3, 5], 7, 2).tolist()
    [0, 2, 3, 4, 4]
    """
    idtype = index_type(idtype)
    tile = count("tile_rows", tile_rows)
    num_rows = count("num_rows", num_rows, positive=False)
    num_tiles = -(-num_rows // tile)
    check_size(f"num_rows = {num_rows} in tiles of tile_rows = {tile}: a tile_indptr of "
               f"{num_tiles + 1} entries", num_tiles + 1)
    rows = index_array("row_indices", row_indices)
    drops = np.flatnonzero(np.diff(rows) < 0)
    if drops.size:
        i = int(drops[0])
        raise SparseTIRValueError(f"row_indices is not sorted: row_indices[{i}] = {rows[i]} > "
                         f"row_indices[{i + 1}] = {rows[i + 1]}")
    if rows.size and rows[-1] >= num_rows:
        raise SparseTIRValueError(f"row_indices are out of range [0, {num_rows}): "
                         f"{rows[0]} .. {rows[-1]}")
    tile_of = floor_div(rows, tile)            # row < t * tile_rows  <=>  tile_of < t
    return as_index(np.searchsorted(tile_of, np.arange(num_tiles + 1), side="left"), idtype,
                    "the entry counts of row_indices")
