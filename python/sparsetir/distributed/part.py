"""``Part``: what one process holds of a partitioned matrix (``partition`` makes them).

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.distributed import partition
>>> A = scipy.sparse.csr_matrix(np.float32([[1, 0, 2], [0, 0, 0], [3, 4, 0]]))
>>> part = partition(A, 2)[1]
>>> part.owned.tolist(), part.nnz, part.halo(0).tolist()    # rows 2; needs rows 0, 1 of part 0
([2], 2, [0, 1])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Block:
    """The entries of a part's rows whose columns part ``q`` owns: CSR over the part's local
    rows (``indptr``) and ``q``'s local column numbering (``indices``, increasing within a
    row), ``data`` the values, ``num_cols`` the rows part ``q`` owns."""
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    num_cols: int

    @property
    def nnz(self) -> int:
        return int(self.indices.size)


@dataclass(frozen=True)
class Part:
    """Part ``rank`` of ``num_parts`` of an ``num_nodes`` x ``num_nodes`` matrix with
    ``nnz_total`` entries.

    ``owned``: the global ids of the rows (nodes) it owns, increasing; local row ``i`` is node
    ``owned[i]``. ``blocks[q]``: a :class:`Block` per part ``q``. ``global_edges``: for each
    local edge (blocks' entries in block order), its position in the global CSR order.
    ``out_degrees``: the global out-degree (entries in its column) of each owned node.
    ``partition_id``: what the parts of one partition share (``partition`` gives a digest of
    the matrix and of every node's part; "" for a part made by hand).
    """
    rank: int
    num_parts: int
    num_nodes: int
    nnz_total: int
    owned: np.ndarray
    blocks: list
    global_edges: np.ndarray
    out_degrees: np.ndarray
    partition_id: str = ""

    @property
    def num_owned(self) -> int:
        return int(self.owned.size)

    @property
    def nnz(self) -> int:
        """The local edges: the entries of the owned rows."""
        return int(self.global_edges.size)

    def block_offsets(self) -> np.ndarray:
        """Where each block's edges start among the local edges (``num_parts + 1`` values)."""
        return np.concatenate([[0], np.cumsum([b.nnz for b in self.blocks])]).astype(np.int64)

    def halo(self, q: int) -> np.ndarray:
        """The rows of part ``q`` (``q``'s local ids, increasing) that this part's entries
        reference: the rows of X it needs from ``q``."""
        return np.unique(self.blocks[q].indices).astype(np.int64)

    def in_degrees(self) -> np.ndarray:
        """Each owned row's entries (int64)."""
        return sum(np.diff(b.indptr).astype(np.int64) for b in self.blocks)
