"""The nonzero split of the CPU kernels: rows longer than a row tile's share of the nonzeros
cut into pieces, so that no single row bounds how evenly the threads share a call.

The row-tiled kernels (``kernels.tiled_kernels``) give a thread whole rows. A row with more
than ``nnz / threads`` nonzeros (a hub of a power-law graph; the virtual node that OGB's graph
models join to every node) keeps one thread busy after the others have finished, however the
other rows are tiled. Here the same kernels run over row segments of at most
``ceil(nnz / tiles)`` nonzeros (``kernels.segment_tiled_kernels``), tiles cut where the
nonzeros are balanced:

- SDDMM: every segment writes the results of its own nonzeros, so the CSR's segments in its
  own order (``format.row_segments``) are tiled as rows are: one kernel call.
- SpMM: the segments of one row would all write its output row. A copy of the matrix
  (``SplitLayout``, made when the kernel is bound) puts the long rows after the others, and a
  call runs three kernels: the other rows into ``Y``; the long rows' pieces into partial rows
  (a buffer of the call); the pieces of each long row summed into its row of ``Y`` (the
  unweighted kernel over the matrix that maps each long row to its pieces).

The search (``sparsetir.tune``) offers it as the layout ``"split"`` where the longest row
bounds the CSR kernel: where it holds more than a thread's even share of the nonzeros, plus a
tile's (``cost_model``), and keeps it only where it measures faster. It is not the default,
which needs no copy and one call. On 2 threads it rarely can win: on a 2-vCPU AMD EPYC (Zen 3)
VM, a 200,000-node graph whose one hub row holds two thirds of the nonzeros ran SpMM at 64
features in 6.2 ms with CSR and 6.4 split (SDDMM 6.3 and 6.2; 9.6 on one thread): the hub's
gathers, in column order, cost far less per nonzero than the other rows' scattered ones. The
bundled graphs' longest rows exceed a thread's share only past 63 (Cora) to 518 (Pubmed)
threads.

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.ops import SparseMatrix
>>> A = scipy.sparse.random(40, 30, density=0.1, format="csr", dtype=np.float32, random_state=0)
>>> A = scipy.sparse.vstack([A, np.ones((1, 30), np.float32)]).tocsr()   # a row of every column
>>> M = SparseMatrix(A)
>>> spmm = bind_split(M, "spmm", 16, tiles=8)
>>> X, Y = np.ones((30, 16), np.float32), np.full((41, 16), np.nan, np.float32)
>>> spmm(X, Y)
>>> np.allclose(Y, A @ X, atol=1e-5)
True
>>> SplitLayout.of(M, 8).long_rows.tolist()        # the rows cut into pieces
[40]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..format.segments import segment_bounds
from ..runtime.arguments import sealed
from .tiles import balanced_row_bounds


@dataclass(frozen=True, eq=False)
class SplitLayout:
    """SpMM's copy of a matrix cut for ``tiles`` row tiles, pieces of at most ``max_nnz``
    nonzeros: the rows that are not cut (``short_rows``, their pointers ``short_ptr`` and tiles
    ``short_tiles``) over the first ``short_nnz`` entries of ``indices`` and ``data``, then the
    ``long_rows``' pieces (``piece_ptr``, ``piece_tiles``) over the rest, and the pieces of each
    long row (``fix_ptr`` over ``piece_ids``, ``fix_tiles``). Made at each bind and kept only
    by the kernels bound to it, so a candidate the search drops frees it."""
    max_nnz: int
    short_rows: np.ndarray
    short_ptr: np.ndarray
    short_tiles: np.ndarray
    short_nnz: int
    long_rows: np.ndarray
    piece_ptr: np.ndarray
    piece_tiles: np.ndarray
    fix_ptr: np.ndarray
    fix_tiles: np.ndarray
    piece_ids: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @classmethod
    def of(cls, matrix, tiles: int) -> "SplitLayout":
        """The layout of the ``SparseMatrix`` ``matrix`` for ``tiles`` row tiles."""
        indptr = matrix.storage("indptr").astype(np.int64)
        max_nnz = piece_length(matrix.nnz, tiles)
        lengths = np.diff(indptr)
        long_rows = np.flatnonzero(lengths > max_nnz)
        short_rows = np.flatnonzero(lengths <= max_nnz)
        moved = _nonzeros_of_rows(indptr, np.concatenate([short_rows, long_rows]))
        short_ptr = np.concatenate([[0], np.cumsum(lengths[short_rows])])
        piece_ptr, piece_rows = segment_bounds(
            np.concatenate([[0], np.cumsum(lengths[long_rows])]), max_nnz)
        fix_ptr = np.searchsorted(piece_rows, np.arange(long_rows.size + 1))
        return cls(
            max_nnz, _index(short_rows), _index(short_ptr), _tiles(short_ptr, tiles),
            int(short_ptr[-1]), _index(long_rows), _index(piece_ptr), _tiles(piece_ptr, tiles),
            _index(fix_ptr), _tiles(fix_ptr, tiles), _index(np.arange(piece_rows.size)),
            _index(matrix.storage("indices")[moved]),
            sealed(matrix.storage("data")[moved], np.float32))

    @property
    def pieces(self) -> int:
        return self.piece_ptr.size - 1


def piece_length(nnz: int, tiles: int) -> int:
    """The most nonzeros a piece holds: a tile's even share, ``ceil(nnz / tiles)``."""
    return max(1, -(-nnz // tiles))


def _nonzeros_of_rows(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The positions of the nonzeros of ``rows``, row after row."""
    lengths = indptr[1:][rows] - indptr[:-1][rows]
    firsts = np.repeat(indptr[:-1][rows] - (np.cumsum(lengths) - lengths), lengths)
    return firsts + np.arange(int(lengths.sum()), dtype=np.int64)


def _index(array) -> np.ndarray:
    return sealed(array, np.int32)


def _tiles(pointer: np.ndarray, tiles: int) -> np.ndarray:
    """Tiles of about equal nonzeros over the positions of ``pointer``, at most one per
    position (a tile with no position would be a launch's share with no work)."""
    return _index(balanced_row_bounds(pointer, max(1, min(tiles, pointer.size - 1))))


def bind_split(matrix, name: str, feat_size: int, tiles: int, prefetch: int = 0,
               lanes: int | None = None):
    """Kernel ``name`` (``"spmm"``, ``"spmm_unweighted"`` or ``"sddmm"``) over the
    ``SparseMatrix`` ``matrix`` cut for ``tiles`` row tiles, callable as ``sparsetir.ops``
    calls its kernels: SpMM ``(X, Y)``, SDDMM ``(X, Y, out)``; it refuses outputs over the
    matrix's arrays, as ``operators.bind_kernel``'s kernels do. ``prefetch``: how many nonzeros
    ahead gathered rows are prefetched (0: none); ``lanes``: SpMM's register tile (default
    ``spmm_lanes``'s)."""
    from .operators import segment_kernel  # pylint: disable=import-outside-toplevel
    m, n = matrix.shape

    def bound(kernel_name: str, **arrays):
        kernel = segment_kernel(kernel_name, feat_size, prefetch, lanes)
        return matrix._guarded(kernel.bind(validate=False, **arrays))  # pylint: disable=W0212

    if name == "sddmm":     # every segment writes its own nonzeros' results: the CSR's order
        seg_ptr, seg_rows = segment_bounds(matrix.storage("indptr").astype(np.int64),
                                           piece_length(matrix.nnz, tiles))
        seg_tiles = _tiles(seg_ptr, tiles)
        return bound("sddmm", tile_ptr=seg_tiles, rows=_index(seg_rows), indptr=_index(seg_ptr),
                     indices=matrix.storage("indices"), t=seg_tiles.size - 1, s=seg_rows.size,
                     m=m, n=n, nnz=matrix.nnz)
    layout = SplitLayout.of(matrix, tiles)
    cut = layout.short_nnz
    short_values, long_values = {}, {}
    if name == "spmm":
        short_values["a"], long_values["a"] = layout.data[:cut], layout.data[cut:]
    short = bound(name, tile_ptr=layout.short_tiles, rows=layout.short_rows,
                  indptr=layout.short_ptr, indices=layout.indices[:cut],
                  t=layout.short_tiles.size - 1, s=layout.short_rows.size, m=m, n=n, nnz=cut,
                  **short_values)
    if not layout.long_rows.size:
        return short
    pieces = bound(name, tile_ptr=layout.piece_tiles, rows=layout.piece_ids,
                   indptr=layout.piece_ptr, indices=layout.indices[cut:],
                   t=layout.piece_tiles.size - 1, s=layout.pieces, m=layout.pieces, n=n,
                   nnz=matrix.nnz - cut, **long_values)
    sums = bound("spmm_unweighted", tile_ptr=layout.fix_tiles, rows=layout.long_rows,
                 indptr=layout.fix_ptr, indices=layout.piece_ids,
                 t=layout.fix_tiles.size - 1, s=layout.long_rows.size, m=m, n=layout.pieces,
                 nnz=layout.pieces)
    return SplitSpmm(short, pieces, sums, (layout.pieces, feat_size))


class SplitSpmm:
    """SpMM over a ``SplitLayout``: ``short`` writes the rows that are not cut, ``pieces`` the
    long rows' pieces into partial rows of shape ``partial_shape`` (a buffer of each call), and
    ``sums`` each long row's pieces into its row of Y. Called ``(X, Y)`` as a ``BoundKernel``
    is, with its ``parameters``, ``call_fast``, ``time``, ``protect`` and ``fixed_bytes``."""

    native_call = False                  # no C plan of its own: numpy_calls leaves it alone
    parameters = ["x", "y"]

    def __init__(self, short, pieces, sums, partial_shape: tuple):
        self.short, self.pieces, self.sums = short, pieces, sums
        self.partial_shape = partial_shape

    def __call__(self, x, y) -> None:
        partial = np.empty(self.partial_shape, np.float32)
        self.short(x, y)
        self.pieces(x, partial)
        self.sums(partial, y)

    def call_fast(self, args: tuple) -> bool:
        """As ``BoundKernel.call_fast``: False, with nothing run, when the arguments need the
        full path."""
        x, y = args
        if not self.short.call_fast((x, y)):
            return False
        partial = np.empty(self.partial_shape, np.float32)
        if not self.pieces.call_fast((x, partial)):
            self.pieces(x, partial)
        if not self.sums.call_fast((partial, y)):
            self.sums(partial, y)
        return True

    def time(self, x, y, number: int = 20, repeat: int = 3) -> float:
        """Mean seconds of one call's three kernels, as ``BoundKernel.time`` times one."""
        partial = np.zeros(self.partial_shape, np.float32)
        return (self.short.time(x, y, number=number, repeat=repeat)
                + self.pieces.time(x, partial, number=number, repeat=repeat)
                + self.sums.time(partial, y, number=number, repeat=repeat))

    def protect(self, **arrays) -> "SplitSpmm":
        """As ``BoundKernel.protect``: calls refuse outputs over ``arrays`` too."""
        for part in (self.short, self.pieces, self.sums):
            part.protect(**arrays)
        return self

    @property
    def fixed_bytes(self) -> int:
        return sum(part.fixed_bytes for part in (self.short, self.pieces, self.sums))
