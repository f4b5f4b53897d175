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

import os
from functools import lru_cache


def row_tiles_for_threads() -> int:
    """Row tiles per call: 8 per thread TVM starts (``TVM_NUM_THREADS``, the usable cores when
    it is unset or not a positive number)."""
    return _tiles_for(os.environ.get("TVM_NUM_THREADS", ""))


@lru_cache(maxsize=None)
def _tiles_for(num_threads: str) -> int:
    threads = int(num_threads) if num_threads.isascii() and num_threads.isdigit() \
        and int(num_threads) > 0 else len(os.sched_getaffinity(0))
    return 8 * threads
