"""``GATConv``: graph attention (Velickovic et al.), multi-head, with DGL's arguments and
parameter names.

Per head ``k``: ``z = fc(x)`` split into heads, ``e_uv = leaky_relu(a_l . z_u + a_r . z_v)``,
``alpha = edge_softmax`` over each destination's in-edges, ``h_v = sum_u alpha_uv z_u``
(``+ res_fc(x_v)`` with ``residual``, ``+ bias``). The output has shape
``(num_dst, num_heads, out_feats)``.

Example
-------
>>> import scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix
>>> from sparsetir.nn import GATConv
>>> A = scipy.sparse.random(6, 6, density=0.4, format="csr", dtype="float32", random_state=0)
>>> M = SparseMatrix(A + scipy.sparse.identity(6, dtype="float32", format="csr"))
>>> gat = GATConv(4, 3, num_heads=2)
>>> h, attention = gat(M, torch.randn(6, 4), get_attention=True)
>>> tuple(h.shape), attention.shape == (M.nnz, 2, 1)
((6, 2, 3), True)
"""

from __future__ import annotations

import torch
from torch import nn

from .. import ops
from .graph_inputs import (check_matrix, edge_column, leading_rows, node_features,
                           refuse_zero_in_degree)
from .kernel_plans import Call, Edges, Nodes, precompile


class GATConv(nn.Module):
    """Graph attention convolution (see the module docstring).

    Parameters
    ----------
    in_feats : int or (int, int)
        Source and destination feature sizes; a pair gives separate ``fc_src`` and ``fc_dst``.
    out_feats, num_heads : int
    feat_drop, attn_drop : float
        Dropout on the input features and on the attention weights.
    negative_slope : float
        Of the leaky ReLU on the attention logits.
    residual : bool
        Add ``res_fc(x_v)`` (a ``Linear``, or the identity when the sizes agree).
    activation : callable or None
    allow_zero_in_degree : bool
        Accept destinations with no in-edge (their output is the bias alone); refused if False.
    bias : bool
    """

    def __init__(self, in_feats, out_feats, num_heads, feat_drop=0.0, attn_drop=0.0,
                 negative_slope=0.2, residual=False, activation=None,
                 allow_zero_in_degree=False, bias=True):
        super().__init__()
        self._num_heads, self._out_feats = num_heads, out_feats
        self._in_src_feats, self._in_dst_feats = (
            in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats))
        self._allow_zero_in_degree = allow_zero_in_degree
        width = num_heads * out_feats
        if isinstance(in_feats, tuple):
            self.fc_src = nn.Linear(self._in_src_feats, width, bias=False)
            self.fc_dst = nn.Linear(self._in_dst_feats, width, bias=False)
        else:
            self.fc = nn.Linear(self._in_src_feats, width, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        self.has_linear_res = residual and self._in_dst_feats != width
        if not residual:
            self.res_fc = None
        elif self.has_linear_res:
            self.res_fc = nn.Linear(self._in_dst_feats, width, bias=bias)
        else:
            self.res_fc = nn.Identity()
        self.has_explicit_bias = bias and not self.has_linear_res
        self.bias = nn.Parameter(torch.empty(width)) if self.has_explicit_bias else None
        self.activation = activation
        self.reset_parameters()
        scores = (num_heads, 1)
        precompile([Call("u_add_v", (Nodes(scores), Nodes(scores))),   # forward's order
                    Call("edge_softmax", (Edges(scores),)),
                    Call("u_mul_e_sum", (Nodes((num_heads, out_feats)), Edges(scores)))],
                   torch.get_default_dtype())

    def reset_parameters(self):
        """Glorot-normal weights with the gain of ReLU, zero biases."""
        gain = nn.init.calculate_gain("relu")
        for name in ("fc", "fc_src", "fc_dst"):
            if hasattr(self, name):
                nn.init.xavier_normal_(getattr(self, name).weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        if self.has_linear_res:
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
            if self.res_fc.bias is not None:
                nn.init.zeros_(self.res_fc.bias)

    def set_allow_zero_in_degree(self, set_value):
        """Accept (True) or refuse (False) destinations with no in-edge from now on."""
        self._allow_zero_in_degree = set_value

    def forward(self, M, feat, edge_weight=None, get_attention=False):
        """``(num_dst, num_heads, out_feats)`` from ``feat`` of shape ``(num_src, in_feats)``
        (or the pair ``(feat_src, feat_dst)``), and the attention ``(nnz, num_heads, 1)`` in
        ``M``'s CSR order with ``get_attention``; ``edge_weight`` ``(nnz,)`` scales it."""
        M = check_matrix(M)
        if not self._allow_zero_in_degree:
            refuse_zero_in_degree(M, "GATConv")
        heads = (self._num_heads, self._out_feats)
        h_src, h_dst = node_features(M, feat, self.feat_drop)
        if isinstance(feat, tuple):
            fc_src, fc_dst = (self.fc_src, self.fc_dst) if hasattr(self, "fc_src") \
                else (self.fc, self.fc)
            z_src = fc_src(h_src).view(*h_src.shape[:-1], *heads)
            z_dst = fc_dst(h_dst).view(*h_dst.shape[:-1], *heads)
        else:
            z_src = self.fc(h_src).view(*h_src.shape[:-1], *heads)
            z_dst = leading_rows(z_src, M.shape[0])
        left = (z_src * self.attn_l).sum(dim=-1, keepdim=True)
        right = (z_dst * self.attn_r).sum(dim=-1, keepdim=True)
        logits = self.leaky_relu(ops.u_add_v(M, left, right))
        attention = self.attn_drop(ops.edge_softmax(M, logits))
        if edge_weight is not None:
            attention = attention * edge_column("edge_weight", edge_weight, M, attention.dim())
        rst = ops.u_mul_e_sum(M, z_src, attention)
        if self.res_fc is not None:
            rst = rst + self.res_fc(h_dst).view(*h_dst.shape[:-1], -1, self._out_feats)
        if self.bias is not None:
            rst = rst + self.bias.view(*heads)      # broadcasts over the leading axes
        if self.activation is not None:
            rst = self.activation(rst)
        return (rst, attention) if get_attention else rst
