"""CSR to bucketed ELL: rows grouped by length, each bucket a dense ``(rows, width)`` block."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from .checks import (FormatTypeError, as_index, check_csr, check_size, count, index_type,
                     value_array)
from ..errors import SparseTIRValueError


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


def check_buckets(buckets) -> np.ndarray:
    """``buckets`` as an int64 array after checking it is a non-empty, strictly increasing
    list of positive integers below 2**40 (``SparseTIRValueError`` naming the problem)."""
    try:
        widths = [count(f"buckets[{b}]", width, dimension=True)
                  for b, width in enumerate(buckets)]
    except (TypeError, ValueError) as err:   # not iterable, or an item that is no width
        kind = FormatTypeError if isinstance(err, TypeError) else SparseTIRValueError
        raise kind(f"buckets must be a list of positive integers below 2**40, got {buckets!r}"
                   f" ({err})") from None
    if not widths:
        raise SparseTIRValueError(f"buckets must be a non-empty list of widths, got {buckets!r}")
    if any(b <= a for a, b in zip(widths, widths[1:])):
        raise SparseTIRValueError(f"buckets must be strictly increasing, got {widths}")
    return np.array(widths, np.int64)


def _ell_pieces(seg_row, seg_start, seg_len, cols, vals, widths, idtype, sources) -> list:
    """Pack segments (runs ``cols[start:start + len]`` belonging to matrix row ``row``, in
    order) into ELL buckets; the engine behind every bucketed format here.

    A segment of length ``L`` goes to the first bucket with ``w >= L`` (the last one if none)
    and becomes ``ceil(L / w)`` consecutive ELL rows; empty segments are dropped; padding
    slots get the value 0. Returns one ``(EllBucket, segment_of_each_ell_row)`` pair per
    bucket. ``sources`` names where the row and the column ids come from, for the error when
    they do not fit ``idtype``; a bucket of 2**40 slots or more is refused, naming its width.
    """
    nonempty = np.flatnonzero(seg_len > 0)
    bucket_of = np.minimum(np.searchsorted(widths, seg_len[nonempty]), widths.size - 1)
    out = []
    for b, width in enumerate(widths.tolist()):
        seg = nonempty[bucket_of == b]
        length = seg_len[seg]
        pieces = -(-length // width)
        ell_rows = int(pieces.sum())
        check_size(f"buckets[{b}] = {width}: {ell_rows} ELL rows of that width",
                   ell_rows * width)
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
        bucket = EllBucket(as_index(seg_row[piece_seg], idtype, sources[0]),
                           as_index(cols[src], idtype, sources[1]), valid.astype(np.int8),
                           values)
        out.append((bucket, piece_seg))
    return out


def csr_to_ell(indptr, indices, data, shape, buckets, idtype=np.int32) -> list:
    """Bucketed ELL form of a CSR matrix: one ``EllBucket`` per width in ``buckets``.

    Bucket ``b`` (width ``buckets[b]``) holds the rows whose length lies in
    ``(buckets[b-1], buckets[b]]`` (``(0, buckets[0]]`` for bucket 0). Empty rows are in no
    bucket. A row longer than ``buckets[-1]`` is cut into ``ceil(L / buckets[-1])`` pieces,
    consecutive ELL rows of the last bucket with the same row index, the last piece padded
    (value exactly 0). Entries keep their CSR order; ``data=None`` gives buckets whose
    ``data`` is ``None``. Inputs, and the size of each bucket (under 2**40 slots), are
    checked as ``sparsetir.format.checks`` says.

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
    idtype = index_type(idtype)
    widths = check_buckets(buckets)
    indptr, indices = check_csr(indptr, indices, shape)
    data = None if data is None else value_array("data", data, indices.size)
    pieces = _ell_pieces(np.arange(indptr.size - 1), indptr[:-1], np.diff(indptr), indices,
                         data, widths, idtype,
                         ("the row ids (shape[0])", "the column ids in indices"))
    return [bucket for bucket, _ in pieces]
