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

Index arrays are *stored* in their own integer types, which may be narrower than the type
the indices are *computed* with (``idtype``): an MLIR encoding with ``posWidth = 16,
crdWidth = 8`` is an axis computing with ``int32`` over an ``int16`` indptr and ``int8``
indices. Lowering reads such an array and widens each value to ``idtype``.

>>> K = sparse_variable("K", I, n, nnz, indptr, indices, indptr_dtype="int16",
...                     indices_dtype="int8")
>>> K.idtype, K.indptr_dtype, K.indices_dtype
('int32', 'int16', 'int8')
"""

from __future__ import annotations

from typing import Optional

import tvm
import tvm_ffi
from tvm import tirx

from .node import node
from ..errors import SparseTIRTypeError, SparseTIRValueError

AXIS_KINDS = ("dense_fixed", "dense_variable", "sparse_fixed", "sparse_variable")
INDEX_DTYPES = ("int8", "int16", "int32", "int64")
"""The types an index array may be stored in (``Axis.indptr_dtype``, ``indices_dtype``)."""


@node("sparsetir.Axis")
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
        Integer type the indices are computed with (``int32`` or ``int64``).
    indptr_dtype, indices_dtype : str or None
        Integer types ``indptr`` and ``indices`` are stored in when narrower than ``idtype``
        (``int8``, ``int16``, ``int32``); None: stored in ``idtype`` (see ``stored_dtype``).
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
    indptr_dtype: Optional[str] = None
    indices_dtype: Optional[str] = None

    def __post_init__(self):
        """Refuse an axis whose fields do not describe one of the four kinds."""
        if self.kind not in AXIS_KINDS:
            raise SparseTIRValueError(f"axis {self.name}: unknown kind {self.kind!r}; expected one of "
                             f"{', '.join(AXIS_KINDS)}")
        if self.idtype not in ("int32", "int64"):
            raise SparseTIRValueError(f"axis {self.name}: idtype must be int32 or int64, got "
                             f"{self.idtype!r}")
        for role in ("indptr", "indices"):
            stored = getattr(self, f"{role}_dtype")
            if stored is None:
                continue
            problem = None
            if getattr(self, role) is None:
                problem = f"a {self.kind} axis has no {role} to store"
            elif stored not in INDEX_DTYPES:
                problem = f"must be one of {', '.join(INDEX_DTYPES)}, got {stored!r}"
            elif INDEX_DTYPES.index(stored) >= INDEX_DTYPES.index(self.idtype):
                problem = (f"{stored} is not narrower than idtype {self.idtype} (leave it None "
                           f"for {self.idtype}; a wider type would truncate: declare the axis "
                           f"with that idtype)")
            if problem:
                raise SparseTIRValueError(f"axis {self.name}: {role}_dtype {problem}")
        if (self.parent is None) != (self.kind == "dense_fixed"):
            raise SparseTIRValueError(f"axis {self.name}: a {self.kind} axis "
                             + ("needs a parent" if self.parent is None else "has no parent"))
        needed = {"indptr": self.is_variable, "nnz": self.is_variable,
                  "indices": self.is_sparse, "nnz_cols": self.kind == "sparse_fixed"}
        for field_name, required in needed.items():
            if required and getattr(self, field_name) is None:
                raise SparseTIRValueError(f"axis {self.name}: a {self.kind} axis needs {field_name}")
        for field_name in ("length", "nnz", "nnz_cols"):
            size = getattr(self, field_name)
            if isinstance(size, tirx.IntImm) and size.value < 0:
                raise SparseTIRValueError(f"axis {self.name}: {field_name} is {size.value}; "
                                          "sizes are 0 or more")

    def stored_dtype(self, role: str) -> str:
        """The integer type the ``role`` (``"indptr"`` or ``"indices"``) array is stored in."""
        return getattr(self, f"{role}_dtype") or self.idtype

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


@node("sparsetir.FusedAxis")
class FusedAxis(tvm_ffi.Object):
    """Axes iterated as one loop over the positions of the innermost (``T.fuse(I, J)``).

    ``group`` is a parent chain from an axis without parent (see ``check_fused_group``).
    """

    group: list

    def __post_init__(self):
        """Refuse a group that is not a parent chain from a root axis."""
        check_fused_group(self.group)

    @property
    def names(self) -> tuple:
        """The names of the fused axes, outermost first (a key for the group)."""
        return tuple(axis.name for axis in self.group)


def check_fused_group(axes, reductions=None) -> None:
    """Raise unless ``axes`` can be iterated as one fused loop.

    The rule of ``T.fuse``, ``Schedule.sparse_fuse`` and lowering: at least two axes, a parent
    chain (each axis the parent of the next) starting at an axis without parent; with
    ``reductions`` (one flag per axis: is its variable a reduction), all spatial or all
    reductions. ``TypeError`` for something that is not an axis, else ``ValueError``.

    Example
    -------
    >>> I = dense_fixed("I", 4)
    >>> J = dense_fixed("J", 4)
    >>> check_fused_group([I, J])
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRValueError: fused axes (I, J): not a parent chain (J's parent is none, not I)
    """
    axes = list(axes)
    where = f"fused axes ({', '.join(getattr(a, 'name', repr(a)) for a in axes)})"
    for axis in axes:
        if not isinstance(axis, Axis):
            raise SparseTIRTypeError(f"{where}: {type(axis).__name__} {axis!r} is not an axis")
    if len(axes) < 2:
        raise SparseTIRValueError(f"{where}: fuse at least two axes")
    if axes[0].parent is not None:
        raise SparseTIRValueError(f"{where}: the chain must start at an axis without parent, not "
                         f"{axes[0].name}")
    for outer, inner in zip(axes, axes[1:]):
        parent = "none" if inner.parent is None else inner.parent.name
        if parent != outer.name:
            raise SparseTIRValueError(f"{where}: not a parent chain ({inner.name}'s parent is {parent}, "
                             f"not {outer.name})")
    if reductions is not None and len({bool(r) for r in reductions}) > 1:
        raise SparseTIRValueError(f"{where}: the variables must all be spatial or all be reductions")


@node("sparsetir.AttachedAxis")
class AttachedAxis(tvm_ffi.Object):
    """``axis`` iterated with ``new_parent``'s coordinate as its row (``T.attach(I_T, J)``).

    The axis's own parent must be dense, so that a coordinate of ``new_parent`` names a row.
    """

    axis: Axis
    new_parent: Axis

    def __post_init__(self):
        """Refuse an axis whose rows are not selected by a dense parent's coordinate."""
        if self.axis.parent is None or self.axis.parent.is_sparse:
            raise SparseTIRValueError(f"attached axis {self.axis.name}: it must have a dense parent, so "
                             f"that a coordinate of {self.new_parent.name} names its row")


def _check_parent(name: str, parent) -> None:
    if not isinstance(parent, Axis):
        raise SparseTIRTypeError(f"the parent of axis {name} must be an axis, got {type(parent).__name__}")


def dense_fixed(name: str, length, idtype: str = "int32") -> Axis:
    """A dense axis with ``length`` positions, each its own coordinate."""
    return Axis(name=name, kind="dense_fixed", parent=None, length=_expr(length), nnz=None,
                nnz_cols=None, indptr=None, indices=None, idtype=idtype, sorted=True)


def dense_variable(name: str, parent: Axis, length, nnz, indptr, idtype: str = "int32",
                   indptr_dtype: Optional[str] = None) -> Axis:
    """A dense axis whose row ``r`` has ``indptr[r+1] - indptr[r]`` positions."""
    _check_parent(name, parent)
    return Axis(name=name, kind="dense_variable", parent=parent, length=_expr(length),
                nnz=_expr(nnz), nnz_cols=None, indptr=indptr, indices=None, idtype=idtype,
                sorted=True, indptr_dtype=narrower(indptr_dtype, idtype))


def sparse_fixed(name: str, parent: Axis, length, nnz_cols, indices, idtype: str = "int32",
                 sorted: bool = True,  # pylint: disable=redefined-builtin
                 indices_dtype: Optional[str] = None) -> Axis:
    """A sparse axis with ``nnz_cols`` stored columns per row (ELL)."""
    _check_parent(name, parent)
    return Axis(name=name, kind="sparse_fixed", parent=parent, length=_expr(length), nnz=None,
                nnz_cols=_expr(nnz_cols), indptr=None, indices=indices, idtype=idtype,
                sorted=sorted, indices_dtype=narrower(indices_dtype, idtype))


def sparse_variable(name: str, parent: Axis, length, nnz, indptr, indices, idtype: str = "int32",
                    sorted: bool = True,  # pylint: disable=redefined-builtin
                    indptr_dtype: Optional[str] = None,
                    indices_dtype: Optional[str] = None) -> Axis:
    """A sparse axis in CSR form: row ``r`` holds ``indices[indptr[r]:indptr[r+1]]``."""
    _check_parent(name, parent)
    return Axis(name=name, kind="sparse_variable", parent=parent, length=_expr(length),
                nnz=_expr(nnz), nnz_cols=None, indptr=indptr, indices=indices, idtype=idtype,
                sorted=sorted, indptr_dtype=narrower(indptr_dtype, idtype),
                indices_dtype=narrower(indices_dtype, idtype))


def narrower(stored: Optional[str], idtype: str) -> Optional[str]:
    """An ``indptr_dtype`` / ``indices_dtype`` as an axis keeps it: None for ``idtype``."""
    return None if stored == idtype else stored


def _expr(value):
    """Python ints become int32 constants; PrimExprs pass through."""
    if isinstance(value, bool):
        raise SparseTIRTypeError("an axis size must be an integer expression, got a bool")
    if isinstance(value, int):
        return tirx.const(value, "int32")
    if isinstance(value, tvm.ir.Expr):
        return value
    raise SparseTIRTypeError(f"an axis size must be an integer expression, got {type(value).__name__}")
