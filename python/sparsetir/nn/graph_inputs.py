"""What every layer of ``sparsetir.nn`` checks and derives from its graph and features.

The graph is a ``SparseMatrix`` ``M`` of shape ``(num_dst, num_src)``: row ``v`` lists the
sources ``u`` of ``v``'s in-edges, and edge data follow ``M``'s CSR order. Node features are one
tensor, or a pair ``(feat_src, feat_dst)``. One tensor on a square ``M`` serves both sides; on
a non-square ``M`` it holds the sources, and the destinations are its first ``num_dst`` rows
(DGL's convention for blocks); with more destinations than sources it holds the sources only,
which serves a layer that reads no destination features (``GraphConv``, ``RelGraphConv``
without a self-loop).

Example
-------
>>> import numpy as np, scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix
>>> M = SparseMatrix(scipy.sparse.csr_matrix(np.float32([[0, 1, 1], [0, 0, 0]])))
>>> src, dst = node_features(M, torch.ones(3, 4))
>>> tuple(src.shape), tuple(dst.shape)
((3, 4), (2, 4))
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..ops import SparseMatrix
from ..ops.graph_tensors import edges_of, graph_tensors, is_distributed, tracing


def check_matrix(M) -> SparseMatrix:
    """``M``'s graph (``M.edge_matrix()``: one stored entry per edge, parallel edges each
    their own, as DGL's layers count them; found through ``M``'s graph tensors, which a
    compiled layer reads: ``ops.graph_tensors.edges_of``) when ``M`` is a ``SparseMatrix``; a
    ``sparsetir.distributed.DistSparseMatrix`` (this rank's nodes of a partitioned graph) as it
    is; anything else is refused by name."""
    if is_distributed(M):
        return M
    if not isinstance(M, SparseMatrix):
        raise SparseTIRTypeError(
            f"M must be a sparsetir.ops.SparseMatrix (num_dst x num_src, rows are destinations), "
            f"got {type(M).__name__}: wrap it once with SparseMatrix(A) or SparseMatrix.from_csr")
    return edges_of(M)


def check_rows(name: str, tensor, rows: int, what: str) -> None:
    """Refuse ``tensor`` unless it is a floating torch tensor with ``rows`` rows."""
    if not isinstance(tensor, torch.Tensor):
        raise SparseTIRTypeError(f"{name} must be a torch tensor, got {type(tensor).__name__}")
    if not tensor.is_floating_point():
        raise SparseTIRTypeError(f"{name} must be floating point, got {tensor.dtype}")
    if tensor.dim() == 0 or tensor.shape[0] != rows:
        raise SparseTIRValueError(f"{name} has shape {tuple(tensor.shape)}: it needs one row per "
                                  f"{what} of M ({rows})")


def node_features(M: SparseMatrix, feat, transform=None, needs_dst: bool = True) -> tuple:
    """``(feat_src, feat_dst)`` from ``feat`` (see the module docstring), each passed through
    ``transform`` (e.g. dropout) first; one tensor is transformed once, so both sides share it.
    One tensor on a graph with more destinations than sources cannot hold the destinations:
    ``feat_dst`` is then None for a layer that does not read it (``needs_dst=False``, as
    DGL's ``GraphConv``), and refused otherwise (as DGL refuses it)."""
    transform = transform or (lambda x: x)
    num_dst, num_src = M.shape
    if isinstance(feat, tuple):
        if len(feat) != 2:
            raise SparseTIRValueError(f"feat is a tuple of {len(feat)} tensors; a pair "
                                      "(feat_src, feat_dst) is expected")
        check_rows("feat[0]", feat[0], num_src, "source (column)")
        check_rows("feat[1]", feat[1], num_dst, "destination (row)")
        return transform(feat[0]), transform(feat[1])
    check_rows("feat", feat, num_src, "source (column)")
    if num_dst > num_src and needs_dst:
        raise SparseTIRValueError(
            f"M has more destinations ({num_dst}) than sources ({num_src}), so feat cannot hold "
            "both: pass the pair (feat_src, feat_dst)")
    src = transform(feat)
    return src, (None if num_dst > num_src else leading_rows(src, num_dst))


def leading_rows(x, count: int):
    """``x[:count]``, or ``x`` itself where it has exactly ``count`` rows: a square graph's
    destinations are all of its sources, and the slice would add a copy to the backward pass.

    >>> import torch
    >>> x = torch.ones(3, 2)
    >>> leading_rows(x, 3) is x, tuple(leading_rows(x, 2).shape)
    (True, (2, 2))
    """
    return x if x.shape[0] == count else x[:count]


def refuse_zero_in_degree(M: SparseMatrix, layer: str) -> None:
    """Refuse a graph with a destination that has no in-edge (its output would be the bias
    alone, which usually means a missing self-loop)."""
    if tracing():       # known when M was made, so a compiled layer refuses it as well
        if graph_tensors(M).has_empty_rows:
            raise SparseTIRValueError(
                f"M has a destination with no in-edge, so {layer} would give it no message: "
                "add self-loops to M, or construct the layer with allow_zero_in_degree=True")
        return
    empty = np.flatnonzero(M.in_degrees() == 0)
    if empty.size:
        raise SparseTIRValueError(
            f"M has {empty.size} destination(s) with no in-edge (row {empty[0]} is empty), so "
            f"{layer} would give them no message: add self-loops to M, or construct the layer "
            "with allow_zero_in_degree=True to accept that")


def edge_column(name: str, data, M: SparseMatrix, ndim: int) -> torch.Tensor:
    """Per-edge data ``(nnz,)`` or ``(nnz, ...)``, checked, with trailing unit axes added up
    to ``ndim`` axes so that it broadcasts over per-edge messages."""
    check_rows(name, data, M.nnz, "edge (stored entry)")
    return data.reshape(data.shape + (1,) * (ndim - data.dim()))
