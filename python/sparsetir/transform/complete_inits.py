"""Make every ``T.init`` run once per spatial point, empty reductions included.

TVM runs a block's init when its reduction variables are at their start. When a loop bound to a
reduction variable may run zero times (a data-dependent row length, a symbolic feature size
that may be 0), that point never comes and the output keeps whatever it held. Before code
generation, every such reduction is split with TVM's own ``decompose_reduction`` at its
outermost reduction loop: the init becomes a block of its own that runs before that loop, and
the user's loop kinds (parallel, vectorized, thread bindings) are kept. Reductions whose loops
provably run at least once keep their native init.

Example
-------
Block ``spmm1``'s loop ``j`` runs over a row's nonzeros, possibly none, so it becomes
``spmm1_init`` (before loop ``j``) and ``spmm1_update``:

>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> mod = DecomposeConditionalInits()(sparsetir.lower_sparse_iter(csrmm))
>>> text = mod.script()
>>> "spmm1_init" in text, "spmm1_update" in text, "T.init()" in text
(True, True, False)
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from ..errors import InitPlacementError


def DecomposeConditionalInits() -> tvm.transform.Pass:  # pylint: disable=invalid-name
    """The pass ``sparsetir.DecomposeConditionalInits`` (``decompose_conditional_inits``)."""
    return tvm.transform.module_pass(lambda mod, _ctx: decompose_conditional_inits(mod),
                                     opt_level=0, name="sparsetir.DecomposeConditionalInits")


def decompose_conditional_inits(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every init that may not run decomposed (see the module docstring).

    TVM's reduction check also asks for quasi-affine bindings, which a reversed or predicated
    loop over a data-dependent extent does not always pass although moving the init before
    the loop is still exact (the init block binds only the spatial loops). Only for that
    refusal (condition #2) the decomposition is retried without the check; any other refusal
    is an ``InitPlacementError``.
    """
    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc) or not isinstance(func.body, s_tir.SBlockRealize):
            continue
        for realize in _realizes_with_init(func):
            mod = _decompose_if_conditional(mod, gv.name_hint, realize)
    return mod


def _decompose_if_conditional(mod, func_name: str, realize) -> tvm.IRModule:
    name = realize.block.name_hint
    for checked in (True, False):
        sch = s_tir.Schedule(mod, enable_check=checked)
        sch.work_on(func_name)
        block_rv = sch.get_sblock(name)
        loop = _first_possibly_empty_reduction_loop(sch, block_rv, realize)
        if loop is None:
            return mod
        try:
            sch.decompose_reduction(block_rv, loop)
            return sch.mod
        except s_tir.ScheduleError as err:
            reason = _violated_condition(str(err))
            if checked and "condition #2" in reason:
                continue
            raise InitPlacementError(
                f"block {name}: its T.init would not run when loop "
                f"{sch.get(loop).loop_var.name} is empty, and TVM cannot move it before "
                f"that loop ({reason}); call decompose_reduction on it in your "
                "schedule") from None
    return mod


def _realizes_with_init(func) -> list:
    found = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlockRealize, lambda r: found.append(r)
                                        if r.block.init is not None else None), order="pre")
    return found


def _first_possibly_empty_reduction_loop(sch, block_rv, realize):
    """The outermost loop bound to a reduction variable, if any such loop may be empty."""
    reduction_loop_vars = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if iv.iter_type == tirx.IterVar.CommReduce:
            tvm_ffi.structural_walk(value, (tirx.Var, reduction_loop_vars.add), order="pre")
    related = [rv for rv in sch.get_loops(block_rv)
               if sch.get(rv).loop_var in reduction_loop_vars]
    analyzer = tvm.sym.Analyzer()
    if all(analyzer.can_prove(sch.get(rv).extent >= 1) for rv in related):
        return None
    return related[0]


def _violated_condition(message: str) -> str:
    """The line of TVM's error that says what it refused, else its last line."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return next((line for line in lines if "violates condition" in line
                 or line.startswith("Error message")), lines[-1] if lines else "")
