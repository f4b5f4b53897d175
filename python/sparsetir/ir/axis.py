"""Axes of the Stage I coordinate space.

An axis is one dimension of a sparse iteration space. It is *dense* or *sparse* (does it
store column indices?) and *fixed* or *variable* (does every row of its parent have the
same number of positions, or does an ``indptr`` say where each row starts?):

===================  =======================  ======================================
kind                 positions per parent row  coordinate of a position
===================  =======================  ======================================
``dense_fixed``      ``length``                the position itself
``dense_variable``   ``indptr[r+1]-indptr[r]`` the position itself
``sparse_fixed``     ``nnz_cols``              ``indices[r * nnz_cols + pos]``
``sparse_variable``  ``indptr[r+1]-indptr[r]`` ``indices[indptr[r] + pos]``
===================  =======================  ======================================

Example
-------
>>> from tvm import tirx
>>> m, n, nnz = (tirx.Var(s, "int32") for s in ("m", "n", "nnz"))
>>> indptr, indices = tirx.Var("indptr", "handle"), tirx.Var("indices", "handle")
>>> I = dense_fixed("I", m)
>>> J = sparse_variable("J", I, n, nnz, indptr, indices)
>>> J.is_sparse, J.is_variable, J.parent.name
(True, True, 'I')
"""

from __future__ import annotations

from typing import Optional

import tvm
import tvm_ffi
from tvm import tirx
from tvm_ffi.dataclasses import py_class

AXIS_KINDS = ("dense_fixed", "dense_variable", "sparse_fixed", "sparse_variable")


@py_class("sparsetir.Axis", structural_eq="tree")
class Axis(tvm_ffi.Object):
    """One axis of a sparse iteration space (see the module docstring for the four kinds).

    Attributes
    ----------
    name : str
        Name of the axis, unique within its function.
    kind : str
        One of ``AXIS_KINDS``.
    parent : Axis or None
        The axis whose positions index this axis's rows (None for ``dense_fixed``).
    length : PrimExpr
        Number of coordinates (the dense extent a coordinate ranges over).
    nnz : PrimExpr or None
        Total number of positions of a variable axis over all rows.
    nnz_cols : PrimExpr or None
        Positions per row of a ``sparse_fixed`` axis (ELL width).
    indptr, indices : tirx.Var or None
        Handle parameters holding the row pointer and the column indices.
    idtype : str
        Integer type of ``indptr`` and ``indices``.
    sorted : bool
        Indices are increasing within each row (binary search relies on it).
    """

    name: str
    kind: str
    parent: Optional[Axis]
    length: tvm.ir.Expr
    nnz: Optional[tvm.ir.Expr]
    nnz_cols: Optional[tvm.ir.Expr]
    indptr: Optional[tirx.Var]
    indices: Optional[tirx.Var]
    idtype: str
    sorted: bool

    def __post_init__(self):
        """Refuse an axis whose fields do not describe one of the four kinds."""
        if self.kind not in AXIS_KINDS:
            raise ValueError(f"axis {self.name}: unknown kind {self.kind!r}; expected one of "
                             f"{', '.join(AXIS_KINDS)}")
        if self.idtype not in ("int32", "int64"):
            raise ValueError(f"axis {self.name}: idtype must be int32 or int64, got "
                             f"{self.idtype!r}")
        if (self.parent is None) != (self.kind == "dense_fixed"):
            raise ValueError(f"axis {self.name}: a {self.kind} axis "
                             + ("needs a parent" if self.parent is None else "has no parent"))
        needed = {"indptr": self.is_variable, "nnz": self.is_variable,
                  "indices": self.is_sparse, "nnz_cols": self.kind == "sparse_fixed"}
        for field_name, required in needed.items():
            if required and getattr(self, field_name) is None:
                raise ValueError(f"axis {self.name}: a {self.kind} axis needs {field_name}")

    @property
    def is_sparse(self) -> bool:
        """Whether positions map to coordinates through an ``indices`` array."""
        return self.kind.startswith("sparse")

    @property
    def is_variable(self) -> bool:
        """Whether row lengths come from an ``indptr`` array."""
        return self.kind.endswith("variable")

    @property
    def storage_size(self) -> tvm.ir.Expr:
        """Number of positions of this axis over all rows of its ancestors."""
        if self.kind == "dense_fixed":
            return self.length
        if self.kind == "sparse_fixed":
            return self.parent.storage_size * self.nnz_cols
        return self.nnz

    def ancestors(self) -> list:
        """The chain of parents, outermost first, excluding ``self``."""
        chain, axis = [], self.parent
        while axis is not None:
            chain.insert(0, axis)
            axis = axis.parent
        return chain


@py_class("sparsetir.FusedAxis", structural_eq="tree")
class FusedAxis(tvm_ffi.Object):
    """Axes iterated as one loop over the positions of the innermost (``T.fuse(I, J)``).

    ``group`` is a parent chain: each axis is the parent of the next one.
    """

    group: list


@py_class("sparsetir.AttachedAxis", structural_eq="tree")
class AttachedAxis(tvm_ffi.Object):
    """``axis`` iterated with ``new_parent``'s coordinate as its row (``T.attach(I_T, J)``).

    The axis's own parent must be dense, so that a coordinate of ``new_parent`` names a row.
    """

    axis: Axis
    new_parent: Axis


def _check_parent(name: str, parent) -> None:
    if not isinstance(parent, Axis):
        raise TypeError(f"the parent of axis {name} must be an axis, got {type(parent).__name__}")


def dense_fixed(name: str, length, idtype: str = "int32") -> Axis:
    """A dense axis with ``length`` positions, each its own coordinate."""
    return Axis(name, "dense_fixed", None, _expr(length), None, None, None, None, idtype, True)


def dense_variable(name: str, parent: Axis, length, nnz, indptr, idtype: str = "int32") -> Axis:
    """A dense axis whose row ``r`` has ``indptr[r+1] - indptr[r]`` positions."""
    _check_parent(name, parent)
    return Axis(name, "dense_variable", parent, _expr(length), _expr(nnz), None, indptr, None,
                idtype, True)


def sparse_fixed(name: str, parent: Axis, length, nnz_cols, indices, idtype: str = "int32",
                 sorted: bool = True) -> Axis:  # pylint: disable=redefined-builtin
    """A sparse axis with ``nnz_cols`` stored columns per row (ELL)."""
    _check_parent(name, parent)
    return Axis(name, "sparse_fixed", parent, _expr(length), None, _expr(nnz_cols), None, indices,
                idtype, sorted)


def sparse_variable(name: str, parent: Axis, length, nnz, indptr, indices, idtype: str = "int32",
                    sorted: bool = True) -> Axis:  # pylint: disable=redefined-builtin
    """A sparse axis in CSR form: row ``r`` holds ``indices[indptr[r]:indptr[r+1]]``."""
    _check_parent(name, parent)
    return Axis(name, "sparse_variable", parent, _expr(length), _expr(nnz), None, indptr, indices,
                idtype, sorted)


def _expr(value):
    """Python ints become int32 constants; PrimExprs pass through."""
    if isinstance(value, bool):
        raise TypeError("an axis size must be an integer expression, got a bool")
    if isinstance(value, int):
        return tirx.const(value, "int32")
    if isinstance(value, tvm.ir.Expr):
        return value
    raise TypeError(f"an axis size must be an integer expression, got {type(value).__name__}")
