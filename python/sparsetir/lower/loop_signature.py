"""Which loop nests of a Stage II function are as ``lower_sparse_iter`` made them.

``lower_sparse_iter`` records, for every block, the names of the loops between it and its
enclosing block (function attribute ``ir.attrs.LOWERED_LOOPS_ATTR``). A top-level nest is untouched
when each of its blocks is still there with the same loops, every loop is serial with no thread
binding or annotation, and no block was added: that is where ``build`` may apply its default
schedule without overriding a user's.

Example
-------
>>> import sparsetir, tvm
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> mod = sparsetir.lower_sparse_iter(csrmm)
>>> loop_signature(mod["main"])
{'spmm0': ['i'], 'spmm1': ['j', 'k']}
>>> untouched_nests(mod["main"])         # the index of each untouched top-level nest
[0]
>>> sch = tvm.s_tir.Schedule(mod)
>>> sch.parallel(sch.get_loops(sch.get_sblock("spmm0"))[0])
>>> untouched_nests(sch.mod["main"])     # scheduled by the user: no default schedule there
[]
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..ir.attrs import LOWERED_LOOPS_ATTR


def loop_signature(func: tirx.PrimFunc) -> dict:
    """Block name -> names of the loops between the block and its enclosing block."""
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    return {name: [sch.get(rv).loop_var.name for rv in sch.get_loops(sch.get_sblock(name))]
            for name in _block_names(func.body) if name != "root"}


def _block_names(stmt) -> list:
    """The names of the blocks in ``stmt`` that a schedule can reach: not those inside a
    block's ``init`` (as ``blockize`` of a reduction makes them), which it does not track."""
    blocks = []
    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, blocks.append), order="pre")
    in_init = set()
    for block in blocks:
        if block.init is not None:
            tvm_ffi.structural_walk(block.init, (s_tir.SBlock, lambda b: in_init.add(b.name_hint)),
                                    order="pre")
    return [block.name_hint for block in blocks if block.name_hint not in in_init]


def top_level_nests(func: tirx.PrimFunc) -> list:
    """The statements of the root block's body, one per top-level nest."""
    root = func.body.block
    return list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]


def untouched_nests(func: tirx.PrimFunc) -> list:
    """Indices (into ``top_level_nests``) of the nests no schedule has changed."""
    recorded = func.attrs.get(LOWERED_LOOPS_ATTR) if func.attrs is not None else None
    if recorded is None:
        return []
    current = loop_signature(func)
    result = []
    for index, stmt in enumerate(top_level_nests(func)):
        blocks, loops = _block_names(stmt), []
        tvm_ffi.structural_walk(stmt, (tirx.For, loops.append), order="pre")
        same_blocks = all(name in recorded and [str(n) for n in recorded[name]] == current[name]
                          for name in blocks)
        plain_loops = all(loop.kind == tirx.ForKind.SERIAL and loop.thread_binding is None
                          and not loop.annotations for loop in loops)
        if blocks and same_blocks and plain_loops:
            result.append(index)
    return result
