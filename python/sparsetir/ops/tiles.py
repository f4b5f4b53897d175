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

from ..runtime.threads import thread_count


def row_tiles_for_threads() -> int:
    """Row tiles per call: 8 per thread a launch uses (``runtime.threads.thread_count``:
    ``TVM_NUM_THREADS``, or torch's count once ``torch.set_num_threads`` changed it)."""
    return 8 * thread_count()
