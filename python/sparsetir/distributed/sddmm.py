"""``dist_sddmm``: ``X[row] . Y[col]`` for each of this rank's edges when the rows of ``X``
and ``Y`` are spread over the ranks, with autograd.

It reuses SpMM's partition and exchange (Bharadwaj et al., IPDPS'22): ``Y``'s rows travel as
``X``'s do in ``dist_spmm``, and the gradient of ``Y`` returns to its owners through the same
transposed exchange; the gradient of ``X`` is local: ``sum over q of block(q) @ Y_q`` with the
edge gradients as the entries' values. The values come in the part's local edge order.

Every rank must call it at the same point with the same ``strategy``, with the same operands
requiring grad.

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
>>> from sparsetir.distributed import dist_sddmm
>>> Y_local = torch.rand(6, 16)
>>> scores = dist_sddmm(DM, X_local, Y_local)     # (DM.nnz,)
>>> scores.shape == (DM.nnz,)
True
>>> dist.destroy_process_group()
"""

from __future__ import annotations

import torch

from ..errors import SparseTIRValueError
from .exchange import check_strategy
from .operands import check_matrix, check_node_rows
from .products import (backward_inputs, block_spmm, edge_dot, gathered_again, per_block,
                       transposed_spmm)


def dist_sddmm(DM, X_local, Y_local, strategy: str | None = None):
    """``X[row] . Y[col]`` for each local edge (see the module docstring); ``strategy``:
    ``"halo"`` or ``"broadcast"`` (default: ``DM.strategy``)."""
    check_matrix(DM)
    strategy = DM.strategy if strategy is None else strategy
    check_strategy(strategy)
    check_node_rows("X_local", X_local, DM)
    check_node_rows("Y_local", Y_local, DM, exchanged=True)
    if X_local.shape[1] != Y_local.shape[1]:
        raise SparseTIRValueError(f"X_local has {X_local.shape[1]} features and Y_local "
                         f"{Y_local.shape[1]}")
    return DistSDDMM.apply(DM, strategy, X_local, Y_local)


class DistSDDMM(torch.autograd.Function):
    """``dist_sddmm`` (see the module docstring)."""

    @staticmethod
    def forward(ctx, DM, strategy, X_local, Y_local):  # pylint: disable=arguments-differ
        X_local = X_local.detach().contiguous()
        pieces, gathered = per_block(
            DM, strategy, Y_local.detach(),
            lambda q, block, Y_q: edge_dot(block, X_local, Y_q),
            keep=ctx.needs_input_grad[2] and strategy == "halo", name="Y_local")
        ctx.DM, ctx.strategy, ctx.gathered = DM, strategy, gathered
        ctx.save_for_backward(X_local, Y_local)
        return torch.cat([pieces[q] for q in range(len(DM.blocks))])

    @staticmethod
    def backward(ctx, grad):  # pylint: disable=arguments-differ
        (X_local, Y_local), DM, strategy, exchange, grad = backward_inputs(ctx, grad)

        def edges(q):
            return grad[int(DM.offsets[q]):int(DM.offsets[q + 1])]

        grad_x = grad_y = None
        if ctx.needs_input_grad[2]:
            grad_x = sum(block_spmm(DM.block(q, strategy), Y_q, edges(q))
                         for q, Y_q in gathered_again(ctx, Y_local.detach()))
        if ctx.needs_input_grad[3]:
            grad_y = exchange.scatter_add(lambda q: transposed_spmm(
                DM.block(q, strategy), X_local, edges(q)))
        return None, None, grad_x, grad_y
