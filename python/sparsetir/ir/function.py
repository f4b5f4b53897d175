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

import tvm_ffi
from tvm import tirx
from tvm_ffi.dataclasses import field, py_class

from .axis import Axis
from .buffer import SparseBuffer


@py_class("sparsetir.SparseFunction", structural_eq="tree")
class SparseFunction(tvm_ffi.Object):
    """A sparse kernel in coordinate space (Stage I).

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

    name: str
    params: list = field(structural_eq="def")
    axes: list
    buffers: list = field(structural_eq="def")
    body: list
    attrs: dict

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
        from ..script.printer import script  # pylint: disable=import-outside-toplevel
        return script(self)

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
        from .substitute import specialize  # pylint: disable=import-outside-toplevel
        return specialize(self, values)

    def __str__(self) -> str:
        return self.script()


def _named(items, name: str, missing: str):
    """The item of ``items`` whose ``.name`` is ``name``; KeyError listing the names otherwise."""
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"{missing} {name!r}; there are {[item.name for item in items]}")
