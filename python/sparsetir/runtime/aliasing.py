"""Refuse calls where a buffer the kernel writes shares memory with another argument.

Kernels are compiled with ``tir.noalias``: the compiler may read an input after the output at
the same address was written, so an output that overlaps an input gives an answer that depends
on scheduling and alignment. Only arguments passed without a copy can overlap in the kernel
(a staged copy is private), and those are contiguous and on the kernel's device, so each one's
byte range is its data pointer and size (nothing is read).

Example
-------
>>> import numpy as np, tvm_ffi
>>> from sparsetir.runtime import BufferParam
>>> param_b = BufferParam("b", "float32", 8, written=False)
>>> param_c = BufferParam("c", "float32", 4, written=True)
>>> array = np.zeros(8, np.float32)
>>> b_value = tvm_ffi.from_dlpack(array)
>>> c_value = tvm_ffi.from_dlpack(np.zeros(4, np.float32))
>>> check_no_aliasing(byte_ranges([(param_b, b_value, 4), (param_c, c_value, 4)]))  # apart: fine
>>> c_value = tvm_ffi.from_dlpack(array[4:])          # c inside b
>>> ranges = byte_ranges([(param_b, b_value, 4), (param_c, c_value, 4)])
>>> check_no_aliasing(ranges)          # c is written and overlaps b
Traceback (most recent call last):
...
sparsetir.errors.ArgumentError: argument 'c' shares memory with argument 'b'; the kernel writes 'c', so pass a separate array
"""
from __future__ import annotations

from ..errors import ArgumentError


def byte_ranges(passed) -> list:
    """``(param, start, end)`` for each non-empty ``(param, value, itemsize)`` in ``passed``:
    the buffers handed to the compiled code without a copy (contiguous tvm or torch tensors)."""
    ranges = []
    for param, value, itemsize in passed:
        count = value.numel()
        if count:
            start = value.data_ptr()
            ranges.append((param, start, start + count * itemsize))
    return ranges


def check_no_aliasing(ranges, others=()) -> None:
    """Raise ArgumentError when a written buffer in ``ranges`` overlaps another buffer of
    ``ranges`` or of ``others`` (both as made by :func:`byte_ranges`)."""
    for param, start, end in ranges:
        if not param.written:
            continue
        for group in (ranges, others):
            for other, other_start, other_end in group:
                if other is not param and start < other_end and other_start < end:
                    raise ArgumentError(
                        f"argument '{param.name}' shares memory with argument '{other.name}'; "
                        f"the kernel writes '{param.name}', so pass a separate array")
