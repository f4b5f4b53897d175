"""CSR to BSR (blocked rows and columns, block size ``bs``)."""

from __future__ import annotations

import numpy as np

from .checks import check_csr


def csr_to_bsr(indptr, indices, data, shape, bs: int, idtype=np.int32) -> tuple:
    """The BSR form of a CSR matrix: ``(indptr, indices, data)`` with ``data`` of shape
    ``(nnzb, bs, bs)``; rows and columns that do not fill a last block are padded with zeros.

    Block columns are sorted within each block row. The block grid has
    ``ceil(rows / bs)`` block rows and ``ceil(cols / bs)`` block columns.

    Example
    -------
    >>> ip, ix, d = csr_to_bsr([0, 1, 1], [2], [5.0], (2, 3), 2)
    >>> ip.tolist(), ix.tolist(), d.tolist()
    ([0, 1], [1], [[[5.0, 0.0], [0.0, 0.0]]])
    """
    if isinstance(bs, bool) or not isinstance(bs, (int, np.integer)) or bs <= 0:
        raise ValueError(f"the block size must be a positive integer, got {bs!r}")
    indptr, indices = check_csr(indptr, indices, shape)
    data = np.asarray(data)
    if data.size != indices.size:
        raise ValueError(f"data has {data.size} values, indices {indices.size}")
    rows, cols = (int(s) for s in shape)
    block_rows, block_cols = -(-rows // bs), -(-cols // bs)
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    block_key = (row_of // bs) * block_cols + indices // bs
    keys, slot = np.unique(block_key, return_inverse=True)
    block_data = np.zeros((keys.size, bs, bs), data.dtype)
    np.add.at(block_data, (slot, row_of % bs, indices % bs), data)
    counts = np.bincount(keys // block_cols, minlength=block_rows)
    block_indptr = np.concatenate([[0], np.cumsum(counts)]).astype(idtype)
    return block_indptr, (keys % block_cols).astype(idtype), block_data
