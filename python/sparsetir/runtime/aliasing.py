"""Refuse calls where a buffer the kernel writes shares memory with another argument.

Kernels are compiled with ``tir.noalias``: the compiler may read an input after the output at
the same address was written, so an output that overlaps an input gives an answer that depends
on scheduling and alignment. Only arguments passed without a copy can overlap in the kernel
(a staged copy is private), and those are contiguous and on the kernel's device, so each one's
byte range is its data pointer and size (nothing is read).

Example
-------
>>> ranges = byte_ranges([(param_b, b_value, 4), (param_c, c_value, 4)])
>>> check_no_aliasing(ranges)          # raises ArgumentError if c (written) overlaps b
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
