"""``sparsetir.ops`` as torch custom operators, for ``torch.compile`` and ``torch.export``.

Each operator is ``torch.ops.sparsetir.<name>``, defined with ``torch.library.custom_op``: its
kernel is the compiled kernel ``sparsetir.ops`` calls in eager mode, its fake implementation
gives the result's shape and dtype from the operands' (so tracing runs nothing), and its
backward, registered with ``register_autograd``, is a second operator that runs the backward
pass of ``autograd`` (the same compiled kernels). A matrix reaches an operator as its
``indptr`` and ``indices`` tensors (``graph_tensors``), which find the ``SparseMatrix`` with
its bound kernels and transpose when the operator runs.

========================  ===========================================================
``gspmm``                 ``(indptr, indices, op, reduce_op, lhs?, rhs?) -> (out, arg)``
``gsddmm``                ``(indptr, indices, op, lhs?, rhs?, lhs_target, rhs_target)``
``edge_softmax``          ``(indptr, indices, logits)``
``segment_reduce``        ``(seglen, value, reducer) -> (out, arg)``
``gather_mm``             ``(a, b, idx_b)``
``segment_mm``            ``(a, b, seglen_a)``
========================  ===========================================================

(``arg``: for ``max``/``min``, the edge each value came from, which the backward reads;
empty otherwise.) Each has a ``<name>_backward`` operator. ``spmm``, ``sddmm`` and DGL's
short names run as ``gspmm`` and ``gsddmm``. While torch traces (``graph_tensors.tracing``),
the public functions call ``traced_<name>`` here instead of their eager path: an operator
whose forward is made of the public functions traces with no registration at all.

Example
-------
>>> import numpy as np, scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix, spmm
>>> M = SparseMatrix(scipy.sparse.csr_matrix(np.float32([[0, 2], [1, 0]])))
>>> f = torch.compile(lambda X: spmm(M, X), fullgraph=True)
>>> f(torch.ones(2, 3)).tolist()                   # doctest: +SKIP
[[2.0, 2.0, 2.0], [1.0, 1.0, 1.0]]
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..errors import SparseTIRTypeError, SparseTIRValueError
from . import typed
from .autograd import GSDDMM, EdgeSoftmax, GSpMM
from .graph_ops import gsddmm_operands, gspmm_operands, segments_matrix
from .graph_tensors import graph_tensors, matrix_of
from .matrix import SparseMatrix

_NO_GRAD = (False, False, False)


class _Context:
    """What an ``autograd.Function``'s forward leaves for its backward, kept by hand: the
    operators run the forward and backward apart (the backward's ``saved_tensors`` and fields
    are given again)."""

    def __init__(self, needs_input_grad, saved=(), **fields):
        self.needs_input_grad = tuple(needs_input_grad)
        self.saved_tensors = tuple(saved)
        self.__dict__.update(fields)

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


def _fresh(result: Tensor, *inputs) -> Tensor:
    """``result``, copied where it shares memory with an input (an operator's outputs may not
    alias its inputs)."""
    shared = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, Tensor)}
    return result.clone() if result.untyped_storage().data_ptr() in shared else result


def _gradient(grad, operand, needed: bool, like: Tensor) -> Tensor:
    """An operand's gradient as the backward operators return it: zeros where the backward
    gave none for an operand it does not read, an empty tensor where none was asked for."""
    if not needed or operand is None:
        return like.new_empty((0,))
    return torch.zeros_like(operand) if grad is None else grad


def _contiguous(*tensors):
    return tuple(None if t is None else t.contiguous() for t in tensors)


def _rows(operand) -> Optional[int]:
    return None if operand is None else int(operand.shape[0])


def _features(lhs, rhs, trim: int = 0) -> tuple:
    """The broadcast feature shape of the operands (``trim`` last dimensions dropped)."""
    shapes = [tuple(x.shape[1:len(x.shape) - trim]) for x in (lhs, rhs) if x is not None]
    return tuple(torch.broadcast_shapes(*shapes))


# ---------------------------------------------------------------------------------- gspmm

@torch.library.custom_op("sparsetir::gspmm", mutates_args=())
def gspmm(indptr: Tensor, indices: Tensor, op: str, reduce_op: str, lhs: Optional[Tensor],
          rhs: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    """``ops.gspmm`` over the CSR tensors ``indptr``, ``indices``; ``(out, arg)``."""
    matrix = matrix_of(indptr, indices, _rows(lhs))
    lhs, rhs = gspmm_operands(matrix, op, reduce_op, lhs, rhs)
    ctx = _Context(_NO_GRAD + (True, True))
    out = GSpMM.forward(ctx, matrix, op, reduce_op, lhs, rhs)
    arg = ctx.arg if ctx.arg is not None else out.new_empty((0,), dtype=torch.int32)
    return _fresh(out, lhs, rhs), arg


@gspmm.register_fake
def _(indptr, indices, op, reduce_op, lhs, rhs):
    sample = lhs if lhs is not None else rhs
    out = sample.new_empty((indptr.shape[0] - 1,) + _features(lhs, rhs))
    recorded = out.shape if reduce_op in ("max", "min") else (0,)
    return out, sample.new_empty(recorded, dtype=torch.int32)


@torch.library.custom_op("sparsetir::gspmm_backward", mutates_args=())
def gspmm_backward(indptr: Tensor, indices: Tensor, op: str, reduce_op: str,
                   lhs: Optional[Tensor], rhs: Optional[Tensor], arg: Tensor, grad: Tensor,
                   needs: list[bool]) -> tuple[Tensor, Tensor]:
    """The gradients of ``gspmm``'s ``lhs`` and ``rhs`` (empty where ``needs`` is False)."""
    matrix = matrix_of(indptr, indices, _rows(lhs))
    lhs, rhs = _contiguous(lhs, rhs)
    ctx = _Context(_NO_GRAD + tuple(needs), (lhs, rhs), matrix=matrix, op=op,
                   reduce_op=reduce_op, arg=arg,
                   lhs_shape=None if lhs is None else tuple(lhs.shape),
                   rhs_shape=None if rhs is None else tuple(rhs.shape))
    d_lhs, d_rhs = GSpMM.backward(ctx, grad)[3:]
    return (_fresh(_gradient(d_lhs, lhs, needs[0], grad), grad, lhs, rhs),
            _fresh(_gradient(d_rhs, rhs, needs[1], grad), grad, lhs, rhs))


@gspmm_backward.register_fake
def _(indptr, indices, op, reduce_op, lhs, rhs, arg, grad, needs):
    return tuple(grad.new_empty(operand.shape if needed and operand is not None else (0,))
                 for operand, needed in zip((lhs, rhs), needs))


def _gspmm_setup(ctx, inputs, output):
    indptr, indices, ctx.op, ctx.reduce_op, lhs, rhs = inputs
    ctx.save_for_backward(indptr, indices, lhs, rhs, output[1])


def _gspmm_grad(ctx, grad, _):
    indptr, indices, lhs, rhs, arg = ctx.saved_tensors
    needs = list(ctx.needs_input_grad[4:6])
    grads = torch.ops.sparsetir.gspmm_backward(indptr, indices, ctx.op, ctx.reduce_op, lhs,
                                               rhs, arg, grad, needs)
    return (None,) * 4 + tuple(g if needed else None for g, needed in zip(grads, needs))


gspmm.register_autograd(_gspmm_grad, setup_context=_gspmm_setup)


# --------------------------------------------------------------------------------- gsddmm

def _source_rows(lhs, rhs, lhs_target: str, rhs_target: str) -> Optional[int]:
    """The sources' count an operand gives (None when none reads the sources)."""
    for operand, target in ((lhs, lhs_target), (rhs, rhs_target)):
        if target == "u" and operand is not None:
            return int(operand.shape[0])
    return None


@torch.library.custom_op("sparsetir::gsddmm", mutates_args=())
def gsddmm(indptr: Tensor, indices: Tensor, op: str, lhs: Optional[Tensor],
           rhs: Optional[Tensor], lhs_target: str, rhs_target: str) -> Tensor:
    """``ops.gsddmm`` over the CSR tensors ``indptr``, ``indices``."""
    matrix = matrix_of(indptr, indices, _source_rows(lhs, rhs, lhs_target, rhs_target))
    lhs, rhs = gsddmm_operands(matrix, op, lhs, rhs, lhs_target, rhs_target)
    ctx = _Context(_NO_GRAD[:2] + (True, True))
    return _fresh(GSDDMM.forward(ctx, matrix, op, lhs, rhs, lhs_target, rhs_target), lhs, rhs)


@gsddmm.register_fake
def _(indptr, indices, op, lhs, rhs, lhs_target, rhs_target):
    sample = lhs if lhs is not None else rhs
    if op == "dot":
        return sample.new_empty((indices.shape[0],) + _features(lhs, rhs, 1) + (1,))
    return sample.new_empty((indices.shape[0],) + _features(lhs, rhs))


@torch.library.custom_op("sparsetir::gsddmm_backward", mutates_args=())
def gsddmm_backward(indptr: Tensor, indices: Tensor, op: str, lhs: Optional[Tensor],
                    rhs: Optional[Tensor], out: Tensor, lhs_target: str, rhs_target: str,
                    grad: Tensor, needs: list[bool]) -> tuple[Tensor, Tensor]:
    """The gradients of ``gsddmm``'s ``lhs`` and ``rhs`` (empty where ``needs`` is False)."""
    matrix = matrix_of(indptr, indices, _source_rows(lhs, rhs, lhs_target, rhs_target))
    lhs, rhs = _contiguous(lhs, rhs)
    ctx = _Context(_NO_GRAD[:2] + tuple(needs), (lhs, rhs, out), matrix=matrix, op=op,
                   targets=(lhs_target, rhs_target),
                   shapes=tuple(None if x is None else tuple(x.shape) for x in (lhs, rhs)))
    d_lhs, d_rhs = GSDDMM.backward(ctx, grad)[2:4]
    return (_fresh(_gradient(d_lhs, lhs, needs[0], grad), grad, lhs, rhs, out),
            _fresh(_gradient(d_rhs, rhs, needs[1], grad), grad, lhs, rhs, out))


@gsddmm_backward.register_fake
def _(indptr, indices, op, lhs, rhs, out, lhs_target, rhs_target, grad, needs):
    return tuple(grad.new_empty(operand.shape if needed and operand is not None else (0,))
                 for operand, needed in zip((lhs, rhs), needs))


def _gsddmm_setup(ctx, inputs, output):
    indptr, indices, ctx.op, lhs, rhs, ctx.lhs_target, ctx.rhs_target = inputs
    ctx.save_for_backward(indptr, indices, lhs, rhs, output)


def _gsddmm_grad(ctx, grad):
    indptr, indices, lhs, rhs, out = ctx.saved_tensors
    needs = list(ctx.needs_input_grad[3:5])
    grads = torch.ops.sparsetir.gsddmm_backward(indptr, indices, ctx.op, lhs, rhs, out,
                                                ctx.lhs_target, ctx.rhs_target, grad, needs)
    return (None,) * 3 + tuple(g if needed else None for g, needed in zip(grads, needs)) \
        + (None, None)


gsddmm.register_autograd(_gsddmm_grad, setup_context=_gsddmm_setup)


# --------------------------------------------------------------------------- edge_softmax

@torch.library.custom_op("sparsetir::edge_softmax", mutates_args=())
def edge_softmax(indptr: Tensor, indices: Tensor, logits: Tensor) -> Tensor:
    """``ops.edge_softmax`` over the CSR tensors ``indptr``, ``indices``."""
    matrix = matrix_of(indptr, indices)
    (logits,) = gspmm_operands(matrix, "copy_rhs", "sum", None, logits)[1:]
    return _fresh(EdgeSoftmax.forward(_Context((False, False)), matrix, logits), logits)


@edge_softmax.register_fake
def _(indptr, indices, logits):
    return torch.empty_like(logits)


@torch.library.custom_op("sparsetir::edge_softmax_backward", mutates_args=())
def edge_softmax_backward(indptr: Tensor, indices: Tensor, scores: Tensor,
                          grad: Tensor) -> Tensor:
    """The gradient of ``edge_softmax``'s logits given its result ``scores``."""
    ctx = _Context((False, True), (scores,), matrix=matrix_of(indptr, indices))
    return _fresh(EdgeSoftmax.backward(ctx, grad)[1], scores, grad)


@edge_softmax_backward.register_fake
def _(indptr, indices, scores, grad):
    return torch.empty_like(scores)


def _edge_softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1], output)


def _edge_softmax_grad(ctx, grad):
    indptr, indices, scores = ctx.saved_tensors
    return None, None, torch.ops.sparsetir.edge_softmax_backward(indptr, indices, scores, grad)


edge_softmax.register_autograd(_edge_softmax_grad, setup_context=_edge_softmax_setup)


# ------------------------------------------------------------------------- segment_reduce

@torch.library.custom_op("sparsetir::segment_reduce", mutates_args=())
def segment_reduce(seglen: Tensor, value: Tensor, reducer: str) -> tuple[Tensor, Tensor]:
    """``ops.segment_reduce``; ``(out, arg)`` as ``gspmm``'s."""
    matrix = segments_matrix(seglen, value, reducer)
    (value,) = gspmm_operands(matrix, "copy_lhs", reducer, value, None)[:1]
    ctx = _Context(_NO_GRAD + (True, False))
    out = GSpMM.forward(ctx, matrix, "copy_lhs", reducer, value, None)
    arg = ctx.arg if ctx.arg is not None else out.new_empty((0,), dtype=torch.int32)
    return _fresh(out, value), arg


@segment_reduce.register_fake
def _(seglen, value, reducer):
    out = value.new_empty((seglen.shape[0],) + tuple(value.shape[1:]))
    recorded = out.shape if reducer in ("max", "min") else (0,)
    return out, value.new_empty(recorded, dtype=torch.int32)


@torch.library.custom_op("sparsetir::segment_reduce_backward", mutates_args=())
def segment_reduce_backward(seglen: Tensor, value: Tensor, reducer: str, arg: Tensor,
                            grad: Tensor) -> Tensor:
    """The gradient of ``segment_reduce``'s ``value``."""
    matrix = segments_matrix(seglen, value, reducer)
    ctx = _Context(_NO_GRAD + (True, False), (None, None), matrix=matrix, op="copy_lhs",
                   reduce_op=reducer, arg=arg, lhs_shape=tuple(value.shape), rhs_shape=None)
    return _fresh(GSpMM.backward(ctx, grad)[3], grad, value)


@segment_reduce_backward.register_fake
def _(seglen, value, reducer, arg, grad):
    return torch.empty_like(value)


def _segment_reduce_setup(ctx, inputs, output):
    seglen, value, ctx.reducer = inputs
    ctx.save_for_backward(seglen, value, output[1])


def _segment_reduce_grad(ctx, grad, _):
    seglen, value, arg = ctx.saved_tensors
    return None, torch.ops.sparsetir.segment_reduce_backward(seglen, value, ctx.reducer, arg,
                                                             grad), None


segment_reduce.register_autograd(_segment_reduce_grad, setup_context=_segment_reduce_setup)


# ----------------------------------------------------------------- gather_mm, segment_mm

@torch.library.custom_op("sparsetir::gather_mm", mutates_args=())
def gather_mm(a: Tensor, b: Tensor, idx_b: Tensor) -> Tensor:
    """``ops.gather_mm``."""
    return _fresh(typed.gather_mm(a, b, idx_b), a, b)


@torch.library.custom_op("sparsetir::segment_mm", mutates_args=())
def segment_mm(a: Tensor, b: Tensor, seglen_a: Tensor) -> Tensor:
    """``ops.segment_mm``."""
    return _fresh(typed.segment_mm(a, b, seglen_a), a, b)


def _typed_fake(a, b, relations):
    return a.new_empty((a.shape[0], b.shape[2]))


gather_mm.register_fake(_typed_fake)
segment_mm.register_fake(_typed_fake)


@torch.library.custom_op("sparsetir::typed_mm_backward", mutates_args=())
def typed_mm_backward(a: Tensor, b: Tensor, relations: Tensor, segments: bool, grad: Tensor,
                      needs: list[bool]) -> tuple[Tensor, Tensor]:
    """The gradients of ``gather_mm``'s (``segments`` False: ``relations`` is ``idx_b``) or
    ``segment_mm``'s (``seglen_a``) ``a`` and ``b``."""
    n, r = int(a.shape[0]), int(b.shape[0])
    relation = typed._Relation.of_segments(relations, n, r) if segments \
        else typed._Relation.of_indices(relations, n, r)  # pylint: disable=protected-access
    ctx = _Context(tuple(needs) + (False,), (a, b), relation=relation)
    d_a, d_b = typed._typed_product_function().backward(  # pylint: disable=protected-access
        ctx, grad.contiguous())[:2]
    return (_fresh(_gradient(d_a, a, needs[0], grad), a, b, grad),
            _fresh(_gradient(d_b, b, needs[1], grad), a, b, grad))


@typed_mm_backward.register_fake
def _(a, b, relations, segments, grad, needs):
    return tuple(grad.new_empty(x.shape if needed else (0,)) for x, needed in zip((a, b), needs))


def _typed_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _typed_grad(segments: bool):
    def backward(ctx, grad):
        a, b, relations = ctx.saved_tensors
        needs = list(ctx.needs_input_grad[:2])
        grads = torch.ops.sparsetir.typed_mm_backward(a, b, relations, segments, grad, needs)
        return tuple(g if needed else None for g, needed in zip(grads, needs)) + (None,)
    return backward


gather_mm.register_autograd(_typed_grad(False), setup_context=_typed_setup)
segment_mm.register_autograd(_typed_grad(True), setup_context=_typed_setup)


# ------------------------------------------------- what the public functions call while traced

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


def traced_gspmm(M, op: str, reduce_op: str, lhs_data, rhs_data, edges_only: bool = True):
    """``ops.gspmm`` as ``torch.ops.sparsetir.gspmm``."""
    M = _edges_only(_graph(M)) if edges_only else _graph(M)
    arrays = graph_tensors(M)
    return torch.ops.sparsetir.gspmm(arrays.indptr, arrays.indices, op, reduce_op,
                                     None if op == "copy_rhs" else lhs_data,
                                     None if op == "copy_lhs" else rhs_data)[0]


def traced_gsddmm(M, op: str, lhs_data, rhs_data, lhs_target: str = "u",
                  rhs_target: str = "v", edges_only: bool = True):
    """``ops.gsddmm`` as ``torch.ops.sparsetir.gsddmm``."""
    M = _edges_only(_graph(M)) if edges_only else _graph(M)
    arrays = graph_tensors(M)
    return torch.ops.sparsetir.gsddmm(arrays.indptr, arrays.indices, op,
                                      None if op == "copy_rhs" else lhs_data,
                                      None if op == "copy_lhs" else rhs_data,
                                      lhs_target, rhs_target)


def traced_edge_softmax(M, logits):
    """``ops.edge_softmax`` as ``torch.ops.sparsetir.edge_softmax``."""
    arrays = graph_tensors(_edges_only(_graph(M)))
    return torch.ops.sparsetir.edge_softmax(arrays.indptr, arrays.indices, logits)


def traced_spmm(A, X, out, weighted: bool):
    """``ops.spmm`` as ``torch.ops.sparsetir.gspmm`` (``u_mul_e_sum`` with ``A``'s values, or
    ``copy_u_sum``)."""
    M = _graph(A)
    if weighted:
        values = M.values if isinstance(M.values, Tensor) else graph_tensors(M).data
        result = traced_gspmm(M, "mul", "sum", X, values, edges_only=False)
    elif M.multiplicity is None:
        result = traced_gspmm(M, "copy_lhs", "sum", X, None, edges_only=False)
    else:
        raise SparseTIRValueError("spmm(weighted=False) on a matrix with parallel edges summed "
                                  "into one entry is not traced; call it outside torch.compile")
    return result if out is None else out.copy_(result)


def traced_sddmm(A, X, Y, out):
    """``ops.sddmm`` as ``torch.ops.sparsetir.gsddmm`` (``u_dot_v(A, Y, X)``)."""
    vector = X.dim() == 1
    result = traced_gsddmm(_graph(A), "dot", Y.reshape(-1, 1) if vector else Y,
                           X.reshape(-1, 1) if vector else X, "u", "v",
                           edges_only=False).reshape(-1)
    return result if out is None else out.copy_(result)


def traced_segment_reduce(seglen, value, reducer: str):
    """``ops.segment_reduce`` as ``torch.ops.sparsetir.segment_reduce``."""
    return torch.ops.sparsetir.segment_reduce(torch.as_tensor(seglen), value, reducer)[0]


def traced_gather_mm(a, b, idx_b):
    """``ops.gather_mm`` as ``torch.ops.sparsetir.gather_mm``."""
    return torch.ops.sparsetir.gather_mm(a, b, torch.as_tensor(idx_b))


def traced_segment_mm(a, b, seglen_a):
    """``ops.segment_mm`` as ``torch.ops.sparsetir.segment_mm``."""
    return torch.ops.sparsetir.segment_mm(a, b, torch.as_tensor(seglen_a))
