"""``apply_index_widths``: index arrays of a Stage II kernel stored in narrower integers.

Stage I axes compute with ``int32`` or ``int64`` indices (``Axis.idtype``), and lowering gives
every index array that type. MLIR's encodings store positions and coordinates in the width the
encoding names (``posWidth``/``crdWidth`` of 8, 16, 32 or 64 bits). ``apply_index_widths(mod,
{"indices": "int8"})`` (the pass ``sparsetir.ApplyIndexWidths``) re-declares each named index
parameter with its storage type and widens every load back to the type the kernel computes
with (``T.Cast("int32", J_indices[p])``): the arithmetic, the loop extents, the binary searches
and the run-time checks of the arrays are those of the original kernel, reading narrower
memory. A storage type wider than the computing type would truncate and is refused, as is a
kernel that writes the array. Loops and blocks are left as they are (schedule before or after).

Example
-------
>>> # mod = sparsetir.lower_sparse_iter(csrmm)          # J_indices: T.Buffer((nnz,), "int32")
>>> # mod = apply_index_widths(mod, {"indices": "int8"}) # J_indices: T.Buffer((nnz,), "int8")
>>> # ... X[T.Cast("int32", J_indices[J_indptr[vi] + vj]), vk]
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import tirx
from tvm.script.ir_builder import tirx as Tb

from ..errors import SparseTIRTypeError, SparseTIRValueError
from .param_rewrite import find_param, main_only, replace_params

__all__ = ["ApplyIndexWidths", "apply_index_widths"]

_INTEGERS = ("int8", "int16", "int32", "int64")


def apply_index_widths(mod: tvm.IRModule, dtypes: dict) -> tvm.IRModule:
    """``mod`` with each index parameter named in ``dtypes`` (Stage I or Stage II name ->
    ``"int8"``, ``"int16"``, ``"int32"`` or ``"int64"``, or a numpy dtype) stored in that type."""
    if not isinstance(mod, tvm.IRModule):
        raise SparseTIRTypeError(f"mod must be an IRModule, got {type(mod).__name__}")
    return ApplyIndexWidths(dtypes)(mod)


def ApplyIndexWidths(dtypes: dict) -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.ApplyIndexWidths``: :func:`apply_index_widths` on ``"main"``."""
    if not isinstance(dtypes, dict):
        raise SparseTIRTypeError(f"dtypes must be a dict of parameter -> dtype, got {dtypes!r}")
    wanted = {}
    for name, dtype in dtypes.items():
        text = str(np.dtype(dtype)) if isinstance(dtype, (np.dtype, type)) else str(dtype)
        if text not in _INTEGERS:
            raise SparseTIRValueError(f"dtypes[{name!r}] must be one of {', '.join(_INTEGERS)}, "
                                      f"got {dtype!r}")
        wanted[name] = text

    return main_only(lambda func: _narrowed(func, wanted), "sparsetir.ApplyIndexWidths")


def _narrowed(func: tirx.PrimFunc, wanted: dict) -> tirx.PrimFunc:
    new = {}
    for name, dtype in wanted.items():
        old = find_param(func, name)
        computing = str(old.dtype)
        if computing not in _INTEGERS:
            raise SparseTIRValueError(f"{name!r} holds {computing}, not indices")
        if np.dtype(dtype).itemsize > np.dtype(computing).itemsize:
            raise SparseTIRValueError(f"{name!r} is computed with {computing}; storing it as "
                                      f"{dtype} would truncate (declare the axis with idtype "
                                      f"\"{dtype}\")")
        if dtype != computing:
            new[old] = Tb.buffer(list(old.shape), dtype, layout=None, buffer_name=old.name,
                                 align=np.dtype(dtype).itemsize)
    if not new:
        return func

    def on_load(load, buffer):
        return tirx.Cast(str(load.source.dtype), tirx.BufferLoad(buffer, list(load.indices)))

    def on_store(store, _buffer):
        raise SparseTIRValueError(f"the kernel writes {store.buffer.name}: an array it "
                                  "computes is not narrowed")

    return replace_params(func, new, on_load, on_store)
