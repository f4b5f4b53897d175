"""``gather_mm`` and ``segment_mm``: RGCN's typed matrix products, with DGL's semantics.

Each row ``i`` of ``a`` (N, D1) is multiplied by one matrix of ``b`` (R, D1, D2): the matrix of
the row's relation. ``gather_mm(a, b, idx_b)`` names it per row (``out[i] = a[i] @
b[idx_b[i]]``); ``segment_mm(a, b, seglen_a)`` gives consecutive segments of rows (``seglen_a[r]``
rows multiply ``b[r]``; a segment may be empty). The kernels are made by the compiler
(``typed_kernels``, scheduled by ``schedule.typed``), one per dtype (float32, float64,
bfloat16 or float16, the half dtypes summed in float32; ``a`` and ``b`` of different dtypes
are refused, never cast) and feature sizes.

Under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (or float16) the products of torch
tensors give the autocast dtype, as torch's own matrix products and ``spmm`` do: ``a`` and
``b`` may each be float32 or that dtype and are read as they are (a float32 operand is not
rounded first: the kernel widens the half one and sums in float32); float64 operands keep
float64. Gradients have their operand's dtype.

numpy in gives numpy out. torch in gives torch out, with autograd: ``da = gather_mm(dout,
b^T, idx_b)`` and ``db[r] = sum of outer(a[i], dout[i])`` over the rows of relation ``r``, both
computed by compiled kernels; a second derivative raises.

Example
-------
>>> import numpy as np
>>> from sparsetir.ops.typed import gather_mm, segment_mm
>>> a = np.ones((3, 2), np.float32)
>>> b = np.stack([np.eye(2, dtype=np.float32), 2 * np.eye(2, dtype=np.float32)])
>>> gather_mm(a, b, idx_b=np.array([1, 0, 1])).tolist()
[[2.0, 2.0], [1.0, 1.0], [2.0, 2.0]]
>>> segment_mm(a, b, seglen_a=np.array([0, 3]))[:, 0].tolist()
[2.0, 2.0, 2.0]
"""

from __future__ import annotations

import sys

import numpy as np

from ..driver.build_module import build
from ..driver.background import remembered
from ..errors import FormatTypeError, SparseTIRTypeError, SparseTIRValueError
from ..format.checks import index_array
from ..lower import lower_sparse_iter
from ..schedule.typed import schedule_gather_mm_cpu, schedule_relation_outer_cpu
from .arrays import is_torch, new_array, torch_func_refusal
from .dtypes import autocast_result, check_autocast_operand
from .generic_kernels import accumulator_dtype
from .graph_tensors import tracing
from .typed_kernels import DTYPES, kernel

__all__ = ["gather_mm", "segment_mm"]


def gather_mm(a, b, idx_b):
    """``out[i] = a[i] @ b[idx_b[i]]`` (DGL's ``gather_mm``).

    Parameters
    ----------
    a : numpy.ndarray or torch.Tensor, shape (N, D1), float32, float64, bfloat16 or float16
    b : numpy.ndarray or torch.Tensor, shape (R, D1, D2), the same kind and dtype as ``a``
    idx_b : integers (array, tensor or list), shape (N,), values in ``[0, R)``

    Returns
    -------
    (N, D2) array of ``a``'s kind and dtype (under ``torch.autocast``: its dtype).
    """
    if tracing():
        from . import traced  # pylint: disable=import-outside-toplevel
        return traced.gather_mm(a, b, idx_b)
    return typed_product(a, b, idx_b, False, _autocast_dtype(a, b))


def segment_mm(a, b, seglen_a):
    """``a[s_r : s_r + seglen_a[r]] @ b[r]`` for each relation ``r`` in turn, where ``s_r`` is
    the sum of the earlier segments (DGL's ``segment_mm``).

    Parameters
    ----------
    a : numpy.ndarray or torch.Tensor, shape (N, D1), float32, float64, bfloat16 or float16
    b : numpy.ndarray or torch.Tensor, shape (R, D1, D2), the same kind and dtype as ``a``
    seglen_a : integers (array, tensor or list), shape (R,), non-negative, summing to N

    Returns
    -------
    (N, D2) array of ``a``'s kind and dtype (under ``torch.autocast``: its dtype).
    """
    if tracing():
        from . import traced  # pylint: disable=import-outside-toplevel
        return traced.segment_mm(a, b, seglen_a)
    return typed_product(a, b, seglen_a, True, _autocast_dtype(a, b))


def _autocast_dtype(a, b):
    """The autocast dtype of a product of ``a`` and ``b`` (``dtypes.autocast_result``) when
    both are torch tensors; None otherwise (anything else is refused by ``Operands``)."""
    return autocast_result(a, b) if is_torch(a) and is_torch(b) else None


def typed_product(a, b, relations, segments: bool, dtype=None):
    """``segment_mm(a, b, relations)`` (``segments``) or ``gather_mm(a, b, relations)``, the
    result in ``dtype`` (None: the operands' one dtype; else the autocast dtype, each operand
    float32 or ``dtype``)."""
    operands = Operands(a, b, dtype)
    of = _Relation.of_segments if segments else _Relation.of_indices
    return operands.product(of(relations, operands.n, operands.r))


class _Relation:
    """Which matrix of ``b`` each row meets: ``idx`` (int32, one per row, in ``[0, r)``), and
    its transpose, each relation's rows as CSR (``transposed``, made when first asked).
    ``gathered``: a relation's rows are scattered (``idx`` is not sorted)."""

    def __init__(self, idx: np.ndarray, r: int):
        self.idx, self.r = idx, r
        self.gathered = bool((idx[1:] < idx[:-1]).any())
        self._transposed = None

    @classmethod
    def of_indices(cls, value, n: int, r: int) -> "_Relation":
        idx = _indices("idx_b", value)
        if idx.size != n:
            raise SparseTIRValueError(f"idx_b must hold one relation per row of a ({n}), "
                                      f"got {idx.size}")
        if idx.size and idx.max() >= r:
            p = int(np.argmax(idx >= r))
            raise SparseTIRValueError(f"idx_b[{p}] = {idx[p]} is out of range: b has {r} "
                                      "relations")
        return cls(idx.astype(np.int32), r)

    @classmethod
    def of_segments(cls, value, n: int, r: int) -> "_Relation":
        seglen = _indices("seglen_a", value)
        if seglen.size != r:
            raise SparseTIRValueError(f"seglen_a must hold one length per relation of b ({r}), "
                                      f"got {seglen.size}")
        if seglen.size and seglen.max() > n:
            p = int(np.argmax(seglen > n))
            raise SparseTIRValueError(f"seglen_a[{p}] = {seglen[p]} is more than the {n} rows "
                                      "of a")
        if seglen.sum() != n:      # no overflow: each length is at most n
            raise SparseTIRValueError(f"seglen_a must sum to the {n} rows of a, got "
                                      f"{int(seglen.sum())}")
        return cls(np.repeat(np.arange(r, dtype=np.int32), seglen), r)

    def transposed(self) -> tuple:
        """``(ptr, rows)``: relation ``q``'s rows are ``rows[ptr[q]:ptr[q + 1]]``, ascending."""
        if self._transposed is None:
            ptr = np.zeros(self.r + 1, np.int32)
            np.cumsum(np.bincount(self.idx, minlength=self.r), out=ptr[1:])
            if self.gathered:
                # numpy sorts 16-bit keys by radix, 20x faster than int32 ones at 20000 rows
                keys = self.idx.astype(np.uint16) if self.r <= 1 << 16 else self.idx
                rows = np.argsort(keys, kind="stable").astype(np.int32)
            else:
                rows = np.arange(self.idx.size, dtype=np.int32)
            self._transposed = (ptr, rows)
        return self._transposed


def _indices(name: str, value) -> np.ndarray:
    """``value`` (1-D integers: numpy array, CPU torch tensor, list) as int64; refusals name
    it."""
    if is_torch(value) and value.device.type != "cpu":
        raise SparseTIRTypeError(f"{name} is on {value.device}; sparsetir.ops runs on the CPU")
    try:
        return index_array(name, value)
    except FormatTypeError as err:
        raise SparseTIRTypeError(str(err)) from None


class Operands:
    """``a`` and ``b`` after their checks: both numpy arrays or both CPU torch tensors, of one
    dtype in ``typed_kernels.DTYPES`` (or, with a result ``dtype``, each float32 or
    ``dtype``), shapes (n, d1) and (r, d1, d2); ``dtypes``: a's, b's and the result's."""

    def __init__(self, a, b, dtype=None):
        self.is_torch = _kind("a", a)
        if _kind("b", b) != self.is_torch:
            raise SparseTIRTypeError("a and b must both be numpy arrays or both torch tensors, "
                                     f"got {type(a).__name__} and {type(b).__name__}")
        self.dtypes = (_dtype_name("a", a), _dtype_name("b", b), dtype or _dtype_name("a", a))
        if dtype is None and self.dtypes[1] != self.dtypes[0]:
            raise SparseTIRTypeError(f"a is {self.dtypes[0]} and b is {self.dtypes[1]}; pass "
                                     "both in one dtype (sparsetir does not cast)")
        if dtype is not None:
            _dtype_name("dtype", dtype)
            for name, given in zip("ab", self.dtypes):
                check_autocast_operand(name, given, dtype)
        if a.ndim != 2:
            raise SparseTIRValueError(f"a must have shape (N, D1), got {tuple(a.shape)}")
        if b.ndim != 3:
            raise SparseTIRValueError(f"b must have shape (R, D1, D2), got {tuple(b.shape)}")
        if a.shape[1] != b.shape[1]:
            raise SparseTIRValueError(f"a has {a.shape[1]} columns (D1) and b's matrices "
                                      f"{b.shape[1]} rows; they must be equal")
        self.a, self.b = a, b
        self.n, self.r = int(a.shape[0]), int(b.shape[0])

    def product(self, relation: _Relation):
        """The typed product over ``relation``, recorded by autograd for torch tensors."""
        if self.is_torch:
            return _typed_product_function().apply(self.a, self.b, relation, self.dtypes[2])
        return gather_rows(self.a, self.b, relation, self.dtypes)


def _kind(name: str, value) -> bool:
    """Whether ``value`` is a torch tensor (else a numpy array); anything else, or a tensor
    the kernels cannot read, is refused by name."""
    if isinstance(value, np.ndarray):
        return False
    if not is_torch(value):
        raise SparseTIRTypeError(f"{name} must be a numpy array or torch tensor, got "
                                 f"{type(value).__name__}")
    torch = sys.modules["torch"]
    if torch._C._functorch.is_functorch_wrapped_tensor(value):
        raise torch_func_refusal(f"{name} is a tensor of")
    if value.is_nested or value.layout is not torch.strided:
        raise SparseTIRTypeError(f"{name} must be a dense (strided) tensor, got layout "
                                 f"{value.layout}")
    if value.device.type != "cpu":
        raise SparseTIRTypeError(f"{name} is on {value.device}; sparsetir.ops runs on the CPU")
    return True


def _dtype_name(name: str, value) -> str:
    """The dtype of ``value`` (an array, or a dtype's name) among ``DTYPES``; refused by name
    otherwise."""
    dtype = str(getattr(value, "dtype", value)).replace("torch.", "")
    if dtype not in DTYPES:
        raise SparseTIRTypeError(f"{name} must be float32, float64, bfloat16 or float16, got "
                                 f"{dtype}")
    return dtype


def _empty(like, shape: tuple, dtype: str, zeros: bool = False):
    """A new array of ``like``'s kind, of ``dtype`` (zeros, or uninitialised)."""
    array = new_array(is_torch(like), shape, dtype)
    if zeros:
        array[...] = 0
    return array


def gather_rows(a, b, relation: _Relation, dtypes: tuple):
    """``out[i] = a[i] @ b[relation.idx[i]]`` by the compiled kernel (no autograd); ``dtypes``:
    a's, b's and the result's."""
    n, d1 = a.shape
    d2 = b.shape[2]
    if n == 0 or d1 == 0 or d2 == 0:
        return _empty(a, (n, d2), dtypes[2], zeros=True)
    out = _empty(a, (n, d2), dtypes[2])
    _kernel("gather_mm", dtypes, d1, d2)(a, b, out, relation.idx, n, relation.r,
                                         validate=False)   # idx checked when it was made
    return out


def relation_outer(a, g, relation: _Relation, dtypes: tuple):
    """``db[q] = sum of outer(a[i], g[i])`` over the rows ``i`` of relation ``q`` (zeros for a
    relation without rows), by the compiled kernel (no autograd); ``dtypes``: a's, g's and
    the result's."""
    n, d1 = a.shape
    d2 = g.shape[1]
    r = relation.r
    if n == 0 or d1 == 0 or d2 == 0 or r == 0:
        return _empty(a, (r, d1, d2), dtypes[2], zeros=True)
    db = _empty(a, (r, d1, d2), dtypes[2])
    ptr, rows = relation.transposed()
    _kernel("relation_outer", dtypes, d1, d2, relation.gathered)(a, g, db, ptr, rows, n, r,
                                                                 validate=False)
    return db


def _kernel(name: str, dtypes: tuple, d1: int, d2: int, gathered: bool = False):
    """The compiled kernel ``name`` (``typed_kernels``) for ``dtypes`` (the operands' and the
    result's) and feature sizes (``gathered``: see ``schedule_relation_outer_cpu``)."""
    def make():
        mod = lower_sparse_iter(kernel(name, dtypes).specialize({"d1": d1, "d2": d2}))
        itemsize = np.dtype(accumulator_dtype(*dtypes)).itemsize   # of the running sums
        if name == "gather_mm":
            scheduled = schedule_gather_mm_cpu(mod, d2, itemsize)
        else:
            scheduled = schedule_relation_outer_cpu(mod, d1, d2, itemsize, gathered)
        return build(scheduled, "llvm", schedule="none", cache=True)
    return remembered(("ops.typed", name, dtypes, d1, d2, gathered), make)


_FUNCTION: list = []


def _typed_product_function():
    """The ``torch.autograd.Function`` of the typed product (made on first use, so that
    importing sparsetir does not import torch)."""
    if not _FUNCTION:
        torch = sys.modules["torch"]
        from .autograd import first_order  # pylint: disable=import-outside-toplevel

        class TypedProduct(torch.autograd.Function):
            """``out[i] = a[i] @ b[idx[i]]`` in ``dtype``; backward by the compiled kernels,
            each gradient in its operand's dtype."""

            @staticmethod
            def forward(ctx, a, b, relation, dtype):
                ctx.relation = relation
                ctx.a_dtype, ctx.b_dtype = _dtype_name("a", a), _dtype_name("b", b)
                needs_a, needs_b = ctx.needs_input_grad[:2]
                ctx.save_for_backward(a if needs_b else None, b if needs_a else None)
                return gather_rows(a.detach(), b.detach(), relation,
                                   (ctx.a_dtype, ctx.b_dtype, dtype))

            @staticmethod
            @first_order
            def backward(ctx, grad):
                a, b = ctx.saved_tensors
                g = _dtype_name("grad", grad)
                da = db = None
                if ctx.needs_input_grad[0]:
                    da = gather_rows(grad, b.transpose(1, 2).contiguous(), ctx.relation,
                                     (g, ctx.b_dtype, ctx.a_dtype))
                if ctx.needs_input_grad[1]:
                    db = relation_outer(a, grad, ctx.relation, (ctx.a_dtype, g, ctx.b_dtype))
                return da, db, None, None

        _FUNCTION.append(TypedProduct)
    return _FUNCTION[0]
