"""The loop-nest plan that ``lower_sparse_iter`` builds before emitting TensorIR.

Planning and emitting are separate so that a binary search is emitted only where its result is
used (after simplification many are not: a fused loop's row search disappears from
``C[i, j]``), and so that variables and buffers can be created freely: the plan uses
placeholder Vars and buffers that the emitter maps to the IR builder's loop and block variables
and to the buffers it allocates.

A search that a block needs becomes a block of its own (``search`` set), placed under the
outermost loop where its inputs are fixed (``hoist_searches``): it runs once per row or nonzero,
not once per feature, and the compute block stays a plain reduction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import PARALLEL_ANNOTATION, PREPROCESS_ANNOTATION
from ..ir.utils import substitute


@dataclass
class Search:
    """A lookup of ``key`` in ``buffer[lo:hi]``, giving an absolute position.

    ``side`` is ``"left"`` (binary search: the first value >= key), ``"right"`` (binary
    search: the first value > key) or ``"equal"`` (a scan: the first value == key, ``hi`` if
    none; for rows that are not sorted). ``checks`` are the assertions that must hold before
    the search reads anything (the coordinates that select its row).
    """

    result: tirx.Var
    buffer: tirx.Var
    lo: tvm.ir.Expr
    hi: tvm.ir.Expr
    key: tvm.ir.Expr
    side: str
    checks: list = field(default_factory=list)


@dataclass
class BlockIterPlan:
    """One block iteration variable bound to one loop variable."""

    var: tirx.Var
    extent: tvm.ir.Expr
    loop_var: tirx.Var
    is_reduction: bool


@dataclass
class BlockPlan:
    """An sblock: its iteration variables, searches, optional init and body.

    ``searches`` are the lookups the block's statements asked for; ``search`` is set on a
    block that performs one lookup and stores it for later blocks (in ``table`` at its
    iteration variable, or in a local buffer of the enclosing block when ``table`` is None);
    ``table_lookups`` are ``(search result, table, index)`` of searches a preprocess nest made
    for this block; ``allocs`` are placeholder buffers (intermediates) the block allocates;
    ``checks`` are assertions on computed coordinates, run before the block's statements.
    """

    name: str
    iter_vars: list = field(default_factory=list)
    searches: list = field(default_factory=list)
    init: list = None
    body: list = field(default_factory=list)
    annotations: dict = field(default_factory=dict)
    search: Search = None
    table: tirx.Var = None
    allocs: list = field(default_factory=list)
    table_lookups: list = field(default_factory=list)
    checks: list = field(default_factory=list)

    def request_search(self, buffer, lo, hi, key, side: str = "left",
                       requires=()) -> tirx.Var:
        """A variable holding the search result; identical searches share one.

        ``requires`` are assertions the search block runs before searching.
        """
        for s in self.searches:
            if (s.side == side and s.buffer.same_as(buffer)
                    and all(tvm_ffi.structural_equal(a, b)
                            for a, b in ((s.lo, lo), (s.hi, hi), (s.key, key)))):
                s.checks += [c for c in requires if not any(
                    tvm_ffi.structural_equal(c, other) for other in s.checks)]
                return s.result
        result = tirx.Var(f"{buffer.name}_pos", "int32")
        self.searches.append(Search(result, buffer, lo, hi, key, side, list(requires)))
        return result


@dataclass
class LoopPlan:
    """A serial loop ``for var in range(extent)``."""

    var: tirx.Var
    extent: tvm.ir.Expr
    body: list = field(default_factory=list)


def free_vars(items) -> set:
    """Every Var referenced by a list of plan items, TIR statements or expressions."""
    found = set()

    def collect(node):
        if node is None:
            return
        tvm_ffi.structural_walk(node, (tirx.Var, lambda v: found.add(v)), order="pre")

    def visit(item):
        if isinstance(item, LoopPlan):
            collect(item.extent)
            for child in item.body:
                visit(child)
        elif isinstance(item, BlockPlan):
            for iv in item.iter_vars:
                collect(iv.extent)
                collect(iv.loop_var)
            for s in item.searches + ([item.search] if item.search else []):
                for e in [s.lo, s.hi, s.key] + s.checks:
                    collect(e)
            for child in (item.init or []) + item.checks + item.body:
                visit(child)
        else:
            collect(item)

    for item in items:
        visit(item)
    return found


def used_searches(block: BlockPlan) -> list:
    """The searches of ``block`` whose results the block (transitively) needs, in order."""
    used = free_vars((block.init or []) + block.checks + block.body)
    keep = []
    for s in reversed(block.searches):
        if s.result in used:
            keep.append(s)
            used |= free_vars([s.lo, s.hi, s.key] + s.checks)
    return list(reversed(keep))


def hoist_searches(block: BlockPlan, loops: list, top_level: bool) -> tuple:
    """The nest ``loops`` around ``block``, with a search block for each search it uses.

    A search goes under the innermost of ``loops`` whose block variable it reads (after the
    searches it depends on), or before the nest when it reads none of them; its block binds
    those loops again, as spatial variables, and leaves the position in a local buffer. In a
    top-level nest, a search that reads only the outermost loop's variable (the row of a fused
    nonzero) becomes a nest of its own before the compute nest, annotated ``preprocess``, that
    fills a table over that loop (as SparseTIR's preprocess blocks did): the compute nest is
    then a plain loop nest over its own blocks, as TVM's ``rfactor`` wants.

    Returns the items that replace the nest and the table buffers to allocate.
    """
    own = [iv.var for iv in block.iter_vars]
    before = {d: [] for d in range(-1, len(loops))}
    depth, preprocess, tables, tabled = {}, [], [], {}
    for n, search in enumerate(used_searches(block)):
        deps = free_vars([search.lo, search.hi, search.key] + search.checks)
        d = max([own.index(v) for v in deps if v in own]
                + [depth[r] for r in depth if r in deps] + [-1])
        depth[search.result] = d
        fresh = {iv.var: tirx.Var(iv.var.name, "int32") for iv in block.iter_vars[:d + 1]}
        found = BlockPlan(f"{block.name}_search{n}", search=Search(
            search.result, search.buffer, *(substitute(e, fresh) for e in
                                             (search.lo, search.hi, search.key)), search.side),
            checks=[substitute(c, fresh) for c in search.checks])
        found.iter_vars = [BlockIterPlan(fresh[iv.var], iv.extent, iv.loop_var, False)
                           for iv in block.iter_vars[:d + 1]]
        found.table_lookups = [(result, tabled[result], fresh[own[0]])
                               for result in deps if result in tabled]   # the row's position
        if d == 0 and top_level and not (deps & set(depth)):
            table = tirx.decl_buffer([loops[0].extent], "int32", name=search.result.name)
            loop_var = tirx.Var(loops[0].var.name, "int32")
            found.iter_vars[0].loop_var = loop_var
            found.table = table
            found.annotations = {PREPROCESS_ANNOTATION: 1, PARALLEL_ANNOTATION: 1}
            block.table_lookups.append((search.result, table, own[0]))
            tabled[search.result] = table
            preprocess.append(LoopPlan(loop_var, loops[0].extent, [found]))
            tables.append(table)
            continue
        before[d].append(found)
    body = [block]
    for d in range(len(loops) - 1, -1, -1):
        loops[d].body = before[d] + body
        body = [loops[d]]
    return preprocess + before[-1] + body, tables
