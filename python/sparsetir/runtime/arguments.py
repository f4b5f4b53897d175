"""Converting one call argument into a value a compiled kernel can safely take.

Compiled TVM functions check the shape and dtype of their tensor arguments,
but they assume contiguous data aligned to the element size (sparsetir declares
its parameters so; a kernel compiled elsewhere may assume 64 bytes), and they
crash on anything else.  The converters here check every argument against its
parameter (a buffer's :class:`~sparsetir.runtime.acceptance.Acceptance`, the spec the fast
paths read too) and stage only data that does not meet those assumptions.
"""
from __future__ import annotations

import ctypes
import sys
from functools import partial
from typing import Callable

import numpy as np
import tvm
import tvm_ffi

from ..errors import ArgumentError
from .acceptance import Acceptance
from .signature import ScalarParam


def tensor_of(array: np.ndarray) -> tvm_ffi.Tensor:
    """A tvm tensor over a C-contiguous numpy ``array``'s memory (no copy); a bfloat16 array
    (ml_dtypes', which numpy's DLPack export does not take) goes through a uint16 view.

    Examples
    --------
    >>> tensor_of(np.zeros(3, "float32")).dtype
    dtype('float32')
    """
    if array.dtype.name != "bfloat16":
        return tvm_ffi.from_dlpack(array)
    return tvm_ffi.from_dlpack(array.view(np.uint16))._create_view(array.shape, "bfloat16")


def numpy_of(tensor: tvm_ffi.Tensor) -> np.ndarray:
    """A numpy array over a host tvm ``tensor``'s memory (no copy; bfloat16 as ml_dtypes')."""
    if str(tensor.dtype) != "bfloat16":
        return np.from_dlpack(tensor)
    return np.from_dlpack(tensor._create_view(tuple(tensor.shape), "uint16")).view(
        np.dtype("bfloat16"))


def host_array(data) -> np.ndarray:
    """Return the elements of an argument as a flat numpy array on the host.

    Parameters
    ----------
    data : numpy.ndarray, torch.Tensor or tvm.runtime.Tensor
        Array on any device.

    Returns
    -------
    numpy.ndarray
        A view where possible, otherwise a copy, in C (row-major) order.

    Examples
    --------
    >>> host_array(tvm.runtime.tensor(np.arange(4, dtype="int32").reshape(2, 2)))
    array([0, 1, 2, 3], dtype=int32)
    """
    if isinstance(data, np.ndarray):
        return np.asarray(data).reshape(-1)
    if isinstance(data, tvm_ffi.Tensor):
        on_host = data.device.dlpack_device_type() == tvm_ffi.DLDeviceType.kDLCPU
        return (numpy_of(data) if on_host else data.numpy()).reshape(-1)
    return data.detach().reshape(-1).cpu().numpy()


def _describe(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"a Python {type(value).__name__} (convert it with numpy.asarray(..., dtype=...))"
    kind = type(value)
    if kind.__module__ == "builtins":
        return f"a {kind.__name__}"
    return f"a {kind.__module__}.{kind.__qualname__}"


class ScalarConverter:
    """Checks the integer value of a scalar parameter.

    Parameters
    ----------
    param : ScalarParam
        The parameter; the dtype of its var sets the accepted range.

    Examples
    --------
    >>> convert = ScalarConverter(ScalarParam("m", tvm.tirx.Var("m", "int32")))
    >>> convert(np.int64(7))
    7
    >>> convert(2.0)
    Traceback (most recent call last):
    ...
    sparsetir.errors.ArgumentError: argument 'm': expected an integer, got a float
    """

    def __init__(self, param: ScalarParam):
        self.param = param
        info = np.iinfo(str(param.var.ty.dtype))
        self._min, self._max = int(info.min), int(info.max)

    def __call__(self, value) -> int:
        """Return `value` as an int, or raise ArgumentError."""
        if type(value) is not int:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise ArgumentError(
                    f"argument '{self.param.name}': expected an integer, got {_describe(value)}"
                )
            value = int(value)
        if not self._min <= value <= self._max:
            raise ArgumentError(
                f"argument '{self.param.name}': {value} does not fit in {self.param.var.ty.dtype}"
            )
        return value


class BufferConverter:
    """Checks a buffer argument against its :class:`~sparsetir.runtime.acceptance.Acceptance`
    and makes it safe to pass to the compiled function.

    Accepts numpy arrays, torch tensors and tvm tensors of exactly the parameter's dtype with
    exactly ``accept.length`` elements, flat or of the declared shape (of any shape when none
    is declared; only flat for a buffer stored in a tiled layout), taken in C (row-major)
    order. Torch and tvm tensors must be on the kernel's device; numpy arrays are host data
    and are copied to a CUDA device. Data that is not
    contiguous or not aligned as ``accept.alignment`` says is staged in a fresh tvm tensor;
    for written parameters the call also returns a function that copies the staged data back
    into the caller's array. Anything else raises ArgumentError naming the parameter.

    Parameters
    ----------
    accept : Acceptance
        What the compiled function takes for the parameter.

    Examples
    --------
    >>> from sparsetir.runtime import BufferParam
    >>> from sparsetir.runtime.acceptance import acceptance
    >>> m = tvm.tirx.Var("m", "int32")
    >>> accept = acceptance(BufferParam("y", "float32", m, written=True), 4, {m: 10},
    ...                     tvm.cpu(), "element")
    >>> convert = BufferConverter(accept)
    >>> y = np.zeros(20, "float32")[::2]          # strided: staged
    >>> value, copy_back = convert(y)  # value: an aligned tvm tensor holding y's elements
    >>> _ = value.copyfrom(np.arange(10, dtype="float32"))   # as the compiled function writes
    >>> copy_back()  # y now holds the result
    >>> y
    array([0., 1., 2., 3., 4., 5., 6., 7., 8., 9.], dtype=float32)
    >>> convert(np.zeros(10, "float32"))[1] is None   # contiguous: passed as is, no copy back
    True
    """

    def __init__(self, accept: Acceptance):
        self.accept = accept
        self.param = accept.param
        self._torch_dtype = f"torch.{accept.param.dtype}"

    def __call__(self, value) -> tuple[object, Callable[[], None] | None]:
        """Check ``value`` against the acceptance and convert it.

        Returns
        -------
        value : tvm.runtime.Tensor or torch.Tensor
            Contiguous, aligned data on the kernel's device holding the elements of the
            argument, in ``accept.passed_shape``; pass it to the compiled function.
        copy_back : callable or None
            Call it after the kernel ran to copy the results into the caller's
            array; None unless ``value`` is a staged copy of a written buffer.
        """
        if isinstance(value, np.ndarray):
            if type(value) is not np.ndarray:
                value = np.asarray(value)   # numpy.matrix and other subclasses: a plain view
            self._check_shape(value.shape)
            converted = self._from_numpy(value)
        elif isinstance(value, tvm_ffi.Tensor):
            self._check_shape(tuple(value.shape))
            converted = self._from_tvm(value)
        else:
            torch = sys.modules.get("torch")
            if torch is None or not isinstance(value, torch.Tensor):
                raise self._error("expected a numpy array, torch tensor or tvm tensor, got "
                                  f"{_describe(value)}")
            self._check_shape(tuple(value.shape))
            converted = self._from_torch(value)
        shape = self.accept.passed_shape
        flat, copy_back = converted
        if len(shape) == 1:
            return converted
        shaped = flat._create_view(shape) if isinstance(flat, tvm_ffi.Tensor) \
            else flat.view(shape)
        return shaped, copy_back

    def _error(self, message: str) -> ArgumentError:
        return ArgumentError(f"argument '{self.param.name}': {message}")

    def _check(self, dtype, expected_dtype: str, size: int) -> None:
        if dtype != expected_dtype:
            got = str(dtype).removeprefix("torch.")
            raise self._error(f"dtype {got} does not match the kernel's {self.param.dtype}")
        length = self.accept.length
        if size != length:
            expected = length if isinstance(self.param.length, int) else f"{self.param.length} = {length}"
            raise self._error(f"has {size} elements, the kernel expects {expected}")

    def _check_shape(self, shape: tuple) -> None:
        if self.accept.shape_fits(shape):
            return
        if self.param.layout:
            raise self._error(f"has shape {tuple(int(d) for d in shape)}, but the kernel stores it "
                              f"in the tiled layout {self.param.layout} and takes its flat "
                              f"physical array of {self.accept.length} elements: pass "
                              f"layout.to_physical(x) (layout = TiledLayout.parse("
                              f"{self.param.layout!r}))")
        declared = ", ".join(str(d) for d in self.param.shape)
        values = ", ".join(str(d) for d in self.accept.dims)
        raise self._error(f"has shape {tuple(int(d) for d in shape)}, the kernel expects "
                          f"({declared}) = ({values}) or a flat array of that many elements")

    def _shared_elements(self) -> ArgumentError:
        return self._error("has elements that share memory (a stride of 0, or strides that "
                           "overlap); the kernel writes it, so pass an array with one place "
                           "per element")

    def _wrong_device(self, where) -> ArgumentError:
        return self._error(f"is on {where}, the kernel runs on {self.accept.device}")

    def _empty(self) -> tuple:
        # Empty arrays may carry any strides, which compiled functions reject.
        return tvm.runtime.empty((0,), self.param.dtype, self.accept.device), None

    def _staged(self) -> tvm_ffi.Tensor:
        return tvm.runtime.empty((self.accept.length,), self.param.dtype, self.accept.device)

    def _from_numpy(self, array: np.ndarray) -> tuple:
        accept = self.accept
        self._check(array.dtype, self.param.dtype, array.size)
        if not accept.length:
            return self._empty()
        flags = array.flags
        if not flags.writeable and accept.written:
            raise self._error("the kernel writes this buffer, but the array is read-only")
        if accept.written and shares_elements(array.shape, array.strides, array.itemsize):
            raise self._shared_elements()
        if accept.on_host and flags.c_contiguous:
            flat = array if array.ndim == 1 else array.reshape(-1)
            # DLPack cannot export read-only arrays; the kernel only reads this one
            tensor = tensor_of(flat if flags.writeable else writable_alias(flat))
            if accept.aligned(tensor.data_ptr()):
                return tensor, None
        staged = self._staged()
        if accept.on_host:
            numpy_of(staged).reshape(array.shape)[...] = array
        else:
            staged.copyfrom(array.reshape(-1))
        return staged, partial(_numpy_copy_back, array, staged) if accept.written else None

    def _from_tvm(self, tensor: tvm_ffi.Tensor) -> tuple:
        accept = self.accept
        self._check(tensor.dtype, self.param.dtype, tensor.numel())
        if tensor.device != accept.device:
            raise self._wrong_device(tensor.device)
        if not accept.length:
            return self._empty()
        if tensor.is_contiguous() and accept.aligned(tensor.data_ptr()):
            return (tensor if tensor.ndim == 1 else tensor._create_view((accept.length,))), None
        if not accept.on_host:
            raise self._error(f"a tvm tensor on {accept.device} must be contiguous and "
                              f"{accept.alignment}-byte aligned")
        return self._from_numpy(numpy_of(tensor))

    def _from_torch(self, tensor) -> tuple:
        accept = self.accept
        torch = sys.modules["torch"]
        refusal = torch_refusal(tensor, accept.written)
        if refusal is not None:
            raise self._error(refusal)
        self._check(str(tensor.dtype), self._torch_dtype, tensor.numel())
        if accept.on_host:
            on_device = tensor.is_cpu
        else:
            on_device = tensor.is_cuda and tensor.get_device() == accept.device.index
        if not on_device:
            raise self._wrong_device(tensor.device)
        if not accept.length:
            return self._empty()
        if tensor._is_zerotensor():
            raise self._error("is a zero tensor without memory of its own; pass a real tensor")
        try:
            start = tensor.data_ptr()
        except RuntimeError as err:      # a wrapper subclass (__torch_dispatch__) has no storage
            raise self._error(f"has no memory the kernel can use ({err})") from None
        if not start:
            raise self._error("has no memory (its storage was freed or resized to nothing)")
        if outgrows_storage(tensor):
            raise self._error(f"reaches past the end of its storage "
                              f"({tensor.untyped_storage().nbytes()} bytes; resized under it?)")
        if accept.written and shares_elements(tensor.shape, tensor.stride()):
            raise self._shared_elements()
        # a tensor with the negative or conjugate bit holds other values than its memory
        # does: staged below, where copy_ applies the bit (both ways)
        if tensor.is_contiguous() and accept.aligned(start) \
                and not (tensor.is_neg() or tensor.is_conj()):
            return (tensor if tensor.ndim == 1 else tensor.detach().view(-1)), None
        staged = self._staged()
        staged_view = torch.from_dlpack(staged).view(tensor.shape)
        staged_view.copy_(tensor.detach())
        return staged, partial(_torch_copy_back, tensor, staged_view) if accept.written else None


def in_dual_level() -> bool:
    """Whether a ``torch.autograd.forward_ad.dual_level`` is open (never imports torch)."""
    forward_ad = sys.modules.get("torch.autograd.forward_ad")
    return forward_ad is not None and getattr(forward_ad, "_current_level", -1) >= 0


INFERENCE_REFUSAL = ("is an inference tensor (made under torch.inference_mode()), which torch "
                     "lets nothing write outside inference mode; pass a normal tensor, or "
                     "call inside torch.inference_mode()")
"""Why a written argument that ``writes_inference_tensor`` finds is refused."""


def writes_inference_tensor(tensor) -> bool:
    """Whether writing the torch ``tensor`` is what torch refuses: an inference tensor (made
    under ``torch.inference_mode()``) while inference mode is off.

    Example
    -------
    >>> import torch
    >>> with torch.inference_mode():
    ...     made = torch.zeros(2)
    ...     inside = writes_inference_tensor(made)
    >>> inside, writes_inference_tensor(made), writes_inference_tensor(torch.zeros(2))
    (False, True, False)
    """
    return tensor.is_inference() and not sys.modules["torch"].is_inference_mode_enabled()


def torch_refusal(tensor, written: bool) -> str | None:
    """Why a kernel must not take the torch ``tensor`` (None when it may): a tensor of a torch
    transform (``torch.func.grad``, ``vmap``, ``functionalize``: no memory of its own), a sparse
    or other non-strided tensor, or one that requires grad while autograd records or carries a
    forward-mode tangent (the kernel is invisible to autograd: a gradient would be lost
    without a word), or, ``written``, an inference tensor outside inference mode.

    Examples
    --------
    >>> import torch
    >>> torch_refusal(torch.ones(3).to_sparse(), written=False).split(";")[0]
    'expected a dense tensor, got layout torch.sparse_coo (a sparse torch tensor)'
    >>> torch_refusal(torch.ones(3), written=True) is None
    True
    """
    torch = sys.modules["torch"]
    if torch._C._functorch.is_functorch_wrapped_tensor(tensor):
        return ("is a torch functorch-wrapped tensor (torch.func.grad, vmap, functionalize...); "
                "sparsetir kernels take plain tensors, outside those transforms")
    if tensor.layout is not torch.strided:
        if "sparse" in str(tensor.layout):
            return (f"expected a dense tensor, got layout {tensor.layout} (a sparse torch "
                    "tensor); pass its dense form (.to_dense()), or the matrix as "
                    "sparsetir.ops.SparseMatrix")
        return f"expected a dense tensor, got layout {tensor.layout}; pass a strided tensor"
    if written and writes_inference_tensor(tensor):
        return INFERENCE_REFUSAL
    if tensor.requires_grad and torch.is_grad_enabled():
        effect = ("writing it would hide the change from autograd" if written
                  else "the result would carry no gradient for it")
        return ("requires grad, and sparsetir kernels do not support autograd (" + effect
                + "); pass its .detach(), or call under torch.no_grad()")
    if in_dual_level() and sys.modules["torch.autograd.forward_ad"].unpack_dual(
            tensor).tangent is not None:
        return ("carries a forward-mode tangent (torch.autograd.forward_ad), which sparsetir "
                "kernels would drop; pass its primal (forward_ad.unpack_dual(t).primal)")
    return None


class _Sealed(bytes):
    """Memory only ``sealed`` hands out: bytes (numpy will not make an array over it writable)
    of a type of sparsetir's own, so user arrays over plain ``bytes`` do not pass for it."""


def sealed(array, dtype) -> np.ndarray:
    """A read-only copy of ``array`` as ``dtype`` over sealed memory, for arrays sparsetir
    keeps private (``SparseMatrix``) and binds without another copy (``is_sealed``). Never hand
    one to users: ``torch.from_numpy`` ignores numpy's read-only flag.

    Examples
    --------
    >>> is_sealed(sealed([1, 2], np.int32)), is_sealed(np.frombuffer(bytes(8), np.int32))
    (True, False)
    """
    return np.frombuffer(_Sealed(np.ascontiguousarray(array, dtype).tobytes()), dtype)


def is_sealed(array) -> bool:
    """Whether ``array`` is a view of memory ``sealed`` made (which nobody else holds)."""
    while isinstance(array, np.ndarray):
        if array.flags.writeable:
            return False
        array = array.base
    return isinstance(array, _Sealed)


def private_copy(value):
    """A tvm tensor holding the elements of the converted argument ``value`` (a tvm or torch
    tensor, contiguous, on the kernel's device) in fresh memory of its own, same shape.

    Examples
    --------
    >>> indices = np.array([3, 1, 2], np.int32)
    >>> copy = private_copy(tvm_ffi.from_dlpack(indices))
    >>> indices[0] = -1          # the copy keeps the old value
    >>> copy.numpy()
    array([3, 1, 2], dtype=int32)
    """
    source = value if isinstance(value, tvm_ffi.Tensor) else tvm_ffi.from_dlpack(value.detach())
    if not source.numel():
        return source                      # no elements: no memory to share
    copy = tvm.runtime.empty(tuple(source.shape), source.dtype, source.device)
    copy.copyfrom(source)
    return copy


def outgrows_storage(tensor) -> bool:
    """Whether the torch ``tensor``'s elements reach past the end of its storage (a storage
    resized under it: torch itself then reads out of bounds)."""
    if tensor.numel() == 0:
        return False
    last = tensor.storage_offset() + sum((size - 1) * step
                                         for size, step in zip(tensor.shape, tensor.stride()))
    return (last + 1) * tensor.element_size() > tensor.untyped_storage().nbytes()


def shares_elements(shape, strides, itemsize: int = 1) -> bool:
    """Whether an array of ``shape`` and ``strides`` (in units of which an element takes
    ``itemsize``: bytes and the item size for numpy, elements and 1 for torch) puts two
    elements in one place: a stride of 0 along an axis longer than 1, as ``broadcast_to`` or
    ``expand`` make, or strides under which one axis steps inside another's span, as
    ``as_strided`` can make. Strides that nest (each at least the span of the axes with
    smaller strides) cannot; others are checked element by element.

    Example
    -------
    >>> shares_elements((6, 4), (16, 4), 4), shares_elements((6, 4), (4, 4), 4)
    (False, True)
    """
    if 0 in tuple(shape):
        return False
    span = itemsize
    for step, size in sorted((abs(step), size) for step, size in zip(strides, shape)
                             if size > 1):
        if step < span:
            offsets = sum(np.arange(size, dtype=np.int64).reshape(
                (-1,) + (1,) * axis) * step for axis, (step, size) in enumerate(
                    (abs(st), sz) for st, sz in zip(strides, shape)))
            return bool((np.diff(np.sort(offsets, axis=None)) < itemsize).any())
        span = step * (size - 1) + span
    return False


def writable_alias(array: np.ndarray) -> np.ndarray:
    """A writable 1-D array over the memory of the contiguous read-only ``array``, for handing
    an input to compiled code without a copy; it does not keep ``array`` alive."""
    memory = (ctypes.c_char * array.nbytes).from_address(array.ctypes.data)
    return np.frombuffer(memory, array.dtype)


def _numpy_copy_back(array: np.ndarray, staged: tvm_ffi.Tensor) -> None:
    array[...] = host_array(staged).reshape(array.shape)


def _torch_copy_back(tensor, staged_view) -> None:
    tensor.detach().copy_(staged_view)
