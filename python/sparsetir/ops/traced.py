"""What the public operators call while torch traces them (``graph_tensors.tracing``): the
matrix as its ``graph_tensors``, and the operator of ``custom_ops`` (``torch.ops.sparsetir``).

Nothing here reads the values of an array, so ``torch.compile`` traces every line; the checks
that need values run in the operators when the graph runs. A matrix must be a ``SparseMatrix``
made outside the traced region (its checks read values): anything else is refused by name.

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

from ..errors import SparseTIRError, SparseTIRTypeError, SparseTIRValueError
from .dtypes import autocast_pair, autocast_result
from .graph_tensors import graph_tensors
from .matrix import SparseMatrix


def _graph(M) -> SparseMatrix:
    """``M``, which must be a ``SparseMatrix`` made outside the traced region."""
    if not isinstance(M, SparseMatrix):
        raise SparseTIRTypeError(
            f"under torch.compile / torch.export the matrix must be a SparseMatrix made "
            f"outside the compiled function (got {type(M).__name__}): wrap it once with "
            "sparsetir.ops.SparseMatrix(A) before the call and pass that")
    return M


def _edges_only(M: SparseMatrix) -> SparseMatrix:
    if M.multiplicity is not None:
        raise SparseTIRValueError(
            "M holds parallel edges summed into one entry; the graph operators take one edge "
            "per stored entry: pass a matrix without duplicate entries")
    return M


def gspmm(M, op: str, reduce_op: str, lhs_data, rhs_data, edges_only: bool = True):
    """``ops.gspmm`` as ``torch.ops.sparsetir.gspmm`` (the autocast dtype, if any, read
    while torch traces)."""
    M = _edges_only(_graph(M)) if edges_only else _graph(M)
    arrays = graph_tensors(M)
    lhs = None if op == "copy_rhs" else lhs_data
    rhs = None if op == "copy_lhs" else rhs_data
    return torch.ops.sparsetir.gspmm(arrays.indptr, arrays.indices, op, reduce_op, lhs, rhs,
                                     autocast_pair(lhs, rhs))[0]


def gsddmm(M, op: str, lhs_data, rhs_data, lhs_target: str = "u", rhs_target: str = "v",
           edges_only: bool = True):
    """``ops.gsddmm`` as ``torch.ops.sparsetir.gsddmm`` (``dot`` in the autocast dtype, if
    any, read while torch traces)."""
    M = _edges_only(_graph(M)) if edges_only else _graph(M)
    arrays = graph_tensors(M)
    lhs = None if op == "copy_rhs" else lhs_data
    rhs = None if op == "copy_lhs" else rhs_data
    return torch.ops.sparsetir.gsddmm(arrays.indptr, arrays.indices, op, lhs, rhs, lhs_target,
                                      rhs_target,
                                      autocast_pair(lhs, rhs) if op == "dot" else None)


def edge_softmax(M, logits, eids=None, norm_by: str = "dst"):
    """``ops.edge_softmax`` as ``torch.ops.sparsetir.edge_softmax`` (over each destination's
    in-edges, every edge: ``eids`` and ``norm_by="src"`` run eagerly only)."""
    if norm_by != "dst" or not (eids is None or (isinstance(eids, str) and eids == "__ALL__")):
        raise SparseTIRError("edge_softmax with eids or norm_by='src' cannot be traced "
                             "(torch.compile / torch.export): call it outside the compiled "
                             "region")
    arrays = graph_tensors(_edges_only(_graph(M)))
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
    """``ops.spmm`` as ``torch.ops.sparsetir.gspmm`` (``u_mul_e_sum`` with ``A``'s values, or
    ``copy_u_sum``)."""
    M = _graph(A)
    if weighted:
        values = graph_tensors(M).values
        result = gspmm(M, "mul", "sum", X, values, edges_only=False)
    elif M.multiplicity is None:
        result = gspmm(M, "copy_lhs", "sum", X, None, edges_only=False)
    else:
        raise SparseTIRValueError("spmm(weighted=False) on a matrix with parallel edges summed "
                                  "into one entry is not traced; call it outside torch.compile")
    return result if out is None else _into(out, result)


def sddmm(A, X, Y, out):
    """``ops.sddmm`` as ``torch.ops.sparsetir.gsddmm`` (``u_dot_v(A, Y, X)``)."""
    vector = X.dim() == 1
    result = gsddmm(_graph(A), "dot", Y.reshape(-1, 1) if vector else Y,
                    X.reshape(-1, 1) if vector else X, "u", "v", edges_only=False).reshape(-1)
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
