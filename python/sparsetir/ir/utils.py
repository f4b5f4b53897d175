"""Small helpers about TIR variables shared by the front end, passes and printer."""

import tvm
from tvm import tirx


def var_dtype(var: tirx.Var) -> str:
    """``"handle"`` for a pointer variable, else its scalar dtype (``"int32"``...).

    Example
    -------
    >>> var_dtype(tirx.Var("a", "handle")), var_dtype(tirx.Var("m", "int32"))
    ('handle', 'int32')
    """
    if isinstance(var.ty, tvm.ir.PointerType):
        return "handle"
    return str(var.ty.dtype)


def is_handle(var) -> bool:
    """Whether ``var`` is a ``T.handle`` variable."""
    return isinstance(var, tirx.Var) and isinstance(var.ty, tvm.ir.PointerType)
