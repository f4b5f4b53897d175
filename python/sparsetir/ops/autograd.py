"""Backward passes of the graph operators, as ``torch.autograd.Function``s.

Every backward is made of the same compiled kernels as the forward passes
(``generic.gspmm_values`` / ``gsddmm_values``), on the matrix or its transpose
(``SparseMatrix.transposed``, made once per matrix), never a dense n x n:

- ``gspmm``, sum (mean: the gradient divided by the in-degree first): the source gradient is a
  ``gspmm`` over the transpose (``dX = M^T dY`` for ``u_mul_e_sum``; edge data is read in M's
  order through the transpose's permutation, ``gspmm_values(rhs_order=)``), the edge gradient a
  ``gsddmm`` on M's pattern (``dE[e] = X[u] * dY[v]``); ``copy_u_mean``'s source gradient,
  as its forward pass, takes the division as edge weights (``generic.mean_weights``:
  ``1 / in-degree(v)`` on each edge, made once per matrix) instead of a divided copy of the
  gradient: on Pubmed at 128 features that copy cost 1 ms of a 1.4 ms backward;
- ``gspmm``, max/min: the gradient goes to the edge each value came from (the arg positions
  the forward pass recorded), and from there as for sum;
- ``gsddmm``: the gradient of each edge, sent to its target (``v``: a ``gspmm`` over M, ``u``:
  over the transpose, ``e``: itself);
- ``edge_softmax``: ``s * (g - rowsum(g * s))``.

Gradients of broadcast operands are summed over the broadcast dimensions. The backward passes
are not differentiable themselves: one run with ``create_graph=True`` (the first step of a
second derivative, ``autograd.grad(..., create_graph=True)``) raises a ``SparseTIRError``
(``first_order``) instead of giving a gradient whose own derivative would be missing.

Example
-------
``graph_ops.gspmm`` runs ``GSpMM.apply`` when an operand requires grad:

>>> import numpy as np, scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix, gspmm
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> M = SparseMatrix(A)
>>> X = torch.ones(5, 16, requires_grad=True)
>>> gspmm(M, "copy_lhs", "sum", X, None).sum().backward()
>>> np.allclose(X.grad.numpy(), A.getnnz(axis=0)[:, None])    # dX = M^T dY: column counts
True
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ..errors import SparseTIRError
from .dtypes import dtype_name
from .generic import edge_softmax_values, gsddmm_values, gspmm_values, mean_weights


def first_order(backward):
    """``backward`` (of a ``torch.autograd.Function``) refusing to run with
    ``create_graph=True``: it is made of compiled kernels autograd cannot see, so the gradient
    it gives has no derivative of its own, and ``autograd.grad`` would later say "not used in
    the graph" (or give None with ``allow_unused=True``) for a second derivative that is not 0.

    Example
    -------
    >>> import numpy as np, scipy.sparse
    >>> from sparsetir.ops import SparseMatrix, gspmm
    >>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32,
    ...                         random_state=0)
    >>> X = torch.ones(5, 16, requires_grad=True)
    >>> total = gspmm(SparseMatrix(A), "copy_lhs", "sum", X, None).sum()
    >>> torch.autograd.grad(total, X, create_graph=True)
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRError: GSpMM: sparsetir.ops has no double backward ...
    """
    @functools.wraps(backward)
    def checked(ctx, *grads):
        if torch.is_grad_enabled():          # autograd runs a backward in grad mode only
            raise SparseTIRError(              # for create_graph=True
                f"{type(ctx).__name__.replace('Backward', '')}: sparsetir.ops has no double "
                "backward (its backward passes are compiled kernels autograd cannot "
                "differentiate): a gradient taken with create_graph=True, for a second "
                "derivative, is not supported")
        return backward(ctx, *grads)
    return checked


def _over_transpose(matrix, op: str, lhs, edge_data, dtype: str | None = None):
    """``gspmm`` sum of ``op(lhs[v], edge_data[e])`` over M's transpose (each source's
    out-edges), ``edge_data`` in M's edge order: the kernel reads it through the transpose's
    permutation, no permuted copy is made (on the arxiv-size graph with 4 heads that copy took
    as long as the kernel). ``dtype``: the result's (None: the operands')."""
    transpose, order = matrix._transposed()      # pylint: disable=protected-access
    return gspmm_values(transpose, op, "sum", lhs, edge_data.contiguous(), dtype=dtype,
                        rhs_order=order)[0]


def _to_nodes(matrix, edge_grad, target: str):
    """Each node's sum of the gradient of its edges (``target``: ``u`` sources, ``v``
    destinations; ``e``: the edges themselves)."""
    if target == "e":
        return edge_grad
    if target == "v":
        return gspmm_values(matrix, "copy_rhs", "sum", None, edge_grad.contiguous())[0]
    return _over_transpose(matrix, "copy_rhs", None, edge_grad)


def unbroadcast(grad, shape: tuple):
    """``grad`` summed over the dimensions an operand of ``shape`` was broadcast over."""
    feat = tuple(shape[1:])
    extra = grad.dim() - 1 - len(feat)
    if extra > 0:
        grad = grad.sum(dim=tuple(range(1, 1 + extra)))
    dims = tuple(d + 1 for d, size in enumerate(feat) if size == 1 and grad.shape[d + 1] != 1)
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    return grad.reshape(shape)


def aligned(operand, ndim: int):
    """``operand`` (rows, *F) with size-1 feature dimensions put before its own, up to
    ``ndim`` dimensions: features broadcast from the left, as the operators' shapes do (torch
    would match an (nnz,) operand's rows with another's last dimension)."""
    missing = ndim - operand.dim()
    if missing <= 0:
        return operand
    return operand.reshape((operand.shape[0],) + (1,) * missing + tuple(operand.shape[1:]))


def _edge_message_grad(matrix, reduce_op: str, grad, arg):
    """The gradient of each edge's message: for max/min, the output gradient at the outputs
    the edge gave (``arg``), 0 elsewhere (nnz, *F)."""
    features = math.prod(grad.shape[1:])      # not -1: there may be no destination
    flat = grad.reshape(grad.shape[0], features)
    edges = torch.zeros((matrix.nnz + 1, features), dtype=grad.dtype)
    edges.scatter_add_(0, arg.reshape(arg.shape[0], features).long(), flat)
    return edges[:matrix.nnz].reshape((matrix.nnz,) + tuple(grad.shape[1:]))


class GSpMM(torch.autograd.Function):
    """``gspmm`` with its backward pass (see the module docstring)."""

    @staticmethod
    def forward(ctx, matrix, op, reduce_op, lhs, rhs, dtype=None):  # pylint: disable=arguments-differ
        record = reduce_op in ("max", "min")
        out, arg = gspmm_values(matrix, op, reduce_op, lhs, rhs, record_arg=record, dtype=dtype)
        ctx.matrix, ctx.op, ctx.reduce_op, ctx.arg = matrix, op, reduce_op, arg
        ctx.lhs_shape = None if lhs is None else tuple(lhs.shape)
        ctx.rhs_shape = None if rhs is None else tuple(rhs.shape)
        # keep only what the backward reads: a product's other operand (and a divisor)
        needs_lhs, needs_rhs = ctx.needs_input_grad[3:5]
        product = op in ("mul", "div")
        ctx.save_for_backward(lhs if product and needs_rhs else None,
                              rhs if product and (needs_lhs or op == "div" and needs_rhs)
                              else None)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        matrix, op, reduce_op = ctx.matrix, ctx.op, ctx.reduce_op
        lhs, rhs = ctx.saved_tensors
        grad = grad.contiguous()
        if reduce_op == "mean" and op == "copy_lhs":
            d_lhs = _over_transpose(matrix, "mul", grad, mean_weights(matrix, grad),
                                    dtype=dtype_name(grad))
            return None, None, None, unbroadcast(d_lhs, ctx.lhs_shape), None, None
        if reduce_op == "mean":
            degrees = torch.from_numpy(np.maximum(matrix.in_degrees(), 1)).to(grad.dtype)
            grad = grad / degrees.reshape((-1,) + (1,) * (grad.dim() - 1))
        if reduce_op in ("max", "min"):
            d_lhs, d_rhs = _backward_through_edges(
                matrix, op, lhs, rhs, _edge_message_grad(matrix, reduce_op, grad, ctx.arg),
                ctx.needs_input_grad[3:])
        else:
            d_lhs, d_rhs = _backward_sum(matrix, op, lhs, rhs, ctx.rhs_shape, grad,
                                         ctx.needs_input_grad[3:])
        return (None, None, None,
                None if d_lhs is None else unbroadcast(d_lhs, ctx.lhs_shape),
                None if d_rhs is None else unbroadcast(d_rhs, ctx.rhs_shape), None)


def _backward_sum(matrix, op, lhs, rhs, rhs_shape, grad, needs):
    """Source and edge gradients of a summing ``gspmm`` given the output gradient (``lhs`` and
    ``rhs`` are None where the gradients asked for do not read them; ``rhs_shape`` is the edge
    operand's shape)."""
    d_lhs = d_rhs = None
    if needs[0] and op != "copy_rhs":
        if op in ("mul", "div"):
            d_lhs = _over_transpose(matrix, op, grad, rhs)
        else:
            d_lhs = gspmm_values(matrix.transposed_pattern_matrix(), "copy_lhs", "sum", grad,
                                 None)[0]
    if needs[1] and op != "copy_lhs":
        suffix = _summed_suffix(lhs.shape, rhs_shape, grad) if op == "mul" else None
        if suffix is not None:
            d_rhs = _edge_dot(matrix, lhs, grad, suffix)
        elif op in ("mul", "div"):
            d_rhs = gsddmm_values(matrix, "mul", lhs, grad, "u", "v")
            if op == "div":
                d_rhs = -d_rhs / aligned(rhs * rhs, d_rhs.dim())
        else:
            d_rhs = gsddmm_values(matrix, "copy_lhs", grad, None, "v")
            if op == "sub":
                d_rhs = -d_rhs
    return d_lhs, d_rhs


def _summed_suffix(lhs_shape, rhs_shape, grad):
    """``k`` when the edge operand is broadcast over exactly the feature dimensions after the
    first ``k`` (an edge weight per head: ``(nnz, H, 1)`` against ``(n, H, F)``, or a scalar
    per edge) and the node operand over none: its gradient is then a dot product over those
    dimensions, not a product summed afterwards. None otherwise."""
    out = tuple(grad.shape[1:])
    if tuple(lhs_shape[1:]) != out:
        return None
    edge = (1,) * max(0, grad.dim() - len(rhs_shape)) + tuple(rhs_shape[1:])
    k = len(out)
    while k and edge[k - 1] == 1 and out[k - 1] != 1:
        k -= 1
    return k if k < len(out) and edge[:k] == out[:k] else None


def _edge_dot(matrix, lhs, grad, k: int):
    """``sum over the feature dimensions after the first k of lhs[u] * grad[v]`` per edge."""
    lead = tuple(grad.shape[1:1 + k])
    dots = gsddmm_values(matrix, "dot", lhs.reshape((lhs.shape[0],) + lead + (-1,)),
                         grad.reshape((grad.shape[0],) + lead + (-1,)), "u", "v")
    return dots.reshape((matrix.nnz,) + lead + (1,) * (grad.dim() - 1 - k))


def _backward_through_edges(matrix, op, lhs, rhs, message_grad, needs):
    """Source and edge gradients given each edge message's gradient."""
    d_lhs = d_rhs = None
    if needs[0] and op != "copy_rhs":
        edge = message_grad
        if op == "mul":
            edge = message_grad * aligned(rhs, message_grad.dim())
        elif op == "div":
            edge = message_grad / aligned(rhs, message_grad.dim())
        d_lhs = _to_nodes(matrix, edge, "u")
    if needs[1] and op != "copy_lhs":
        d_rhs = message_grad
        if op in ("mul", "div"):
            d_rhs = gsddmm_values(matrix, "mul", lhs, message_grad.contiguous(), "u", "e")
            if op == "div":
                d_rhs = -d_rhs / aligned(rhs * rhs, d_rhs.dim())
        elif op == "sub":
            d_rhs = -d_rhs
    return d_lhs, d_rhs


def _node_product(matrix, grad, other, target: str):
    """``sum over the edges e of each node t (a ``target``) of grad[e] * other[the other end
    of e]``: one ``gspmm`` over M (t = v) or its transpose (t = u), with no per-edge product
    stored."""
    if target == "v":
        return gspmm_values(matrix, "mul", "sum", other, grad)[0]
    return _over_transpose(matrix, "mul", other, grad)


class GSDDMM(torch.autograd.Function):
    """``gsddmm`` with its backward pass (see the module docstring)."""

    @staticmethod
    def forward(ctx, matrix, op, lhs, rhs, lhs_target, rhs_target, dtype=None):  # pylint: disable=arguments-differ
        out = gsddmm_values(matrix, op, lhs, rhs, lhs_target, rhs_target, dtype)
        ctx.matrix, ctx.op, ctx.targets = matrix, op, (lhs_target, rhs_target)
        ctx.shapes = tuple(None if x is None else tuple(x.shape) for x in (lhs, rhs))
        # keep only what the backward reads: a product's other operand, a quotient's divisor
        needs_lhs, needs_rhs = ctx.needs_input_grad[2:4]
        ctx.save_for_backward(
            lhs if op in ("mul", "dot") and needs_rhs else None,
            rhs if op in ("mul", "dot", "div") and needs_lhs or op == "div" and needs_rhs
            else None,
            out if op == "div" and needs_rhs else None)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        matrix, op, (lhs_target, rhs_target) = ctx.matrix, ctx.op, ctx.targets
        lhs, rhs, out = ctx.saved_tensors
        grad = grad.contiguous()
        grads = [None, None]
        if ctx.needs_input_grad[2] and op != "copy_rhs":
            if op in ("mul", "dot") and {lhs_target, rhs_target} == {"u", "v"}:
                grads[0] = _node_product(matrix, grad, rhs, lhs_target)
            else:
                if op in ("mul", "dot", "div"):
                    edge = gsddmm_values(matrix, "div" if op == "div" else "mul", grad, rhs,
                                         "e", rhs_target)
                else:
                    edge = grad
                grads[0] = _to_nodes(matrix, edge, lhs_target)
            grads[0] = unbroadcast(grads[0], ctx.shapes[0])
        if ctx.needs_input_grad[3] and op != "copy_lhs":
            if op in ("mul", "dot") and {lhs_target, rhs_target} == {"u", "v"}:
                grads[1] = _node_product(matrix, grad, lhs, rhs_target)
            else:
                if op in ("mul", "dot"):
                    edge = gsddmm_values(matrix, "mul", grad, lhs, "e", lhs_target)
                elif op == "div":
                    edge = -gsddmm_values(matrix, "div", grad, rhs, "e", rhs_target) * out
                else:
                    edge = -grad if op == "sub" else grad
                grads[1] = _to_nodes(matrix, edge.contiguous(), rhs_target)
            grads[1] = unbroadcast(grads[1], ctx.shapes[1])
        return None, None, grads[0], grads[1], None, None, None


class EdgeSoftmax(torch.autograd.Function):
    """``edge_softmax`` with its backward pass ``s * (g - rowsum(g * s))``."""

    @staticmethod
    def forward(ctx, matrix, logits):  # pylint: disable=arguments-differ
        scores = edge_softmax_values(matrix, logits)
        ctx.matrix = matrix
        ctx.save_for_backward(scores)
        return scores

    @staticmethod
    @first_order
    def backward(ctx, grad):
        (scores,) = ctx.saved_tensors
        weighted = (grad * scores).contiguous()
        sums = gspmm_values(ctx.matrix, "copy_rhs", "sum", None, weighted)[0]
        # in place: ``weighted`` is this backward's own tensor (one edge tensor less at peak)
        return None, weighted.sub_(gsddmm_values(ctx.matrix, "mul", scores, sums, "e", "v"))
