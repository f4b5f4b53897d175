"""The one adapter of the DGL test port: a ``DGLGraph`` as a ``SparseMatrix``, and DGL's
operator and layer calls on a graph as the same calls of ``sparsetir.ops`` / ``sparsetir.nn``.

A graph becomes the matrix whose row ``v`` holds the sources of ``v``'s in-edges
(``(num_dst, num_src)``), one stored entry per edge, sorted by destination, then source, then
DGL edge id (parallel edges stay edges of their own). ``Adapted.to_matrix`` puts edge data
given in DGL's edge-id order into the matrix's order, ``Adapted.to_dgl`` takes per-edge results
back; both are ``index_select``, so gradients flow through them. Nothing else is translated:
the ported tests keep DGL's inputs, references and tolerances.

A heterograph's relations are made one graph with ``dgl.to_homogeneous`` where DGL treats them
as one (``edge_softmax`` on a dict of logits); a single relation is chosen with ``etype``.

Example
-------
>>> g = dgl.graph(([0, 1, 1], [1, 0, 1]))
>>> Adapted(g).matrix.to_scipy().toarray().tolist()
[[0.0, 1.0], [1.0, 1.0]]
>>> gspmm(g, "copy_lhs", "sum", torch.ones(2, 1), None).ravel().tolist()
[1.0, 2.0]
"""

from __future__ import annotations

import dgl
import numpy as np
import torch

import sparsetir.nn as snn
import sparsetir.ops as ops


class Adapted:
    """``g`` (one relation: ``etype``) as ``matrix``, with its edge-order maps."""

    def __init__(self, g, etype=None):
        etype = g.to_canonical_etype(etype) if etype is not None or len(g.canonical_etypes) > 1 \
            else g.canonical_etypes[0]
        src, dst = (t.numpy().astype(np.int64) for t in g.edges(order="eid", etype=etype))
        num_src, num_dst = g.num_nodes(etype[0]), g.num_nodes(etype[2])
        if g.is_block:
            num_src, num_dst = g.num_src_nodes(etype[0]), g.num_dst_nodes(etype[2])
        order = np.lexsort((np.arange(src.size), src, dst))     # matrix position -> DGL edge id
        indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=num_dst))])
        self.matrix = ops.SparseMatrix.from_csr(indptr, src[order], np.ones(src.size, np.float32),
                                                (num_dst, num_src))
        self.order = torch.from_numpy(order)
        self.inverse = torch.from_numpy(np.argsort(order))       # DGL edge id -> matrix position

    def to_matrix(self, edge_data):
        """Edge data in DGL's edge-id order, in the matrix's order (None stays None)."""
        return None if edge_data is None else edge_data.index_select(0, self.order)

    def to_dgl(self, edge_data):
        """Per-edge data in the matrix's order, in DGL's edge-id order."""
        return edge_data.index_select(0, self.inverse)

    def renumbered(self, g):
        """``g`` (homogeneous) with its edge ids in the matrix's order (``dgl.reorder_graph``):
        the graph on which DGL reads each node's in-edges in the order the matrix holds them."""
        return dgl.reorder_graph(g, edge_permute_algo="custom",
                                 permute_config={"edges_perm": self.order.to(g.idtype)})


def _targeted(adapted, data, target):
    return adapted.to_matrix(data) if target == "e" else data


def gspmm(g, op, reduce_op, lhs_data, rhs_data):
    """``dgl.ops.gspmm``."""
    adapted = Adapted(g)
    return ops.gspmm(adapted.matrix, op, reduce_op, lhs_data, adapted.to_matrix(rhs_data))


def gsddmm(g, op, lhs_data, rhs_data, lhs_target="u", rhs_target="v"):
    """``dgl.ops.gsddmm``."""
    adapted = Adapted(g)
    return adapted.to_dgl(ops.gsddmm(adapted.matrix, op, _targeted(adapted, lhs_data, lhs_target),
                                     _targeted(adapted, rhs_data, rhs_target), lhs_target,
                                     rhs_target))


def edgewise(name):
    """``dgl.<name>(g, x[, y], etype=None)`` for DGL's per-edge short names (``copy_u``,
    ``u_add_v``, ``u_dot_v``, ...), on one relation."""
    def call(g, *data, etype=None):
        adapted = Adapted(g, etype)
        return adapted.to_dgl(getattr(ops, name)(adapted.matrix, *data))
    return call


def edge_softmax(g, logits, eids=dgl.base.ALL, norm_by="dst"):
    """``dgl.ops.edge_softmax``; a dict of logits by relation is one softmax over the
    relations' union (``dgl.to_homogeneous``), given back by canonical relation."""
    if isinstance(logits, dict):
        return _hetero_edge_softmax(g, logits, norm_by)
    adapted = Adapted(g)
    if isinstance(eids, str):
        return adapted.to_dgl(ops.edge_softmax(adapted.matrix, adapted.to_matrix(logits),
                                               norm_by=norm_by))
    return ops.edge_softmax(adapted.matrix, logits, adapted.inverse[eids], norm_by)


def _hetero_edge_softmax(g, logits, norm_by):
    sub = g.edge_type_subgraph([g.to_canonical_etype(key) for key in logits])
    by_relation = {sub.to_canonical_etype(key): value for key, value in logits.items()}
    homogeneous = dgl.to_homogeneous(sub)
    relation = homogeneous.edata[dgl.ETYPE].numpy()
    local = homogeneous.edata[dgl.EID].numpy()
    stacked = torch.cat([by_relation[name] for name in sub.canonical_etypes])
    offsets = np.cumsum([0] + [sub.num_edges(name) for name in sub.canonical_etypes])
    rows = torch.from_numpy(offsets[relation] + local)
    scores = torch.empty_like(stacked).index_copy(
        0, rows, edge_softmax(homogeneous, stacked.index_select(0, rows), norm_by=norm_by))
    return {name: scores[offsets[i]:offsets[i + 1]]
            for i, name in enumerate(sub.canonical_etypes)}


class Layer(torch.nn.Module):
    """A ``sparsetir.nn`` layer called as DGL's: ``layer(g, feat, ...)``; edge tensors
    (``edge_weight``, RelGraphConv's ``etypes`` and ``norm``) and attention are in DGL's edge
    order. ``state_dict`` and parameters are the wrapped layer's, under DGL's names."""

    EDGE_ARGUMENTS = {"edge_weight", "etypes", "norm"}

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, g, feat, *args, get_attention=False, **kwargs):
        adapted = Adapted(g)
        names = {snn.RelGraphConv: ("etypes", "norm")}.get(type(self.layer), ())
        kwargs.update(zip(names, args))
        args = args[len(names):]
        kwargs = {name: adapted.to_matrix(value) if name in self.EDGE_ARGUMENTS else value
                  for name, value in kwargs.items()}
        if get_attention:
            out, attention = self.layer(adapted.matrix, feat, *args, get_attention=True, **kwargs)
            return out, adapted.to_dgl(attention)
        return self.layer(adapted.matrix, feat, *args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("layer"), name)

    def state_dict(self, *args, **kwargs):
        return self.layer.state_dict(*args, **kwargs)

    def load_state_dict(self, state, strict=True, assign=False):
        return self.layer.load_state_dict(state, strict, assign)


def layer(name):
    """``dgl.nn.pytorch.<name>(...)``'s counterpart: ``sparsetir.nn.<name>`` with the same
    arguments, called as DGL's (``Layer``)."""
    return lambda *args, **kwargs: Layer(getattr(snn, name)(*args, **kwargs))
