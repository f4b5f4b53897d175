"""Refuse calls where a buffer the kernel writes shares memory with another argument.

Kernels are compiled with ``tir.noalias``: the compiler may read an input after the output at
the same address was written, so an output that overlaps an input gives an answer that depends
on scheduling and alignment. Each argument's byte range is computed from its data pointer,
shape and strides (no data is read).

Example
-------
>>> # check_no_aliasing([(param_b, b), (param_c, b)])   # raises: 'c' overlaps 'b'
"""
from __future__ import annotations

import sys

import numpy as np
import tvm_ffi

from .errors import ArgumentError


def byte_range(value) -> tuple[int, int] | None:
    """``(first byte, one past the last byte)`` of an array argument, None if it is empty."""
    if isinstance(value, np.ndarray):
        if value.size == 0:
            return None
        low, high = np.lib.array_utils.byte_bounds(value)
        return int(low), int(high)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.numel() == 0:
            return None
        size = value.element_size()
        low = high = value.data_ptr()
        for extent, stride in zip(value.shape, value.stride()):
            span = (extent - 1) * stride * size
            low, high = (low + span, high) if span < 0 else (low, high + span)
        return low, high + size
    if isinstance(value, tvm_ffi.Tensor):
        if value.numel() == 0:
            return None
        size = np.dtype(str(value.dtype)).itemsize
        return value.data_ptr(), value.data_ptr() + value.numel() * size
    return None


def check_no_aliasing(params_and_values) -> None:
    """Raise ArgumentError when a written buffer overlaps any other argument."""
    ranges = [(param, value, byte_range(value)) for param, value in params_and_values]
    ranges = [(param, value, rng) for param, value, rng in ranges if rng is not None]
    for n, (param, value, rng) in enumerate(ranges):
        if not param.written:
            continue
        for m, (other, other_value, other_rng) in enumerate(ranges):
            if m == n or _device_of(value) != _device_of(other_value):
                continue
            if rng[0] < other_rng[1] and other_rng[0] < rng[1]:
                raise ArgumentError(
                    f"argument '{param.name}' shares memory with argument '{other.name}'; the "
                    f"kernel writes '{param.name}', so pass a separate array")


def _device_of(value) -> str:
    if isinstance(value, np.ndarray):
        return "cpu"
    return str(value.device)
