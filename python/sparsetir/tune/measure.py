"""Candidates made real on one matrix: bound, checked against scipy, timed.

:func:`bind` gives a candidate's kernel with the matrix's arrays bound, callable as
``sparsetir.ops`` calls its kernels (SpMM ``(X, Y)``, SDDMM ``(X, Y, out)``); the CSR kernels
come from ``ops.operators.bind_kernel``, the nonzero split from ``ops.split``, hyb from
``ops.hyb``. :meth:`Trial.check` runs it once on seeded operands into an output filled with NaN
and compares with scipy (the operands and scipy's result are made once for all candidates): a
candidate that fails can never be chosen. :func:`time_calls` times whole calls of the bound
kernel (the median of as many as fit in a budget), as a user's call runs; :func:`time_pair`
times two in alternation.

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.ops import SparseMatrix
>>> from sparsetir.tune.candidates import default
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> M = SparseMatrix(A)
>>> bound = bind(default("spmm", 16, 5), M, "spmm", 16)
>>> trial = Trial(M, "spmm", 16)
>>> trial.check(bound)                       # computes what scipy does: no error
>>> seconds = time_calls(bound, trial.args, budget_s=0.01)
>>> 0 < seconds < 1
True
"""

from __future__ import annotations

import time

import numpy as np

from ..ops.hyb import HybLayout, hyb_kernel
from ..ops.operators import bind_kernel
from ..ops.split import bind_split
from ..runtime.threads import thread_count

MIN_CALLS, MAX_CALLS = 5, 200


class CandidateFailed(Exception):
    """A candidate computed a wrong result (or could not be built): it is not chosen."""


def bind(candidate, matrix, kernel: str, feat_size: int):
    """``candidate``'s kernel for ``kernel`` at ``feat_size`` with ``matrix``'s arrays bound."""
    tiles = thread_count() * candidate.tiles_per_thread
    if candidate.layout == "csr":
        return bind_kernel(matrix, kernel, feat_size, prefetch=candidate.prefetch,
                           lanes=candidate.lanes or 1, tiles=tiles)
    if candidate.layout == "split":
        return bind_split(matrix, kernel, feat_size, tiles, prefetch=candidate.prefetch,
                          lanes=candidate.lanes or 1)
    layout = HybLayout.of(matrix, candidate.parts, candidate.widths, tiles)
    compiled, _ = hyb_kernel(layout.config, feat_size, prefetch=candidate.prefetch)
    m, n = matrix.shape
    kept = matrix._kernel_arrays()         # pylint: disable=protected-access
    values = dict(layout.arrays, a=kept["data"], indptr=kept["indptr"],
                  indices=kept["indices"], m=m, n=n, nnz=matrix.nnz)
    fixed = {p.name: values[p.name] for p in compiled.signature.params
             if p.name not in ("x", "y")}
    return matrix._guarded(compiled.bind(**fixed))  # pylint: disable=protected-access


def operands(matrix, kernel: str, feat_size: int, seed: int = 0) -> tuple:
    """Seeded float32 operands of one call, the output filled with NaN."""
    rng = np.random.default_rng(seed)
    m, n = matrix.shape
    if kernel == "sddmm":
        return (rng.standard_normal((m, feat_size), np.float32),
                rng.standard_normal((n, feat_size), np.float32),
                np.full(matrix.nnz, np.nan, np.float32))
    return (rng.standard_normal((n, feat_size), np.float32),
            np.full((m, feat_size), np.nan, np.float32))


REFERENCE_CHUNK = 1 << 22
"""Elements of each gathered operand SDDMM's reference holds at once (32 MiB of float64)."""


def reference(matrix, kernel: str, args: tuple) -> np.ndarray:
    """What scipy (float64) computes for the call ``args``; SDDMM's gathered rows are made a
    chunk of nonzeros at a time, so the memory it takes does not grow with ``nnz * feat``."""
    A = matrix.to_scipy().astype(np.float64)
    if kernel == "sddmm":
        X, Y = args[:2]
        rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
        result = np.empty(A.nnz)
        step = max(1, REFERENCE_CHUNK // max(X.shape[1], 1))
        for start in range(0, A.nnz, step):
            part = slice(start, start + step)
            result[part] = np.einsum("ij,ij->i", X[rows[part]].astype(np.float64),
                                     Y[A.indices[part]].astype(np.float64))
        return result
    if kernel == "spmm_unweighted":
        A.data[:] = 1.0
    return A @ args[0].astype(np.float64)


class Trial:
    """What candidates for one matrix, kernel and feature size are checked and timed on:
    seeded operands and what scipy computes on them, made once for every candidate (on an
    arxiv-size graph at 256 features that takes seconds).

    Example
    -------
    >>> import scipy.sparse
    >>> from sparsetir.ops import SparseMatrix
    >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32,
    ...                         random_state=0)
    >>> trial = Trial(SparseMatrix(A), "spmm", 16)
    >>> [arg.shape for arg in trial.args]         # X, and Y filled with NaN
    [(5, 16), (6, 16)]
    >>> def wrong(X, Y):                         # writes 0, not A @ X
    ...     Y[:] = 0
    >>> trial.check(wrong)
    Traceback (most recent call last):
    ...
    sparsetir.tune.measure.CandidateFailed: its result differs from scipy's
    """

    def __init__(self, matrix, kernel: str, feat_size: int):
        self.args = operands(matrix, kernel, feat_size)
        self.expected = reference(matrix, kernel, self.args)
        self.tolerance = 1e-4 * float(np.abs(self.expected).max(initial=1.0))

    def check(self, bound) -> None:
        """Raise :class:`CandidateFailed` unless ``bound`` computes what scipy does, into an
        output filled with NaN first (every entry must be written)."""
        result = self.args[-1]
        result.fill(np.nan)
        try:
            bound(*self.args)
        except Exception as err:  # noqa: BLE001  (any failure rules the candidate out)
            raise CandidateFailed(f"the call failed: {err}") from err
        if not np.isfinite(result).all() \
                or np.abs(result - self.expected).max(initial=0) > self.tolerance:
            raise CandidateFailed("its result differs from scipy's")


def time_calls(bound, args: tuple, budget_s: float) -> float:
    """The median seconds of whole calls of ``bound`` on ``args``: two warm-up calls, then as
    many as fit in ``budget_s`` (at least ``MIN_CALLS``, at most ``MAX_CALLS``)."""
    for _ in range(2):
        bound(*args)
    times, start = [], time.perf_counter()
    while len(times) < MIN_CALLS or (len(times) < MAX_CALLS
                                     and time.perf_counter() - start < budget_s):
        begin = time.perf_counter()
        bound(*args)
        times.append(time.perf_counter() - begin)
    return float(np.median(times))


def time_pair(first, second, args: tuple, budget_s: float) -> tuple:
    """The median seconds of whole calls of ``first`` and of ``second`` on ``args``, timed in
    alternation (one call each, as many pairs as fit in ``budget_s``, at least ``MIN_CALLS``;
    the pairs in turn ``first, second`` and ``second, first``), so that a machine slowing down
    or speeding up meanwhile weighs on both, and neither always runs on what the other left
    in the caches."""
    first(*args)
    second(*args)
    pair = ((first, 0), (second, 1))
    times, start = ([], []), time.perf_counter()
    while len(times[0]) < MIN_CALLS or (len(times[0]) < MAX_CALLS
                                        and time.perf_counter() - start < budget_s):
        for bound, which in pair if len(times[0]) % 2 == 0 else pair[::-1]:
            begin = time.perf_counter()
            bound(*args)
            times[which].append(time.perf_counter() - begin)
    return float(np.median(times[0])), float(np.median(times[1]))
