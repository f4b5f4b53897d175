"""Which dtypes the operators take together, and the dtype of their result.

Features and edge values may be float32, float64, bfloat16 or float16. Kernels compute in
float32 (float64 for float64 operands): half-precision loads are widened, and the result is
rounded once where it is stored (``generic_kernels``). Operands of one dtype give that dtype.
A half-precision operand with a float32 one gives float32, torch's promotion (the half operand
is read as it is, never copied into float32). Every other mixture (float32 with float64, a half
dtype with float64, bfloat16 with float16) is refused by name: nothing is cast. An operator
whose operands are its own choice may ask for another result dtype: ``spmm(M, X,
weighted=False)`` on a matrix that summed parallel edges reads their counts in float32 and
gives X's dtype, as it does without parallel edges (``graph_ops.gspmm_entries``'s ``dtype``).

Under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (or float16), the products of features
(``spmm``, ``sddmm``, ``gspmm``, ``gsddmm``'s ``dot``, ``gather_mm``, ``segment_mm``) give
the autocast dtype, as torch's own
matrix products do; their operands are read as they are (a float32 operand is not rounded
first); float64 operands keep float64, as torch's autocast leaves them. ``autocast_dtype()``
says which dtype that is, if any; ``autocast_result(lhs, rhs)`` which dtype a product of
those operands gets.

Example
-------
>>> result_dtype([("X", "bfloat16"), ("E", "float32")])
'float32'
>>> result_dtype([("X", "bfloat16"), ("Y", "bfloat16")])
'bfloat16'
"""

from __future__ import annotations

import sys

import numpy as np

from ..errors import SparseTIRTypeError
from ..schedule.widen import HALF_DTYPES

FLOAT_DTYPES = ("float32", "float64") + HALF_DTYPES


_NAMES: dict = {}          # numpy dtype -> its plain name
_MAX_NAMES = 256


def dtype_name(array) -> str:
    """``"float32"``, ``"bfloat16"``... (the plain name) of a numpy array or torch tensor.

    Remembered per numpy dtype: numpy makes a dtype's name in Python code, which after a kernel
    has emptied the caches cost about 30 us a call (``ops.numpy_calls``). A torch dtype's name
    is made in C, and is not remembered: ``torch.compile`` cannot guard a table with torch
    dtypes in its keys."""
    dtype = array.dtype
    if not isinstance(dtype, np.dtype):
        return str(dtype).replace("torch.", "")
    name = _NAMES.get(dtype)
    if name is None:
        name = str(dtype)
        if len(_NAMES) < _MAX_NAMES:
            _NAMES[dtype] = name
    return name


def check_dtype(name: str, dtype: str) -> None:
    """Refuse, naming the operand, a dtype the operators do not take."""
    if dtype not in FLOAT_DTYPES:
        raise SparseTIRTypeError(f"{name} must be float32, float64, bfloat16 or float16, got "
                                 f"{dtype}")


def result_dtype(named: list) -> str:
    """The dtype of a result computed from ``[(name, dtype)]`` (see the module docstring);
    a mixture that is not a half dtype with float32 is refused, naming the operands."""
    dtypes = {dtype for _, dtype in named}
    if len(dtypes) == 1:
        return dtypes.pop()
    if dtypes - set(HALF_DTYPES) == {"float32"} and len(dtypes) == 2:
        return "float32"
    raise SparseTIRTypeError(
        f"{' and '.join(name for name, _ in named)} have different dtypes "
        f"({', '.join(dtype for _, dtype in named)}); sparsetir.ops combines only a bfloat16 "
        "or float16 operand with a float32 one and casts nothing: pass them in one dtype")


def autocast_dtype() -> str | None:
    """The dtype torch's CPU autocast gives matrix products now (``"bfloat16"`` or
    ``"float16"``), or None when autocast is off (or torch is not imported)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_autocast_enabled("cpu"):
        return None
    return str(torch.get_autocast_dtype("cpu")).replace("torch.", "")


def autocast_pair(lhs, rhs) -> str | None:
    """``autocast_result(lhs, rhs)`` for a product of two operands (either None), refusing by
    name one in the other half dtype (float16 under a bfloat16 autocast, or the reverse), as
    ``gather_mm`` does: the forward gave the autocast dtype and the backward then failed on a
    mixture the caller never passed."""
    dtype = autocast_result(lhs, rhs)
    if dtype is not None and lhs is not None and rhs is not None:
        for operand in (lhs, rhs):
            check_autocast_operand("an operand", dtype_name(operand), dtype)
    return dtype


def check_autocast_operand(name: str, given: str, dtype: str) -> None:
    """Refuse, naming it, an operand ``name`` of dtype ``given`` in a product computed in the
    autocast dtype ``dtype``: it must be float32 or ``dtype`` (nothing is cast).

    Example
    -------
    >>> check_autocast_operand("b", "float16", "bfloat16")
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRTypeError: b is float16: a product in bfloat16 (torch.autocast) takes float32 or bfloat16 operands (sparsetir does not cast)
    """
    if given not in ("float32", dtype):
        raise SparseTIRTypeError(f"{name} is {given}: a product in {dtype} (torch.autocast) "
                                 f"takes float32 or {dtype} operands (sparsetir does not cast)")


def autocast_result(*operands) -> str | None:
    """The result dtype torch's CPU autocast asks now of a product of ``operands`` (None
    where unused): ``autocast_dtype()``, or None when no operand is a torch tensor or one is
    float64 (autocast leaves float64 alone, as torch's does)."""
    given = [value for value in operands if value is not None]
    torch = sys.modules.get("torch")
    if torch is None or not any(isinstance(value, torch.Tensor) for value in given) \
            or any(dtype_name(value) == "float64" for value in given):
        return None
    return autocast_dtype()
