"""Reading the metadata ``lower_sparse_iter`` leaves on a Stage II function.

Sizes in the attributes (``sparsetir.index_checks``, ``sparsetir.value_domains``,
``sparsetir.param_shapes``) are TVMScript text over the Stage I parameter names, so a module
prints and parses back. ``SizeReader`` turns such text into an expression over the function's
*current* scalar parameters with a small parser of its own (no ``eval``). When the user
specialised the Stage II function with TVM's own ``PrimFunc.specialize``, a parameter is gone;
its value is recovered from the buffer shapes, which ``specialize`` did rewrite.

Example
-------
>>> # reader = SizeReader(func, stage2_shapes)
>>> # reader.expr("m + 1")   -> the PrimExpr m + 1 over func's scalar parameter m
"""

from __future__ import annotations

import ast

from tvm import tirx
from ..errors import MetadataError

PARAM_SHAPES_ATTR = "sparsetir.param_shapes"
"""Function attribute: Stage II parameter name -> its shape, as text over Stage I names."""

_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.FloorDiv: tirx.floordiv, ast.Mod: tirx.floormod}
_CALLS = {"min": tirx.min, "max": tirx.max}




class SizeReader:
    """Sizes written as text, read as expressions over a function's scalar parameters.

    Parameters
    ----------
    func : tirx.PrimFunc
        The function (Stage II or III) whose scalar parameters the sizes may use.
    shapes : list or None
        The Stage II shape of each parameter of ``func`` (empty for scalars), used to recover
        parameters that ``PrimFunc.specialize`` removed.
    """

    def __init__(self, func, shapes=None):
        self.names = {p.name: p for p in func.params if not tirx.is_buffer_var(p)}
        recorded = func.attrs.get(PARAM_SHAPES_ATTR, {}) if func.attrs is not None else {}
        for param, shape in zip(func.params, shapes or []):
            texts = recorded.get(param.name) if tirx.is_buffer_var(param) else None
            for text, dim in zip(texts or [], shape):
                text = str(text)
                if text.isidentifier() and text not in self.names \
                        and isinstance(dim, tirx.IntImm):
                    self.names[text] = dim

    def expr(self, text: str):
        """The expression ``text`` denotes (an int for a constant)."""
        try:
            return self._eval(ast.parse(str(text), mode="eval").body)
        except SyntaxError as err:
            raise MetadataError(f"cannot read the size {text!r}: {err}") from None

    def _eval(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                raise MetadataError(
                    f"the size {node.id} is neither a parameter nor known from a buffer shape "
                    "(was it specialised away? specialise the Stage I function instead)")
            return self.names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](self._eval(node.left), self._eval(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self._eval(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _CALLS and len(node.args) == 2:
            return _CALLS[node.func.attr](*(self._eval(arg) for arg in node.args))
        raise MetadataError(f"unsupported expression in a size: {ast.unparse(node)}")
