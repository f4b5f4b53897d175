"""Gathered rows on cache-line boundaries: SDDMM's ``Y``, whose rows its kernel gathers, is
copied to a 64-byte boundary first when it is not on one, it fits the caches and its rows are
gathered often enough to pay for the copy. SpMM's ``X`` is not copied (since 2026-11-29): with
AVX-512 its kernels load a row that starts off a line as the whole lines it spans, shifted
into place in registers (``backend.realign_gathers``), which beat the copy on every case
measured there (facebook at 32-256 features: 1.1-1.4x; the figures below are the copy's, from
before); with AVX2 they load it where it is (``schedule.operators.realigns_gathers``).

With AVX2 SDDMM's ``Y`` is not copied either: only every other 32-byte vector of a row off a
line straddles two lines, and the copy cost more than it saved. On AMD Zen 3 (2 threads,
facebook, ``Y`` 48 bytes past a line, calls with and without the copy alternating in one
process, medians of 6-8 s, 2026-11-30), ms copied / not: at 16 features 0.418 / 0.325, at 32
0.556 / 0.464, 0.437 / 0.426 and 0.481 / 0.423, at 64 0.800 / 0.741, 0.769 / 0.622 and 0.760
/ 0.762; beside 2 busy processes 0.851 / 0.830 at 32 and 1.430 / 1.504 at 64.

The kernels load a gathered row as whole 64-byte vectors. numpy places a large array 16 bytes
past a page boundary (glibc's ``mmap``-backed ``malloc``), so every such load then spans two
cache lines. Where the rows come from the L1 and L2 caches that doubled the time: SpMM on
facebook (4,039 nodes), one thread, on the Intel VM: 0.73-0.83 ms aligned against 1.36-1.53 ms
at 16 bytes past at 128 features. The copy (``ops.line_copy``: a compiled kernel whose
parallel loop runs on the threads the kernels use, so each thread copies ``1 / threads`` of
it, as each gathers ``1 / threads`` of the rows) costs about what numpy's copy costs on one
thread; it pays when the rows are gathered often enough: ``reuse_to_copy`` gathers a row, on
average (the call's nonzeros / the operand's rows). Both sides scale with the threads, so
the rule is the same for any count. An operand larger than two cores' L2 caches comes from
memory, where a copy costs about what the split loads do (the arxiv-size graph at 32 features:
6.7-7.9 ms aligned, 9.1-10.4 ms not, a copy 7 ms with fresh pages), so it is read where it is.
Re-timed on 2026-11-29 with the copy into this thread's kept buffer (weighted SpMM, 2 threads, X
16 bytes off the line, the copy forced, two runs): 1.05-1.15x faster on the arxiv-size graphs at
32 features, 0.79-0.82x at 64, 0.94-1.03x at 128; 0.56-0.83x on pubmed and email-Enron at 32-128
(whose operands, 2.5-19 MiB, the rule leaves as they are). A rule for the one case that gains
would be fitted to two graphs; it was not made. SDDMM's ``X`` is read row by row (each row's
loads hit L1 after the first): copying it too saved nothing on facebook (128 features: 1.25 ms
copying ``Y``, 1.23 both) and cost 10-23% on random graphs (16 a row, 128 features: 0.72 against
0.88 ms). torch's allocator puts tensors on 64-byte boundaries, and the operators' own numpy
results of 64 KiB or more start on one too (``arrays.empty_on_line``): a chained call
(``spmm(M, spmm(M, X))``) gathers them where they are. A tensor viewing numpy's memory
(``torch.from_numpy``) is read where numpy put it: copied by this rule on torch's team (where
torch-tensor calls run), facebook's ``X`` gained only from 128 features (2 threads, 2026-11-29:
1.40 -> 1.23 ms at 256, 0.64 -> 0.59 at 128) and lost below (0.142 -> 0.173 ms at 32), so
torch tensors are not copied.

The thresholds come from ``benchmarks/alignment_copy.py`` (one thread, the caller's CPU time,
medians of 300 alternating calls, the operand in cache before the call as an operator's
output is, on the loaded 2-core Intel VM with a 2 MiB L2 a core);
``docs/benchmark.md`` lists the table. They are named constants, to be re-timed on an idle
machine.

The copy goes into a buffer kept for the calling thread, so a call allocates nothing after
its first; nothing returned to the user ever refers to it.

Example
-------
>>> X = np.ones((100, 64), np.float32)
>>> ready = gather_ready(X, gathers=10**5)     # a copy on a line with AVX-512, else X itself
>>> np.array_equal(ready, X), ready is X or ready.ctypes.data % 64 == 0
(True, True)
>>> copy_may_pay((100, 24), gathers=10**5)     # 96-byte rows: never whole lines
False
"""

from __future__ import annotations

import threading

import numpy as np

from ..schedule.cpu_target import CACHE_LINE_BYTES, vectors_are_lines
from ..schedule.operators import l2_cache_bytes
from .arrays import empty_on_line
from .line_copy import copy_lines

MIN_REUSE = 8
"""Gathers a row from which a copy of an operand of at most half an L2 pays. SpMM on random
graphs of 4,039 nodes at 16 and 32 features (operands of 0.25 and 0.5 MiB), one thread, two
runs: from 8% slower to 5% faster copied at 4 nonzeros a row, 11-19% faster at 6, 19-24% at
8; SDDMM (copying Y) from 17% slower to 2% faster at 6, 1-8% faster at 8 (so 8, not 6)."""

REUSE_PER_L2 = 16
"""Beyond that, the gathers a row that pay grow with the operand: 16 per core's L2 it fills
(a larger operand's rows come from L3 more often, where a split load costs less, while the
copy costs the same a row). SpMM on those graphs breaks even at 8 a row with 1 MiB (64
features), 12-16 with 2 MiB (128: 4-6% faster at 16), about 32 with 4 MiB (256: 0-3% slower
at 24 and 32; SDDMM 5-9% faster there). facebook, whose rows are gathered near each other,
gains at every size (0.25-4 MiB, 43.7 a row): SpMM 7-37%, SDDMM 0-26%."""

MIN_ROW_BYTES = CACHE_LINE_BYTES
"""Rows must be a whole number of cache lines, so every row of the copy starts on one. Rows of
64 and 128 bytes (16 and 32 features) gain too now that the copy is shared by the threads
(random graph, 8 a row: 45 -> 36 us at 16 features, 75 -> 61 at 32, one thread); when the
copy ran on the calling thread alone, 32 features on facebook on 2 threads lost (0.15 ms
without, 0.20 with), which is why 256-byte rows were the floor then."""

COPIED = frozenset({"sddmm"})
"""The operators whose gathered operand ``gather_ready`` may copy: SDDMM (``Y``). SpMM's
``X`` is never copied (see the module docstring)."""

_scratch = threading.local()     # .buffer: a float32 buffer of this thread


def reuse_to_copy(nbytes: int) -> float:
    """Gathers a row, on average, from which copying an operand of ``nbytes`` pays:
    ``MIN_REUSE``, or ``REUSE_PER_L2`` per core's L2 cache the operand fills."""
    return max(MIN_REUSE, REUSE_PER_L2 * nbytes / l2_cache_bytes())


def copy_may_pay(shape: tuple, gathers: int | None) -> bool:
    """Whether copying a C-contiguous 2-D float32 operand of ``shape`` off a cache line's
    boundary pays: the kernels' vector registers are whole lines
    (``cpu_target.vectors_are_lines``: AVX-512), the operand is not empty, its rows are a
    whole number of ``MIN_ROW_BYTES``, it fits two cores' L2 caches, and the call gathers its
    rows ``gathers`` times (the matrix's nonzeros; None: unknown), at least ``reuse_to_copy``
    times a row on average (see the module docstring)."""
    rows, feats = shape
    nbytes = 4 * rows * feats
    return nbytes > 0 and (4 * feats) % MIN_ROW_BYTES == 0 and nbytes <= 2 * l2_cache_bytes() \
        and gathers is not None and gathers >= reuse_to_copy(nbytes) * rows \
        and vectors_are_lines()


def gather_ready(array, gathers: int | None):
    """``array``, or a copy of it on a cache line's boundary (in this thread's buffer, made
    by ``line_copy`` on the kernels' threads) when it is a C-contiguous 2-D float32 numpy
    array off that boundary and a copy pays (``copy_may_pay``)."""
    if type(array) is not np.ndarray or array.dtype != np.float32 or array.ndim != 2 \
            or array.ctypes.data % CACHE_LINE_BYTES == 0 or not array.flags.c_contiguous \
            or not copy_may_pay(array.shape, gathers):
        return array
    size = array.size
    buffer = getattr(_scratch, "buffer", None)
    if buffer is None or buffer.size < size:
        buffer = _scratch.buffer = empty_on_line(size, min_bytes=0)
    copy = buffer[:size].reshape(array.shape)
    copy_lines(array, copy)
    return copy
