"""What each rank runs in ``test_dist_layers``: the layers that need all of a destination's
in-edges together (``GATConv``, ``SAGEConv`` "pool", ``RelGraphConv``) and the operators under
them (``edge_softmax``, ``gsddmm``, the ``max`` reducer) on a ``DistSparseMatrix``, against the
same calls on the whole graph in one process: outputs, gradients of the node and edge inputs,
and the parameters' gradients summed over the ranks. A difference raises, naming the rank.

Example
-------
>>> # run(check_local_graph_layers, 2, args=(A, parts))
"""

import numpy as np
import torch
import torch.distributed as dist

from dist_workers import RTOL, ATOL
from sparsetir import ops
from sparsetir.distributed import DistSparseMatrix
from sparsetir.nn import GATConv, RelGraphConv, SAGEConv

FEATS, RELATIONS = 6, 3


def _close(name, got, want, rank, what):
    if not np.allclose(got.detach().numpy(), want.detach().numpy(), rtol=RTOL, atol=ATOL):
        worst = float((got - want).abs().max())
        raise AssertionError(f"rank {rank}, {what}: {name} differs (max |diff| {worst})")


def _inputs(A):
    rng = np.random.default_rng(1)
    n = A.shape[0]

    def floats(*shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    return {"X": floats(n, FEATS), "E": floats(A.nnz), "R": floats(n, 8, 4),
            "types": torch.from_numpy(rng.integers(0, RELATIONS, A.nnz))}


def _layers():
    """``(name, make, call)``: ``call(layer, M, X, edge_data, types)`` -> (output, edge output
    or None)."""
    def gat(layer, M, X, w, types):
        return layer(M, X, edge_weight=w.abs(), get_attention=True)

    def pool(layer, M, X, w, types):
        return layer(M, X, edge_weight=w), None

    def rgcn(layer, M, X, w, types):
        return layer(M, X, types, norm=w.reshape(-1, 1)), None

    def rgcn_numpy_types(layer, M, X, w, types):
        return layer(M, X, types.numpy()), None
    return [
        ("GATConv", lambda: GATConv(FEATS, 4, num_heads=2, allow_zero_in_degree=True,
                                    residual=True), gat),
        ("SAGEConv pool", lambda: SAGEConv(FEATS, 5, "pool"), pool),
        ("RelGraphConv basis", lambda: RelGraphConv(FEATS, 3, RELATIONS, "basis", 2), rgcn),
        ("RelGraphConv narrow", lambda: RelGraphConv(FEATS, 8, RELATIONS), rgcn),
        ("RelGraphConv numpy etypes", lambda: RelGraphConv(FEATS, 8, RELATIONS, "bdd", 2),
         rgcn_numpy_types),
    ]


def check_local_graph_layers(rank, world_size, A, parts):
    """Each layer of ``_layers`` and the operators of ``check_operators_on_local_graph`` on
    this rank's ``DistSparseMatrix`` equal the whole graph's, for both strategies."""
    del world_size
    data = _inputs(A)
    part = parts[rank]
    rows, edges = torch.from_numpy(part.owned), torch.from_numpy(part.global_edges)
    M = ops.SparseMatrix(A)
    for strategy in ("broadcast", "halo"):
        DM = DistSparseMatrix(part, strategy=strategy)
        check_operators_on_local_graph(rank, M, DM, data, rows, edges, strategy)
        for name, make, call in _layers():
            what = f"{strategy}/{name}"
            torch.manual_seed(0)
            layer = make()
            X, w = data["X"].clone().requires_grad_(), data["E"].clone().requires_grad_()
            want, want_edges = call(layer, M, X, w, data["types"])
            (want * _weights(want)).sum().backward()
            want_params = {k: p.grad.clone() for k, p in layer.named_parameters()}
            layer.zero_grad()
            X_local = data["X"][rows].clone().requires_grad_()
            w_local = data["E"][edges].clone().requires_grad_()
            got, got_edges = call(layer, DM, X_local, w_local, data["types"][edges])
            _close("output", got, want[rows], rank, what)
            if got_edges is not None:
                _close("edge output", got_edges, want_edges[edges], rank, what)
            (got * _weights(want)[rows]).sum().backward()
            _close("grad X", X_local.grad, X.grad[rows], rank, what)
            if w.grad is not None:
                _close("grad of the edge data", w_local.grad, w.grad[edges], rank, what)
            for key, param in layer.named_parameters():
                summed = param.grad.clone()
                dist.all_reduce(summed)
                _close(f"grad {key} (summed over ranks)", summed, want_params[key], rank, what)


def check_operators_on_local_graph(rank, M, DM, data, rows, edges, strategy):
    """``copy_u_max``, ``u_dot_v``, ``e_add_v`` and ``edge_softmax`` (all edges, and ``eids``)
    on ``DM`` against ``M``, with the sources' gradients."""
    R, E = data["R"], data["E"].reshape(-1, 1, 1)
    cases = [
        ("copy_u_max", lambda G, r, e: ops.copy_u_max(G, r), False),
        ("u_dot_v", lambda G, r, e: ops.u_dot_v(G, r, r), True),
        ("e_add_v", lambda G, r, e: ops.e_add_v(G, e, r), True),
        ("edge_softmax", lambda G, r, e: ops.edge_softmax(G, ops.u_add_e(G, r, e)), True),
    ]
    for name, call, per_edge in cases:
        what = f"{strategy}/{name}"
        r, e = R.clone().requires_grad_(), E.clone().requires_grad_()
        want = call(M, r, e)
        (want * _weights(want)).sum().backward()
        r_local, e_local = R[rows].clone().requires_grad_(), E[edges].clone().requires_grad_()
        got = call(DM, r_local, e_local)
        picked = edges if per_edge else rows
        _close("result", got, want[picked], rank, what)
        (got * _weights(want)[picked]).sum().backward()
        _close("grad of the node data", r_local.grad, r.grad[rows], rank, what)
        if e_local.grad is not None:
            _close("grad of the edge data", e_local.grad, e.grad[edges], rank, what)
    chosen = torch.arange(DM.nnz - 1, -1, -3)      # some local edges, in another order
    logits = data["E"][edges][chosen].reshape(-1, 1)
    _close("edge_softmax over eids", ops.edge_softmax(DM, logits, eids=chosen),
           _softmax_over(DM, logits, chosen.numpy()), rank, strategy)


def _softmax_over(DM, logits, chosen):
    """The softmax of ``logits`` within each destination among the local edges ``chosen``
    (computed in torch from the destinations of the local edges)."""
    destinations = np.concatenate([np.repeat(np.arange(DM.part.num_owned), np.diff(b.indptr))
                                   for b in DM.part.blocks])[chosen]
    out = torch.empty_like(logits)
    for v in np.unique(destinations):
        mask = torch.from_numpy(destinations == v)
        out[mask] = torch.softmax(logits[mask], dim=0)
    return out


def _weights(result):
    """Fixed weights of a result's shape, so that every entry's gradient differs."""
    generator = torch.Generator().manual_seed(7)
    return torch.randn(result.shape, generator=generator)
