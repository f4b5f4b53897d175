"""Sparse buffers: values laid out over a list of axes.

A sparse buffer keeps, next to its axes, an ordinary TVM buffer for its *coordinate-space
view* (shape: the ``length`` of each axis). Kernel bodies are plain ``BufferLoad`` and
``BufferStore`` on that view, so they print and compare as TIR; lowering rewrites each access
from coordinates to positions.

Example
-------
>>> from tvm import tirx
>>> from sparsetir.ir.axis import dense_fixed
>>> m = tirx.Var("m", "int32")
>>> I = dense_fixed("I", m)
>>> B = SparseBuffer.create("B", [I], "float32", handle=tirx.Var("b", "handle"))
>>> i = tirx.Var("i", "int32")
>>> print(B[i])
B[i]
"""

from __future__ import annotations

from typing import Optional

import tvm
import tvm_ffi
from tvm import tirx

from .axis import Axis
from .node import node
from .utils import is_handle
from ..errors import SparseTIRTypeError, SparseTIRValueError


@node("sparsetir.SparseBuffer")
class SparseBuffer(tvm_ffi.Object):
    """Values stored over ``axes``.

    Attributes
    ----------
    name : str
        Buffer name.
    axes : list of Axis
        The axes, outermost first.
    dtype : str
        Element type.
    scope : str
        Storage scope of an intermediate buffer (``"global"`` for parameters).
    extra_storage : PrimExpr or None
        Extra elements stored after the last position (``indptr`` has one).
    default_value : PrimExpr or None
        What a load of an absent coordinate yields (zero when None).
    handle : tirx.Var or None
        The parameter bound by ``T.match_sparse_buffer``; None for ``T.alloc_sparse_buffer``.
    view : tirx.Buffer
        The coordinate-space view that kernel bodies load from and store to.
    """

    name: str
    axes: list
    dtype: str
    scope: str
    extra_storage: Optional[tvm.ir.Expr]
    default_value: Optional[tvm.ir.Expr]
    handle: Optional[tirx.Var]
    view: tirx.Var

    def __post_init__(self):
        """Refuse a buffer whose view, handle or default do not fit its axes and dtype."""
        _check_axes(self.name, self.axes)
        _check_dtype(self.name, self.dtype)
        if self.handle is not None and not is_handle(self.handle):
            raise SparseTIRTypeError(f"buffer {self.name}: its handle must be a T.handle variable, got "
                            f"{self.handle!r}")
        if self.default_value is not None and str(self.default_value.ty.dtype) != self.dtype:
            raise SparseTIRTypeError(f"buffer {self.name}: default value {self.default_value} is "
                            f"{self.default_value.ty.dtype}, not {self.dtype}")
        lengths = [axis.length for axis in self.axes]
        if str(self.view.dtype) != self.dtype \
                or not tvm_ffi.structural_equal(list(self.view.shape), lengths):
            raise SparseTIRValueError(f"buffer {self.name}: its view is {self.view.dtype} "
                             f"{list(self.view.shape)}, not {self.dtype} {lengths} (the lengths "
                             "of its axes); make buffers with SparseBuffer.create")

    @staticmethod
    def create(name: str, axes, dtype: str, handle=None, scope: str = "global",
               extra_storage=None, default_value=None) -> "SparseBuffer":
        """Make a buffer and its coordinate-space view."""
        axes = list(axes)
        _check_axes(name, axes)
        view = tirx.decl_buffer([axis.length for axis in axes], dtype, name=name)
        if default_value is not None and not isinstance(default_value, tvm.ir.Expr):
            default_value = tirx.const(default_value, dtype)
        return SparseBuffer(name=name, axes=axes, dtype=dtype, scope=scope,
                            extra_storage=extra_storage, default_value=default_value,
                            handle=handle, view=view)

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.axes)

    @property
    def is_param(self) -> bool:
        """Whether the buffer is bound to a function parameter."""
        return self.handle is not None

    def default(self) -> tvm.ir.Expr:
        """The value a load of an absent coordinate yields."""
        if self.default_value is not None:
            return self.default_value
        return tirx.const(0, self.dtype)

    def __getitem__(self, indices):
        indices = list(indices) if isinstance(indices, (tuple, list)) else [indices]
        self.check_index_count(indices)
        return tirx.BufferLoad(self.view, [_index(x) for x in indices])

    def check_index_count(self, indices) -> None:
        """Raise if ``indices`` does not have one index per axis."""
        if len(indices) != len(self.axes):
            names = ", ".join(axis.name for axis in self.axes)
            axes = "1 axis" if len(self.axes) == 1 else f"{len(self.axes)} axes"
            count = "1 index" if len(indices) == 1 else f"{len(indices)} indices"
            raise IndexError(f"sparse buffer {self.name} has {axes} ({names}) "
                             f"but is indexed with {count}")


SCALAR_BITS = {0: (1, 4, 8, 16, 32, 64), 1: (1, 4, 8, 16, 32, 64), 2: (16, 32, 64)}
"""The widths TVM compiles, by type code (int, uint, float): a dtype TVM parses but cannot
compile (``float33``) is refused when the buffer is declared, not deep in code generation."""


def _check_dtype(name: str, dtype: str) -> None:
    try:
        parsed = tvm.DataType(dtype)
    except (ValueError, TypeError) as err:
        raise SparseTIRTypeError(f"buffer {name}: dtype {dtype!r} is not a TVM dtype") from err
    if parsed.lanes != 1 or parsed.bits not in SCALAR_BITS.get(parsed.type_code, (parsed.bits,)):
        raise SparseTIRTypeError(f"buffer {name}: dtype {dtype!r} is no scalar type TVM "
                                 "compiles (float16, float32, float64, bfloat16, float8_e4m3fn "
                                 "and the other named small floats, int and uint of 1, 4, 8, "
                                 "16, 32 or 64 bits, bool)")


def _check_axes(name: str, axes) -> None:
    for axis in axes:
        if not isinstance(axis, Axis):
            raise SparseTIRTypeError(f"buffer {name}: {axis!r} is not an axis")


def _index(value):
    if isinstance(value, bool) or not isinstance(value, (int, tvm.ir.Expr)):
        raise SparseTIRTypeError(f"a buffer index must be an integer expression, got {value!r}")
    return tirx.const(value, "int32") if isinstance(value, int) else value


@node("sparsetir.BufferDomain")
class BufferDomain(tvm_ffi.Object):
    """``T.assume_buffer_domain(buf, (lo, hi))``: every value of ``buffer`` lies in ``[lo, hi)``."""

    buffer: SparseBuffer
    min: tvm.ir.Expr
    max: tvm.ir.Expr
