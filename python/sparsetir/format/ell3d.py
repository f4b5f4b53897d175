"""CSF (relation, row, column) to 3-D bucketed ELL, for relational graphs (RGCN)."""

from __future__ import annotations

import numpy as np

from .checks import (FormatTypeError, as_index, check_csr, check_size, count, index_array,
                     index_type)
from .ell import _ell_pieces, check_buckets
from ..errors import SparseTIRTypeError, SparseTIRValueError


def _check_level(level: int, indptr, indices) -> tuple:
    """One CSF level checked as a CSR matrix whose rows are the parent entries."""
    try:
        indptr = index_array(f"csf_indptr_{level}", indptr)
        indices = index_array(f"csf_indices_{level}", indices)
        if indptr.size == 0:
            raise SparseTIRValueError(f"csf_indptr_{level} must be a non-empty 1-D array")
        cols = int(indices.max()) + 1 if indices.size else 0
        return check_csr(indptr, indices, (indptr.size - 1, cols))
    except ValueError as err:
        raise type(err)(f"CSF level {level}: {err}") from None


def _rows_per_block(rows_per_block, buckets: int) -> list:
    """``rows_per_block`` as one positive int per bucket (an int applies to every bucket)."""
    if isinstance(rows_per_block, (int, np.integer)) and not isinstance(rows_per_block, bool):
        rows_per_block = [rows_per_block] * buckets
    try:
        items = None if isinstance(rows_per_block, (str, bytes)) else list(rows_per_block)
    except TypeError:                  # not iterable
        items = None
    if items is None:
        raise FormatTypeError("rows_per_block must be a positive integer or a list of one per "
                              f"bucket, got {rows_per_block!r}")
    if len(items) != buckets:
        raise SparseTIRValueError(f"rows_per_block has {len(items)} entries, buckets {buckets}")
    return [count("rows_per_block", r, dimension=True) for r in items]


def csf_to_ell3d(csf_indptr_0, csf_indices_0, csf_indptr_1, csf_indices_1, buckets,
                 *sparsetir_order, rows_per_block=1, idtype=np.int32) -> tuple:
    """``(indptr, row_indices, col_indices, mask)``, each a list with one array per bucket:
    a 3-D CSF tensor (relation -> rows -> columns) as blocks of bucketed ELL rows, as
    SparseTIR's ``csf_to_ell3d``.

    Level 0 (``csf_indptr_0``, ``num_rels + 1`` entries) lists each relation's rows in
    ``csf_indices_0``; level 1 (``csf_indptr_1``, ``len(csf_indices_0) + 1`` entries) lists
    each of those rows' columns in ``csf_indices_1``. Within every relation the rows are
    bucketed by length as ``csr_to_ell`` does (width ``buckets[b]``; rows longer than
    ``buckets[-1]`` split into consecutive pieces, empty rows dropped), and the ELL rows of a
    relation in bucket ``b`` are packed ``rows_per_block[b]`` at a time into blocks
    (SparseTIR's ``nnz_rows_bkt``; an int applies to every bucket). For bucket ``b`` with
    ``r`` rows per block and width ``w``:

    * ``indptr[b]`` (idtype, ``(num_rels + 1,)``): relation ``k`` owns blocks
      ``indptr[b][k]:indptr[b][k + 1]``.
    * ``row_indices[b]`` (idtype, ``(blocks, r)``): the row of each ELL row; a relation's last
      block is filled up by repeating its last real ELL row.
    * ``col_indices[b]`` (idtype, ``(blocks, r, w)``): the columns; a padding slot repeats a
      real column of its row (SparseTIR writes 0), so every index is in range.
    * ``mask[b]`` (int8, ``(blocks, r, w)``): 1 on real entries, 0 on padding.

    Arrays of 2**40 elements or more are refused, naming the width and ``rows_per_block``.
    ``rows_per_block`` and ``idtype`` are keywords: SparseTIR's positional call
    ``csf_to_ell3d(..., nnz_rows_bkt, nnz_cols_bkt)`` (the two lists the other way round) is
    refused with what to write, here or with ``sparsetir.format.compat.csf_to_ell3d``.

    Example
    -------
    >>> ip, ri, ci, m = csf_to_ell3d([0, 2, 3], [0, 2, 1], [0, 1, 3, 4], [3, 0, 1, 4], [1, 2],
    ...                              rows_per_block=[2, 1])
    >>> ip[0].tolist(), ri[0].tolist(), ci[0].tolist(), m[0].tolist()
    ([0, 1, 2], [[0, 0], [1, 1]], [[[3], [3]], [[4], [4]]], [[[1], [0]], [[1], [0]]])
    >>> ip[1].tolist(), ri[1].tolist(), ci[1].tolist(), m[1].tolist()
    ([0, 1, 1], [[2]], [[[0, 1]]], [[[1, 1]]])
    """
    if sparsetir_order:
        raise SparseTIRTypeError(
            f"csf_to_ell3d takes rows_per_block by keyword, got {1 + len(sparsetir_order)} "
            "bucket lists by position: SparseTIR's csf_to_ell3d(..., nnz_rows_bkt, "
            "nnz_cols_bkt) is csf_to_ell3d(..., buckets=nnz_cols_bkt, "
            "rows_per_block=nnz_rows_bkt) here, or sparsetir.format.compat.csf_to_ell3d with "
            "SparseTIR's arguments and results")
    idtype = index_type(idtype)
    widths = check_buckets(buckets)
    block_rows = _rows_per_block(rows_per_block, widths.size)
    indptr_0, rows = _check_level(0, csf_indptr_0, csf_indices_0)
    indptr_1, cols = _check_level(1, csf_indptr_1, csf_indices_1)
    if indptr_1.size != rows.size + 1:
        raise SparseTIRValueError(f"csf_indptr_1 has {indptr_1.size} entries, csf_indices_0 has "
                         f"{rows.size} rows so it needs {rows.size + 1}")
    num_rels = indptr_0.size - 1
    rel_of_row = np.repeat(np.arange(num_rels), np.diff(indptr_0))
    pieces = _ell_pieces(rows, indptr_1[:-1], np.diff(indptr_1), cols, None, widths, idtype,
                         ("the row ids in csf_indices_0", "the column ids in csf_indices_1"))
    result = ([], [], [], [])
    for b, ((bucket, piece_row), r) in enumerate(zip(pieces, block_rows)):
        per_rel = np.bincount(rel_of_row[piece_row], minlength=num_rels)
        blocks = -(-per_rel // r)
        num_blocks = int(blocks.sum())
        check_size(f"rows_per_block = {r}, buckets[{b}] = {widths[b]}: {num_blocks} blocks of "
                   "rows_per_block x width", num_blocks * r * int(widths[b]))
        indptr = np.concatenate([[0], np.cumsum(blocks)])
        block_rel = np.repeat(np.arange(num_rels), blocks)
        offset = (np.arange(block_rel.size) - indptr[:-1][block_rel]) * r
        first = (np.cumsum(per_rel) - per_rel)[block_rel] + offset
        filled = np.minimum(r, per_rel[block_rel] - offset)[:, None]
        slot = np.arange(r)
        src = first[:, None] + np.minimum(slot, filled - 1)
        real = (slot < filled).astype(np.int8)
        for out, array in zip(result, (as_index(indptr, idtype, "the block count"),
                                       bucket.row_indices[src],
                                       bucket.col_indices[src],
                                       bucket.mask[src] * real[:, :, None])):
            out.append(array)
    return result
