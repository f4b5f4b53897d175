"""Float values computed as written: TVM's arithmetic simplifier kept away from them.

TVM 0.27's simplifier (``StmtSimplify``, and the analyzers other passes simplify with) treats
floats as real numbers: it folds ``x - x`` to 0, ``(x + y) - y`` to ``x``, ``x * 0`` and
``0 / x`` to 0 and ``x + 0`` to ``x``. Under IEEE arithmetic (numpy's, scipy's) those are
wrong where ``x`` is inf or NaN (``inf - inf`` and ``NaN * 0`` are NaN), drop a rounding
(``(1e-20 + 1) - 1`` is 0, not 1e-20) or a zero's sign (``-0 + 0`` is +0). Each of these
rewrites needs a float subtraction or an operand that is the constant 0 (TVM's expression
constructors fold ``x * 0`` as they build it; a 0 gets there by a substitution, as
sparsetir's ``specialize`` makes); the simplifier's other float rewrites (``x * 1``,
``select(c, x, x)``, constants folded) keep the value exactly.

``protect_floats`` turns every float ``a - b``, and every float ``+``, ``*`` or ``/`` with a
constant 0 operand, into a call of a pure op that the simplifier cannot see into and the
vectorizer vectorizes like the operation (``sparsetir.ExactSub``, ``ExactAdd``, ``ExactMul``,
``ExactDiv``); ``restore_floats`` turns the calls back. The ``sparsetir`` pipeline protects
the values for TVM's passes only (its own passes see plain operations) and restores them after
the last one, before code generation (``backend.pipeline``). Integer (index) arithmetic is not
touched, so loops and addresses are simplified as before. Half, single and double precision
are protected; ``bfloat16`` and the float8 types, which TVM first computes in float32 by
passes of its own, are not.

Example
-------
>>> from tvm.script import tirx as T
>>> @T.prim_func
... def f(a: T.Buffer((4,), "float64"), b: T.Buffer((4,), "float64")):
...     for i in range(4):
...         b[i] = a[i] - a[i]
>>> mod = tvm.IRModule({"main": f})
>>> simplify = tirx.transform.StmtSimplify()
>>> simplify(mod)["main"].body.body.value         # TVM alone: 0, where inf - inf is NaN
T.float64(0.0)
>>> restore_floats(simplify(protect_floats(mod)))["main"].body.body.value
a[i] - a[i]
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm_ffi._dtype import DataTypeCode

_NAMES = {tirx.Sub: "Sub", tirx.Add: "Add", tirx.Mul: "Mul", tirx.Div: "Div"}
_OPS = {}
for _node, _name in _NAMES.items():
    _op_name = f"sparsetir.Exact{_name}"
    tvm.ir.register_op_attr(_op_name, "TCallEffectKind", tirx.CallEffectKind.Pure.value)
    tvm.ir.register_op_attr(_op_name, "TVectorizable", True)
    tvm.ir.register_op_attr(_op_name, "TScriptPrinterName", _op_name)
    _OPS[_node] = tvm.ir.Op.get(_op_name)
_NODES = {op.name: node for node, op in _OPS.items()}


def _protected(node):
    """``node`` as the call of its op where the simplifier could change its value."""
    if node.ty.dtype.type_code != DataTypeCode.FLOAT:
        return node
    if isinstance(node, tirx.Sub) or _is_zero(node.a) or _is_zero(node.b):
        return tvm.ir.Call(_OPS[type(node)], [node.a, node.b], ret_ty=node.ty.dtype)
    return node


def _is_zero(expr) -> bool:
    return isinstance(expr, tirx.FloatImm) and float(expr.value) == 0.0


def _restored(call):
    node = _NODES.get(call.op.name) if isinstance(call.op, tvm.ir.Op) else None
    return call if node is None else node(call.args[0], call.args[1])


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.ProtectFloats")
def protect_floats(func, _mod, _ctx):
    """Float operations the simplifier would change as calls it cannot see into."""
    return func.with_body(tvm_ffi.structural_map(
        func.body, [(node, _protected) for node in _NAMES], order="post"))


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.RestoreFloats")
def restore_floats(func, _mod, _ctx):
    """The operations ``protect_floats`` hid, back as they were."""
    return func.with_body(tvm_ffi.structural_map(func.body, (tvm.ir.Call, _restored),
                                                 order="post"))
