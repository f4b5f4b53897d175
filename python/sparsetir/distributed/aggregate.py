"""DGL's graph operators on a ``DistSparseMatrix``: ``sparsetir.ops.gspmm``, ``gsddmm`` and
``edge_softmax`` hand a distributed matrix to ``dist_gspmm``, ``dist_gsddmm`` and
``dist_edge_softmax``, so the layers of ``sparsetir.nn`` run unchanged on one process or many.

* ``copy_lhs`` or ``mul`` by one value per edge (``(nnz,)`` or ``(nnz, 1)``) of 2-D features,
  reduced by ``sum`` or ``mean``, is ``dist_spmm`` (its exchange overlaps the local block's
  product);
* every other ``gspmm`` (``max``, ``min``, any ``op``, features of more dimensions), every
  ``gsddmm`` and the edge softmax run the single-process operator on the rank's local graph
  (``local_graph``): the sources' rows gathered with one exchange, a destination's in-edges
  all on its owner. The edge softmax normalises over destinations only: ``norm_by="src"``
  would need a source's out-edges, which live on every rank that holds one, and is refused.

Edge data come and go in the part's local edge order; node data are this rank's rows.

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
>>> h = sparsetir.ops.copy_u_max(DM, X_local)          # this rank's rows of the max
>>> logits_local = torch.rand(DM.nnz)
>>> a = sparsetir.ops.edge_softmax(DM, logits_local)   # one row per local edge
>>> h.shape, a.shape == (DM.nnz,)
(torch.Size([6, 16]), True)
>>> dist.destroy_process_group()
"""

from __future__ import annotations

import numpy as np
import torch

from .. import ops
from ..errors import SparseTIRValueError
from ..ops.graph_ops import edge_ids
from .operands import check_node_rows
from .spmm import DistSpMM, dist_spmm

OPS = ("copy_lhs", "mul")
REDUCERS = ("sum", "mean")


def dist_gspmm(DM, op: str, reduce_op: str, lhs_data, rhs_data):
    """``gspmm(DM, op, reduce_op, lhs_data, rhs_data)``: this rank's rows (see the module
    docstring)."""
    if op in OPS and reduce_op in REDUCERS and _two_dims(lhs_data) and _per_edge_scalar(
            DM, op, rhs_data):
        if op == "copy_lhs":
            result = dist_spmm(DM, lhs_data, weighted=False)
        else:
            check_node_rows("lhs_data", lhs_data, DM, exchanged=True)
            result = DistSpMM.apply(DM, DM.strategy, None, lhs_data, rhs_data.reshape(-1),
                                    "lhs_data")
        if reduce_op == "mean":
            degrees = torch.from_numpy(DM.in_degrees()).clamp(min=1).to(result)
            result = result / degrees.reshape((-1,) + (1,) * (result.dim() - 1))
        return result
    graph = DM.local_graph()
    return ops.gspmm(graph.matrix, op, reduce_op,
                     None if lhs_data is None else graph.gather(lhs_data, "lhs_data"),
                     graph.to_matrix_order("rhs_data", rhs_data))


def dist_gsddmm(DM, op: str, lhs_data, rhs_data, lhs_target: str, rhs_target: str):
    """``gsddmm(DM, op, lhs_data, rhs_data, lhs_target, rhs_target)``: one row per local edge
    (targets ``u``: this rank's rows of the sources, gathered; ``v``: its destinations' rows;
    ``e``: its edges' data)."""
    graph = DM.local_graph()

    def operand(name, data, target):
        if data is None or target == "v":
            return data
        if target == "u":
            return graph.gather(data, name)
        return graph.to_matrix_order(name, data)
    return graph.to_local_order(ops.gsddmm(
        graph.matrix, op, operand("lhs_data", lhs_data, lhs_target),
        operand("rhs_data", rhs_data, rhs_target), lhs_target, rhs_target))


def dist_edge_softmax(DM, logits, eids=None, norm_by: str = "dst"):
    """``edge_softmax(DM, logits, eids, norm_by)`` over each owned destination's in-edges;
    ``eids`` are local edge ids (``logits`` then has one row per id, the result too)."""
    if norm_by != "dst":
        raise SparseTIRValueError(
            "edge_softmax on a DistSparseMatrix normalises over destinations only (norm_by="
            f"'dst'): got norm_by={norm_by!r}, whose sources' out-edges live on several ranks")
    graph = DM.local_graph()
    ids = edge_ids(eids, DM.nnz, "this rank's local edges")
    if ids is None:
        return graph.to_local_order(ops.edge_softmax(
            graph.matrix, graph.to_matrix_order("logits", logits)))
    return ops.edge_softmax(graph.matrix, logits,
                            eids=graph.position.numpy()[ids.astype(np.int64)])


def _two_dims(data) -> bool:
    return torch.is_tensor(data) and data.dim() == 2


def _per_edge_scalar(DM, op: str, data) -> bool:
    """Whether ``op`` multiplies by one scalar per edge (or reads no edge data)."""
    if op == "copy_lhs":
        return True
    return torch.is_tensor(data) and data.numel() == DM.nnz and data.dim() in (1, 2) \
        and data.shape[0] == DM.nnz
