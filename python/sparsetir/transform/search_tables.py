"""Run-time checks that a search table passed by the caller holds what the search would write.

``remove_preprocess`` makes each table a preprocess fills (the row search of a fused loop,
``<searched buffer>_pos``) an input of the compute. An entry out of range is caught by
``index_guards``; an entry in range but wrong (another row) would give wrong numbers. The
search of ``lower_sparse_iter`` is a binary search over ``S[start:start + count]`` for ``key``:
``if S[mid] <= key`` (upper bound) or ``if S[mid] < key`` (lower bound), its result ``t`` stored
as ``table[v] = state[0]``. Whatever ``S`` holds, that ``t`` is the one position with

    (t == start or S[t - 1] OP key) and (t == start + count or not S[t] OP key)

when ``S`` is sorted (``OP`` the search's ``<=`` or ``<``), so :func:`guard_table_reads` asserts it
in every compute block that reads the table, before the block's body. A search written any
other way is not recognised, and its table keeps only the range checks.

Example
-------
The fused loop of SDDMM (``T.fuse(I, J)``) finds each nonzero's row in a preprocess nest:

>>> import sparsetir
>>> from sparsetir.ops.kernels import sddmm_fused
>>> func = sparsetir.lower_sparse_iter(sddmm_fused.specialize({"feat_size": 16}))["main"]
>>> root = func.body.block
>>> preprocess_nest, compute_nest = root.body.seq
>>> table = root.alloc_buffers[0]
>>> search = search_of([preprocess_nest], table, list(func.params))
>>> search.table.name, search.searched.name, search.strict        # an upper bound
('J_indptr_pos', 'J_indptr', False)
>>> compute_nest = guard_table_reads(compute_nest, search, "the table is not the search's")
>>> [line.strip()[:42] for line in compute_nest.script().splitlines() if "assert" in line]
['assert T.if_then_else(J_indptr_pos[vj] < 0']
"""

from __future__ import annotations

from typing import NamedTuple

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..ir.utils import structural_map, substitute
from ..lower.coordinate_checks import assertion


class Search(NamedTuple):
    """The binary search that fills ``table[var]``: ``S[start:start + count]`` against
    ``key``, ``strict`` for a lower bound (``<``)."""

    table: object
    var: object
    searched: object
    key: object
    start: object
    count: object
    strict: bool


def search_of(nests: list, table, params: list):
    """The ``Search`` that writes ``table`` in ``nests`` (preprocess loop nests of a function
    with parameters ``params``), or None when it is not one written as the module docstring
    says, or when its bounds or key read anything but its own variable and ``params``."""
    found = []
    for nest in nests:
        tvm_ffi.structural_walk(nest, (s_tir.SBlock, lambda b: found.append(_search(b, table))),
                                order="pre")
    found = [f for f in found if f is not None]
    if len(found) != 1:
        return None
    search = found[0]
    allowed = [search.var, *params]
    used = []
    for expr in (search.key, search.start, search.count):
        tvm_ffi.structural_walk(tirx.const(0, "int32") + expr, [
            (tirx.Var, used.append), (tvm.ir.TensorLoad, lambda ld: used.append(ld.source))],
            order="pre")
    if not any(search.searched.same_as(p) for p in params) or \
            not all(any(u.same_as(a) for a in allowed) for u in used):
        return None
    return search


def guard_table_reads(stmt, search: Search, message: str):
    """``stmt`` with, in every block that reads ``search.table[i]`` (one index), the assertion
    of the module docstring for that ``i``, failing with ``message``."""

    def on_block(block):
        loads = []
        own = structural_map(block.body, (s_tir.SBlockRealize, lambda _: tirx.Evaluate(0)))
        tvm_ffi.structural_walk(own, (tvm.ir.TensorLoad, lambda ld: loads.append(ld)
                                      if ld.source.same_as(search.table) else None),
                                order="pre")
        reads = {str(ld.indices[0]): ld for ld in reversed(loads)}
        if not reads:
            return block
        checks = [assertion(_holds(search, load), message) for load in reads.values()]
        regions = list(block.reads)
        if not any(r.source.same_as(search.searched) for r in regions):
            regions.append(tirx.BufferRegion(search.searched, [
                tvm.ir.Range.from_min_extent(0, extent) for extent in search.searched.shape]))
        return s_tir.SBlock(block.iter_vars, regions, block.writes, block.name_hint,
                            tirx.SeqStmt(checks + [block.body]), block.init,
                            block.alloc_buffers, block.match_buffers, block.annotations)

    return structural_map(stmt, (s_tir.SBlock, on_block), order="post")


def _holds(search: Search, load):
    """The condition that ``load`` (``table[i]``) is the search's result for ``i``: every
    buffer read sits under an ``if_then_else`` that keeps it in range."""
    where = {search.var: load.indices[0]}
    key, start = substitute(search.key, where), substitute(search.start, where)
    end = start + substitute(search.count, where)
    t = load

    def before(pos):                                  # S[pos] OP key
        value = tirx.BufferLoad(search.searched, [pos])
        return value < key if search.strict else value <= key

    true = tirx.const(True, "bool")
    low = tirx.if_then_else(t == start, true, before(t - 1))
    high = tirx.if_then_else(t == end, true, tirx.Not(before(t)))
    return tirx.if_then_else(tirx.any(t < start, t > end), tirx.const(False, "bool"),
                             tirx.all(low, high))


def _search(block, table):
    """The ``Search`` of ``block`` if it writes ``table`` as the module docstring says."""
    if len(block.iter_vars) != 1:
        return None
    stores, conditions = [], []
    tvm_ffi.structural_walk(block.body, [
        (tirx.BufferStore, stores.append),
        (tirx.IfThenElse, lambda s: conditions.append(s.condition))], order="pre")
    result = [s for s in stores if s.buffer.same_as(table)]
    if len(result) != 1 or len(conditions) != 1:
        return None
    (store,), (cond,) = result, conditions
    var = block.iter_vars[0].var
    value = store.value
    if not (len(store.indices) == 1 and store.indices[0].same_as(var)
            and isinstance(value, tvm.ir.TensorLoad) and len(value.indices) == 1
            and _is_int(value.indices[0], 0)):
        return None
    state = value.source
    init = {}
    for s in stores:
        if s.buffer.same_as(state) and len(s.indices) == 1 and _is_int(s.indices[0], None):
            init.setdefault(int(s.indices[0]), s.value)
    if not (isinstance(cond, (tirx.LE, tirx.LT)) and isinstance(cond.a, tvm.ir.TensorLoad)
            and 0 in init and 1 in init):
        return None
    return Search(table, var, cond.a.source, cond.b, init[0], init[1], isinstance(cond, tirx.LT))


def _is_int(expr, value) -> bool:
    """Whether ``expr`` is an integer constant (equal to ``value`` unless None)."""
    return isinstance(expr, tirx.IntImm) and (value is None or int(expr) == value)
