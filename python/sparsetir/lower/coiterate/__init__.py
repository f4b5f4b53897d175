"""Lowering of co-iteration (``T.coiterate``): merge loops over sorted coordinates, sparse outputs.

A ``T.sp_iter`` whose variables include ``T.coiterate(J, merge)`` lowers here (called by
``lower_sparse_iter``). The variables are walked outermost first. For each one the merge is
simplified against the operands present at that point (``merge_lattice``) and emitted as:

* a **dense** walk over every coordinate (a whole merge, or a plain axis): the outermost one is a
  ``for`` loop binding its block variable (``parallel`` applies to it), deeper ones ``while``
  loops;
* a **merge**: one ``while`` loop per lattice point, running while every operand of the point
  has coordinates left; the coordinate is the smallest of theirs, the cases (the points below,
  largest first) pick the operands holding it, and the operands holding it advance.

Operands of the index that do not drive the loop (a sparse operand under a dense walk, or
intersected with a union that is whole) are *followers*: their position is found by stepping
forward (by binary search under the outer ``for``, whose iterations share no state), and the
rest of the nest is emitted once with and once without them. An absent operand reads 0, and
expressions are folded accordingly (``B*C`` with ``C`` absent is no term at all).

The output is dense (its untouched part zeroed where the merge skips coordinates), *rows*
(a CSR result under the outer ``for``: function ``count`` writes each row's count into
``indptr[i + 1]``; the caller sums them up and allocates; ``main`` fills each row from
``indptr[i]``; ``onepass`` merges once, appending chunks of rows into room the caller bounds:
``coiterate_onepass``), *workspace* (a CSR result with a column under a sum, SpGEMM:
``coiterate_workspace``; a sparse outer index is looked up per row), or *appended* (every level
compressed: ``count`` writes each level's total into ``<output>_counts``; ``main`` appends in
coordinate order, a coordinate of an outer level only when something was appended below it).
Inside a point's loop at the innermost index, cases that leave no coordinate unstored store a
``Select`` of their values (no branch to mispredict). Results keep every coordinate the merge visits, explicit
zeros included (``B - B`` keeps ``B``'s pattern). Everything sits inside blocks with explicit
read/write regions; the outer ``for``'s block is complete, so TVM's checked ``parallel`` takes it.

Example
-------
>>> import sparsetir
>>> import sparsetir.algebra as alg
>>> add = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
>>> "T.coiterate(J, T.union(B, C))" in add.func.script()
True
>>> mod = sparsetir.lower_sparse_iter(add.func)
>>> sorted(gv.name_hint for gv in mod.functions)
['count', 'main', 'onepass']
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as Tb

from ...ir.attrs import PARAM_NAMES_ATTR, IndexCheck, metadata_annotations, with_root_annotations
from ...ir.coiteration import CoiteratedAxis
from ...ir.function import SparseFunction
from ...ir.iteration import SparseIteration
from .emit import Emitter
from .onepass import has_onepass
from .plan import Plan, plan_coiteration
from .tir import INT


def has_coiteration(func: SparseFunction) -> bool:
    """Whether ``func`` has a ``T.coiterate`` variable (it then lowers through this module)."""
    return any(isinstance(v.axis, CoiteratedAxis) for it in func.body
               if isinstance(it, SparseIteration) for v in it.sp_iter_vars)


def lower_coiteration(func: SparseFunction) -> tvm.IRModule:
    """Stage II of a co-iterating function: ``"main"``, ``"count"`` when the output's
    pattern is assembled, and ``"onepass"`` for a CSR result merged once
    (``coiterate_onepass``)."""
    plan = plan_coiteration(func)
    funcs = {"main": _emit(plan, "fill")}
    if plan.out_mode in ("rows", "append", "workspace"):
        funcs["count"] = _emit(plan, "count")
    if has_onepass(plan):
        funcs["onepass"] = _emit(plan, "onepass")
    return tvm.IRModule(funcs)


def _emit(plan: Plan, mode: str, slots: int = 1) -> tirx.PrimFunc:
    """The function ``mode`` of ``plan``; emitted again when its local pointers need more
    than ``slots`` entries (the emitter counts them as it goes)."""
    with IRBuilder() as builder:
        with Tb.prim_func(s_tir=True):
            symbol = "main" if mode == "fill" else mode
            Tb.func_name(symbol)
            Tb.func_attr({"global_symbol": symbol, "tir.noalias": True})
            emitter = Emitter(plan, mode, slots)
            emitter.declare_params()
            emitter.body()
    if emitter.slots > slots:
        return _emit(plan, mode, emitter.slots)
    lowered = builder.get()
    lowered = with_root_annotations(lowered, metadata_annotations(_index_checks(plan), []))
    return lowered.with_attr(PARAM_NAMES_ATTR, emitter.stage1_names)


def _index_checks(plan: Plan) -> list:
    zero = tirx.const(0, INT)
    return [IndexCheck(lv.axis.name, lv.axis.indptr.name, lv.axis.indices.name, lv.axis.nnz,
                       lv.axis.length, zero, True)
            for op in plan.operands.values() for lv in op.levels if lv.kind == "compressed"]
