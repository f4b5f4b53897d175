"""What the public operators call while torch traces them (``graph_tensors.tracing``): the
matrix as its ``graph_tensors``, and the operator of ``custom_ops`` (``torch.ops.sparsetir``).

Nothing here reads the values of an array, so ``torch.compile`` traces every line; the checks
that need values run in the operators when the graph runs. A matrix is a ``SparseMatrix``
made outside the traced region (its checks read values; a matrix that summed parallel edges
is read through its ``edge_matrix``, made with it); another matrix (scipy, torch sparse) is
made into one eagerly (``untraceable.eagerly``: a graph break).

Example
-------
Inside ``torch.compile``, ``ops.gspmm(M, ...)`` runs ``traced.gspmm(M, ...)``:

>>> import numpy as np, scipy.sparse
>>> from sparsetir import ops
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> M = ops.SparseMatrix(A)                          # made outside the compiled function
>>> f = torch.compile(lambda x: ops.gspmm(M, "copy_lhs", "sum", x, None), backend="eager",
...                   fullgraph=True)
>>> X = torch.ones(5, 16)
>>> np.allclose(f(X).numpy(), (A != 0).astype(np.float32) @ X.numpy())
True
>>> torch._dynamo.reset()                            # forget the compiled function
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import SparseTIRValueError
from .dtypes import autocast_pair, autocast_result
from .graph_tensors import edges_of, graph_tensors
from .matrix import SparseMatrix, as_sparse_matrix
from .untraceable import NOT_A_MATRIX, eagerly


def _graph(M) -> SparseMatrix:
    """``M`` as a ``SparseMatrix``: one made outside the traced region, else made from ``M``
    eagerly (``NOT_A_MATRIX``)."""
    if isinstance(M, SparseMatrix):
        return M
    return eagerly(NOT_A_MATRIX, as_sparse_matrix, M, "M")


def gspmm(M, op: str, reduce_op: str, lhs_data, rhs_data, edges: bool = True):
    """``ops.gspmm`` as ``torch.ops.sparsetir.gspmm`` (the autocast dtype, if any, read
    while torch traces), over ``M``'s edges (``edges_of``), or its stored entries where
    ``edges`` is False (``spmm``)."""
    M = edges_of(_graph(M)) if edges else _graph(M)
    arrays = graph_tensors(M)
    lhs = None if op == "copy_rhs" else lhs_data
    rhs = None if op == "copy_lhs" else rhs_data
    return torch.ops.sparsetir.gspmm(arrays.indptr, arrays.indices, op, reduce_op, lhs, rhs,
                                     autocast_pair(lhs, rhs))[0]


def gsddmm(M, op: str, lhs_data, rhs_data, lhs_target: str = "u", rhs_target: str = "v",
           edges: bool = True):
    """``ops.gsddmm`` as ``torch.ops.sparsetir.gsddmm`` (``dot`` in the autocast dtype, if
    any, read while torch traces), over ``M``'s edges, or its stored entries where ``edges``
    is False (``sddmm``)."""
    M = edges_of(_graph(M)) if edges else _graph(M)
    arrays = graph_tensors(M)
    lhs = None if op == "copy_rhs" else lhs_data
    rhs = None if op == "copy_lhs" else rhs_data
    return torch.ops.sparsetir.gsddmm(arrays.indptr, arrays.indices, op, lhs, rhs, lhs_target,
                                      rhs_target,
                                      autocast_pair(lhs, rhs) if op == "dot" else None)


def edge_softmax(M, logits):
    """``ops.edge_softmax`` as ``torch.ops.sparsetir.edge_softmax``, over each destination's
    in-edges, every edge (``ops.edge_softmax`` runs ``eids`` and ``norm_by="src"``
    eagerly)."""
    arrays = graph_tensors(edges_of(_graph(M)))
    return torch.ops.sparsetir.edge_softmax(arrays.indptr, arrays.indices, logits)


def _into(out, result):
    """``result`` written into ``out``, which must have its shape and dtype (as the eager
    call requires: ``copy_`` would broadcast a column into every column, or cast)."""
    if not isinstance(out, Tensor) or tuple(out.shape) != tuple(result.shape) \
            or out.dtype != result.dtype:
        raise SparseTIRValueError(
            f"out must be a tensor of shape {tuple(result.shape)} and dtype {result.dtype}, "
            f"got {getattr(out, 'shape', type(out).__name__)} "
            f"{getattr(out, 'dtype', '')}".rstrip())
    return out.copy_(result)


def spmm(A, X, out, weighted: bool):
    """``ops.spmm`` as ``torch.ops.sparsetir.gspmm``: ``u_mul_e_sum`` with ``A``'s values
    over its entries, or ``copy_u_sum`` over its edges (parallel edges summed into one entry
    each count, as eagerly)."""
    M = _graph(A)
    if weighted:
        result = gspmm(M, "mul", "sum", X, graph_tensors(M).values, edges=False)
    else:
        result = gspmm(M, "copy_lhs", "sum", X, None)
    return result if out is None else _into(out, result)


def sddmm(A, X, Y, out):
    """``ops.sddmm`` as ``torch.ops.sparsetir.gsddmm`` (``u_dot_v(A, Y, X)``)."""
    vector = X.dim() == 1
    result = gsddmm(_graph(A), "dot", Y.reshape(-1, 1) if vector else Y,
                    X.reshape(-1, 1) if vector else X, "u", "v", edges=False).reshape(-1)
    return result if out is None else _into(out, result)


def segment_reduce(seglen, value, reducer: str):
    """``ops.segment_reduce`` as ``torch.ops.sparsetir.segment_reduce`` (in the autocast
    dtype, if any, as ``ops.segment_reduce``'s ``gspmm``)."""
    return torch.ops.sparsetir.segment_reduce(torch.as_tensor(seglen), value, reducer,
                                              autocast_result(value))[0]


def gather_mm(a, b, idx_b):
    """``ops.gather_mm`` as ``torch.ops.sparsetir.gather_mm`` (in the autocast dtype, if any,
    read while torch traces)."""
    return torch.ops.sparsetir.gather_mm(a, b, torch.as_tensor(idx_b), autocast_result(a, b))


def segment_mm(a, b, seglen_a):
    """``ops.segment_mm`` as ``torch.ops.sparsetir.segment_mm`` (in the autocast dtype, if
    any, read while torch traces)."""
    return torch.ops.sparsetir.segment_mm(a, b, torch.as_tensor(seglen_a),
                                          autocast_result(a, b))
