"""``RelGraphConv``: the relational graph convolution of R-GCN (Schlichtkrull et al.), with
DGL's arguments and parameter names.

``h_v = sum over relations r, sum over in-edges (u, v) of type r of norm_uv x_u W_r``
(``+ x_v loop_weight + h_bias``): a destination reached under several relations gets the sum.
``etypes`` gives each edge's relation in ``M``'s CSR order. On a
``sparsetir.distributed.DistSparseMatrix`` (``feat``, ``etypes`` and ``norm``: this rank's
nodes and local edges) it runs on the rank's local graph (``DM.local_graph()``).

How it runs (``edge_groups``): with ``in_feat > out_feat`` each (relation, source) slot is
transformed first and the results are summed into the destinations at width ``out_feat``;
otherwise each (relation, destination) slot sums its sources first, at width ``in_feat``, and
the sums are transformed. The typed products run over every slot as one dense product, or,
where most of those slots would be empty (many relations), per relation over the slots in use
(``segment_mm``): never more rows than DGL's one product per edge (``gather_mm``). While torch
traces it (``torch.compile``, ``torch.export``), which cannot group edges by the values of
``etypes``, it transforms first over the dense slots (``relation_slots``), or per edge where
those would be many times more than the edges.

Example
-------
>>> import scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix
>>> from sparsetir.nn import RelGraphConv
>>> M = SparseMatrix(scipy.sparse.random(6, 6, density=0.5, format="csr", dtype="float32"))
>>> conv = RelGraphConv(4, 2, num_rels=3, regularizer="basis", num_bases=2)
>>> conv(M, torch.randn(6, 4), torch.randint(0, 3, (M.nnz,))).shape
torch.Size([6, 2])
"""

from __future__ import annotations

import torch
from torch import nn

from .. import ops
from ..ops.graph_tensors import graph_tensors, is_distributed, tracing
from ..errors import SparseTIRValueError
from .edge_groups import edge_groups
from .graph_inputs import check_matrix, check_rows, leading_rows
from .kernel_plans import Call, Edges, Nodes, precompile
from .linear import TypedLinear
from .relation_slots import dense_slots_fit, slot_messages


class RelGraphConv(nn.Module):
    """Relational graph convolution (see the module docstring).

    Parameters
    ----------
    in_feat, out_feat, num_rels : int
    regularizer : {None, "basis", "bdd"}
        Of the per-relation weights (``TypedLinear``, as ``linear_r``).
    num_bases : int or None
        None: ``num_rels``.
    bias : bool
        Add ``h_bias``.
    activation : callable or None
    self_loop : bool
        Add ``x_v @ loop_weight`` (``x_v``: the first ``num_dst`` rows of ``feat``).
    dropout : float
        On the output.
    layer_norm : bool
        Layer-normalise the aggregated messages (``layer_norm_weight``) before bias and loop.
    """

    def __init__(self, in_feat, out_feat, num_rels, regularizer=None, num_bases=None, bias=True,
                 activation=None, self_loop=True, dropout=0.0, layer_norm=False):
        super().__init__()
        if regularizer is not None and num_bases is None:
            num_bases = num_rels
        self.linear_r = TypedLinear(in_feat, out_feat, num_rels, regularizer, num_bases)
        self.bias, self.activation = bias, activation
        self.self_loop, self.layer_norm = self_loop, layer_norm
        if bias:
            self.h_bias = nn.Parameter(torch.zeros(out_feat))
        if layer_norm:
            self.layer_norm_weight = nn.LayerNorm(out_feat, elementwise_affine=True)
        if self_loop:
            self.loop_weight = nn.Parameter(torch.empty(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))
        self.dropout = nn.Dropout(dropout)
        width = min(in_feat, out_feat)        # the side _messages sums over the edges
        precompile([Call("u_mul_e_sum", (Nodes((width,)), Edges((1,), grad=False)))],
                   torch.get_default_dtype())      # with norm, as R-GCN's entity classification

    def forward(self, M, feat, etypes, norm=None, *, presorted=False):
        """``(num_dst, out_feat)`` from ``feat`` ``(num_src, in_feat)``, ``etypes`` ``(nnz,)``
        (integers below ``num_rels``, in ``M``'s CSR order) and ``norm`` ``(nnz,)`` or
        ``(nnz, 1)`` scaling each edge's message. ``presorted`` is accepted for DGL's callers
        and not needed: the layer groups the edges by relation itself."""
        del presorted
        if is_distributed(M):   # this rank's rows, on its local graph
            graph = M.local_graph()
            return self.forward(graph.matrix, graph.gather(feat),
                                graph.to_matrix_order("etypes", etypes),
                                graph.to_matrix_order("norm", norm))
        M = check_matrix(M)
        num_dst, num_src = M.shape
        check_rows("feat", feat, num_src, "source (column)")
        if feat.dim() != 2 or (self.self_loop and num_dst > num_src):
            raise SparseTIRValueError(
                f"feat {tuple(feat.shape)} must be (num_src, in_feat), and M {M.shape} may have "
                "no more destinations than sources with self_loop=True (the self-loop reads "
                "feat's first num_dst rows)")
        h = self._messages(M, feat, etypes, norm)
        if self.layer_norm:
            h = self.layer_norm_weight(h)
        if self.bias:
            h = h + self.h_bias
        if self.self_loop:
            h = h + leading_rows(feat, num_dst) @ self.loop_weight
        if self.activation:
            h = self.activation(h)
        return self.dropout(h)

    def _messages(self, M, feat, etypes, norm):
        """The sum over relations and in-edges of ``norm_uv x_u W_r`` per destination."""
        linear = self.linear_r
        if norm is not None:
            check_rows("norm", norm, M.nnz, "edge (stored entry)")
            if norm.numel() != M.nnz:
                raise SparseTIRValueError(f"norm has shape {tuple(norm.shape)}: one scale per "
                                          f"edge, (nnz,) or (nnz, 1), is expected")
        if tracing():
            if dense_slots_fit(M.shape[1], linear.num_types, M.nnz):
                return slot_messages(linear, M, feat, etypes, norm)
            return self._messages_per_edge(M, feat, etypes, norm)
        transform_first = linear.in_size > linear.out_size
        groups = edge_groups(M, etypes, linear.num_types, by_source=transform_first)
        if groups is None:      # no edge: zeros, with (zero) gradients for W, feat and norm
            return self._messages_per_edge(M, feat, etypes, norm)
        if norm is not None:
            norm = norm.reshape(-1, 1).index_select(0, groups.edge_order)

        def edge_sum(x):
            if norm is None:
                return ops.copy_u_sum(groups.edges, x)
            return ops.u_mul_e_sum(groups.edges, x, norm)

        if not groups.compact:
            if transform_first:
                return edge_sum(linear.every_type(feat))
            return linear.sum_over_types(edge_sum(feat))
        if transform_first:
            rows = feat.index_select(0, groups.slot_nodes)
            return edge_sum(linear(rows, groups.slot_types, sorted_by_type=True))
        sums = linear(edge_sum(feat), groups.slot_types, sorted_by_type=True)
        return ops.copy_u_sum(groups.slots_to_destinations, sums)

    def _messages_per_edge(self, M, feat, etypes, norm):
        """``_messages`` as torch traces it where the dense slots of ``relation_slots`` would
        be too many: each edge's ``norm_uv x_u W_r`` (``gather_mm``), summed into its
        destination (``copy_e_sum``). The compact groupings of ``edge_groups`` are made from
        the values of ``etypes``, which a traced function does not know."""
        h = self.linear_r(feat.index_select(0, graph_tensors(M).indices), etypes)
        if norm is not None:
            h = h * norm.reshape(-1, 1)
        return ops.copy_e_sum(M, h)
