"""Dense operands of ``sparsetir.ops``: checked, and results given back in the caller's type.

A torch tensor is checked by name before anything reads its memory (``check_tensor``): the
tensors of a ``torch.func`` transform (``grad``, ``vmap``) are refused, as are sparse, nested
or other non-strided tensors, and, where an operator has no backward for it, one that autograd
would track while grad mode is on (a gradient must never vanish silently; under
``torch.no_grad()`` it is read as data).

Example
-------
>>> import numpy as np
>>> from sparsetir.ops.arrays import DenseOperand
>>> x = DenseOperand("X", np.ones((3, 4), np.float32), rows=3)
>>> x.feat_size, x.new_output(x.rows_shape(5)).shape
(4, (5, 4))
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ..runtime.arguments import (INFERENCE_REFUSAL, in_dual_level, shares_elements,
                                 writes_inference_tensor)
from ..errors import ArgumentError, SparseTIRTypeError, SparseTIRValueError
from ..schedule.cpu_target import CACHE_LINE_BYTES
from .huge_pages import advise_fresh_result


def torch_func_refusal(what: str) -> SparseTIRTypeError:
    """The error refusing a call inside a ``torch.func`` transform; ``what`` says what showed
    it (``"X is a tensor of"``)."""
    return SparseTIRTypeError(f"{what} a torch.func transform (grad, vmap, ...); sparsetir.ops "
                              "does not support torch.func: call it outside the transform "
                              "(torch.autograd works)")


def in_torch_func_transform() -> bool:
    """Whether the caller runs inside a ``torch.func`` transform (torch loaded)."""
    functorch = getattr(sys.modules["torch"]._C, "_functorch", None)
    return functorch is not None and functorch.maybe_current_level() is not None


def check_functorch(name: str, tensor) -> None:
    """Refuse (``TypeError`` naming ``name``) a tensor of a ``torch.func`` transform (``grad``,
    ``vmap``, ...) or one carrying a forward-mode tangent (``torch.autograd.forward_ad``): the
    operators' backward passes are ``autograd.Function``s without the ``vmap`` and forward-mode
    rules those need, and a kernel reading the tensor's values would drop its tangent."""
    torch = sys.modules["torch"]
    functorch = getattr(torch._C, "_functorch", None)
    if functorch is not None and functorch.is_functorch_wrapped_tensor(tensor):
        raise torch_func_refusal(f"{name} is a tensor of")
    if in_dual_level() and sys.modules["torch.autograd.forward_ad"].unpack_dual(
            tensor).tangent is not None:
        raise SparseTIRTypeError(f"{name} carries a forward-mode tangent (torch.autograd."
                                 "forward_ad); sparsetir.ops has no forward-mode rule and would "
                                 "drop it: use reverse mode (backward), or pass the primal "
                                 f"(forward_ad.unpack_dual({name}).primal)")


def recorded(tensors) -> bool:
    """Whether autograd records a call on the torch ``tensors`` (None among them skipped):
    one requires grad in grad mode.

    Example
    -------
    >>> import torch
    >>> x = torch.ones(2, requires_grad=True)
    >>> recorded((x, None)), torch.no_grad()(recorded)((x,))
    (True, False)
    """
    return sys.modules["torch"].is_grad_enabled() and any(
        tensor is not None and tensor.requires_grad for tensor in tensors)


def recorded_or_autocast(tensors) -> bool:
    """Whether a call on the torch ``tensors`` (None among them skipped) is one only the
    operators' torch path (``graph_ops``) makes as torch would: autograd records it
    (:func:`recorded`), or torch's CPU autocast sets its result's dtype."""
    return sys.modules["torch"].is_autocast_enabled("cpu") or recorded(tensors)


def check_autograd(name: str, tensor, remedy: str = "") -> None:
    """Refuse (``TypeError`` naming ``name``) a torch tensor that autograd or ``torch.func``
    would track, where the operator has no backward for it (``remedy``: what to do instead).
    A tensor that requires grad passes under ``torch.no_grad()``, as in DGL."""
    check_functorch(name, tensor)
    if tensor.requires_grad and sys.modules["torch"].is_grad_enabled():
        raise SparseTIRTypeError(f"{name} requires grad, and sparsetir.ops has no backward for it "
                        f"here (its gradient would be lost): {remedy or 'pass '+ name + '.detach()'}"
                        ", or call it under torch.no_grad()")


def check_tensor(name: str, tensor, tracked_ok: bool = False) -> None:
    """Refuse (``TypeError`` naming ``name``) a torch tensor that cannot be a dense operand or
    output: one autograd would track (``check_autograd``; with ``tracked_ok``, only the
    tensors of a ``torch.func`` transform), or a sparse, nested or other non-strided tensor.
    Reads no memory."""
    if tracked_ok:
        check_functorch(name, tensor)
    else:
        check_autograd(name, tensor)
    if tensor.is_nested or tensor.layout is not sys.modules["torch"].strided:
        kind = "nested" if tensor.is_nested else str(tensor.layout).replace("torch.", "")
        raise SparseTIRTypeError(f"{name} is a {kind} torch tensor; sparsetir.ops takes dense "
                        f"(strided) tensors here: pass {name}.to_dense()")


def is_torch(value) -> bool:
    """Whether ``value`` is a torch tensor (torch is never imported for the question)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


class DenseOperand:
    """A row-major dense operand with ``rows`` rows (a 1-D array is one feature)."""

    def __init__(self, name: str, value, rows: int):
        self.is_torch = is_torch(value)
        if self.is_torch:
            check_tensor(name, value)
        else:
            value = np.asarray(value)
            if isinstance(value, np.matrix):
                value = np.asarray(value)
        if value.dtype != np.float32 and str(value.dtype) != "torch.float32":
            raise SparseTIRTypeError(f"{name} must be float32, got {value.dtype}")
        if self.is_torch and value.device.type != "cpu":
            raise SparseTIRTypeError(f"{name} is on {value.device}; sparsetir.ops runs on the CPU")
        if value.ndim not in (1, 2) or value.shape[0] != rows:
            raise SparseTIRValueError(f"{name} must have {rows} rows (shape ({rows}, feat) or ({rows},)), "
                             f"got shape {tuple(value.shape)}")
        self.name, self.value, self.vector = name, value, value.ndim == 1
        self.feat_size = 1 if self.vector else int(value.shape[1])

    def as_matrix(self):
        """The operand as a 2-D array (a view)."""
        return self.value.reshape(-1, 1) if self.vector else self.value

    def rows_shape(self, rows: int) -> tuple:
        """The shape of an array of ``rows`` rows with this operand's features."""
        return (rows,) if self.vector else (rows, self.feat_size)

    def new_output(self, shape: tuple):
        """An uninitialised float32 array of this operand's kind."""
        return new_array(self.is_torch, shape)


def new_array(torch_tensor: bool, shape: tuple, dtype: str = "float32"):
    """An uninitialised torch tensor (``torch_tensor``) or numpy array of ``shape`` and
    ``dtype``: a large tensor asks for huge pages before it is written
    (``huge_pages.advise_fresh_result``, as numpy does for its arrays), a numpy array is
    ``empty_on_line``'s (on a cache line from ``LINED_BYTES``)."""
    if torch_tensor:
        torch = sys.modules["torch"]
        tensor = torch.empty(shape, dtype=getattr(torch, dtype))
        advise_fresh_result(tensor)
        return tensor
    return empty_on_line(shape, dtype)


LINED_BYTES = 1 << 16
"""Results from this size start on a cache line (``empty_on_line``), as torch's allocator
places every tensor. Below it numpy's allocator
serves them from its heap (16-byte boundaries) and placing them would cost more than it saves:
a placed array costs about 1.3 us more to make than ``np.empty``'s 0.2 us."""


def empty_on_line(shape, dtype=np.float32, min_bytes: int = LINED_BYTES) -> np.ndarray:
    """An uninitialised C-contiguous numpy array of ``shape`` that starts on a cache line
    (``CACHE_LINE_BYTES``) when it holds ``min_bytes`` or more. Such an array is a view of a
    buffer 64 bytes longer (its ``base``): like any view it cannot be resized in place
    (``ndarray.resize``; ``np.resize`` makes a new array).

    An operator's result is often the next call's gathered operand (``spmm(M, spmm(M, X))``),
    whose rows the kernels load as whole cache lines: ``np.empty`` puts a large array 16 bytes
    past a page (glibc's ``mmap``), so a 128-byte row would span three lines and the next call
    would copy it first (``ops.alignment``) or load every row split. ``spmm(M, Y1)`` with
    ``Y1`` the previous call's result (weighted, 2 threads, Intel VM, 2 runs, medians; before
    -> placed): facebook 0.148-0.157 -> 0.093-0.096 ms at 32 features, 0.50-0.57 -> 0.344 at
    128; the arxiv-size graph 3.9-4.1 -> 2.4-2.5 ms at 32, 16.7-16.8 -> 15.1-15.3 at 128;
    pubmed 0.19-0.21 -> 0.15-0.18 at 32 (at 128 within the runs' spread).

    Example
    -------
    >>> empty_on_line((1000, 32)).ctypes.data % CACHE_LINE_BYTES
    0
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod((shape,) if isinstance(shape, int) else shape) * dtype.itemsize
    if nbytes < min_bytes:
        return np.empty(shape, dtype)
    memory = np.empty(nbytes + CACHE_LINE_BYTES, np.uint8)
    start = -memory.__array_interface__["data"][0] % CACHE_LINE_BYTES
    return np.ndarray(shape, dtype, memory, start)


def check_output(out, shape: tuple, name: str = "out", dtype: str = "float32",
                 tracked_ok: bool = False) -> None:
    """``out`` must be a writable array of ``dtype`` (numpy or torch, ``check_tensor``, with
    ``tracked_ok``; no inference tensor outside inference mode) of ``shape``."""
    if is_torch(out):
        check_tensor(name, out, tracked_ok)
        if writes_inference_tensor(out):
            raise SparseTIRValueError(f"{name} {INFERENCE_REFUSAL}")
    if not hasattr(out, "shape") or not hasattr(out, "dtype"):
        raise SparseTIRTypeError(f"{name} must be a numpy array or torch tensor, got "
                        f"{type(out).__name__}")
    if getattr(getattr(out, "flags", None), "writeable", True) is False:
        raise SparseTIRValueError(f"{name} is read-only")
    if tuple(out.shape) != tuple(shape):
        raise SparseTIRValueError(f"{name} must have shape {tuple(shape)}, got {tuple(out.shape)}")
    strides, itemsize = (out.stride(), 1) if callable(getattr(out, "stride", None)) \
        else (out.strides, out.itemsize)
    if shares_elements(out.shape, strides, itemsize):
        raise SparseTIRValueError(f"{name} has elements that share memory (a stride of 0, or "
                                  "strides that overlap); pass an array with one place per "
                                  "element")
    if str(out.dtype).replace("torch.", "") != str(dtype).replace("torch.", ""):
        raise SparseTIRTypeError(f"{name} must be {str(dtype).replace('torch.', '')}, got "
                                 f"{out.dtype}")


def refuse_shared_output(out, operands: dict) -> None:
    """Refuse (``ArgumentError`` naming the operand, as a kernel call refuses an output over an
    input) an ``out`` that shares memory with one of ``operands`` (name -> numpy array or
    torch tensor; anything else is left to the checks that name its type). Checked on the
    caller's own arrays, before anything is copied: a kernel that reads a private copy would
    give the right values, and then write them over the caller's input. (Calls that go
    through ``graph_ops``, in half precision, float64 or with autograd, are not checked here:
    they write ``out`` from a result of their own, or their kernel refuses it.)

    Example
    -------
    >>> X = np.ones((4, 3), np.float32)
    >>> refuse_shared_output(X[:, :2], {"X": X})
    Traceback (most recent call last):
    ...
    sparsetir.errors.ArgumentError: 'out' shares memory with argument 'X'; the operator writes 'out', so pass a separate array
    """
    if not _is_array(out):
        return
    for name, operand in operands.items():
        if _is_array(operand) and _overlaps(out, operand):
            raise ArgumentError(f"'out' shares memory with argument '{name}'; the operator "
                                "writes 'out', so pass a separate array")


def _is_array(value) -> bool:
    return type(value) is np.ndarray or is_torch(value)


def _overlaps(a, b) -> bool:
    """Whether arrays or tensors ``a`` and ``b`` touch one byte: numpy's exact test (given up
    as shared where it is too costly), on torch tensors' numpy views; by the extent of their
    elements where torch gives no numpy view."""
    a_array, b_array = _as_numpy(a), _as_numpy(b)
    if a_array is None or b_array is None:
        (a_start, a_end), (b_start, b_end) = _extent(a), _extent(b)
        return a_start < b_end and b_start < a_end
    if not np.may_share_memory(a_array, b_array):
        return False
    try:
        return bool(np.shares_memory(a_array, b_array, max_work=1 << 16))
    except TOO_HARD:
        return True


TOO_HARD = getattr(np, "exceptions", np).TooHardError


def _as_numpy(value):
    """``value`` (a numpy array or CPU torch tensor) as a numpy array over its memory (a
    bfloat16 tensor as int16); None where torch gives none (another device, a negative or
    conjugate bit)."""
    if type(value) is np.ndarray:
        return value
    torch = sys.modules["torch"]
    tensor = value.detach()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    try:
        return tensor.numpy()
    except (RuntimeError, TypeError):
        return None


def _extent(value) -> tuple:
    """``(first byte, past the last byte)`` of the elements of a numpy array or torch tensor
    (an empty range for no elements)."""
    if type(value) is np.ndarray:
        itemsize, start, steps = value.itemsize, value.ctypes.data, value.strides
    else:
        itemsize, start = value.element_size(), value.data_ptr()
        steps = [step * itemsize for step in value.stride()]
    if 0 in tuple(value.shape):
        return 0, 0
    low = sum(min(0, (size - 1) * step) for size, step in zip(value.shape, steps))
    high = sum(max(0, (size - 1) * step) for size, step in zip(value.shape, steps))
    return start + low, start + high + itemsize


def writable_view(out, shape: tuple):
    """``(target, finish)``: an array of ``shape`` the kernel can write, and a function that
    moves what was written into ``out`` (a reshaped view when ``out`` is contiguous, so
    nothing moves; a contiguous copy otherwise, copied back)."""
    contiguous = out.is_contiguous() if hasattr(out, "is_contiguous") \
        else out.flags.c_contiguous
    if contiguous:
        return out.reshape(shape), lambda: None
    target = out.contiguous() if hasattr(out, "contiguous") else np.ascontiguousarray(out)
    target = target.reshape(shape)

    def finish():
        out[...] = target.reshape(out.shape)
    return target, finish


def reordered_view(out, length: int, order: np.ndarray):
    """``(target, finish)`` as ``writable_view`` gives, for a result the kernel writes in
    another order: a new float32 array of ``length`` values, and a function that puts
    ``target[order]`` into ``out`` (``order[p]``: where ``out``'s p-th value is in
    ``target``; ``SparseMatrix.source_order``)."""
    target = np.empty(length, np.float32)

    def finish():
        gathered = target[order]
        if is_torch(out):
            out.copy_(sys.modules["torch"].from_numpy(gathered))
        else:
            out[...] = gathered
    return target, finish
