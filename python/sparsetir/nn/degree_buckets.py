"""Sequence aggregators over each destination's in-edges, run per bucket of equal in-degree.

A sequence model (SAGEConv's LSTM) reads each destination's messages as a sequence, in ``M``'s
CSR order. Destinations with the same in-degree ``d`` form one batch of sequences of length
``d`` (DGL's degree bucketing), so the model runs once per distinct in-degree
(``per_destination``); a destination with no in-edge gets 0. ``last_states`` runs a
recurrence one step at a time instead, over every destination still reading a message, so
that a traced model unrolls ``max in-degree`` steps, not the sum of the distinct in-degrees.

Both read the matrix through its ``graph_tensors`` (the destinations sorted by in-degree
with ``torch.sort``, and ``degree_counts``, made with the matrix), never its arrays, so
``torch.compile`` traces them.

Example
-------
>>> import numpy as np, torch
>>> from sparsetir.ops import SparseMatrix
>>> M = SparseMatrix.from_csr([0, 2, 2, 3], [0, 1, 1], np.ones(3, np.float32), (3, 2))
>>> last = lambda batch: batch[:, -1]          # each destination's last message
>>> per_destination(M, torch.tensor([[1.0], [2.0], [3.0]]), last, (1,)).ravel().tolist()
[2.0, 0.0, 3.0]
>>> total = lambda x, state: (state[0] + x,)    # a running sum, one message at a time
>>> last_states(M, torch.tensor([[1.0], [2.0], [3.0]]), total,
...             (torch.zeros(3, 1),))[0].ravel().tolist()
[3.0, 0.0, 3.0]
"""

from __future__ import annotations

import torch

from ..ops import SparseMatrix
from ..ops.graph_tensors import graph_tensors


def _by_degree(M: SparseMatrix) -> tuple:
    """``(rows, first, degree_counts)``: the destinations sorted by in-degree (ascending rows
    within one degree), each one's first edge, and ``((degree, destinations), ...)`` by
    increasing degree."""
    arrays = graph_tensors(M)
    rows = torch.sort(arrays.in_degrees, stable=True).indices
    first = arrays.indptr[:-1].to(torch.int64).index_select(0, rows)
    return rows, first, arrays.degree_counts


def per_destination(M: SparseMatrix, messages: torch.Tensor, reduce,
                    out_shape: tuple) -> torch.Tensor:
    """``(num_dst, *out_shape)``: ``reduce(batch)`` (shape ``(destinations, *out_shape)``) for
    each bucket of destinations of one in-degree ``d``, ``batch`` being their messages
    ``(destinations, d, *F)`` (``messages``: one row per edge, in ``M``'s CSR order), and 0
    for destinations with no in-edge."""
    rows, first, degree_counts = _by_degree(M)
    out = messages.new_zeros((M.shape[0],) + tuple(out_shape))
    end = 0
    for degree, count in degree_counts:
        begin, end = end, end + count
        if degree == 0:
            continue
        edges = (first[begin:end, None] + torch.arange(degree)).reshape(-1)
        batch = messages.index_select(0, edges).reshape(
            (count, degree) + tuple(messages.shape[1:]))
        out = out.index_copy(0, rows[begin:end], reduce(batch))
    return out


def last_states(M: SparseMatrix, inputs: torch.Tensor, step, initial: tuple) -> tuple:
    """The state ``step`` leaves each destination in after reading its in-edges' ``inputs``
    (one row per edge, in ``M``'s CSR order) one at a time from ``initial`` (a tuple of
    tensors, one row per destination; a destination with no in-edge keeps its own).
    ``step(x, state)`` takes one input row and the state of each destination still reading,
    and returns the new state (a tuple as ``initial``); it runs ``max in-degree`` times. The
    inputs are gathered once and the states parted with ``torch.split``, whose backward is one
    ``cat``: a slice per step would make the backward fill a zero tensor of the whole size at
    every step."""
    rows, first, degree_counts = _by_degree(M)
    ending = dict(degree_counts)          # how many destinations end after each step
    reading, left = [], M.shape[0] - ending.get(0, 0)
    for degree in range(1, degree_counts[-1][0] + 1 if degree_counts else 1):
        reading.append(left)              # how many read their degree-th message
        left -= ending.get(degree, 0)
    positions = [first[:0]] + [first[M.shape[0] - count:] + degree      # ([:0]: no edge)
                               for degree, count in enumerate(reading)]
    steps = torch.split(inputs.index_select(0, torch.cat(positions)), reading)
    state = tuple(part.index_select(0, rows) for part in initial)
    finished = []
    for degree in range(len(reading) + 1):
        if degree:
            state = step(steps[degree - 1], state)
        count = ending.get(degree, 0)     # the first `count` still reading end here
        if count:
            done, state = zip(*(torch.split(part, (count, part.shape[0] - count))
                                for part in state))
            finished.append(done)
    if not finished:                      # no destination
        return initial
    return tuple(torch.zeros_like(part).index_copy(0, rows, torch.cat(parts))
                 for part, parts in zip(initial, zip(*finished)))
