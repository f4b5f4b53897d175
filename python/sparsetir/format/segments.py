"""Row segments: every CSR row cut into runs of at most ``max_nnz`` nonzeros.

A GPU SpMM that gives each row to one warp waits, on a power-law graph, for the warp that walks
the longest row (23111 nonzeros on the arxiv-size synthetic graph: the whole launch runs that
long). Cut into segments of at most ``max_nnz`` nonzeros, every warp gets a bounded share, and
a row's segments add their sums into its output row (``ops.kernels.spmm_segments``).

The segments keep the CSR's order: segment ``s`` holds the nonzeros
``seg_ptr[s]:seg_ptr[s + 1]`` of the CSR's ``indices`` and values, all of row ``seg_rows[s]``,
so the CSR's arrays are used as they are. An empty row has no segment.

Example
-------
>>> seg_ptr, seg_rows = row_segments([0, 5, 5, 7], 2)
>>> seg_ptr.tolist(), seg_rows.tolist()
([0, 2, 4, 5, 7], [0, 0, 0, 2])
"""

from __future__ import annotations

import numpy as np

from .checks import as_index, count, index_array, row_pointer_problem
from ..errors import SparseTIRValueError


def row_segments(indptr, max_nnz: int, idtype=np.int32) -> tuple:
    """``(seg_ptr, seg_rows)`` (``idtype``) of the rows of ``indptr`` cut into segments of at
    most ``max_nnz`` nonzeros (see the module docstring). ``indptr`` must be a row pointer
    (from 0, never falling); a refusal names the problem."""
    indptr = index_array("indptr", indptr)
    problem = row_pointer_problem(indptr, int(indptr[-1]) if indptr.size else 0)
    if problem is not None:
        raise SparseTIRValueError(problem)
    seg_ptr, seg_rows = segment_bounds(indptr, count("max_nnz", max_nnz))
    return (as_index(seg_ptr, idtype, "the nonzero offsets (seg_ptr)"),
            as_index(seg_rows, idtype, "the row ids (seg_rows)"))


def segment_bounds(indptr: np.ndarray, max_nnz: int) -> tuple:
    """``(seg_ptr, seg_rows)`` as int64, unchecked: ``indptr`` a valid int64 row pointer and
    ``max_nnz`` positive (``row_segments`` checks both). Numpy only, so that the GPU bundle
    (``benchmarks/gpu/package.py``) ships this function's source as it is."""
    lengths = np.diff(indptr)
    per_row = -(-lengths // max_nnz)                       # ceil; 0 for an empty row
    seg_rows = np.repeat(np.arange(lengths.size, dtype=np.int64), per_row)
    first = np.cumsum(per_row) - per_row                   # each row's first segment
    within = np.arange(seg_rows.size, dtype=np.int64) - first[seg_rows]
    starts = indptr[:-1][seg_rows] + within * max_nnz
    return np.append(starts, indptr[-1]).astype(np.int64), seg_rows
