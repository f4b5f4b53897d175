"""The typed edges of ``RelGraphConv``, grouped into the sparse matrices its sums run through.

An edge ``u -> v`` of relation ``r`` belongs to a slot: ``(r, u)`` when the layer transforms
first (each slot's source features meet ``W_r``, and the results are summed into the
destinations through a ``num_dst x slots`` matrix), or ``(r, v)`` when it sums first (a
``slots x num_src`` matrix sums each slot's sources, which then meet ``W_r`` and are added into
their destination). The slots are laid out one of two ways:

- dense: every (node, relation) slot, node-major (``slot = node * num_rels + r``), so the typed
  products are one dense matrix product (``TypedLinear.every_type`` / ``sum_over_types``) over
  ``num_rels * nodes`` rows;
- compact: only the slots some edge uses, relation-major (sorted by relation, then node), so the
  typed products run per relation over its slots' rows (``segment_mm``): at most ``nnz`` rows,
  where DGL's per-edge product (``gather_mm``) has ``nnz``.

``edge_groups`` takes the dense layout unless it has more than ``DENSE_FACTOR`` times as many
rows as the compact one (a row of one dense product costs less than a row of the per-relation
products, which also gather their rows first). A grouping is made once per matrix, edge types
and layout, and kept while the matrix lives.

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.ops import SparseMatrix
>>> M = SparseMatrix(scipy.sparse.csr_matrix(np.float32([[1, 1, 0], [0, 1, 1], [0, 0, 0]])))
>>> groups = edge_groups(M, np.array([0, 1, 1, 1]), num_rels=2, by_source=True)
>>> groups.compact, groups.edges.shape              # 3 of the 6 dense slots are used
(False, (3, 6))
>>> groups.edges.indices.tolist()                  # source * 2 + relation, per edge
[0, 3, 3, 5]
"""

from __future__ import annotations

import weakref
from typing import NamedTuple, Optional

import numpy as np
import torch

from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..ops import SparseMatrix

DENSE_FACTOR = 6.0
"""Dense slots are taken while at most this many times as many as compact ones. Measured on Cora
(one thread, 3 to 96 relations, 1433 -> 16, 16 -> 7 and 16 -> 40 features, forward and
backward): the dense layout is faster up to about 6 to 7 times the rows."""


class EdgeGroups(NamedTuple):
    """A grouping (see the module docstring).

    ``edges``: by source, ``num_dst x slots`` with an entry per edge at (its destination, its
    slot); by destination, ``slots x num_src`` with an entry per edge at (its slot, its source).
    ``edge_order``: ``M``'s edge behind each entry of ``edges``. Compact layout only:
    ``slot_types`` (non-decreasing), ``slot_nodes`` (by source: the rows of the features to
    gather) and ``slots_to_destinations`` (by destination: ``num_dst x slots``, an entry per
    slot)."""
    compact: bool
    edges: SparseMatrix
    edge_order: torch.Tensor
    slot_types: Optional[torch.Tensor]
    slot_nodes: Optional[torch.Tensor]
    slots_to_destinations: Optional[SparseMatrix]


_KEPT = weakref.WeakKeyDictionary()
"""SparseMatrix -> {(by_source, num_rels): (edge types, EdgeGroups)}: the last of each kind."""


def edge_groups(M: SparseMatrix, etypes, num_rels: int, by_source: bool):
    """``EdgeGroups`` of ``M`` under ``etypes`` (one relation per edge in ``M``'s CSR order,
    checked by name), or None when ``M`` has no edge."""
    types = checked_etypes(etypes, M.nnz, num_rels)
    kept = _KEPT.setdefault(M, {})
    key = (by_source, num_rels)
    if key in kept and np.array_equal(kept[key][0], types):
        return kept[key][1]
    groups = _grouped(M, types, num_rels, by_source) if M.nnz else None
    kept[key] = (types, groups)
    return groups


def _grouped(M: SparseMatrix, types: np.ndarray, num_rels: int, by_source: bool) -> EdgeGroups:
    num_dst, num_src = M.shape
    destinations = np.repeat(np.arange(num_dst), np.diff(M.indptr))
    nodes, count = (M.indices.astype(np.int64), num_src) if by_source else (destinations, num_dst)
    slot_key, edge_slot = np.unique(types * count + nodes, return_inverse=True)
    slots = slot_key.size
    if num_rels * count <= DENSE_FACTOR * slots:
        edge_slot, slots, compact = nodes * num_rels + types, num_rels * count, False
    else:
        compact = True
    if by_source:
        edges, order = _pattern(destinations, edge_slot, (num_dst, slots))
    else:
        edges, order = _pattern(edge_slot, M.indices, (slots, num_src))
    if not compact:
        return EdgeGroups(False, edges, torch.from_numpy(order), None, None, None)
    slot_nodes = slot_key % count
    to_destinations = None if by_source else \
        _pattern(slot_nodes, np.arange(slots), (num_dst, slots))[0]
    return EdgeGroups(True, edges, torch.from_numpy(order), torch.from_numpy(slot_key // count),
                      torch.from_numpy(slot_nodes) if by_source else None, to_destinations)


def _pattern(rows: np.ndarray, cols: np.ndarray, shape: tuple) -> tuple:
    """``(matrix, order)``: the pattern with an entry at each ``(rows[i], cols[i])`` as a
    ``SparseMatrix`` (a pair given twice, parallel edges of one relation, is two entries), and
    the ``i`` behind each of its entries."""
    order = np.lexsort((cols, rows))
    indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=shape[0]))]
    matrix = SparseMatrix.from_csr(indptr, cols[order], np.ones(order.size, np.float32), shape)
    return matrix, order


def checked_etypes(etypes, nnz: int, num_rels: int) -> np.ndarray:
    """``etypes`` as an int64 numpy copy, refused by name unless one relation in range per
    edge."""
    if isinstance(etypes, torch.Tensor):
        etypes = etypes.detach().cpu().numpy()
    types = np.asarray(etypes)
    if types.dtype.kind not in "iu" and types.size:
        raise SparseTIRTypeError(f"etypes must hold integers, got {types.dtype}")
    if types.shape != (nnz,):
        raise SparseTIRValueError(f"etypes has shape {types.shape}: one relation per edge of M "
                                  f"({nnz},) in M's CSR order is expected")
    if nnz and (types.min() < 0 or types.max() >= num_rels):
        raise SparseTIRValueError(f"etypes holds relations outside [0, {num_rels}): "
                                  f"{types.min()}..{types.max()}")
    return types.astype(np.int64)
