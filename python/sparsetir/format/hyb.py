"""Column-partitioned hybrid format (hyb): CSR split into column ranges, each bucketed as ELL."""

from __future__ import annotations

import numpy as np

from .checks import check_csr
from .ell import _check_buckets, _check_data, _check_positive, _ell_pieces


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
    the row's last real column instead of 0, ``data`` filled when given).

    Example
    -------
    >>> parts = column_part_hyb(2, 4, [0, 3, 4], [0, 1, 3, 2], 2, [1, 2])
    >>> [[b.row_indices.tolist() for b in part] for part in parts]
    [[[], [0]], [[0, 1], []]]
    >>> parts[0][1].col_indices.tolist(), parts[1][0].col_indices.tolist()
    ([[0, 1]], [[3], [2]])
    """
    parts = _check_positive("num_col_parts", num_col_parts)
    widths = _check_buckets(buckets)
    indptr, indices = check_csr(indptr, indices, (num_rows, num_cols))
    data = _check_data(data, indices.size)
    rows, cols = int(num_rows), int(num_cols)
    part_size = max(1, -(-cols // parts))
    part_of = indices // part_size
    # Stable, so each (partition, row) run keeps its CSR order; small keys sort by radix.
    key_type = np.int16 if parts < 2 ** 15 else np.int64
    order = np.argsort(part_of.astype(key_type), kind="stable")
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    key = (part_of * rows + row_of)[order]
    # Segments: the runs of one (partition, row) in that order.
    seg_start = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])[:key.size])
    seg_len = np.diff(np.append(seg_start, key.size))
    seg_key = key[seg_start]
    seg_part, seg_row = seg_key // max(rows, 1), seg_key % max(rows, 1)
    bounds = np.searchsorted(seg_part, np.arange(parts + 1))
    sorted_cols = indices[order]
    sorted_vals = None if data is None else data[order]
    out = []
    for p in range(parts):
        s = slice(bounds[p], bounds[p + 1])
        pieces = _ell_pieces(seg_row[s], seg_start[s], seg_len[s], sorted_cols, sorted_vals,
                             widths, idtype)
        out.append([bucket for bucket, _ in pieces])
    return out


def row_tiles(row_indices, num_rows, tile_rows) -> np.ndarray:
    """``tile_indptr`` (int32, ``ceil(num_rows / tile_rows) + 1`` entries) over the sorted
    ``row_indices`` of a bucket: ``tile_indptr[t]`` counts the entries below
    ``t * tile_rows``, so tile ``t``'s ELL rows are ``tile_indptr[t]:tile_indptr[t + 1]``.

    Example
    -------
    >>> row_tiles([0, 0, 3, 5], 7, 2).tolist()
    [0, 2, 3, 4, 4]
    """
    tile = _check_positive("tile_rows", tile_rows)
    rows = np.asarray(row_indices)
    num_rows = int(num_rows)
    if num_rows < 0:
        raise ValueError(f"num_rows must not be negative, got {num_rows}")
    if rows.ndim != 1:
        raise ValueError(f"row_indices must be 1-D, got shape {rows.shape}")
    drops = np.flatnonzero(np.diff(rows) < 0)
    if drops.size:
        i = int(drops[0])
        raise ValueError(f"row_indices is not sorted: row_indices[{i}] = {rows[i]} > "
                         f"row_indices[{i + 1}] = {rows[i + 1]}")
    if rows.size and (rows[0] < 0 or rows[-1] >= num_rows):
        raise ValueError(f"row_indices are out of range [0, {num_rows}): "
                         f"{rows[0]} .. {rows[-1]}")
    bounds = np.arange(-(-num_rows // tile) + 1, dtype=np.int64) * tile
    return np.searchsorted(rows, bounds, side="left").astype(np.int32)
