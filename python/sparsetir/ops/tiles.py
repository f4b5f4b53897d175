"""How many row tiles a call cuts a matrix into.

Tiles hold about the same number of nonzeros (``SparseMatrix.row_tiles``), and a parallel loop
over them gives every thread the same work however skewed the rows are; 8 tiles per thread
even out what one tile cannot.

Example
-------
>>> import os
>>> os.environ["TVM_NUM_THREADS"] = "2"
>>> row_tiles_for_threads()
16
"""

from __future__ import annotations

import numpy as np

from ..runtime.threads import thread_count


def row_tiles_for_threads() -> int:
    """Row tiles per call: 8 per thread a launch uses (``runtime.threads.thread_count``:
    ``TVM_NUM_THREADS``, or torch's count once ``torch.set_num_threads`` changed it)."""
    return 8 * thread_count()


def balanced_row_bounds(indptr: np.ndarray, tiles: int) -> np.ndarray:
    """``tiles + 1`` row bounds (int32, from 0 to the row count, non-decreasing whatever
    ``indptr`` holds) cutting a CSR matrix into ``tiles`` ranges of about ``nnz / tiles``
    nonzeros each, ``nnz`` being ``indptr[-1]``. The targets are searched in ``indptr``'s own
    dtype: a float target would make numpy convert the whole ``indptr`` at every call.

    Example
    -------
    >>> balanced_row_bounds(np.int32([0, 4, 4, 5, 8]), 2).tolist()
    [0, 1, 4]
    """
    m = indptr.size - 1
    nnz = int(indptr[-1]) if m >= 0 else 0
    bounds = np.searchsorted(indptr, tile_targets(nnz, tiles, indptr.dtype))
    bounds = np.maximum.accumulate(np.clip(bounds, 0, max(m, 0))).astype(np.int32)
    bounds[0], bounds[-1] = 0, max(m, 0)
    return bounds


def tile_targets(nnz: int, tiles: int, dtype) -> np.ndarray:
    """The nonzero counts ``round(k * nnz / tiles)``, ``k = 0..tiles``, at which tiles start,
    in ``dtype`` (the dtype of the ``indptr`` they are searched in).

    Example
    -------
    >>> tile_targets(10, 4, np.int32).tolist()
    [0, 3, 5, 8, 10]
    """
    return ((np.arange(tiles + 1, dtype=np.int64) * nnz + tiles // 2) // tiles).astype(dtype)
