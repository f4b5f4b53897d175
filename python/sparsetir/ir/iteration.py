"""Sparse iterations: loops over positions of axes, with a body written in coordinates.

``with T.sp_iter([I, J, K], "SRS", "csrmm") as [i, j, k]:`` becomes a ``SparseIteration``
with three ``SpIterVar``s; ``i`` and ``k`` are spatial ("S"), ``j`` is a reduction ("R").

Example
-------
>>> from tvm import tirx
>>> from sparsetir.ir.axis import dense_fixed
>>> I = dense_fixed("I", tirx.Var("m", "int32"))
>>> it = SparseIteration("rows", [SpIterVar(tirx.Var("i", "int32"), I, False, None)], [], None, {})
>>> it.kinds
'S'
"""

from __future__ import annotations

from typing import Optional

import tvm_ffi
from tvm import tirx
from tvm_ffi.dataclasses import field, py_class

from .axis import AttachedAxis, Axis, FusedAxis


@py_class("sparsetir.SpIterVar", structural_eq="tree")
class SpIterVar(tvm_ffi.Object):
    """One variable of a sparse iteration.

    Attributes
    ----------
    var : tirx.Var
        The variable, bound here; its value is a *position* on ``axis``.
    axis : Axis or AttachedAxis
        The axis iterated.
    is_reduction : bool
        "R" (True) or "S" (False).
    fused : FusedAxis or None
        The fused group the variable belongs to (one loop for the whole group).
    """

    var: tirx.Var = field(structural_eq="def")
    axis: tvm_ffi.Object
    is_reduction: bool
    fused: Optional[FusedAxis]

    @property
    def base_axis(self) -> Axis:
        """The declared axis, looking through ``T.attach``."""
        return self.axis.axis if isinstance(self.axis, AttachedAxis) else self.axis


@py_class("sparsetir.SparseIteration", structural_eq="tree")
class SparseIteration(tvm_ffi.Object):
    """A loop nest over positions of axes.

    Attributes
    ----------
    name : str
        Name; the lowered blocks are ``<name>0``, ``<name>1``, ...
    sp_iter_vars : list of SpIterVar
        The variables, outermost first.
    body : list
        Statements: TIR statements on coordinate-space views, or nested SparseIterations.
    init : list or None
        Statements of ``T.init()``: run once for every output element before any update.
    annotations : dict
        ``T.sp_iter_attr({...})``.
    """

    name: str
    sp_iter_vars: list
    body: list
    init: Optional[list]
    annotations: dict

    @property
    def kinds(self) -> str:
        """The "S"/"R" string."""
        return "".join("R" if v.is_reduction else "S" for v in self.sp_iter_vars)

    @property
    def vars(self) -> list:
        """The TIR variables, outermost first."""
        return [v.var for v in self.sp_iter_vars]
