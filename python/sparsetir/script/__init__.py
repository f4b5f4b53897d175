"""TVMScript front end of sparsetir: ``from sparsetir.script import tir as T``.

``T.prim_func`` parses a decorated Python function, ``from_source`` the text that
``SparseFunction.script()`` prints (this package registers that printer on import).

Example
-------
>>> from sparsetir.script import from_source, tir as T
>>> from sparsetir.ops.kernels import spmm as kernel
>>> func = from_source(kernel.script())
>>> func.script() == kernel.script()
True
"""
from . import tir
from ..errors import SparseScriptError
from .parser import parse_text
from . import printer  # noqa: F401  (registers the printer of SparseFunction.script)

__all__ = ["SparseScriptError", "from_source", "tir"]


def from_source(text: str):
    """Parse TVMScript text (as printed by ``SparseFunction.script()``) into a
    ``SparseFunction``."""
    return parse_text(text, tir)
