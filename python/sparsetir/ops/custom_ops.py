"""``sparsetir.ops`` as torch custom operators, for ``torch.compile`` and ``torch.export``.

Each operator is ``torch.ops.sparsetir.<name>``, defined with ``torch.library.custom_op``
(``cpu_dispatch.custom_operator``, which gives CPU calls a short path through torch's
dispatcher): its kernel is the compiled kernel ``sparsetir.ops`` calls in eager mode, its fake
implementation gives the result's shape and dtype from the operands' (so tracing runs
nothing), and its backward, registered with ``register_autograd``, is a second operator that
runs the backward pass of ``autograd`` (the same compiled kernels). A matrix reaches an operator as its
``indptr`` and ``indices`` tensors (``graph_tensors``), which find the ``SparseMatrix`` with
its bound kernels and transpose when the operator runs.

========================  ===========================================================
``gspmm``                 ``(indptr, indices, op, reduce_op, lhs?, rhs?, dtype?) -> (out, arg)``
``gsddmm``                ``(indptr, indices, op, lhs?, rhs?, lhs_target, rhs_target, dtype?)``
``edge_softmax``          ``(indptr, indices, logits)``
``segment_reduce``        ``(seglen, value, reducer, dtype?) -> (out, arg)``
``gather_mm``             ``(a, b, idx_b, dtype?)``
``segment_mm``            ``(a, b, seglen_a, dtype?)``
========================  ===========================================================

(``arg``: for ``max``/``min``, the edge each value came from, which the backward reads;
empty otherwise.) Operands may be float32, float64, bfloat16 or float16, combined as
``dtypes`` says (``gather_mm``/``segment_mm``: one dtype, or with ``dtype`` each float32 or
``dtype``, as ``typed`` says); ``dtype`` (None: ``dtypes.result_dtype`` of the operands) is the result's
dtype, which ``traced`` sets to torch's autocast dtype (``dtypes.autocast_dtype``) when the
public function would: it is read while torch traces, so the compiled graph holds it.
``torch.library.register_autocast`` does not fit: it would round float32 operands to one dtype
fixed when registered, where ``sparsetir.ops`` reads them as they are. A gradient has its
operand's dtype. Each has a ``<name>_backward`` operator. ``spmm``, ``sddmm`` and DGL's
short names run as ``gspmm`` and ``gsddmm``. While torch traces (``graph_tensors.tracing``),
the public functions call ``traced`` instead of their eager path, which calls these
operators: an operator whose forward is made of the public functions traces with no
registration at all. ``sparsetir.ops`` imports this module, so the operators exist once it is
imported.

Example
-------
>>> import numpy as np, scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix, spmm
>>> M = SparseMatrix(scipy.sparse.csr_matrix(np.float32([[0, 2], [1, 0]])))
>>> f = torch.compile(lambda X: spmm(M, X), fullgraph=True)
>>> f(torch.ones(2, 3)).tolist()                   # traces and compiles at the first call
[[2.0, 2.0, 2.0], [1.0, 1.0, 1.0]]
>>> torch.compiler.reset()                          # forget the compiled graph
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from . import typed
from .autograd import GSDDMM, EdgeSoftmax, GSpMM
from .cpu_dispatch import custom_operator
from .dtypes import check_dtype, dtype_name
from .generic import edge_softmax_values, gsddmm_values, gspmm_values, kernel_dtypes
from .graph_ops import (gsddmm_operands, gsddmm_read, gspmm_operands, gspmm_read,
                        segments_matrix)
from .graph_tensors import LIVE
from .matrix import SparseMatrix

_NO_GRAD = (False, False, False)

_MADE: OrderedDict = OrderedDict()
"""(indptr address, indices address, nnz, n) -> (indptr, indices, versions, matrix) made
from tensors of no live matrix; the tensors are kept, so no other tensor takes their memory
while the entry is here."""

_MADE_LIMIT = 8


def matrix_of(indptr, indices, num_src: int | None = None):
    """The ``SparseMatrix`` behind the CSR tensors ``indptr`` and ``indices``: the live matrix
    whose ``graph_tensors`` they are, else (an exported program's copies of them, tensors made
    by hand) a matrix made from them by ``SparseMatrix.from_csr``, which checks them, kept for
    later calls with the tensors themselves (no other tensor can take their memory meanwhile).
    ``num_src``: its columns, used only then (None: the largest column index + 1, for an
    operator that reads no source data)."""
    key = (indptr.data_ptr(), indices.data_ptr(), int(indices.numel()))
    found = LIVE.get(key)
    matrix = None if found is None else found()
    if matrix is not None:
        own = matrix._graph_tensors          # pylint: disable=protected-access
        if own is not None and (own.indptr is indptr and own.indices is indices or (
                own.indptr.data_ptr() == key[0] and own.indices.data_ptr() == key[1]
                and own.indptr.numel() == indptr.numel())):
            return matrix
    if num_src is None:
        num_src = int(indices.max()) + 1 if indices.numel() else 0
    key += (int(num_src),)
    kept = _MADE.get(key)
    if kept is not None and kept[2] == (kept[0]._version, kept[1]._version):
        _MADE.move_to_end(key)
        return kept[3]
    matrix = SparseMatrix.from_csr(indptr.numpy(), indices.numpy(),
                                   np.ones(indices.numel(), np.float32),
                                   (indptr.numel() - 1, int(num_src)))
    return remember_matrix(indptr, indices, num_src, matrix)


def remember_matrix(indptr, indices, num_src: int, matrix: SparseMatrix) -> SparseMatrix:
    """Let ``matrix_of(indptr, indices, num_src)`` find ``matrix`` (whose CSR arrays the
    caller vouches are those of the tensors) while the tensors are unchanged, as it keeps
    those it makes; returns ``matrix``. An operator that makes CSR tensors at each call for a
    matrix it keeps (``nn.relation_slots``) spares the operators that read them a new
    matrix, its bound kernels and transpose."""
    key = (indptr.data_ptr(), indices.data_ptr(), int(indices.numel()), int(num_src))
    _MADE[key] = (indptr, indices, (indptr._version, indices._version), matrix)
    _MADE.move_to_end(key)
    while len(_MADE) > _MADE_LIMIT:
        _MADE.popitem(last=False)
    return matrix


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
    alias its inputs, and ``cpu_dispatch`` does not check it at run time). The forward
    operators need none: ``gspmm_values`` and ``gsddmm_values`` return new tensors."""
    shared = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, Tensor)}
    return result.clone() if result.untyped_storage().data_ptr() in shared else result


def _gradient(grad, operand, needed: bool, like: Tensor) -> Tensor:
    """An operand's gradient as the backward operators return it, in the operand's dtype:
    zeros where the backward gave none for an operand it does not read, an empty tensor where
    none was asked for."""
    if not needed or operand is None:
        return like.new_empty((0,))
    return torch.zeros_like(operand) if grad is None else grad.to(operand.dtype)


def _fake_gradients(grad, operands, needs) -> tuple:
    """``_gradient``'s shapes and dtypes, for the backward operators' fake implementations."""
    return tuple(operand.new_empty(operand.shape) if needed and operand is not None
                 else grad.new_empty((0,)) for operand, needed in zip(operands, needs))


def _out_dtype(lhs, rhs, dtype: Optional[str]) -> torch.dtype:
    """The result dtype of a product of ``lhs`` and ``rhs`` (either None): ``dtype``, checked,
    or the operands' (``dtypes.result_dtype``, which refuses a mixture by name)."""
    if dtype is not None:
        check_dtype("dtype", dtype)
    return getattr(torch, kernel_dtypes(lhs, rhs, dtype)[1])


def _checked(dtype: Optional[str]) -> Optional[str]:
    """``dtype``, refused by name unless None or a dtype the kernels compute in."""
    if dtype is not None:
        check_dtype("dtype", dtype)
    return dtype


def _reduced(matrix, op: str, reduce_op: str, lhs, rhs, dtype: Optional[str]) -> tuple:
    """``gspmm_values``'s ``(out, arg)`` over checked operands as the forward operators
    return them: ``arg`` empty where the reduction records none (sum, mean)."""
    out, arg = gspmm_values(matrix, op, reduce_op, lhs, rhs, record_arg=True,
                            dtype=_checked(dtype))
    return out, arg if arg is not None else out.new_empty(0, dtype=torch.int32)


def _contiguous(*tensors):
    return tuple(None if t is None else t.contiguous() for t in tensors)


def _rows(operand) -> Optional[int]:
    return None if operand is None else int(operand.shape[0])


def _features(lhs, rhs, trim: int = 0) -> tuple:
    """The broadcast feature shape of the operands (``trim`` last dimensions dropped)."""
    shapes = [tuple(x.shape[1:len(x.shape) - trim]) for x in (lhs, rhs) if x is not None]
    return tuple(torch.broadcast_shapes(*shapes))


# ---------------------------------------------------------------------------------- gspmm

@custom_operator("sparsetir::gspmm")
def gspmm(indptr: Tensor, indices: Tensor, op: str, reduce_op: str, lhs: Optional[Tensor],
          rhs: Optional[Tensor], dtype: Optional[str] = None) -> tuple[Tensor, Tensor]:
    """``ops.gspmm`` over the CSR tensors ``indptr``, ``indices``; ``(out, arg)``, ``out`` of
    ``dtype`` (None: the operands')."""
    matrix = matrix_of(indptr, indices, _rows(lhs))
    lhs, rhs = gspmm_operands(matrix, op, reduce_op, lhs, rhs)
    return _reduced(matrix, op, reduce_op, lhs, rhs, dtype)


@gspmm.register_fake
def _(indptr, indices, op, reduce_op, lhs, rhs, dtype=None):
    lhs, rhs = gspmm_read(op, reduce_op, lhs, rhs)
    sample = lhs if lhs is not None else rhs
    out = sample.new_empty((indptr.shape[0] - 1,) + _features(lhs, rhs),
                           dtype=_out_dtype(lhs, rhs, dtype))
    recorded = out.shape if reduce_op in ("max", "min") else (0,)
    return out, sample.new_empty(recorded, dtype=torch.int32)


@custom_operator("sparsetir::gspmm_backward")
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
    d_lhs, d_rhs = GSpMM.backward(ctx, grad)[3:5]
    return (_fresh(_gradient(d_lhs, lhs, needs[0], grad), grad, lhs, rhs),
            _fresh(_gradient(d_rhs, rhs, needs[1], grad), grad, lhs, rhs))


@gspmm_backward.register_fake
def _(indptr, indices, op, reduce_op, lhs, rhs, arg, grad, needs):
    return _fake_gradients(grad, (lhs, rhs), needs)


def _gspmm_setup(ctx, inputs, output):
    indptr, indices, ctx.op, ctx.reduce_op, lhs, rhs = inputs[:6]
    ctx.save_for_backward(indptr, indices, lhs, rhs, output[1])


def _gspmm_grad(ctx, grad, _):
    indptr, indices, lhs, rhs, arg = ctx.saved_tensors
    needs = list(ctx.needs_input_grad[4:6])
    grads = torch.ops.sparsetir.gspmm_backward(indptr, indices, ctx.op, ctx.reduce_op, lhs,
                                               rhs, arg, grad, needs)
    return (None,) * 4 + tuple(g if needed else None for g, needed in zip(grads, needs)) \
        + (None,)


gspmm.register_autograd(_gspmm_grad, setup_context=_gspmm_setup)


# --------------------------------------------------------------------------------- gsddmm

def _source_rows(lhs, rhs, lhs_target: str, rhs_target: str) -> Optional[int]:
    """The sources' count an operand gives (None when none reads the sources)."""
    for operand, target in ((lhs, lhs_target), (rhs, rhs_target)):
        if target == "u" and operand is not None:
            return int(operand.shape[0])
    return None


@custom_operator("sparsetir::gsddmm")
def gsddmm(indptr: Tensor, indices: Tensor, op: str, lhs: Optional[Tensor],
           rhs: Optional[Tensor], lhs_target: str, rhs_target: str,
           dtype: Optional[str] = None) -> Tensor:
    """``ops.gsddmm`` over the CSR tensors ``indptr``, ``indices``, the result of ``dtype``
    (None: the operands')."""
    matrix = matrix_of(indptr, indices, _source_rows(lhs, rhs, lhs_target, rhs_target))
    lhs, rhs = gsddmm_operands(matrix, op, lhs, rhs, lhs_target, rhs_target)
    return gsddmm_values(matrix, op, lhs, rhs, lhs_target, rhs_target, _checked(dtype))


@gsddmm.register_fake
def _(indptr, indices, op, lhs, rhs, lhs_target, rhs_target, dtype=None):
    lhs, rhs = gsddmm_read(op, lhs, rhs, lhs_target, rhs_target)
    sample = lhs if lhs is not None else rhs
    shape = (indices.shape[0],) + (_features(lhs, rhs, 1) + (1,) if op == "dot"
                                   else _features(lhs, rhs))
    return sample.new_empty(shape, dtype=_out_dtype(lhs, rhs, dtype))


@custom_operator("sparsetir::gsddmm_backward")
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
    return _fake_gradients(grad, (lhs, rhs), needs)


def _gsddmm_setup(ctx, inputs, output):
    indptr, indices, ctx.op, lhs, rhs, ctx.lhs_target, ctx.rhs_target = inputs[:7]
    ctx.save_for_backward(indptr, indices, lhs, rhs, output)


def _gsddmm_grad(ctx, grad):
    indptr, indices, lhs, rhs, out = ctx.saved_tensors
    needs = list(ctx.needs_input_grad[3:5])
    grads = torch.ops.sparsetir.gsddmm_backward(indptr, indices, ctx.op, lhs, rhs, out,
                                                ctx.lhs_target, ctx.rhs_target, grad, needs)
    return (None,) * 3 + tuple(g if needed else None for g, needed in zip(grads, needs)) \
        + (None, None, None)


gsddmm.register_autograd(_gsddmm_grad, setup_context=_gsddmm_setup)


# --------------------------------------------------------------------------- edge_softmax

@custom_operator("sparsetir::edge_softmax")
def edge_softmax(indptr: Tensor, indices: Tensor, logits: Tensor) -> Tensor:
    """``ops.edge_softmax`` over the CSR tensors ``indptr``, ``indices``."""
    matrix = matrix_of(indptr, indices)
    (logits,) = gspmm_operands(matrix, "copy_rhs", "sum", None, logits)[1:]
    return edge_softmax_values(matrix, logits)


@edge_softmax.register_fake
def _(indptr, indices, logits):
    return torch.empty_like(logits)


@custom_operator("sparsetir::edge_softmax_backward")
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

@custom_operator("sparsetir::segment_reduce")
def segment_reduce(seglen: Tensor, value: Tensor, reducer: str,
                   dtype: Optional[str] = None) -> tuple[Tensor, Tensor]:
    """``ops.segment_reduce``; ``(out, arg)`` as ``gspmm``'s."""
    matrix = segments_matrix(seglen, value, reducer)
    (value,) = gspmm_operands(matrix, "copy_lhs", reducer, value, None)[:1]
    return _reduced(matrix, "copy_lhs", reducer, value, None, dtype)


@segment_reduce.register_fake
def _(seglen, value, reducer, dtype=None):
    out = value.new_empty((seglen.shape[0],) + tuple(value.shape[1:]),
                          dtype=_out_dtype(value, None, dtype))
    recorded = out.shape if reducer in ("max", "min") else (0,)
    return out, value.new_empty(recorded, dtype=torch.int32)


@custom_operator("sparsetir::segment_reduce_backward")
def segment_reduce_backward(seglen: Tensor, value: Tensor, reducer: str, arg: Tensor,
                            grad: Tensor) -> Tensor:
    """The gradient of ``segment_reduce``'s ``value``."""
    matrix = segments_matrix(seglen, value, reducer)
    ctx = _Context(_NO_GRAD + (True, False), (None, None), matrix=matrix, op="copy_lhs",
                   reduce_op=reducer, arg=arg, lhs_shape=tuple(value.shape), rhs_shape=None)
    return _fresh(GSpMM.backward(ctx, grad)[3].to(value.dtype), grad, value)


@segment_reduce_backward.register_fake
def _(seglen, value, reducer, arg, grad):
    return torch.empty_like(value)


def _segment_reduce_setup(ctx, inputs, output):
    seglen, value, ctx.reducer = inputs[:3]
    ctx.save_for_backward(seglen, value, output[1])


def _segment_reduce_grad(ctx, grad, _):
    seglen, value, arg = ctx.saved_tensors
    return None, torch.ops.sparsetir.segment_reduce_backward(seglen, value, ctx.reducer, arg,
                                                             grad), None, None


segment_reduce.register_autograd(_segment_reduce_grad, setup_context=_segment_reduce_setup)


# ----------------------------------------------------------------- gather_mm, segment_mm

@custom_operator("sparsetir::gather_mm")
def gather_mm(a: Tensor, b: Tensor, idx_b: Tensor, dtype: Optional[str] = None) -> Tensor:
    """``ops.gather_mm``, the result in ``dtype`` (None: the operands')."""
    return _fresh(typed.typed_product(a, b, idx_b, False, dtype), a, b)


@custom_operator("sparsetir::segment_mm")
def segment_mm(a: Tensor, b: Tensor, seglen_a: Tensor, dtype: Optional[str] = None) -> Tensor:
    """``ops.segment_mm``, the result in ``dtype`` (None: the operands')."""
    return _fresh(typed.typed_product(a, b, seglen_a, True, dtype), a, b)


def _typed_fake(a, b, relations, dtype=None):
    operands = typed.Operands(a, b, dtype)   # their shapes and dtypes, refused as eagerly
    return a.new_empty((a.shape[0], b.shape[2]), dtype=getattr(torch, operands.dtypes[2]))


gather_mm.register_fake(_typed_fake)
segment_mm.register_fake(_typed_fake)


@custom_operator("sparsetir::typed_mm_backward")
def typed_mm_backward(a: Tensor, b: Tensor, relations: Tensor, segments: bool, grad: Tensor,
                      needs: list[bool]) -> tuple[Tensor, Tensor]:
    """The gradients of ``gather_mm``'s (``segments`` False: ``relations`` is ``idx_b``) or
    ``segment_mm``'s (``seglen_a``) ``a`` and ``b``."""
    n, r = int(a.shape[0]), int(b.shape[0])
    relation = typed._Relation.of_segments(relations, n, r) if segments \
        else typed._Relation.of_indices(relations, n, r)  # pylint: disable=protected-access
    ctx = _Context(tuple(needs) + (False, False), (a, b), relation=relation,
                   a_dtype=dtype_name(a), b_dtype=dtype_name(b))
    d_a, d_b = typed._typed_product_function().backward(  # pylint: disable=protected-access
        ctx, grad.contiguous())[:2]
    return (_fresh(_gradient(d_a, a, needs[0], grad), a, b, grad),
            _fresh(_gradient(d_b, b, needs[1], grad), a, b, grad))


@typed_mm_backward.register_fake
def _(a, b, relations, segments, grad, needs):
    return _fake_gradients(grad, (a, b), needs)       # each in its operand's dtype, as real


def _typed_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:3])      # a, b and the relations; not the result's dtype


def _typed_grad(segments: bool):
    def backward(ctx, grad):
        a, b, relations = ctx.saved_tensors
        needs = list(ctx.needs_input_grad[:2])
        grads = torch.ops.sparsetir.typed_mm_backward(a, b, relations, segments, grad, needs)
        return tuple(g if needed else None for g, needed in zip(grads, needs)) + (None, None)
    return backward


gather_mm.register_autograd(_typed_grad(False), setup_context=_typed_setup)
segment_mm.register_autograd(_typed_grad(True), setup_context=_typed_setup)
