"""TVMScript front end of sparsetir: ``from sparsetir.script import tir as T``."""
from . import tir
from ..errors import SparseScriptError
from .parser import from_source

__all__ = ["SparseScriptError", "from_source", "tir"]
