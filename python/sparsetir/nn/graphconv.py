"""``GraphConv``: Kipf and Welling's graph convolution, with DGL's arguments and parameters.

``h_v = sum over in-edges (u, v) of c_u c_v (x_u W)  (+ bias)``, where ``c`` is
``deg^-1/2`` on both sides (``norm="both"``), ``1 / in-degree`` on the destination
(``"right"``), ``1 / out-degree`` on the source (``"left"``) or 1 (``"none"``); degrees below 1
count as 1. ``edge_weight`` multiplies each edge's message. ``M``'s stored values are not used
(only its pattern), as DGL uses the graph.

Example
-------
>>> import scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix
>>> from sparsetir.nn import GraphConv
>>> A = scipy.sparse.random(6, 6, density=0.5, format="csr", dtype="float32", random_state=0)
>>> M = SparseMatrix(A + scipy.sparse.identity(6, dtype="float32", format="csr"))
>>> conv = GraphConv(4, 2)
>>> conv(M, torch.randn(6, 4)).shape
torch.Size([6, 2])
"""

from __future__ import annotations

import torch
from torch import nn

from .. import ops
from ..ops.graph_tensors import graph_tensors
from ..errors import SparseTIRValueError
from .graph_inputs import check_matrix, edge_column, node_features, refuse_zero_in_degree
from .kernel_plans import Call, Nodes, precompile

_NORMS = ("none", "both", "right", "left")


class GraphConv(nn.Module):
    """Graph convolution (see the module docstring).

    Parameters
    ----------
    in_feats, out_feats : int
    norm : {"both", "right", "left", "none"}
    weight, bias : bool
        Whether the layer has a ``weight`` of shape ``(in_feats, out_feats)`` (without one,
        ``forward`` takes ``weight=``) and a ``bias`` of shape ``(out_feats,)``.
    activation : callable or None
    allow_zero_in_degree : bool
        Accept destinations with no in-edge (their output is the bias alone); refused if False.
    """

    def __init__(self, in_feats, out_feats, norm="both", weight=True, bias=True,
                 activation=None, allow_zero_in_degree=False):
        super().__init__()
        if norm not in _NORMS:
            raise SparseTIRValueError(f"norm must be one of {_NORMS}, got {norm!r}")
        self._in_feats, self._out_feats, self._norm = in_feats, out_feats, norm
        self._allow_zero_in_degree = allow_zero_in_degree
        self._activation = activation
        self.weight = nn.Parameter(torch.empty(in_feats, out_feats)) if weight else None
        self.bias = nn.Parameter(torch.empty(out_feats)) if bias else None
        self.reset_parameters()
        width = out_feats if weight and in_feats > out_feats else in_feats   # as forward
        precompile([Call("copy_u_sum", (Nodes((width,)),))], torch.get_default_dtype())

    def reset_parameters(self):
        """Glorot-uniform ``weight``, zero ``bias``."""
        if self.weight is not None:
            nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def set_allow_zero_in_degree(self, set_value):
        """Accept (True) or refuse (False) destinations with no in-edge from now on."""
        self._allow_zero_in_degree = set_value

    def forward(self, M, feat, weight=None, edge_weight=None):
        """``(num_dst, out_feats)`` from ``feat`` of shape ``(num_src, in_feats)`` (or the pair
        ``(feat_src, feat_dst)``; one tensor serves any graph, a bipartite one with more
        destinations than sources included, as only the destinations' count is read);
        ``weight`` only for a layer made with ``weight=False``;
        ``edge_weight`` of shape ``(nnz,)`` in ``M``'s CSR order."""
        M = check_matrix(M)
        if not self._allow_zero_in_degree:
            refuse_zero_in_degree(M, "GraphConv")
        feat_src, _ = node_features(M, feat, needs_dst=False)   # only M's destinations count
        if weight is not None and self.weight is not None:
            raise SparseTIRValueError("weight was passed to a GraphConv that has its own weight "
                                      "parameter: construct it with weight=False")
        weight = self.weight if weight is None else weight
        if edge_weight is None:
            aggregate = lambda h: ops.copy_u_sum(M, h)      # noqa: E731
        else:
            aggregate = lambda h: ops.u_mul_e_sum(         # noqa: E731
                M, h, edge_column("edge_weight", edge_weight, M, h.dim()))
        transform_first = weight is not None and self._in_feats > self._out_feats
        h = feat_src @ weight if transform_first else feat_src    # aggregate the narrower side
        if self._norm in ("left", "both"):     # row scales commute with the product: scale h
            h = h * _degree_scale(graph_tensors(M).out_degrees, h, self._norm)
        rst = aggregate(h)
        if weight is not None and not transform_first:
            rst = rst @ weight
        if self._norm in ("right", "both"):
            rst = rst * _degree_scale(graph_tensors(M).in_degrees, rst, self._norm)
        if self.bias is not None:
            rst = rst + self.bias
        return rst if self._activation is None else self._activation(rst)

    def extra_repr(self):
        return f"in={self._in_feats}, out={self._out_feats}, normalization={self._norm}"


def _degree_scale(degrees: torch.Tensor, like: torch.Tensor, norm: str) -> torch.Tensor:
    """Per node ``deg^-1/2`` (``norm="both"``) or ``1 / deg``, degrees (int64) clamped at 1,
    in ``like``'s dtype and shaped to broadcast over its rows."""
    degrees = degrees.clamp(min=1).to(like)
    scale = degrees.pow(-0.5) if norm == "both" else 1.0 / degrees
    return scale.reshape(scale.shape + (1,) * (like.dim() - 1))
