"""Sparse iterations: loops over positions of axes, with a body written in coordinates.

``with T.sp_iter([I, J, K], "SRS", "csrmm") as [i, j, k]:`` becomes a ``SparseIteration``
with three ``SpIterVar``s; ``i`` and ``k`` are spatial ("S"), ``j`` is a reduction ("R").

Example
-------
>>> from tvm import tirx
>>> from sparsetir.ir.axis import dense_fixed
>>> I = dense_fixed("I", tirx.Var("m", "int32"))
>>> i = SpIterVar(var=tirx.Var("i", "int32"), axis=I, is_reduction=False, fused=None)
>>> it = SparseIteration(name="rows", sp_iter_vars=[i], body=[], init=None, annotations={})
>>> it.kinds
'S'
"""

from __future__ import annotations

from typing import Optional

import tvm_ffi
from tvm import tirx
from tvm_ffi.dataclasses import field

from .axis import AttachedAxis, Axis, FusedAxis, check_fused_group
from .coiteration import CoiteratedAxis
from .node import node
from ..errors import SparseTIRTypeError, SparseTIRValueError


@node("sparsetir.SpIterVar")
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

    def __post_init__(self):
        """Refuse a variable over something that is not an axis, or outside its fused group."""
        if not isinstance(self.axis, (Axis, AttachedAxis, CoiteratedAxis)):
            raise SparseTIRTypeError(f"iteration variable {self.var.name}: {self.axis!r} is not an axis "
                            "or T.attach or T.coiterate")
        if self.fused is not None and (not isinstance(self.axis, Axis)
                                       or self.axis.name not in self.fused.names):
            raise SparseTIRValueError(f"iteration variable {self.var.name}: its axis "
                             f"{self.base_axis.name} is not one of the fused axes "
                             f"{self.fused.names}")

    @property
    def base_axis(self) -> Axis:
        """The declared axis, looking through ``T.attach``."""
        return self.axis.axis if isinstance(self.axis, (AttachedAxis, CoiteratedAxis)) else self.axis


@node("sparsetir.SparseIteration")
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

    def __post_init__(self):
        """Refuse variables bound twice, and fused groups that are not one run of variables
        (the whole group, in its order, all spatial or all reductions)."""
        where = f"sparse iteration {self.name}"
        for n, v in enumerate(self.sp_iter_vars):
            if not isinstance(v, SpIterVar):
                raise SparseTIRTypeError(f"{where}: {v!r} is not a SpIterVar")
            if any(v.var.same_as(w.var) for w in self.sp_iter_vars[:n]):
                raise SparseTIRValueError(f"{where}: variable {v.var.name} is bound twice")
        for members in self.loops:
            group = members[0].fused
            if group is None:
                continue
            if [v.axis.name for v in members] != list(group.names):
                raise SparseTIRValueError(f"{where}: the variables of T.fuse({', '.join(group.names)}) "
                                 "must iterate its axes together, in order")
            try:
                check_fused_group(group.group, [v.is_reduction for v in members])
            except ValueError as err:
                raise SparseTIRValueError(f"{where}: {err}") from None

    @property
    def loops(self) -> list:
        """The variables grouped by loop, outermost first: the variables of a fused group
        share one loop, every other variable has a loop of its own."""
        loops = []
        for v in self.sp_iter_vars:
            last = loops[-1] if loops else None
            if v.fused is not None and last is not None and last[-1].fused is not None \
                    and last[-1].fused.names == v.fused.names and len(last) < len(v.fused.group):
                last.append(v)
            else:
                loops.append([v])
        return loops

    @property
    def kinds(self) -> str:
        """The "S"/"R" string."""
        return "".join("R" if v.is_reduction else "S" for v in self.sp_iter_vars)

    @property
    def vars(self) -> list:
        """The TIR variables, outermost first."""
        return [v.var for v in self.sp_iter_vars]
