"""The common call of a bound kernel, checked in a few attribute reads (numpy calls are
checked in C first where the native module is available: ``native_call``).

A :class:`~sparsetir.runtime.kernel.BoundKernel` is called again and again with arrays of one
shape: C-contiguous, writable numpy arrays or contiguous CPU torch tensors of the parameter's
dtype. :class:`FastPath` recognises exactly that case and hands the arrays to the compiled
function with nothing converted but what DLPack needs; any argument it does not recognise
(another type or dtype, a strided or read-only array, a torch tensor that requires grad,
carries a negative or conjugate bit or is a functorch or sparse one, an output overlapping
another argument, a kernel that does not run on the CPU) sends the call down the general
path, which copies what must be copied and raises the errors. The fast path never decides
that a call is wrong, so its checks cannot disagree with the general ones.

Example
-------
>>> fast = FastPath(kernel, free_params, fixed_values, fixed_ranges)
>>> values = fast.values((x, y))   # None: take the general path
>>> if values is not None:
...     kernel_function(*values)
"""
from __future__ import annotations

import sys
from bisect import bisect_right

import numpy as np
import tvm_ffi

from .arguments import outgrows_storage
from .native_call import native_plan

class _Slot:
    """What one free buffer parameter accepts on the fast path."""

    def __init__(self, position: int, param, length: int, dims: tuple, alignment: int):
        self.position = position
        self.written = param.written
        self.dtype = np.dtype(param.dtype)
        self.torch_dtype = None            # torch's dtype, looked up at the first torch call
        self.flat = (length,)
        self.dims = tuple(dims) if dims else self.flat
        self.passed_shape = self.dims if param.keeps_shape else self.flat
        self.any_shape = not param.shape      # no declared shape: any with `length` elements
        self.flat_passed = self.passed_shape == self.flat
        self.length = length
        self.nbytes = length * self.dtype.itemsize
        self.alignment = alignment


class FastPath:
    """Checks and converts the free arguments of a bound kernel in the common case.

    Parameters
    ----------
    free : list of (position, BufferConverter, length, dims)
        The parameters each call passes, with their fixed lengths and declared dims.
    fixed_values : list
        The converted values of every parameter (free ones are filled in per call).
    fixed_ranges : list of (param, start, end)
        Byte ranges of the bound arrays passed without a copy (``aliasing.byte_ranges``).
    on_host : bool
        Whether the kernel runs on the CPU (no fast path otherwise: arrays must be moved).
    function : tvm_ffi.Function, optional
        The compiled function: given, numpy calls are checked and made in C where the
        native module is available (``native_call``; ``self.native``, else None).
    """

    def __init__(self, free, fixed_values: list, fixed_ranges, on_host: bool, function=None):
        self._slots = [_Slot(position, convert.param, length, dims, convert.alignment)
                       for position, convert, length, dims in free]
        self._values = fixed_values
        self._count = len(self._slots)
        merged = []
        for _, start, end in sorted(fixed_ranges, key=lambda r: r[1]):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._fixed_starts = [start for start, _ in merged]
        self._fixed_ends = [end for _, end in merged]
        self.enabled = on_host and all(slot.length > 0 for slot in self._slots)
        self.native = native_plan(function, fixed_values, [
            (slot.position, convert, slot.length, slot.dims, slot.passed_shape)
            for slot, (_, convert, _, _) in zip(self._slots, free)],
            list(zip(self._fixed_starts, self._fixed_ends))) \
            if self.enabled and function is not None else None

    def values(self, args: tuple):
        """The values to pass for ``args``, or None when a call must take the general path."""
        if not self.enabled or len(args) != self._count:
            return None
        values = self._values.copy()
        spans, written = [], []
        torch = sys.modules.get("torch")
        for slot, value in zip(self._slots, args):
            kind = type(value)
            if kind is np.ndarray:
                flags = value.flags
                if value.dtype != slot.dtype or not (flags.c_contiguous and flags.writeable):
                    return None
                shape = value.shape
                if shape != slot.passed_shape:
                    if not (shape == slot.dims or shape == slot.flat
                            or slot.any_shape and value.size == slot.length):
                        return None
                    value = value.reshape(slot.passed_shape)
                value = tvm_ffi.from_dlpack(value)
            elif torch is not None and kind is torch.Tensor:
                if slot.torch_dtype is None:
                    slot.torch_dtype = getattr(torch, slot.dtype.name)
                try:     # a functorch-wrapped tensor has no storage to look at
                    if (not value.is_cpu or value.requires_grad
                            or value.layout is not torch.strided
                            or value.dtype != slot.torch_dtype or not value.is_contiguous()
                            or value.is_neg() or value.is_conj() or value._is_zerotensor()
                            or outgrows_storage(value)):
                        return None
                except RuntimeError:
                    return None
                shape = value.shape
                if shape != slot.passed_shape:
                    if not (shape == slot.dims or shape == slot.flat
                            or slot.any_shape and value.numel() == slot.length):
                        return None
                    # view(-1) costs a third of view(shape) in torch 2.13
                    value = value.view(-1) if slot.flat_passed else value.view(slot.passed_shape)
            else:
                return None
            start = value.data_ptr()
            if not start or start % slot.alignment:     # no memory (a freed torch storage)
                return None
            values[slot.position] = value
            span = (start, start + slot.nbytes)
            spans.append(span)
            if slot.written:
                written.append(span)
        return values if self._disjoint(spans, written) else None

    def _disjoint(self, spans: list, written: list) -> bool:
        """No written span overlaps another of ``spans`` (which holds it too) or a bound array."""
        for start, end in written:
            overlaps = 0
            for other_start, other_end in spans:
                if start < other_end and other_start < end:
                    overlaps += 1
            if overlaps > 1:
                return False
            i = bisect_right(self._fixed_ends, start)
            if i < len(self._fixed_starts) and self._fixed_starts[i] < end:
                return False
        return True
