"""The loop-nest plan that ``lower_sparse_iter`` builds before emitting TensorIR.

Planning and emitting are separate so that a binary search is emitted only where its result is
used (after simplification many are not: a fused loop's row search disappears from
``C[i, j]``), and so that variables can be created freely: the plan uses placeholder Vars that
the emitter maps to the IR builder's loop and block variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import tirx


@dataclass
class Search:
    """``lower_bound``/``upper_bound`` of ``key`` in ``buffer[lo:hi]`` (absolute position)."""

    result: tirx.Var
    buffer: tirx.Var
    lo: tvm.ir.Expr
    hi: tvm.ir.Expr
    key: tvm.ir.Expr
    side: str  # "left": first value >= key; "right": first value > key


@dataclass
class BlockIterPlan:
    """One block iteration variable bound to one loop variable."""

    var: tirx.Var
    extent: tvm.ir.Expr
    loop_var: tirx.Var
    is_reduction: bool


@dataclass
class BlockPlan:
    """An sblock: its iteration variables, searches, optional init and body."""

    name: str
    iter_vars: list = field(default_factory=list)
    searches: list = field(default_factory=list)
    init: list = None
    body: list = field(default_factory=list)
    annotations: dict = field(default_factory=dict)

    def search(self, buffer, lo, hi, key, side: str = "left") -> tirx.Var:
        """A variable holding the search result; identical searches share one."""
        for s in self.searches:
            if (s.side == side and s.buffer.same_as(buffer)
                    and all(tvm_ffi.structural_equal(a, b)
                            for a, b in ((s.lo, lo), (s.hi, hi), (s.key, key)))):
                return s.result
        result = tirx.Var(f"{buffer.name}_pos", "int32")
        self.searches.append(Search(result, buffer, lo, hi, key, side))
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
            for s in item.searches:
                for e in (s.lo, s.hi, s.key):
                    collect(e)
            for child in (item.init or []) + item.body:
                visit(child)
        else:
            collect(item)

    for item in items:
        visit(item)
    return found


def used_searches(block: BlockPlan) -> list:
    """The searches of ``block`` whose results the block (transitively) needs, in order."""
    used = free_vars((block.init or []) + block.body)
    keep = []
    for s in reversed(block.searches):
        if s.result in used:
            keep.append(s)
            used |= free_vars([s.lo, s.hi, s.key])
    return list(reversed(keep))
