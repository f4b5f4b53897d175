"""Facts about blocks and loops that the default CPU and CUDA schedules share."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..lower.loop_signature import top_level_nests


def nest_blocks(sch, nests: list) -> list:
    """(block, realize) pairs of the top-level nests numbered ``nests``, each nest in pre-order."""
    stmts = top_level_nests(sch.mod["main"])
    return [[(r.block, r) for r in _realizes(stmts[index])] for index in nests]


def _realizes(stmt) -> list:
    found = []
    tvm_ffi.structural_walk(stmt, (s_tir.SBlockRealize, found.append), order="pre")
    return found


def innermost_spatial_loop(sch, block, realize):
    """The innermost loop of ``block`` if it binds the block's last iteration variable, which
    is spatial, and its extent reads no memory."""
    loops = sch.get_loops(sch.get_sblock(block.name_hint))
    if not loops or not block.iter_vars:
        return None
    loop = sch.get(loops[-1])
    iv = block.iter_vars[-1]
    if iv.iter_type != tirx.IterVar.DataPar or not realize.iter_values[-1].same_as(loop.loop_var):
        return None
    if reads_memory(loop.extent):
        return None
    return loops[-1]


def reads_memory(expr) -> bool:
    found = tvm_ffi.structural_walk(
        expr, (tvm.ir.TensorLoad, lambda _: tvm_ffi.VisitInterrupt(True)), order="pre")
    return bool(getattr(found, "value", False))


def try_primitive(primitive, *args):
    """Apply a schedule primitive; return None (schedule unchanged) where TVM refuses it."""
    try:
        return primitive(*args)
    except s_tir.ScheduleError:
        return None
