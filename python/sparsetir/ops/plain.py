"""The plain call: a scipy CSR matrix or torch sparse CSR tensor passed to ``spmm`` or
``sddmm`` on every call, read where it is.

Wrapping a matrix (``SparseMatrix``) copies, sorts and checks it; done on every call, that cost
several times the kernel (SpMM on email-Enron at 32 features: 2.9 ms against 0.6 ms). The plain
call instead gives the caller's own arrays to the kernel, which checks them inside its
parallel loop (``checks_inline``, ``backend.inline_checks``) on every call: row pointers
from 0 to nnz and non-decreasing, column indices in range and strictly increasing within
each row. So an array changed in place between two calls is checked like any new input, and
nothing is kept between calls but the kernel. Row tiles balanced by nonzeros are cut from
the caller's ``indptr`` (one binary search per tile).

It applies to float32 values with int32 or int64 index arrays (both of one dtype: the kernel
is compiled for it, so torch's int64 indices are read as they are, without a narrowing copy),
in canonical form as far as scipy knows (``has_canonical_format``). Anything else, and any call whose arrays the checks refuse,
takes the wrapped path, which sorts columns and sums duplicates, or raises the error that
names the problem.

Example
-------
>>> import numpy as np, scipy.sparse
>>> A = scipy.sparse.csr_matrix((np.float32([1, 2]), [1, 0], [0, 1, 2]), shape=(2, 2))
>>> plain = PlainCSR.of(A)
>>> plain.shape, plain.tile_ptr(4).tolist()
((2, 2), [0, 1, 1, 2, 2])
>>> PlainCSR.of(A.astype(np.float64)) is None          # the wrapped path computes float64
True
"""

from __future__ import annotations

import sys
from functools import lru_cache

import numpy as np
import scipy.sparse

from ..backend.inline_checks import ROWS, TILES
from ..runtime.arguments import sealed
from ..schedule.operators import spmm_lanes
from .arrays import in_torch_func_transform, torch_func_refusal
from .tiles import balanced_row_bounds


INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
"""The index dtypes the plain call's kernels are compiled for."""

INLINE_MIN_FEATURES = 64
"""SpMM on int64 indices from this many features on checks them in each row's loop, where one
register tile covers the row (``schedule.operators.spmm_lanes``; ``checks_inline``)."""


def checks_inline(kind: str, index_dtype, feat_size: int) -> str:
    """Where the plain call's kernel ``kind`` checks the index arrays, inside its loops
    (``backend.inline_checks``): per row (``ROWS``) or per row tile, before the tile's rows
    (``TILES``). Per row only for SpMM on int64 indices (torch's) from
    ``INLINE_MIN_FEATURES`` features on, where one register tile holds the whole row or no
    tile divides it (``spmm_lanes``: one scalar loop): a kernel with several register tiles
    walks each row's nonzeros, and would check them, once per tile, and a tile's flat check
    reads the indices once more, 8 bytes each for int64. Everywhere else per tile: no pass of
    its own over the indices before the kernel (``runtime.compiled_checks``), which would
    read them again, mostly from memory once the kernel has streamed its operands, and is a
    second parallel loop whose threads the OS may park.

    Measured (2 threads, Intel VM, R-MAT graph of arxiv size, whole call over the wrapped
    call, medians of alternating calls in one process, torch int64 CSR, idle): SpMM at 32
    features, the pass 1.21-1.22x, per tile 1.15-1.17x (beside 2 busy processes 1.47x
    against 1.16x), per row 1.42x; at 64, per row 1.08x, per tile 1.11x; at 128, per row
    1.03-1.04x, per tile 1.08-1.09x, the pass 1.06-1.10x. SDDMM, kernel alone: per tile
    1.04x at 32 and 128 features, per row 1.50x and 1.08x; the whole call with the pass
    1.21x at 32. On AMD Zen 3 (AVX2: 64-lane tiles, so two or four tiles a row at 128 or 256
    features; the same measurement, one process per case, 2026-11-30): int64, per row
    against per tile, the synthetic arxiv-size graph 1.09x against 1.02x at 128 features
    and 1.07x against 1.02x at 256, the R-MAT graph 1.05x against 1.01x and 1.05x against
    1.03x; at 64 features (one tile) 1.11x and 1.09x per row, 1.11x and 1.11x per tile.
    scipy's int32, the pass against per tile (per row where measured): SpMM at 32 features
    pubmed 1.25x / 1.19x (1.37x), facebook 1.20x / 1.17x (1.30x), synthetic arxiv-size
    1.07x / 1.06x, R-MAT 1.09x / 1.08x; at 64 email-Enron 1.11x / 1.11x (1.14x), R-MAT
    1.06x / 1.04x (1.07x); at 128 synthetic 1.02x / 1.01x, R-MAT 1.01x / 1.03x. SDDMM at 32
    pubmed 1.22x / 1.14x, synthetic 1.07x / 1.04x, R-MAT 1.09x / 1.04x; at 128 1.00x /
    1.02x and 1.04x / 0.99x. Beside 2 busy processes: SpMM R-MAT at 32 1.31x / 1.09x,
    pubmed 1.24x / 1.27x, facebook 1.30x / 1.19x; SDDMM R-MAT at 32 1.04x / 0.99x, pubmed at
    64 1.20x / 1.08x, facebook at 32 and 64 1.21x / 1.15x and 1.19x / 1.18x.

    Example
    -------
    >>> checks_inline("spmm", "int64", 32), checks_inline("spmm", "int32", 32)
    ('tiles', 'tiles')
    """
    one_tile = feat_size >= INLINE_MIN_FEATURES and spmm_lanes(feat_size) in (1, feat_size)
    wide = np.dtype(index_dtype) == np.int64
    return ROWS if kind != "sddmm" and wide and one_tile else TILES


class PlainCSR:
    """The arrays of a CSR matrix as the caller holds them (no copy of scipy's), unchecked:
    the kernel's checks validate them at every call."""

    def __init__(self, shape: tuple, indptr: np.ndarray, indices: np.ndarray,
                 data: np.ndarray):
        self.shape, self.indptr, self.indices, self.data = shape, indptr, indices, data
        self.nnz = int(indices.size)

    @classmethod
    def of(cls, matrix) -> "PlainCSR | None":
        """The plain form of ``matrix``, or None when the call must take the wrapped path (not
        CSR, not 2-D (scipy's 1-D ``csr_array``), not float32, index arrays that are not both
        int32 or both int64, or a matrix scipy knows has unsorted or repeated columns)."""
        if scipy.sparse.issparse(matrix):
            if matrix.format != "csr" or matrix.ndim != 2 or matrix.dtype != np.float32 \
                    or matrix.indptr.dtype != matrix.indices.dtype \
                    or matrix.indices.dtype not in INDEX_DTYPES \
                    or matrix.data.shape != matrix.indices.shape \
                    or not matrix.has_canonical_format:
                return None
            return cls(tuple(int(s) for s in matrix.shape), matrix.indptr, matrix.indices,
                       matrix.data)
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(matrix, torch.Tensor) \
                or matrix.layout is not torch.sparse_csr or matrix.dtype != torch.float32 \
                or matrix.device.type != "cpu" or matrix.requires_grad or matrix.dim() != 2:
            return None
        try:
            indptr, indices, values = matrix.crow_indices(), matrix.col_indices(), \
                matrix.values()
        except RuntimeError as err:          # torch refuses to read them inside torch.func
            if in_torch_func_transform():
                raise torch_func_refusal("A is read inside") from err
            raise
        if values.dim() != 1 or indptr.dtype != indices.dtype \
                or indices.dtype not in (torch.int32, torch.int64):
            return None
        return cls(tuple(int(s) for s in matrix.shape), indptr.numpy(), indices.numpy(),
                   values.numpy())

    def tile_ptr(self, tiles: int) -> np.ndarray:
        """``tiles`` ranges of rows holding about ``nnz / tiles`` nonzeros each, as
        ``SparseMatrix.row_tiles`` cuts them: ``tiles + 1`` row bounds from 0 to the row
        count, non-decreasing whatever ``indptr`` holds (the kernel's checks refuse a bad
        ``indptr`` itself)."""
        return balanced_row_bounds(self.indptr, tiles)

    def rows(self) -> np.ndarray:
        """The row ids ``0..m-1`` (int32, shared by every call with ``m`` rows)."""
        return _row_ids(self.shape[0])


@lru_cache(maxsize=16)
def _row_ids(m: int) -> np.ndarray:
    return sealed(np.arange(m), np.int32)
