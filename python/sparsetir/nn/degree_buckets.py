"""Sequence aggregators over each destination's in-edges, run per bucket of equal in-degree.

A sequence model (SAGEConv's LSTM) reads each destination's messages as a sequence, in ``M``'s
CSR order. Destinations with the same in-degree ``d`` form one batch of sequences of length
``d`` (DGL's degree bucketing), so the model runs once per distinct in-degree; a destination
with no in-edge gets 0.

Example
-------
>>> import numpy as np, torch
>>> from sparsetir.ops import SparseMatrix
>>> M = SparseMatrix.from_csr([0, 2, 2, 3], [0, 1, 1], np.ones(3, np.float32), (3, 2))
>>> last = lambda batch: batch[:, -1]          # each destination's last message
>>> per_destination(M, torch.tensor([[1.0], [2.0], [3.0]]), last, (1,)).ravel().tolist()
[2.0, 0.0, 3.0]
"""

from __future__ import annotations

import numpy as np
import torch

from ..ops import SparseMatrix


def per_destination(M: SparseMatrix, messages: torch.Tensor, reduce,
                    out_shape: tuple) -> torch.Tensor:
    """``(num_dst, *out_shape)``: ``reduce(batch)`` (shape ``(destinations, *out_shape)``) for
    each bucket of destinations of one in-degree ``d``, ``batch`` being their messages
    ``(destinations, d, *F)`` (``messages``: one row per edge, in ``M``'s CSR order), and 0
    for destinations with no in-edge."""
    degrees = M.in_degrees()
    starts = M.indptr[:-1].astype(np.int64)
    out = messages.new_zeros((M.shape[0],) + tuple(out_shape))
    for degree in np.unique(degrees[degrees > 0]):
        rows = np.flatnonzero(degrees == degree)
        edges = torch.from_numpy((starts[rows, None] + np.arange(degree)).ravel())
        batch = messages.index_select(0, edges).reshape(
            (rows.size, int(degree)) + tuple(messages.shape[1:]))
        out = out.index_copy(0, torch.from_numpy(rows), reduce(batch))
    return out
