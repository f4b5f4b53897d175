"""Gathered rows on cache-line boundaries: a dense operand whose rows a kernel gathers (SpMM's
``X``, SDDMM's ``X`` and ``Y``) is copied to a 64-byte boundary first when it is not on one and
it fits the caches.

The kernels load a gathered row as whole 64-byte vectors. numpy places a large array 16 bytes
past a page boundary (glibc's ``mmap``-backed ``malloc``), so every such load then spans two
cache lines. Where the rows come from the L1 and L2 caches, which is where they come from when
the operand fits them, that doubled the time: SpMM on facebook (4,039 nodes), one thread, on the
Intel VM: 0.81 ms aligned against 1.53 ms at 16 bytes past at 128 features, 1.73 against 3.25 at
256, 0.28 against 0.36 at 32. A copy of such an operand costs a
fraction of that when its rows are gathered many times each (``MIN_REUSE``). A larger
operand comes from memory, where a copy costs about what the split loads do (the arxiv-size
graph at 32 features: 6.7-7.9 ms aligned, 9.1-10.4 ms not, a copy 7 ms with fresh pages), so
it is read where it is. torch tensors are on 64-byte boundaries already (torch's allocator).

The copy goes into a buffer kept for the calling thread (one per operand slot), so a call
allocates nothing after its first; nothing returned to the user ever refers to it.

Example
-------
>>> X = np.ones((100, 64), np.float32)
>>> gather_ready(X, 0, gathers=10**5).ctypes.data % CACHE_LINE
0
>>> np.array_equal(gather_ready(X, 0, gathers=10**5), X)
True
"""

from __future__ import annotations

import threading

import numpy as np

from ..runtime.threads import thread_count
from ..schedule.operators import l2_cache_bytes

CACHE_LINE = 64
"""The boundary gathered rows are loaded from (bytes): one AVX-512 vector, one cache line."""

MIN_REUSE = 8
"""Gathers per row and thread, on average, from which a copy pays: each split row load cost
about 8 ns more (facebook, 128 features) and a copied row about 46 ns; on pubmed (4.5 gathers
a row) the copy made 32 features 1.3x slower. The copy runs on the calling thread alone while
the kernel's gathers are shared by the threads, hence per thread."""

MIN_ROW_BYTES = 4 * CACHE_LINE
"""Rows of fewer bytes are not copied: a 128-byte row (32 features) off the boundary spans 3
lines instead of 2, and on 2 threads the copy cost more than that (facebook at 32 features:
0.15 ms without, 0.20 with)."""

_scratch = threading.local()     # .buffers: slot -> a float32 buffer of this thread


def gather_ready(array, slot: int, gathers: int | None):
    """``array``, or a copy of it on a ``CACHE_LINE`` boundary (in this thread's buffer for
    ``slot``: a call passing two operands uses two slots) when it is a C-contiguous 2-D float32
    numpy array off that boundary, its rows are a whole number of ``MIN_ROW_BYTES`` (so every
    row lands on a boundary), it fits two cores' L2 caches, and the call gathers its rows
    ``gathers`` times (the matrix's nonzeros; None: unknown), at least ``MIN_REUSE`` times a
    row and thread on average (see the module docstring)."""
    if type(array) is not np.ndarray or array.dtype != np.float32 or array.ndim != 2 \
            or array.ctypes.data % CACHE_LINE == 0 or not array.flags.c_contiguous \
            or (array.shape[1] * 4) % MIN_ROW_BYTES != 0 \
            or array.nbytes > 2 * l2_cache_bytes() or gathers is None \
            or gathers < MIN_REUSE * thread_count() * array.shape[0]:
        return array
    buffers = getattr(_scratch, "buffers", None)
    if buffers is None:
        buffers = _scratch.buffers = {}
    size = array.size
    buffer = buffers.get(slot)
    if buffer is None or buffer.size < size + CACHE_LINE // 4:
        buffer = buffers[slot] = np.empty(size + CACHE_LINE // 4, np.float32)
    start = (-buffer.ctypes.data % CACHE_LINE) // 4
    copy = buffer[start:start + size].reshape(array.shape)
    np.copyto(copy, array)
    return copy
