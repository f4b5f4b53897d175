"""A coarse cost model that orders a search's candidates, so that only the most promising few
are compiled and measured.

It estimates a kernel call's time from the bytes it moves and where they come from, for one
matrix (:class:`MatrixStats`: sizes and row lengths) on the kernels' threads:

* streamed bytes at memory speed: the index (and value) arrays once per register tile of the
  feature loop (SpMM walks a row once per tile), the output written once, and, for hyb, the
  padded slots of its ELL buckets and the partial sums every column partition after the first
  reads and writes back;
* gathered rows (X for SpMM, Y for SDDMM): fast when the gathered slice (all of X, or one column
  partition's share) fits in the threads' L2 caches, else at a latency-bound rate that
  prefetching raises (more rows in flight), and prefetching costs a little where it fits;
* load balance: tiles are claimed one at a time, so a call ends within about one tile of the
  ideal; outside the nonzero split (``"split"``) a row is never cut, so the longest row bounds
  how evenly threads share the work. The split is estimated only where that bound is what
  limits the CSR kernel (elsewhere ``ranked`` leaves it out), and its SpMM pays two more
  launches and the long rows' partial sums;
* a fixed cost per tile claimed.

The constants are rough (bytes per second of one thread on a current x86 server core); only the
order of the estimates is used, and the search measures the best few.

Example
-------
>>> import scipy.sparse
>>> from sparsetir.tune.cost_model import MatrixStats, predicted_seconds
>>> from sparsetir.tune.candidates import Candidate
>>> stats = MatrixStats.of(scipy.sparse.random(1000, 1000, density=0.01, format="csr"))
>>> fast = predicted_seconds(Candidate("csr", 0, 32, 8), "spmm", 32, stats, threads=2)
>>> slow = predicted_seconds(Candidate("csr", 0, 0, 8), "spmm", 32, stats, threads=2)
>>> fast < slow                              # a scalar feature loop computes 16x slower
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .machine import cache_bytes

STREAM_BYTES_PER_S = 10e9       # one thread streaming from memory
CACHED_GATHER_BYTES_PER_S = 40e9  # one thread gathering rows that sit in its L2
MISSED_GATHER_BYTES_PER_S = 5e9   # ... rows from L3 or memory, without prefetching
FMAS_PER_S = 2e9                # one thread, one float lane
PREFETCH_COST = 0.03            # the share prefetching adds where rows are cached
SECONDS_PER_TILE = 0.3e-6
SECONDS_PER_LAUNCH = 5e-6


@dataclass(frozen=True)
class MatrixStats:
    """What the model reads of a matrix: its shape, nonzeros and row lengths."""
    rows: int
    cols: int
    nnz: int
    row_lengths: np.ndarray

    @classmethod
    def of(cls, matrix) -> "MatrixStats":
        """The statistics of a ``SparseMatrix`` or scipy CSR matrix."""
        indptr = np.asarray(matrix.indptr)
        return cls(int(matrix.shape[0]), int(matrix.shape[1]), int(indptr[-1]),
                   np.diff(indptr).astype(np.int64))

    @property
    def longest_row(self) -> int:
        return int(self.row_lengths.max(initial=0))

    def hyb_slots(self, parts: int, widths: tuple) -> int:
        """The ELL slots (nonzeros and padding) of a hyb layout: each row's share of a column
        partition (taken as an even share) goes to the narrowest bucket that holds it, rows
        longer than the widest bucket into several rows of it."""
        share = np.ceil(self.row_lengths / parts).astype(np.int64)
        share = share[share > 0]
        widest = widths[-1]
        fits = np.searchsorted(np.asarray(widths), np.minimum(share, widest))
        slots = np.where(share > widest, -(-share // widest) * widest,
                         np.asarray(widths)[fits])
        return int(slots.sum()) * parts


def predicted_seconds(candidate, kernel: str, feat_size: int, stats: MatrixStats,
                      threads: int) -> float:
    """The model's estimate of one call of ``kernel`` run as ``candidate`` describes;
    ``math.inf`` for a candidate that does not apply to the matrix (the split where no row
    bounds the CSR kernel)."""
    nnz, feat = max(stats.nnz, 1), max(feat_size, 1)
    tiles = threads * candidate.tiles_per_thread
    split = candidate.layout == "split"
    even = 1.0 + 1.0 / candidate.tiles_per_thread      # how evenly claimed tiles share a call
    if split and stats.longest_row * threads <= even * nnz:
        return math.inf                 # no row bounds the CSR kernel: nothing to gain
    lanes = candidate.lanes or 1
    passes = max(1, feat // lanes) if kernel != "sddmm" else 1
    slots, parts = nnz, 1
    if candidate.layout == "hyb":
        parts = candidate.parts
        slots = max(stats.hyb_slots(parts, candidate.widths), nnz)
    value_bytes = 4 if kernel == "spmm" else 0
    streamed = slots * (4 + value_bytes) * passes + stats.rows * 8
    if kernel == "sddmm":
        streamed += nnz * 4 + stats.rows * feat * 4          # the results, X's rows in order
        gathered_rows = stats.cols
    else:
        streamed += stats.rows * feat * 4 * (1 + 2 * (parts - 1))   # Y, partial sums
        gathered_rows = -(-stats.cols // parts)
    gathered = slots * feat * 4
    if gathered_rows * feat * 4 <= cache_bytes(threads):
        gather_s = gathered / CACHED_GATHER_BYTES_PER_S * (1 + PREFETCH_COST * bool(
            candidate.prefetch))
    else:
        gather_s = gathered / (MISSED_GATHER_BYTES_PER_S * (1 + min(candidate.prefetch, 16) / 8))
    compute_s = slots * feat / (FMAS_PER_S * (16 if candidate.lanes or kernel == "sddmm" else 1))
    if split and kernel != "sddmm":     # partial rows written and read, two more launches
        streamed += 2 * tiles * feat * 4
    work_s = max(streamed / STREAM_BYTES_PER_S + gather_s, compute_s) / threads
    balance = even if split else max(even, stats.longest_row * threads / nnz)
    launches = 3 if split and kernel != "sddmm" else 1
    return work_s * balance + tiles * SECONDS_PER_TILE + launches * SECONDS_PER_LAUNCH


def ranked(candidates, kernel: str, feat_size: int, stats: MatrixStats, threads: int) -> list:
    """``candidates`` ordered by :func:`predicted_seconds`, the most promising first, without
    those that do not apply to the matrix (an infinite estimate)."""
    estimates = [(predicted_seconds(c, kernel, feat_size, stats, threads), c)
                 for c in candidates]
    return [c for seconds, c in sorted(estimates, key=lambda pair: pair[0])
            if seconds != math.inf]
