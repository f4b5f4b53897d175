"""DGL 1.1.3 message passing: ``u_mul_e_sum``, ``copy_u_sum`` and ``u_dot_v``.

The graph is made once, outside the timed region, with an edge ``c -> r`` for every nonzero
``(r, c)`` of ``A`` (edge ids in ``A.indices`` order), so summing messages into destination
``r`` gives row ``r`` of ``A @ X``; all its sparse formats are created up front. SDDMM is
``u_dot_v(g, Y, X)``: edge ``c -> r`` gets ``dot(Y[c], X[r])`` (shape ``(nnz, 1)``). In
bfloat16 the features and edge weights are bfloat16 tensors (DGL 1.1.3 takes them on the
CPU). Threads:
``OMP_NUM_THREADS`` (set by the harness, with ``DGLBACKEND=pytorch``) and
``torch.set_num_threads``.

Example
-------
>>> c = Dgl(A, threads=2)
>>> Y = c.to_numpy("spmm", c.spmm(X, weighted=True)())
"""

from __future__ import annotations

import dgl
import dgl.ops
import numpy as np
import torch

from contenders import Contender


class Dgl(Contender):
    def __init__(self, A, threads: int):
        super().__init__(A, threads)
        torch.set_num_threads(threads)
        csc = (torch.from_numpy(A.indptr.astype(np.int64)),
               torch.from_numpy(A.indices.astype(np.int64)), torch.arange(A.nnz))
        self.graph = dgl.graph(("csc", csc), num_nodes=A.shape[0])  # A is square
        self.graph.create_formats_()
        self.weights = torch.from_numpy(A.data).reshape(-1, 1)

    def spmm(self, X, weighted, dtype="float32"):
        dtype = getattr(torch, dtype)
        g, X, e = self.graph, torch.from_numpy(X).to(dtype), self.weights.to(dtype)
        if weighted:
            return lambda: dgl.ops.u_mul_e_sum(g, X, e)
        return lambda: dgl.ops.copy_u_sum(g, X)

    def sddmm(self, X, Y, dtype="float32"):
        dtype = getattr(torch, dtype)
        g, X, Y = self.graph, torch.from_numpy(X).to(dtype), torch.from_numpy(Y).to(dtype)
        return lambda: dgl.ops.u_dot_v(g, Y, X)


CONTENDER = Dgl
