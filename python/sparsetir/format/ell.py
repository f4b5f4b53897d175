"""CSR to bucketed ELL: rows grouped by length, each bucket a dense ``(rows, width)`` block."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from .checks import check_csr


class EllBucket(NamedTuple):
    """One ELL bucket of width ``w``: ``rows`` ELL rows of ``w`` slots each.

    ``row_indices`` (idtype, ``(rows,)``) is the matrix row of each ELL row, ascending;
    ``col_indices`` (idtype, ``(rows, w)``) the matrix column of each slot; ``mask`` (int8,
    ``(rows, w)``) 1 on real entries and 0 on padding; ``data`` (``(rows, w)``, the values'
    dtype, 0 on padding) or ``None`` when no values were given. A padding slot repeats the
    last real column of its ELL row, so every ``(row, col)`` pair names a real nonzero.
    """

    row_indices: np.ndarray
    col_indices: np.ndarray
    mask: np.ndarray
    data: Optional[np.ndarray]


def _check_positive(name: str, value) -> int:
    """``value`` as an int after checking it is a positive integer (``ValueError`` if not)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_buckets(buckets) -> np.ndarray:
    """``buckets`` as an int64 array after checking it is a non-empty, strictly increasing
    list of positive integers (``ValueError`` naming the problem)."""
    widths = np.asarray(buckets)
    if widths.ndim != 1 or widths.size == 0:
        raise ValueError(f"buckets must be a non-empty list of widths, got {buckets!r}")
    if widths.dtype.kind not in "iu":
        raise ValueError(f"buckets must be integers, got {buckets!r}")
    if np.any(widths <= 0):
        raise ValueError(f"buckets must be positive, got {widths.tolist()}")
    if np.any(np.diff(widths) <= 0):
        raise ValueError(f"buckets must be strictly increasing, got {widths.tolist()}")
    return widths.astype(np.int64)


def _check_data(data, nnz: int) -> Optional[np.ndarray]:
    """``data`` as a 1-D array of ``nnz`` values (or ``None``), else ``ValueError``."""
    if data is None:
        return None
    data = np.asarray(data)
    if data.ndim != 1 or data.size != nnz:
        raise ValueError(f"data has {data.size} values (shape {data.shape}), indices {nnz}")
    return data


def _ell_pieces(seg_row, seg_start, seg_len, cols, vals, widths, idtype) -> list:
    """Pack segments (runs ``cols[start:start + len]`` belonging to matrix row ``row``, in
    order) into ELL buckets; the engine behind every bucketed format here.

    A segment of length ``L`` goes to the first bucket with ``w >= L`` (the last one if none)
    and becomes ``ceil(L / w)`` consecutive ELL rows; empty segments are dropped. Returns one
    ``(EllBucket, segment_of_each_ell_row)`` pair per bucket.
    """
    nonempty = np.flatnonzero(seg_len > 0)
    bucket_of = np.minimum(np.searchsorted(widths, seg_len[nonempty]), widths.size - 1)
    out = []
    for b, width in enumerate(widths.tolist()):
        seg = nonempty[bucket_of == b]
        length = seg_len[seg]
        pieces = -(-length // width)
        piece_seg = np.repeat(seg, pieces)
        first_piece = np.repeat(np.cumsum(pieces) - pieces, pieces)
        offset = (np.arange(piece_seg.size) - first_piece) * width
        pos = offset[:, None] + np.arange(width)
        row_len = seg_len[piece_seg][:, None]
        valid = pos < row_len
        src = seg_start[piece_seg][:, None] + np.minimum(pos, row_len - 1)
        values = None
        if vals is not None:
            values = np.where(valid, vals[src], np.zeros((), vals.dtype))
        bucket = EllBucket(seg_row[piece_seg].astype(idtype), cols[src].astype(idtype),
                           valid.astype(np.int8), values)
        out.append((bucket, piece_seg))
    return out


def csr_to_ell(indptr, indices, data, shape, buckets, idtype=np.int32) -> list:
    """Bucketed ELL form of a CSR matrix: one ``EllBucket`` per width in ``buckets``.

    Bucket ``b`` (width ``buckets[b]``) holds the rows whose length lies in
    ``(buckets[b-1], buckets[b]]`` (``(0, buckets[0]]`` for bucket 0). Empty rows are in no
    bucket. A row longer than ``buckets[-1]`` is cut into ``ceil(L / buckets[-1])`` pieces,
    consecutive ELL rows of the last bucket with the same row index, the last piece padded.
    Entries keep their CSR order; ``data=None`` gives buckets whose ``data`` is ``None``.

    Example
    -------
    >>> b = csr_to_ell([0, 1, 1, 4], [2, 0, 1, 2], [1.0, 2.0, 3.0, 4.0], (3, 3), [1, 2])
    >>> b[0].row_indices.tolist(), b[0].col_indices.tolist()
    ([0], [[2]])
    >>> b[1].row_indices.tolist(), b[1].col_indices.tolist(), b[1].mask.tolist()
    ([2, 2], [[0, 1], [2, 2]], [[1, 1], [1, 0]])
    >>> b[1].data.tolist()
    [[2.0, 3.0], [4.0, 0.0]]
    """
    widths = _check_buckets(buckets)
    indptr, indices = check_csr(indptr, indices, shape)
    data = _check_data(data, indices.size)
    rows = indptr.size - 1
    pieces = _ell_pieces(np.arange(rows), indptr[:-1], np.diff(indptr), indices, data, widths,
                        idtype)
    return [bucket for bucket, _ in pieces]
