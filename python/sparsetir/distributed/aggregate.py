"""``dist_gspmm``: the neighbour aggregations of ``sparsetir.nn``'s layers on a
``DistSparseMatrix`` (``sparsetir.ops.gspmm`` hands a distributed matrix to it), so a layer
runs unchanged on one process or many.

Offered: ``op`` ``"copy_lhs"`` (the sources' rows) or ``"mul"`` (times per-edge data of shape
``(nnz,)`` or ``(nnz, 1)``, in the local edge order), reduced by ``"sum"`` or ``"mean"``; the
data multiplied are the exchanged rows ``dist_spmm`` multiplies, with its autograd.

Example
-------
>>> # h = sparsetir.ops.copy_u_sum(DM, X_local)        # == dist_spmm(DM, X_local, weighted=False)
"""

from __future__ import annotations

import torch

from ..errors import SparseTIRValueError
from .operands import check_node_rows
from .spmm import DistSpMM, dist_spmm

OPS = ("copy_lhs", "mul")
REDUCERS = ("sum", "mean")


def dist_gspmm(DM, op: str, reduce_op: str, lhs_data, rhs_data):
    """``gspmm(DM, op, reduce_op, lhs_data, rhs_data)`` for the cases above; others are
    refused by name."""
    if op not in OPS or reduce_op not in REDUCERS:
        raise SparseTIRValueError(
            f"a DistSparseMatrix aggregates with op in {OPS} and reduce_op in {REDUCERS}, got "
            f"op={op!r}, reduce_op={reduce_op!r} (max/min are not offered distributed)")
    if op == "copy_lhs":
        result = dist_spmm(DM, lhs_data, weighted=False)
    else:
        check_node_rows("lhs_data", lhs_data, DM)
        if not torch.is_tensor(rhs_data) or rhs_data.shape[0] != DM.nnz \
                or rhs_data.numel() != DM.nnz:
            raise SparseTIRValueError(
                f"a DistSparseMatrix multiplies by one value per local edge, shape ({DM.nnz},) "
                f"or ({DM.nnz}, 1), got {tuple(getattr(rhs_data, 'shape', ()))}")
        result = DistSpMM.apply(DM, DM.strategy, None, lhs_data, rhs_data.reshape(-1))
    if reduce_op == "mean":
        degrees = torch.from_numpy(DM.in_degrees()).clamp(min=1).to(result)
        result = result / degrees.reshape((-1,) + (1,) * (result.dim() - 1))
    return result
