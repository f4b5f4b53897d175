"""``SAGEConv``: GraphSAGE (Hamilton et al.), with DGL's arguments and parameter names.

``h_v = fc_self(x_v) + fc_neigh(agg over in-edges (u, v) of x_u)``, the aggregator being
``"mean"`` (the mean of the sources), ``"pool"`` (the element-wise max of
``relu(fc_pool(x_u))``), ``"gcn"`` (``(x_v + sum of x_u) / (in-degree + 1)``, with no
``fc_self`` and a separate ``bias``) or ``"lstm"`` (the last hidden state of an ``nn.LSTM``,
``lstm``, run over the sources in ``M``'s CSR order, destinations batched by in-degree as DGL
does: ``degree_buckets``; DGL runs it in edge-id order, the same order where a graph's edge ids
follow its CSR order, ``docs/migration.md`` §6). A destination with no in-edge aggregates to 0. ``edge_weight``
multiplies each edge's message. Traced (``torch.compile``, ``torch.export``), the LSTM runs
from ``lstm``'s parameters, one step at a time over every destination still reading
(``degree_buckets.last_states``): dynamo does not trace ``nn.LSTM``.

Example
-------
>>> import scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix
>>> from sparsetir.nn import SAGEConv
>>> M = SparseMatrix(scipy.sparse.random(6, 6, density=0.4, format="csr", dtype="float32"))
>>> sage = SAGEConv(4, 2, "mean")
>>> sage(M, torch.randn(6, 4)).shape
torch.Size([6, 2])
>>> sorted(name for name, _ in sage.named_parameters())
['fc_neigh.weight', 'fc_self.bias', 'fc_self.weight']
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from .. import ops
from ..ops.graph_tensors import graph_tensors, is_distributed, tracing
from ..errors import SparseTIRValueError
from .degree_buckets import last_states, per_destination
from .graph_inputs import check_matrix, edge_column, leading_rows, node_features
from .kernel_plans import Call, Nodes, precompile

_AGGREGATORS = ("mean", "gcn", "pool", "lstm")
_REDUCERS = {"mean": "mean", "gcn": "sum", "pool": "max"}
_LSTM_WEIGHTS = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")


class SAGEConv(nn.Module):
    """GraphSAGE convolution (see the module docstring).

    Parameters
    ----------
    in_feats : int or (int, int)
        Source and destination feature sizes (one int: both).
    out_feats : int
    aggregator_type : {"mean", "gcn", "pool", "lstm"}
    feat_drop : float
        Dropout on the input features.
    bias : bool
    norm, activation : callable or None
        Applied to the output, activation first.
    """

    def __init__(self, in_feats, out_feats, aggregator_type, feat_drop=0.0, bias=True,
                 norm=None, activation=None):
        super().__init__()
        if aggregator_type not in _AGGREGATORS:
            raise SparseTIRValueError(f"aggregator_type must be one of {_AGGREGATORS}, got "
                                      f"{aggregator_type!r}")
        self._in_src_feats, self._in_dst_feats = (
            in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats))
        self._out_feats = out_feats
        self._aggre_type = aggregator_type
        self.norm, self.activation = norm, activation
        self.feat_drop = nn.Dropout(feat_drop)
        if aggregator_type == "pool":
            self.fc_pool = nn.Linear(self._in_src_feats, self._in_src_feats)
        if aggregator_type == "lstm":
            self.lstm = nn.LSTM(self._in_src_feats, self._in_src_feats, batch_first=True)
        self.fc_neigh = nn.Linear(self._in_src_feats, out_feats, bias=False)
        if aggregator_type != "gcn":
            self.fc_self = nn.Linear(self._in_dst_feats, out_feats, bias=bias)
        else:
            self.bias = nn.Parameter(torch.zeros(out_feats)) if bias else None
        self.reset_parameters()
        precompile([self._aggregation()], torch.get_default_dtype())

    def _aggregation(self):
        """The ``sparsetir.ops`` call of ``forward`` (without ``edge_weight``), planned when
        the layer is built (``kernel_plans``)."""
        if self._aggre_type == "lstm":
            return Call("copy_u", (Nodes((self._in_src_feats,)),))
        narrower = self._out_feats if self._in_src_feats > self._out_feats \
            else self._in_src_feats
        width = self._in_src_feats if self._aggre_type == "pool" else narrower
        return Call("gspmm", ("copy_lhs", _REDUCERS[self._aggre_type], Nodes((width,)), None))

    def reset_parameters(self):
        """Glorot-uniform weights with the gain of ReLU (``nn.Linear``'s own biases kept); the
        LSTM's own initialisation."""
        gain = nn.init.calculate_gain("relu")
        if hasattr(self, "lstm"):
            self.lstm.reset_parameters()
        for name in ("fc_pool", "fc_self", "fc_neigh"):
            if hasattr(self, name):
                nn.init.xavier_uniform_(getattr(self, name).weight, gain=gain)

    def forward(self, M, feat, edge_weight=None):
        """``(num_dst, out_feats)`` from ``feat`` of shape ``(num_src, in_feats)`` (or the pair
        ``(feat_src, feat_dst)``); ``edge_weight`` of shape ``(nnz,)`` in ``M``'s CSR order."""
        M = check_matrix(M)
        if self._aggre_type == "lstm" and is_distributed(M):
            raise SparseTIRValueError(
                "SAGEConv's lstm aggregator reads each destination's sources in the whole "
                "graph's CSR order, which a DistSparseMatrix's local edges do not keep: use "
                "mean, gcn or pool on a DistSparseMatrix")
        feat_src, feat_dst = node_features(M, feat, self.feat_drop)
        reduce_op = _REDUCERS.get(self._aggre_type)

        def aggregate(h):
            if edge_weight is None:
                return ops.gspmm(M, "copy_lhs", reduce_op, h, None)
            return ops.gspmm(M, "mul", reduce_op, h,
                             edge_column("edge_weight", edge_weight, M, h.dim()))

        transform_first = self._in_src_feats > self._out_feats   # aggregate the narrower side
        if self._aggre_type == "pool":
            h_neigh = self.fc_neigh(aggregate(functional.relu(self.fc_pool(feat_src))))
        elif self._aggre_type == "lstm":
            h_neigh = self.fc_neigh(self._lstm_neighbourhood(M, feat_src, edge_weight))
        elif self._aggre_type == "mean":
            h_neigh = (aggregate(self.fc_neigh(feat_src)) if transform_first
                       else self.fc_neigh(aggregate(feat_src)))
        else:
            h_neigh = self._gcn_neighbourhood(M, feat, feat_src, feat_dst, aggregate,
                                              transform_first)
        if self._aggre_type == "gcn":
            rst = h_neigh if self.bias is None else h_neigh + self.bias
        else:
            rst = self.fc_self(feat_dst) + h_neigh
        if self.activation is not None:
            rst = self.activation(rst)
        return rst if self.norm is None else self.norm(rst)

    def _lstm_neighbourhood(self, M, feat_src, edge_weight):
        """The LSTM's last hidden state over each destination's messages (0: no in-edge)."""
        if edge_weight is None:
            messages = ops.copy_u(M, feat_src)
        else:
            messages = ops.u_mul_e(M, feat_src, edge_column("edge_weight", edge_weight, M,
                                                             feat_src.dim()))
        width = self._in_src_feats
        if tracing():
            return self._traced_lstm(M, messages)

        def last_state(batch):
            zeros = batch.new_zeros((1, batch.shape[0], width))
            return self.lstm(batch, (zeros, zeros))[1][0].squeeze(0)
        return per_destination(M, messages, last_state, (width,))

    def _traced_lstm(self, M, messages):
        """``lstm``'s last hidden state over each destination's messages, from its parameters
        (``_lstm_parameters``: dynamo refuses to trace an ``nn.LSTM``, or to read its
        parameters through it), its cell written out (gates ``i, f, g, o``, as
        ``nn.LSTM``): the one-layer LSTM with biases the layer builds, anything else refused by
        name."""
        weights = self._lstm_parameters
        if set(weights) != set(_LSTM_WEIGHTS):
            raise SparseTIRValueError(
                f"a traced SAGEConv runs lstm as a one-layer, one-way nn.LSTM with biases "
                f"(parameters {', '.join(_LSTM_WEIGHTS)}); this one has {', '.join(weights)}")
        w_hh = weights["weight_hh_l0"]
        inputs = functional.linear(messages, weights["weight_ih_l0"],
                                   weights["bias_ih_l0"] + weights["bias_hh_l0"])

        def step(x, state):
            h, c = state
            i, f, g, o = (x + functional.linear(h, w_hh)).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c
        zeros = messages.new_zeros((M.shape[0], self._in_src_feats))
        return last_states(M, inputs, step, (zeros, zeros))[0]

    def __setattr__(self, name, value):
        """As ``nn.Module``'s; ``lstm`` also sets ``_lstm_parameters``, its parameters by name
        (the dict ``nn.LSTM`` keeps them in, so a parameter it is given later is there too),
        which a traced forward reads."""
        super().__setattr__(name, value)
        if name == "lstm":
            super().__setattr__("_lstm_parameters", value._parameters)

    def _gcn_neighbourhood(self, M, feat, feat_src, feat_dst, aggregate, transform_first):
        """``(x_v + sum of x_u) / (in-degree + 1)``, through ``fc_neigh``."""
        if isinstance(feat, tuple) and feat[0].shape[1:] != feat[1].shape[1:]:
            raise SparseTIRValueError(
                f"the gcn aggregator adds source and destination features, so feat[0] "
                f"{tuple(feat[0].shape)} and feat[1] {tuple(feat[1].shape)} need the same "
                "feature shape")
        h_src = self.fc_neigh(feat_src) if transform_first else feat_src
        if isinstance(feat, tuple):
            h_dst = self.fc_neigh(feat_dst) if transform_first else feat_dst
        else:
            h_dst = leading_rows(h_src, M.shape[0])
        degrees = graph_tensors(M).in_degrees.to(feat_dst).unsqueeze(-1)
        h_neigh = (aggregate(h_src) + h_dst) / (degrees + 1)
        return h_neigh if transform_first else self.fc_neigh(h_neigh)
