"""Coordinate checks on CUDA: an assertion becomes ``__trap()`` (device code cannot raise).

The checks ``lower_sparse_iter`` puts in the blocks (``lower.coordinate_checks``) are
``AssertStmt`` nodes; on the CPU they stay assertions and the call raises ``ArgumentError``.
On CUDA each becomes ``if not condition: __trap()``, so a bad index stops the launch (an
unspecified launch failure) instead of reading out of bounds.

Example
-------
A computed index (``transform.specialize_buffer``) is checked in the kernel:

>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> from sparsetir.transform.pipeline import stage3_passes
>>> from sparsetir.transform.specialize_buffer import specialize_buffer
>>> func = csrmm.specialize({"feat_size": 16})
>>> mod = specialize_buffer(sparsetir.lower_sparse_iter(func), "J_indices", lambda i, j: (j,))
>>> stage3_module = stage3_passes("llvm")(mod)
>>> def checks(m):
...     return [line.strip() for line in m.script().splitlines()
...             if "assert" in line or "__trap" in line or "if not" in line]
>>> checks(stage3_module)
['assert vj >= 0 and vj < n, ("sparsetir.ArgumentError", [...])']
>>> checks(LowerDeviceChecks("cuda")(stage3_module))       # AssertStmt -> if (!c) __trap();
['if not (vj >= 0 and vj < n):', 'T.call_extern("int32", "__trap")']
"""

from __future__ import annotations

import tvm
from tvm import tirx

from ..ir.utils import structural_map


def LowerDeviceChecks(target_kind: str) -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.LowerDeviceChecks`` (``lower_device_checks`` for ``target_kind``)."""
    return tvm.transform.module_pass(lambda mod, _ctx: lower_device_checks(mod, target_kind),
                                     opt_level=0, name="sparsetir.LowerDeviceChecks")


def lower_device_checks(mod: tvm.IRModule, target_kind: str) -> tvm.IRModule:
    """``mod`` with every assertion a ``__trap()`` on CUDA; unchanged for other targets."""
    if target_kind != "cuda":
        return mod

    def on_assert(stmt):
        trap = tirx.Evaluate(tirx.call_extern("int32", "__trap"))
        return tirx.IfThenElse(tirx.Not(stmt.condition), trap, None)

    funcs = {gv: func.with_body(structural_map(func.body, (tirx.AssertStmt, on_assert),
                                               order="post"))
             if isinstance(func, tirx.PrimFunc) else func for gv, func in mod.functions.items()}
    return tvm.IRModule(funcs, attrs=mod.attrs)
