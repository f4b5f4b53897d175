"""What a buffer argument must be to reach the compiled function as it is: one spec per
parameter, read by all three call paths.

An :class:`Acceptance` is a :class:`~sparsetir.runtime.signature.BufferParam` with its sizes
evaluated for one call's scalars, its byte alignment and the kernel's device. The general path
(``arguments.BufferConverter``) refuses an argument that breaks it with an ``ArgumentError``
naming the rule, or stages a copy that meets it; the Python fast path (``fast_path.FastPath``)
and the C fast path (``native_call``, ``src/fastcall/fastcall.c``, which reads the fields by
name) pass an argument only when it meets the spec as it is, and leave every other call to the
general path. The rules live here once (:meth:`Acceptance.shape_fits`, :meth:`Acceptance.aligned`),
so the paths cannot disagree on what they take.

Example
-------
>>> m = tvm.tirx.Var("m", "int32")
>>> accept = acceptance(BufferParam("b", "float32", m * 4, False, shape=(m, 4)), 3,
...                     {m: 2}, tvm.cpu(), "element")
>>> accept.length, accept.dims, accept.alignment
(8, (2, 4), 4)
>>> accept.shape_fits((8,)), accept.shape_fits((2, 4)), accept.shape_fits((4, 2))
(True, True, False)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import tvm
import tvm_ffi

from ..errors import ArgumentError
from .signature import BufferParam, evaluate_int

_DLPACK_CODES = {"i": 0, "u": 1, "f": 2}     # numpy dtype kind -> DLPack type code
_DLPACK_BFLOAT = 4                           # kDLBfloat (numpy's bfloat16 is ml_dtypes')

BFLOAT16_BITS = np.dtype(np.uint16)
"""The dtype of the numpy view ``runtime.kernel.torch_as_numpy`` gives a bfloat16 torch tensor:
its bits (numpy has no bfloat16 of its own that exports a buffer)."""


@dataclass(frozen=True, slots=True)
class Acceptance:
    """What one buffer argument of a call must be to go to the compiled function unchanged.

    Parameters
    ----------
    param : BufferParam
        The parameter (its name, dtype, whether the kernel writes it, its declared shape).
    position : int
        The parameter's place in the call.
    length : int
        Elements the argument must hold.
    dims : tuple of int
        The declared dimensions, evaluated; ``()`` when only the length is declared.
    alignment : int
        Byte alignment the compiled code assumes for the data's start.
    device : tvm.runtime.Device
        Where the kernel runs: a tensor must be there (numpy arrays are host data).

    The other attributes are derived: ``name``, ``dtype`` (numpy), ``written`` (the argument
    must be writable), ``itemsize``, ``nbytes``, ``passed_shape`` (the shape the compiled
    function takes: ``dims`` for a parameter that keeps its shape, else ``(length,)``),
    ``any_shape`` (no declared shape: any array of ``length`` elements fits), ``on_host``, and
    the forms the C path compares: ``buffer_format`` (the buffer protocol's format string),
    ``torch_view_format`` (the format of the numpy view ``torch_as_numpy`` gives a torch
    tensor of the dtype: ``BFLOAT16_BITS``' for bfloat16, else ``buffer_format``),
    ``dlpack_code`` and ``dlpack_bits`` (``dlpack_code`` is None for a dtype DLPack does not
    name by numpy kind).
    """

    param: BufferParam
    position: int
    length: int
    dims: tuple
    alignment: int
    device: tvm.runtime.Device
    name: str = field(init=False)
    dtype: np.dtype = field(init=False)
    written: bool = field(init=False)
    itemsize: int = field(init=False)
    nbytes: int = field(init=False)
    passed_shape: tuple = field(init=False)
    any_shape: bool = field(init=False)
    on_host: bool = field(init=False)
    buffer_format: str = field(init=False)
    torch_view_format: str = field(init=False)
    dlpack_code: object = field(init=False)
    dlpack_bits: int = field(init=False)

    def __post_init__(self):
        dtype = np.dtype(self.param.dtype)
        derived = {
            "name": self.param.name, "dtype": dtype, "written": self.param.written,
            "itemsize": dtype.itemsize, "nbytes": self.length * dtype.itemsize,
            "passed_shape": self.dims if self.param.keeps_shape and self.dims
            else (self.length,),
            "any_shape": not self.dims,
            "on_host": self.device.dlpack_device_type() == tvm_ffi.DLDeviceType.kDLCPU,
            "buffer_format": _buffer_format(dtype),
            "torch_view_format": _buffer_format(BFLOAT16_BITS if dtype.name == "bfloat16"
                                                else dtype),
            "dlpack_code": _DLPACK_BFLOAT if dtype.name == "bfloat16"
            else _DLPACK_CODES.get(dtype.kind), "dlpack_bits": dtype.itemsize * 8,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def shape_fits(self, shape) -> bool:
        """Whether an argument of ``shape`` (holding ``length`` elements) may stand for the
        parameter: a flat one always, a shaped one when it has the declared dims or the
        parameter declares none."""
        return len(shape) <= 1 or self.any_shape or tuple(shape) == self.dims

    def aligned(self, address: int) -> bool:
        """Whether data starting at ``address`` is aligned as the compiled code assumes."""
        return address % self.alignment == 0


def _buffer_format(dtype: np.dtype) -> str:
    """The buffer protocol's format string of ``dtype``; "" for one the protocol has none for
    (bfloat16: no numpy array of it exports a buffer, so the C path never takes one)."""
    try:
        return memoryview(np.empty(1, dtype)).format
    except ValueError:
        return ""


def required_alignment(dtype: str) -> int:
    """Byte alignment sparsetir's kernels assume for a buffer of ``dtype``: its element size."""
    return max(1, np.dtype(dtype).itemsize)


def acceptance(param: BufferParam, position: int, env: Mapping, device: tvm.runtime.Device,
               alignment) -> Acceptance:
    """The :class:`Acceptance` of ``param`` for the scalar values ``env`` (TIR var -> int).

    ``alignment`` is what the kernel assumes for buffers that declare none: ``"element"`` (the
    element size, as ``sparsetir.build`` declares them) or a byte count. Raises ArgumentError
    naming the parameter when its length divides by zero or needs offsets past its index type.
    """
    try:
        length = evaluate_int(param.length, env)
        dims = tuple(evaluate_int(d, env) for d in param.shape)
    except ZeroDivisionError:
        values = ", ".join(f"{var}={value}" for var, value in env.items())
        raise ArgumentError(f"argument '{param.name}': its length {param.length} divides by "
                            f"zero for {values}") from None
    _check_index_range(param, length)
    align = param.alignment or (required_alignment(param.dtype) if alignment == "element"
                                else int(alignment))
    return Acceptance(param, position, length, dims, align, device)


def _check_index_range(param: BufferParam, length: int) -> None:
    """A buffer longer than the kernel's index type can address would wrap its offsets."""
    dtype = str(param.length.ty.dtype) if hasattr(param.length, "ty") else "int64"
    limit = int(np.iinfo(dtype).max)
    if length - 1 > limit:
        raise ArgumentError(
            f"argument '{param.name}': {length} elements need offsets past {dtype} "
            f"(at most {limit + 1}); build the kernel with int64 indices")
