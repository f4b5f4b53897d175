"""Dense operands of ``sparsetir.ops``: checked, and results given back in the caller's type.

Example
-------
>>> import numpy as np
>>> from sparsetir.ops.arrays import DenseOperand
>>> x = DenseOperand("X", np.ones((3, 4), np.float32), rows=3)
>>> x.feat_size, x.new_output(x.rows_shape(5)).shape
(4, (5, 4))
"""

from __future__ import annotations

import sys

import numpy as np

from ..runtime.arguments import shares_elements


class DenseOperand:
    """A row-major dense operand with ``rows`` rows (a 1-D array is one feature)."""

    def __init__(self, name: str, value, rows: int):
        torch = sys.modules.get("torch")
        self.is_torch = torch is not None and isinstance(value, torch.Tensor)
        if not self.is_torch:
            value = np.asarray(value)
            if isinstance(value, np.matrix):
                value = np.asarray(value)
        if value.dtype != np.float32 and str(value.dtype) != "torch.float32":
            raise TypeError(f"{name} must be float32, got {value.dtype}")
        if self.is_torch and value.device.type != "cpu":
            raise TypeError(f"{name} is on {value.device}; sparsetir.ops runs on the CPU")
        if value.ndim not in (1, 2) or value.shape[0] != rows:
            raise ValueError(f"{name} must have {rows} rows (shape ({rows}, feat) or ({rows},)), "
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


def new_array(torch_tensor: bool, shape: tuple):
    """An uninitialised float32 torch tensor (``torch_tensor``) or numpy array of ``shape``."""
    if torch_tensor:
        return sys.modules["torch"].empty(shape, dtype=sys.modules["torch"].float32)
    return np.empty(shape, np.float32)


def check_output(out, shape: tuple, name: str = "out") -> None:
    """``out`` must be a writable float32 array (numpy or torch) of ``shape``."""
    if not hasattr(out, "shape") or not hasattr(out, "dtype"):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got "
                        f"{type(out).__name__}")
    if getattr(getattr(out, "flags", None), "writeable", True) is False:
        raise ValueError(f"{name} is read-only")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(out.shape)}")
    strides = out.stride() if callable(getattr(out, "stride", None)) else out.strides
    if shares_elements(out.shape, strides):
        raise ValueError(f"{name} has elements that share memory (a stride of 0); "
                         "pass an array with one place per element")
    if out.dtype != np.float32 and str(out.dtype) != "torch.float32":
        raise TypeError(f"{name} must be float32, got {out.dtype}")


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
