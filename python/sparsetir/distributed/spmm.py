"""``dist_spmm``: the owned rows of ``A @ X`` when ``A``'s rows and ``X``'s rows are spread
over the ranks, with autograd.

Forward: for every rank ``q`` the exchange delivers the rows ``X_q`` that block ``q``
references, and the result is the sum of ``block(q) @ X_q``. Backward: the gradient of ``X`` is
the exchange's transpose (``scatter_add``): each rank computes ``block(q).T @ dY`` for every
``q`` and the contributions are summed on their owners; the gradient of the edge values is
``dY[row] . X_q[col]`` for each local entry, computed on this rank alone.

Every rank must call it at the same point with the same ``strategy``, and with ``X_local``
requiring grad on all ranks or on none (the backward passes are collectives too).

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
>>> X_local.requires_grad_()
tensor(...)
>>> Y_local = dist_spmm(DM, X_local, strategy="halo")
>>> Y_local.sum().backward()                     # X_local.grad: this rank's rows
>>> np.allclose(X_local.grad.numpy(), A.T @ np.ones((6, 16), np.float32), atol=1e-5)
True
>>> dist.destroy_process_group()
"""

from __future__ import annotations

import torch

from .exchange import check_strategy
from .operands import check_matrix, check_node_rows
from .products import (backward_inputs, block_spmm, edge_dot, gathered_again, per_block,
                       transposed_spmm)


def dist_spmm(DM, X_local, strategy: str | None = None, weighted: bool = True):
    """This rank's rows of ``A @ X`` (see the module docstring). ``strategy``: ``"halo"`` or
    ``"broadcast"`` (default: ``DM.strategy``). The entries multiply by ``DM.values`` when it
    was given, else by the stored values; ``weighted=False`` uses the pattern alone (DGL's
    ``copy_u_sum``)."""
    check_matrix(DM)
    strategy = DM.strategy if strategy is None else strategy
    check_strategy(strategy)
    check_node_rows("X_local", X_local, DM, exchanged=True)
    values = DM.values if weighted else None
    return DistSpMM.apply(DM, strategy, None if weighted else "ones", X_local, values, "X_local")


def block_weights(DM, weights, values, q: int):
    """What block ``q`` multiplies by: ``values``' slice for it, else ``weights``."""
    if values is None:
        return weights
    return values[int(DM.offsets[q]):int(DM.offsets[q + 1])]


class DistSpMM(torch.autograd.Function):
    """``dist_spmm`` (see the module docstring); ``name``: what the caller calls ``X_local``
    (a dtype refusal after the exchange names it)."""

    @staticmethod
    def forward(ctx, DM, strategy, weights, X_local, values,  # pylint: disable=arguments-differ
                name):
        detached = None if values is None else values.detach()
        products, gathered = per_block(
            DM, strategy, X_local.detach(), lambda q, block, X_q: block_spmm(
                block, X_q, block_weights(DM, weights, detached, q)),
            keep=ctx.needs_input_grad[4] and strategy == "halo", name=name)
        result = sum(products.values())
        ctx.DM, ctx.strategy, ctx.weights, ctx.gathered = DM, strategy, weights, gathered
        ctx.save_for_backward(X_local, detached)
        return result

    @staticmethod
    def backward(ctx, grad):  # pylint: disable=arguments-differ
        (X_local, values), DM, strategy, exchange, grad = backward_inputs(ctx, grad)
        grad_x = grad_values = None
        if ctx.needs_input_grad[3]:
            grad_x = exchange.scatter_add(lambda q: transposed_spmm(
                DM.block(q, strategy), grad, block_weights(DM, ctx.weights, values, q)))
        if ctx.needs_input_grad[4]:
            pieces = {q: edge_dot(DM.block(q, strategy), grad, X_q)
                      for q, X_q in gathered_again(ctx, X_local.detach())}
            grad_values = torch.cat([pieces[q] for q in range(len(DM.blocks))])
        return None, None, None, grad_x, grad_values, None
