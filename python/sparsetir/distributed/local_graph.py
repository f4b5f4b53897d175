"""``LocalGraph``: this rank's destinations with every source their edges reach, as one
``SparseMatrix`` (DistDGL's local graph with halo nodes), for what needs all of a
destination's in-edges together: the ``max`` and ``min`` reducers, the edge softmax, and the
layers built on them (``GATConv``, ``SAGEConv`` "pool", ``RelGraphConv``).

A node's row lives on its owner, so all its in-edges are this rank's local edges, spread over
the blocks by the rank owning each source. The local graph puts them in one matrix of
``num_owned`` rows whose columns are the owned nodes first (so the destinations are the first
sources: DGL's convention for blocks) and then, for every other rank ``q`` in rank order,
block ``q``'s columns as the strategy's exchange delivers them (the halo rows with ``halo``,
all of ``q``'s rows with ``broadcast``). Any single-process operator or layer on it gives this
rank's rows of the whole graph's result.

* ``gather(X_local)``: the sources' rows, in the matrix's column order (``GatherRows``: one
  exchange; its backward pass sends a remote row's gradient back to its owner through the
  exchange's transpose);
* ``to_matrix_order(name, data)`` / ``to_local_order(data)``: per-edge data between the
  part's local edge order (block by block) and the matrix's CSR order (row by row).

Example
-------
>>> import os, tempfile
>>> import numpy as np, scipy.sparse, torch, torch.distributed as dist
>>> from sparsetir.distributed import DistSparseMatrix, partition
>>> store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
>>> dist.init_process_group("gloo", store=store, rank=0, world_size=1)    # one rank: all of A
>>> A = scipy.sparse.random(6, 6, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> DM = DistSparseMatrix(partition(A, 1)[0])
>>> X_local = torch.rand(6, 16)[torch.from_numpy(np.asarray(DM.part.owned))]
>>> import sparsetir
>>> G = DM.local_graph()
>>> h = sparsetir.ops.copy_u_max(G.matrix, G.gather(X_local))   # this rank's rows
>>> torch.equal(h, sparsetir.ops.copy_u_max(DM, X_local))
True
>>> dist.destroy_process_group()
"""

from __future__ import annotations

import numpy as np
import torch

from .. import ops
from ..errors import SparseTIRTypeError, SparseTIRValueError
from .operands import check_node_rows, check_rows_dtype


class LocalGraph:
    """The local graph of ``DM`` for ``strategy`` (see the module docstring); made once per
    matrix and strategy by ``DistSparseMatrix.local_graph``."""

    def __init__(self, DM, strategy: str):
        part = DM.part
        self.DM, self.exchange = DM, DM.exchange(strategy)
        self.ranks = [part.rank] + [q for q in range(part.num_parts) if q != part.rank]
        blocks = {q: DM.block(q, strategy) for q in self.ranks}
        widths = [blocks[q].shape[1] for q in self.ranks]
        starts = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
        self.columns = {q: slice(int(starts[i]), int(starts[i + 1]))
                        for i, q in enumerate(self.ranks)}
        rows, cols, edges = [], [], []
        for i, q in enumerate(self.ranks):
            indptr = blocks[q].indptr
            rows.append(np.repeat(np.arange(part.num_owned, dtype=np.int64), np.diff(indptr)))
            cols.append(blocks[q].indices.astype(np.int64) + starts[i])
            edges.append(np.arange(DM.offsets[q], DM.offsets[q + 1], dtype=np.int64))
        rows, cols, edges = (np.concatenate(a) for a in (rows, cols, edges))
        order = np.lexsort((cols, rows))          # by row, then column: CSR order
        self.order = torch.from_numpy(edges[order])        # matrix entry -> local edge
        position = np.empty_like(order)
        position[edges[order]] = np.arange(order.size)
        self.position = torch.from_numpy(position)           # local edge -> matrix entry
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=part.num_owned))])
        data = np.concatenate([b.data for b in part.blocks])[edges[order]]
        self.matrix = ops.SparseMatrix.from_csr(indptr, cols[order].astype(np.int32), data,
                                                (part.num_owned, int(starts[-1])))

    def gather(self, X_local, name: str = "feat"):
        """The rows of the matrix's sources (``(matrix.shape[1], ...)``) from this rank's rows
        ``X_local`` (``(num_owned, ...)``), with autograd; a pair ``(feat_src, feat_dst)``
        gathers its first member and keeps the second."""
        if isinstance(X_local, tuple) and len(X_local) == 2:
            return self.gather(X_local[0], f"{name}[0]"), X_local[1]
        check_node_rows(name, X_local, self.DM, two_dims=False, exchanged=True)
        return GatherRows.apply(self, X_local, name)

    def to_matrix_order(self, name: str, data):
        """Per-edge ``data`` (a torch tensor, or a numpy array such as ``RelGraphConv``'s
        ``etypes`` may be; one row per local edge) in the matrix's order."""
        if data is None:
            return None
        if not torch.is_tensor(data) and not isinstance(data, np.ndarray):
            raise SparseTIRTypeError(f"{name} must be a torch tensor or numpy array, got "
                                     f"{type(data).__name__}")
        if data.ndim == 0 or data.shape[0] != self.DM.nnz:
            raise SparseTIRValueError(f"{name} has shape {tuple(data.shape)}: it needs one row "
                                      f"per local edge ({self.DM.nnz})")
        if isinstance(data, np.ndarray):
            return data[self.order.numpy()]
        return data.index_select(0, self.order)

    def to_local_order(self, data: torch.Tensor) -> torch.Tensor:
        """Per-edge ``data`` in the matrix's order back in the local edge order."""
        return data.index_select(0, self.position)


class GatherRows(torch.autograd.Function):
    """``LocalGraph.gather``: forward, the exchange's rows in the matrix's column order;
    backward, each rank's slice of the gradient summed onto that rank (``scatter_add``). The
    rows' dtype (``name``: the caller's name for them) is checked once the exchange has made
    the ranks agree on it, so every rank refuses together (``operands.check_node_rows``)."""

    @staticmethod
    def forward(ctx, graph, X_local, name):  # pylint: disable=arguments-differ
        ctx.graph = graph
        pieces = dict(graph.exchange.gather(X_local.detach().contiguous()))
        check_rows_dtype(name, X_local, graph.DM)
        return torch.cat([pieces[q] for q in graph.ranks])

    @staticmethod
    def backward(ctx, grad):  # pylint: disable=arguments-differ
        graph, grad = ctx.graph, grad.contiguous()
        # a copy per rank: the broadcast strategy's reduce writes into its buffers
        return None, graph.exchange.scatter_add(lambda q: grad[graph.columns[q]].clone()), None
