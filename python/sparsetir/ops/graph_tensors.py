"""A ``SparseMatrix`` as the torch tensors a custom operator takes, and back.

``torch.compile`` and ``torch.export`` trace torch operators on tensors, not Python objects.
So the operators of ``custom_ops`` take a matrix as its ``indptr`` and ``indices`` (int32
tensors), and find the ``SparseMatrix`` behind them when they run (``custom_ops.matrix_of``):
the matrix whose tensors they are (``LIVE``, by address, kept while the matrix lives), or one
made from them. The kernels, their bindings and the transpose the backward passes walk all
stay with that matrix, outside any traced region.

``GraphTensors`` is made when a ``SparseMatrix`` is made while torch is loaded, so that a
compiled function only reads it: tensors over copies of the matrix's private arrays, their own
(a write through ``M.indptr`` or another public copy does not reach them; a write through
these tensors themselves reaches compiled calls, which read ``data`` and ``values``: torch has
no read-only tensors, so do not write them).

Example
-------
>>> import numpy as np, scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix
>>> M = SparseMatrix(scipy.sparse.csr_matrix(np.float32([[0, 1], [1, 0]])))
>>> arrays = graph_tensors(M)
>>> arrays.indptr.tolist(), arrays.has_empty_rows
([0, 1, 2], False)
"""

from __future__ import annotations

import sys
import weakref
from typing import NamedTuple

import numpy as np

from ..errors import SparseTIRValueError


class GraphTensors(NamedTuple):
    """A ``SparseMatrix``'s arrays as CPU tensors (see the module docstring).

    ``indptr`` (m + 1,) and ``indices`` (nnz,) int32; ``data`` (nnz,) the stored values;
    ``values``: ``M.values`` where it is a tensor (``from_csr`` keeps its autograd), else
    ``data``; ``in_degrees`` (m,) and ``out_degrees`` (n,) int64; ``has_empty_rows``: whether a row
    (destination) has no entry; ``edge_matrix``: ``M.edge_matrix()`` where ``M`` summed
    parallel edges into one entry (``multiplicity``), else None (``M``'s entries are its
    edges: ``edges_of``); ``degree_counts``: ``((degree, rows), ...)``, how many rows have each
    in-degree that occurs, by increasing degree (``nn.degree_buckets``)."""
    indptr: object
    indices: object
    data: object
    values: object
    in_degrees: object
    out_degrees: object
    has_empty_rows: bool
    edge_matrix: object = None
    degree_counts: tuple = ()


LIVE: dict = {}
"""(indptr address, indices address, nnz) -> weak reference to the matrix whose tensors
they are."""


def is_distributed(M) -> bool:
    """Whether ``M`` is a ``sparsetir.distributed.DistSparseMatrix`` (its class says so with
    ``is_distributed = True``; a torch tensor's ``is_distributed`` is a method, not True).

    Example
    -------
    >>> import torch
    >>> is_distributed(torch.zeros(2, 2).to_sparse())
    False
    """
    return getattr(M, "is_distributed", False) is True


def graph_tensors(M) -> GraphTensors:
    """``M``'s ``GraphTensors``, made the first time (outside a traced region: inside one it
    must have been made already, which it is for a matrix made while torch was loaded)."""
    made = getattr(M, "_graph_tensors", None)
    if made is None:
        torch = sys.modules["torch"]
        if torch.compiler.is_compiling():
            raise SparseTIRValueError(
                "this SparseMatrix was made before torch was imported, so torch.compile "
                "cannot read it: import torch first, or call sparsetir.ops.graph_tensors(M) "
                "once before the compiled call")
        made = _made(M, torch)
        M.__dict__["_graph_tensors"] = made
    return made


def _made(M, torch) -> GraphTensors:
    # normal tensors even under torch.inference_mode(): autograd may save them later
    with torch.inference_mode(False):
        indptr, indices, data = (torch.from_numpy(np.array(M.storage(name)))  # copies
                                 for name in ("indptr", "indices", "data"))
        # made anew, not copied from M.storage: a matrix far wider than its nonzeros pays
        in_degrees, out_degrees = (torch.from_numpy(M.derived(name)) for name in (
            "in_degrees", "out_degrees"))
    values = M.values if isinstance(M.values, torch.Tensor) else data
    counts = np.bincount(in_degrees.numpy())
    degrees = np.flatnonzero(counts)
    edges = M.edge_matrix()
    arrays = GraphTensors(indptr, indices, data, values, in_degrees, out_degrees,
                          bool(M.storage("empty_rows").size), None if edges is M else edges,
                          tuple(zip(degrees.tolist(), counts[degrees].tolist())))
    key = (indptr.data_ptr(), indices.data_ptr(), M.nnz)
    LIVE[key] = weakref.ref(M, lambda ref, key=key: _forget(key, ref))
    return arrays


def edges_of(M):
    """``M.edge_matrix()`` (one stored entry per edge, parallel edges each their own) found
    through ``M``'s ``GraphTensors``, so that a traced function reads no array of ``M``
    (``torch.compile`` cannot read a ``SparseMatrix``'s arrays).

    Example
    -------
    >>> import scipy.sparse
    >>> from sparsetir.ops import SparseMatrix
    >>> A = scipy.sparse.coo_matrix((np.float32([1, 2, 3]), ([0, 0, 1], [1, 1, 0])), (2, 2))
    >>> M = SparseMatrix(A)                          # (0, 1) twice: summed into one entry
    >>> M.nnz, edges_of(M).nnz, edges_of(M) is M.edge_matrix()
    (2, 3, True)
    """
    made = graph_tensors(M).edge_matrix
    return M if made is None else made


def _forget(key: tuple, ref) -> None:
    """Drop ``key`` from ``LIVE`` if it still names the matrix of ``ref`` (a matrix made
    since at the same addresses keeps its entry)."""
    if LIVE.get(key) is ref:
        del LIVE[key]


def tracing() -> bool:
    """Whether torch is tracing the caller (``torch.compile`` or ``torch.export``): the
    operators then call their ``custom_ops`` operators."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()
