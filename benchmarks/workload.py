"""What each worker benchmarks: a prepared graph, each operator's inputs, the reference and the
check, and the memory-traffic lower bound the achieved bandwidth is measured against.

Graphs are prepared by ``graphs.py`` in the harness's process and read here from its cache
folder, so a worker imports no more than its contender needs (not TVM, for the others).

Traffic lower bound (bytes; 4-byte indices, ``s``-byte values and features: ``s`` = 4 in
float32, 2 in bfloat16; ``m`` rows, ``f`` features, ``nnz`` nonzeros, ``r`` non-empty rows, ``c``
distinct columns): every operand read once and the result written once, nothing more:

- ``spmm``: ``4 (m + 1)`` indptr + ``4 nnz`` indices + ``s nnz`` values + ``s c f`` rows of X read
  + ``s m f`` Y written; ``spmm_unweighted``: the same without the values.
- ``sddmm``: ``4 (m + 1)`` indptr + ``4 nnz`` indices + ``s (r + c) f`` rows of X and Y read +
  ``s nnz`` values written.

Dtypes (``DTYPES``): every measurement starts from the same seeded float32 inputs and the same
float32 reference. In bfloat16 a contender rounds the inputs to bfloat16 itself, outside the
timed region, and its result is checked against the float32 reference with ``RTOL["bfloat16"]``
= ``4 u`` (``u = 2^-8``, bfloat16's unit roundoff) of the sum of the magnitudes of the terms:
rounding X (and Y, or a library's edge values) moves each term by at most ``u`` of its
magnitude, the result's rounding at most ``u`` of the sum, and a float32 accumulation adds
next to nothing, so a kernel that sums in float32 stays within ``2 u``-``3 u``; one that sums in
bfloat16 drifts beyond it on long rows of terms of one sign (its running sum outgrows the
terms, whose low bits it drops), though not necessarily on the benchmark's random-sign inputs,
where the sum of magnitudes is far above the sum.

No-reuse traffic (:func:`no_reuse_bytes`): what the CSR layout of ``sparsetir.ops`` moves when
no gathered row is found in a cache: as above, but one row of X (SpMM) or Y (SDDMM) per nonzero,
``4 nnz f`` instead of ``4 c f``. Between the two bounds, the share of the measured bandwidth
says which limit binds: near 100% of the lower bound, memory bandwidth; far above 100% of the
no-reuse traffic, gathers served by caches; below both, the latency of the gathers.

Example
-------
>>> A = load("cora", cache)        # after graphs.prepare("cora", cache)
>>> X, Y = inputs(A, "spmm", 32)
>>> expected, bound = reference(A, "spmm", X, Y)
>>> check(A @ X, expected, bound)  # the largest error as a share of what is allowed: <= 1 passes
0.0
>>> traffic_bytes(A, "spmm", 32)
788532
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse

OPS = ("spmm", "spmm_unweighted", "sddmm")
OP_TITLES = {"spmm": "SpMM, weighted (Y = A @ X)",
             "spmm_unweighted": "SpMM, unweighted (Y = pattern(A) @ X)",
             "sddmm": "SDDMM (dot(X[r], Y[c]) at every nonzero (r, c))"}
DTYPES = ("float32", "bfloat16")
ITEMSIZE = {"float32": 4, "bfloat16": 2}
RTOL = {"float32": 1e-3, "bfloat16": 4 * 2.0 ** -8}
"""Allowed error per dtype, relative to the sum of the magnitudes of the terms."""


def graph_path(label: str, cache: Path) -> Path:
    """Where ``graphs.prepare`` keeps graph ``label``."""
    return cache / f"{label}.npz"


def load(label: str, cache: Path) -> scipy.sparse.csr_matrix:
    """Prepared graph ``label``: float32 CSR, int32 indices sorted within rows."""
    return scipy.sparse.load_npz(graph_path(label, cache))


INPUT_OFFSET = 16
"""Bytes past a 64-byte cache line where every input starts, for every contender alike: where
numpy puts a large array in a fresh process (glibc serves it from ``mmap``, 16 bytes past a
page). Later in a process an array can start anywhere (glibc raises its ``mmap`` threshold when
such memory is freed, and serves the next ones from its heap), and where it starts matters: a
gathered row that straddles one more cache line costs every library that line (the
arxiv-size graphs at 32 features: 3.6-4.0 ms 16 bytes off, 2.35-2.48 ms on the line, in ours'
unweighted SpMM). Until 2026-11-29 each measurement's inputs started wherever its process's
allocator put them."""

CACHE_LINE = 64


def placed(array: np.ndarray, offset: int = INPUT_OFFSET) -> np.ndarray:
    """A copy of ``array`` starting ``offset`` bytes past a cache line.

    Example
    -------
    >>> placed(np.ones((3, 4), np.float32)).ctypes.data % CACHE_LINE
    16
    """
    memory = np.empty(array.nbytes + CACHE_LINE, np.uint8)
    start = (offset - memory.ctypes.data) % CACHE_LINE
    copy = memory[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def inputs(A, op: str, feat: int) -> tuple:
    """Seeded float32 inputs, each ``placed`` (``INPUT_OFFSET`` bytes past a cache line):
    ``(X, None)`` for SpMM (``X``: columns x feat), ``(X, Y)`` for SDDMM (``X``: rows x feat,
    ``Y``: columns x feat)."""
    rng = np.random.default_rng(feat)
    m, n = A.shape
    if op == "sddmm":
        return (placed(rng.standard_normal((m, feat), np.float32)),
                placed(rng.standard_normal((n, feat), np.float32)))
    return placed(rng.standard_normal((n, feat), np.float32)), None


def _pattern(A):
    return scipy.sparse.csr_matrix((np.ones(A.nnz, np.float32), A.indices, A.indptr), A.shape)


def _row_ids(A) -> np.ndarray:
    return np.repeat(np.arange(A.shape[0], dtype=np.int32), np.diff(A.indptr))


def _sddmm(A, X, Y, chunk: int = 1 << 18) -> np.ndarray:
    rows, out = _row_ids(A), np.empty(A.nnz, np.float32)
    for lo in range(0, A.nnz, chunk):
        hi = min(lo + chunk, A.nnz)
        out[lo:hi] = np.einsum("ef,ef->e", X[rows[lo:hi]], Y[A.indices[lo:hi]])
    return out


def reference(A, op: str, X, Y, path: Path | None = None) -> tuple:
    """``(expected, bound)``: scipy's (SDDMM: numpy's, in chunks) result, kept in ``path`` (a
    ``.npy`` file) when one is given, and the sum of the magnitudes of the terms of each entry
    (SpMM: an upper bound of it, ``|A| @ max|X[c, :]|``; SDDMM: ``|X[r]| |Y[c]|``), which
    :func:`check` scales the allowed error by."""
    B = _pattern(A) if op == "spmm_unweighted" else A
    if path and path.exists():
        expected = np.load(path)
    else:
        expected = _sddmm(A, X, Y) if op == "sddmm" else np.asarray(B @ X)
        if path:
            np.save(path.with_suffix(".part.npy"), expected)
            path.with_suffix(".part.npy").replace(path)
    if op == "sddmm":
        bound = np.linalg.norm(X, axis=1)[_row_ids(A)] * np.linalg.norm(Y, axis=1)[A.indices]
    else:
        bound = (abs(B) @ np.abs(X).max(axis=1))[:, None]
    return expected, bound


def check(got, expected: np.ndarray, bound: np.ndarray, dtype: str = "float32") -> float:
    """The largest error of ``got`` as a share of what is allowed in ``dtype`` (``RTOL[dtype]
    * bound`` + 1e-6 per entry): at most 1 passes; inf for NaNs or a shape or size that
    differs."""
    got = np.asarray(got, np.float32)
    if got.size != expected.size:
        return float("inf")
    err = np.abs(got.reshape(expected.shape) - expected) / (RTOL[dtype] * bound + 1e-6)
    return float(err.max()) if np.isfinite(err).all() else float("inf")


def traffic_bytes(A, op: str, feat: int, reuse: bool = True, dtype: str = "float32") -> int:
    """The memory-traffic lower bound of one call in ``dtype`` (formula in the module
    docstring); with ``reuse=False``, the no-reuse traffic (:func:`no_reuse_bytes`)."""
    m, nnz, s = A.shape[0], A.nnz, ITEMSIZE[dtype]
    cols = int(np.count_nonzero(np.bincount(A.indices, minlength=A.shape[1]))) if reuse \
        else nnz
    csr = 4 * (m + 1) + 4 * nnz
    if op == "sddmm":
        rows = int(np.count_nonzero(np.diff(A.indptr)))
        return csr + s * (rows + cols) * feat + s * nnz
    values = s * nnz if op == "spmm" else 0
    return csr + values + s * cols * feat + s * m * feat


def no_reuse_bytes(A, op: str, feat: int, dtype: str = "float32") -> int:
    """The traffic of the CSR layout when every gathered row comes from memory (module
    docstring)."""
    return traffic_bytes(A, op, feat, reuse=False, dtype=dtype)
