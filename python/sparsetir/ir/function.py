"""The Stage I function: parameters, axes, sparse buffers and a body of sparse iterations.

Example
-------
>>> from sparsetir.script import tir as T
>>> @T.prim_func
... def scale(a: T.handle, b: T.handle, indptr: T.handle, indices: T.handle,
...           m: T.int32, n: T.int32, nnz: T.int32):
...     I = T.dense_fixed(m)
...     J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
...     A = T.match_sparse_buffer(a, (I, J), "float32")
...     B = T.match_sparse_buffer(b, (I, J), "float32")
...     with T.sp_iter([I, J], "SS", "scale") as [i, j]:
...         B[i, j] = A[i, j] * 2.0
>>> scale.get_axis("J").kind
'sparse_variable'
>>> small = scale.specialize({"m": 4})            # m is no longer a parameter
"""

from __future__ import annotations

import numbers

import tvm
import tvm_ffi
from tvm import tirx
from tvm_ffi.dataclasses import field

from .axis import Axis
from .buffer import BufferDomain, SparseBuffer
from .iteration import SparseIteration
from .node import node
from .substitute import Substituter
from .utils import var_dtype
from .visit import iterations
from ..errors import SparseTIRTypeError, SparseTIRValueError

_PRINTER: list = []
"""The function ``SparseFunction.script`` calls; ``sparsetir.script`` registers it on import
(``register_printer``), so that ``ir`` never imports the front end."""


def register_printer(printer) -> None:
    """Make ``printer(func) -> str`` what ``SparseFunction.script()`` returns."""
    _PRINTER[:] = [printer]


@node("sparsetir.SparseFunction")
class SparseFunction(tvm_ffi.Object):
    """A sparse kernel in coordinate space (Stage I).

    Structural equality ignores the name: a transform's result equals the expected kernel
    whatever the expected kernel's Python function was called.

    Attributes
    ----------
    name : str
        Function name.
    params : list of tirx.Var
        Handles (``T.handle``) and integer scalars, in call order.
    axes : list of Axis
        Declared axes, in declaration order.
    buffers : list of SparseBuffer
        Declared sparse buffers (matched and allocated), in declaration order.
    body : list
        ``SparseIteration``s and ``BufferDomain`` assumptions, in program order.
    attrs : dict
        Function attributes (``T.func_attr``).
    """

    name: str = field(structural_eq="ignore")
    params: list = field(structural_eq="def")
    axes: list
    buffers: list = field(structural_eq="def")
    body: list
    attrs: dict

    def __post_init__(self):
        """Refuse names declared twice (sparse iterations, nested ones included, too: schedules
        and lowered block names refer to an iteration by its name), axes and buffers over
        undeclared axes, and body items that are not sparse iterations or buffer domains."""
        where = f"function {self.name}"
        for a_kind, kind, items, cls in (("a", "parameter", self.params, tirx.Var),
                                         ("an", "axis", self.axes, Axis),
                                         ("a", "sparse buffer", self.buffers, SparseBuffer)):
            seen = set()
            for item in items:
                if not isinstance(item, cls):
                    raise SparseTIRTypeError(f"{where}: {item!r} is not {a_kind} {kind}")
                if item.name in seen:
                    raise SparseTIRValueError(f"{where}: {kind} {item.name} is declared twice")
                seen.add(item.name)
        axes = {axis.name for axis in self.axes}
        for owner, used in [(f"axis {a.name}", a.parent) for a in self.axes] + [
                (f"sparse buffer {b.name}", a) for b in self.buffers for a in b.axes]:
            if used is not None and used.name not in axes:
                raise SparseTIRValueError(f"{where}: {owner} uses axis {used.name}, which the function "
                                 "does not declare")
        for stmt in self.body:
            if not isinstance(stmt, (SparseIteration, BufferDomain)):
                raise SparseTIRTypeError(f"{where}: a body item must be a SparseIteration or a "
                                f"BufferDomain, got {type(stmt).__name__}")
        _refuse_repeated_iteration_names(where, self.body)

    def get_axis(self, name: str) -> Axis:
        """The axis called ``name``."""
        return _named(self.axes, name, f"function {self.name} has no axis")

    def get_buffer(self, name: str) -> SparseBuffer:
        """The sparse buffer called ``name``."""
        return _named(self.buffers, name, f"function {self.name} has no sparse buffer")

    def get_param(self, name: str) -> tirx.Var:
        """The parameter called ``name``."""
        return _named(self.params, name, f"function {self.name} has no parameter")

    def script(self) -> str:
        """TVMScript text that ``sparsetir.script.from_source`` parses back to an equal function."""
        if not _PRINTER:
            raise RuntimeError("import sparsetir.script to print a SparseFunction")
        return _PRINTER[0](self)

    def show(self) -> None:
        """Print ``script()``."""
        print(self.script())

    def specialize(self, values: dict) -> "SparseFunction":
        """Bind integer parameters to values, also where axes and buffers use them.

        Parameters
        ----------
        values : dict
            Keys are parameter Vars or names; values are ints or integer PrimExprs.
        """
        var_map = {}
        for key, value in values.items():
            param = self.get_param(key) if isinstance(key, str) else key
            if not any(param.same_as(p) for p in self.params):
                raise KeyError(f"{param} is not a parameter of {self.name}")
            dtype = var_dtype(param)
            if dtype == "handle":
                raise SparseTIRTypeError(f"parameter {param.name} is a handle; only integer parameters "
                                "can be specialized")
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                value = int(value)                      # numpy integers too
            if isinstance(value, bool) or not isinstance(value, (int, tvm.ir.Expr)):
                raise SparseTIRTypeError(f"parameter {param.name}: expected an integer, got {value!r}")
            if isinstance(value, int):
                bits = tvm.DataType(dtype).bits
                low, high = (0, 1 << bits) if str(dtype).startswith("uint") \
                    else (-(1 << (bits - 1)), 1 << (bits - 1))
                if not low <= value < high:
                    raise SparseTIRValueError(f"parameter {param.name} is {dtype}: {value} does "
                                              "not fit in it")
                value = tirx.const(value, dtype)
            var_map[param] = value
        kept = [p for p in self.params if p not in var_map]
        return Substituter(var_map).function(self, params=kept)

    def __str__(self) -> str:
        return self.script()


def _refuse_repeated_iteration_names(where: str, body: list) -> None:
    """SparseTIRValueError naming an iteration name used twice and the two positions (in
    program order, nested iterations counted) where it is used."""
    first = {}
    for position, it in enumerate(iterations(body), 1):
        if it.name in first:
            raise SparseTIRValueError(
                f"{where}: sparse iteration {it.name} is declared twice (sparse iterations "
                f"{first[it.name]} and {position} in program order); give each T.sp_iter its own "
                "name: sparsetir.Schedule and the lowered blocks refer to an iteration by name")
        first[it.name] = position


def _named(items, name: str, missing: str):
    """The item of ``items`` whose ``.name`` is ``name``; KeyError listing the names otherwise."""
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"{missing} {name!r}; there are {[item.name for item in items]}")
