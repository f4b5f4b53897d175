"""The local products of a distributed operator: every one is a ``sparsetir.ops`` call on a
block's ``SparseMatrix``, so the kernels are the compiled ones one process uses.

``weights`` says what a block multiplies by: ``None`` (the block's stored values), ``"ones"``
(its pattern: DGL's ``copy_u_sum``) or a torch tensor of one value per entry in the block's
CSR order.

Example
-------
>>> import numpy as np, scipy.sparse
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> M = ops.SparseMatrix(A)
>>> X, dY, w = torch.rand(5, 16), torch.rand(6, 16), torch.from_numpy(A.data)
>>> Y = block_spmm(M, X, None); G = transposed_spmm(M, dY, w); dw = edge_dot(M, dY, X)
>>> np.allclose(Y.numpy(), A @ X.numpy()), np.allclose(G.numpy(), A.T @ dY.numpy(), atol=1e-5)
(True, True)
>>> rows = np.repeat(np.arange(6), np.diff(A.indptr))
>>> np.allclose(dw.numpy(), (dY.numpy()[rows] * X.numpy()[A.indices]).sum(axis=1), atol=1e-5)
True
"""

from __future__ import annotations

import torch

from .. import ops
from .operands import check_rows_dtype


def block_spmm(matrix: ops.SparseMatrix, X: torch.Tensor, weights) -> torch.Tensor:
    """``matrix @ X`` with the entries' ``weights`` (see the module docstring)."""
    if matrix.nnz == 0:
        return X.new_zeros((matrix.shape[0],) + tuple(X.shape[1:]))
    if weights is None:
        return ops.spmm(matrix, X)
    if isinstance(weights, str):
        return ops.spmm(matrix, X, weighted=False)
    return ops.u_mul_e_sum(matrix, X, weights.reshape((-1,) + (1,) * (X.dim() - 1)))


def transposed_spmm(matrix: ops.SparseMatrix, G: torch.Tensor, weights) -> torch.Tensor:
    """``matrix.T @ G`` with the entries' ``weights`` (given in ``matrix``'s order)."""
    transpose, perm = matrix.transposed_pattern()
    if torch.is_tensor(weights):
        weights = weights[torch.tensor(perm)]      # perm is read-only: a copy, no warning
    return block_spmm(transpose, G, weights)


def edge_dot(matrix: ops.SparseMatrix, G: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``G[row] . X[col]`` for every entry of ``matrix``, in its CSR order."""
    if matrix.nnz == 0:
        return G.new_zeros(0)
    return ops.sddmm(matrix, G, X)


def per_block(DM, strategy: str, rows_local: torch.Tensor, product, keep: bool,
              name: str = "X_local") -> tuple:
    """``({q: product(q, block q, rows_q)}, {q: rows_q} if keep else {})`` over the rows the
    exchange of ``strategy`` gathers from ``rows_local`` (each rank's rows its blocks use,
    ``name`` the caller's name for them). Their dtype is checked once the exchange has made
    the ranks agree on it (``operands.check_node_rows``): every rank refuses together."""
    results, gathered = {}, {}
    for q, rows_q in DM.exchange(strategy).gather(rows_local):
        if not results:
            check_rows_dtype(name, rows_local, DM)
        results[q] = product(q, DM.block(q, strategy), rows_q)
        if keep:
            gathered[q] = rows_q
    return results, gathered


def gathered_again(ctx, rows_local: torch.Tensor):
    """``(q, rows_q)`` pairs for the backward pass: those the forward pass kept in
    ``ctx.gathered``, else gathered again (the broadcast strategy keeps none: it would hold
    every rank's rows)."""
    if ctx.gathered:
        return ctx.gathered.items()
    return ctx.DM.exchange(ctx.strategy).gather(rows_local)


def backward_inputs(ctx, grad: torch.Tensor) -> tuple:
    """``(saved tensors, matrix, strategy, exchange, contiguous grad)`` of a backward pass."""
    return (ctx.saved_tensors, ctx.DM, ctx.strategy, ctx.DM.exchange(ctx.strategy),
            grad.contiguous())
