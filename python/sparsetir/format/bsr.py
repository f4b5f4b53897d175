"""CSR to BSR (blocked rows and columns, block size ``bs``)."""

from __future__ import annotations

import numpy as np

from .checks import as_index, check_csr, check_size, count, index_type, value_array


def csr_to_bsr(indptr, indices, data, shape, bs: int, idtype=np.int32) -> tuple:
    """The BSR form of a CSR matrix: ``(indptr, indices, data)`` with ``data`` of shape
    ``(nnzb, bs, bs)``; block slots with no nonzero, and the rows and columns that do not fill
    a last block, hold exactly 0. Duplicate entries are summed.

    Block columns are sorted within each block row. The block grid has
    ``ceil(rows / bs)`` block rows and ``ceil(cols / bs)`` block columns. Inputs, and the
    size of ``data`` (under 2**40 elements), are checked as ``sparsetir.format.checks`` says.

    Example
    -------
    >>> ip, ix, d = csr_to_bsr([0, 1, 1], [2], [5.0], (2, 3), 2)
    >>> ip.tolist(), ix.tolist(), d.tolist()
    ([0, 1], [1], [[[5.0, 0.0], [0.0, 0.0]]])
    """
    idtype = index_type(idtype)
    bs = count("bs: the block size", bs, dimension=True)
    indptr, indices = check_csr(indptr, indices, shape)
    data = value_array("data", data, indices.size)
    block_rows = -(-(indptr.size - 1) // bs)
    row_of = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    block_row, block_col = row_of // bs, indices // bs
    order = np.lexsort((block_col, block_row))       # pairs, not a product that may overflow
    sorted_row, sorted_col = block_row[order], block_col[order]
    new = np.ones(order.size, bool)
    new[1:] = (sorted_row[1:] != sorted_row[:-1]) | (sorted_col[1:] != sorted_col[:-1])
    slot = np.empty(order.size, np.int64)
    slot[order] = np.cumsum(new) - 1
    blocks = int(new.sum())
    check_size(f"bs = {bs}: {blocks} blocks of bs x bs", blocks * bs * bs)
    block_data = np.zeros((blocks, bs, bs), data.dtype)
    np.add.at(block_data, (slot, row_of % bs, indices % bs), data)
    counts = np.bincount(sorted_row[new], minlength=block_rows)
    block_indptr = np.concatenate([[0], np.cumsum(counts)])
    return (as_index(block_indptr, idtype, "the block count of indices"),
            as_index(sorted_col[new], idtype, "the block column ids of indices"), block_data)
