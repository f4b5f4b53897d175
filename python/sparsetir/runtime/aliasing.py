"""Refuse calls where a buffer the kernel writes shares memory with another argument.

Kernels are compiled with ``tir.noalias``: the compiler may read an input after the output at
the same address was written, so an output that overlaps an input gives an answer that depends
on scheduling and alignment. Only arguments passed without a copy can overlap in the kernel
(a staged copy is private), and those are contiguous, so each one's byte range is its data
pointer and size (nothing is read).

Example
-------
>>> # check_no_aliasing([(param_b, b_value), (param_c, c_value)])   # raises if they overlap
"""
from __future__ import annotations

from .errors import ArgumentError


def check_no_aliasing(passed) -> None:
    """Raise ArgumentError when a written buffer overlaps another argument.

    ``passed`` holds ``(param, value, itemsize)`` for each buffer handed to the compiled code
    without a copy (a contiguous tvm tensor or torch tensor on one device).
    """
    ranges = []
    for param, value, itemsize in passed:
        count = value.numel()
        if count:
            start = value.data_ptr()
            ranges.append((param, start, start + count * itemsize, str(value.device)))
    for param, start, end, device in ranges:
        if not param.written:
            continue
        for other, other_start, other_end, other_device in ranges:
            if other is not param and device == other_device and start < other_end \
                    and other_start < end:
                raise ArgumentError(
                    f"argument '{param.name}' shares memory with argument '{other.name}'; the "
                    f"kernel writes '{param.name}', so pass a separate array")
