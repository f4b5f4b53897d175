"""The loop order of a statement and the level-order conversions it needs.

Co-iteration walks each sparse tensor's levels in storage order, so the loop order must follow
every sparse operand's level order, and a sparse result must be assembled in an order its
lowering takes (its variables outermost in its level order; a CSR result may also take a
summed variable between its two: Gustavson's workspace). When the declared formats contradict
each other (``A(i,j) = B(i,j) + C(i,j)`` with ``B`` in DCSR and ``C`` in CSC, a CSR result
of two CSC operands), ``plan_order`` does what MLIR's sparsifier does: it gives the fewest
tensors another level order, the same level kinds over the loop's order of their dimensions
(CSC read as CSR, DCSC as DCSR, a result computed as CSC and returned as CSR). An operand is
converted when a call reads it (``storage.to_levels`` stores any operand in its kernel
format); a result is converted after the kernel (``SparseTensor.convert``). ``OrderPlan``
prints what was chosen (``k.plan``). Only a sparse tensor read in index orders no one
nesting of the loops walks (``B(i,j) + B(j,i)``) cannot be served: one stored copy has one
level order, and ``NotationError`` says so.

Example
-------
>>> from sparsetir.algebra.notation import parse
>>> from sparsetir.algebra.storage import level_format
>>> stmt = parse("A(i,j) = B(i,j) + C(i,j)")
>>> fmts = {"A": level_format("CSR", 2, "A"), "B": level_format("DCSR", 2, "B"),
...         "C": level_format("CSC", 2, "C")}
>>> print(plan_order(stmt, fmts))
loop order: i, j
C(i,j): declared levels j (dense), i (compressed); read as i (dense), j (compressed): converted by each call before the kernel (a sort of its entries)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations, permutations

from ..format import Encoding
from .notation import NotationError


@dataclass(frozen=True)
class OrderPlan:
    """The loop order, each tensor's kernel format (name -> ``LevelFormat``) and the
    conversions between declared and kernel formats (``(name, declared, kernel)`` each)."""

    statement: object
    loop: tuple
    formats: dict
    conversions: tuple

    def __str__(self) -> str:
        lines = [f"loop order: {', '.join(self.loop)}"]
        reads = _reads(self.statement)
        for name, declared, kernel in self.conversions:
            access = reads[name][0]
            was, now = _levels_text(declared, access), _levels_text(kernel, access)
            if name == self.statement.lhs.name:
                lines.append(f"{access}: computed in levels {now}; converted after the kernel "
                             f"to its declared levels {was} (a sort of its entries)")
            else:
                lines.append(f"{access}: declared levels {was}; read as {now}: converted by "
                             "each call before the kernel (a sort of its entries)")
        return "\n".join(lines)

    __repr__ = __str__


def plan_order(stmt, formats: dict) -> OrderPlan:
    """The loop order of ``stmt`` over tensors in ``formats`` (name -> ``LevelFormat``) that
    converts the fewest sparse tensors to another level order (none where the declared
    orders agree: the order is then the one ``generate`` takes); ``NotationError`` where no
    order serves (a sparse tensor read in index orders that contradict)."""
    reads = _reads(stmt)
    tensors = {name: formats[name] for name in reads}
    lhs = stmt.lhs
    preferred = [lhs.indices[d] for d in tensors[lhs.name].dims] + list(stmt.reduction_vars)
    convertible = [name for name, fmt in tensors.items()     # one stored copy, one order
                   if not fmt.is_dense and len(reads[name]) == 1]
    preferences = [preferred] + [list(p) for p in permutations(preferred) if list(p) != preferred]
    for count in range(len(convertible) + 1):
        for with_dense in (True, False):       # dense operands' orders where they fit
            for converted in combinations(convertible, count):
                chains = [_chain(access, fmt) for name, fmt in tensors.items()
                          if name not in converted and (with_dense or not fmt.is_dense)
                          for access in reads[name]]
                for preference in preferences:   # the output's order first, then any other
                    loop = _topological(preference, chains)
                    if loop is None:               # the chains contradict, whatever the order
                        break
                    planned = {name: _reordered(fmt, reads[name][0], loop)
                               if name in converted else fmt for name, fmt in tensors.items()}
                    results = [planned[lhs.name]]
                    if lhs.name in converted and len(lhs.indices) == 2:   # a matrix result may
                        results.append(_as_rows(planned[lhs.name]))       # be computed as CSR
                    for result in results:
                        planned[lhs.name] = result
                        if _assembles(planned, lhs, loop, reads):
                            changes = tuple((name, tensors[name], planned[name])
                                            for name in converted
                                            if planned[name] != tensors[name])
                            return OrderPlan(stmt, loop, {**formats, **planned}, changes)
    several = [name for name, fmt in tensors.items() if not fmt.is_dense and len(reads[name]) > 1]
    if several:
        raise _no_order(stmt, reads, several)
    # no operand compressed at a result index in any order: the result is written at every
    # coordinate, which AlgebraKernel refuses naming that (the declared formats, unconverted)
    loop = _topological(preferred, [_chain(a, fmt) for name, fmt in tensors.items()
                                    if not fmt.is_dense for a in reads[name]])
    return OrderPlan(stmt, loop or tuple(preferred), dict(formats), ())


def _reads(stmt) -> dict:
    """Each tensor's accesses (the result's first), one per distinct index tuple."""
    reads = {}
    for access in (stmt.lhs,) + stmt.accesses:
        same = reads.setdefault(access.name, [])
        if all(a.indices != access.indices for a in same):
            same.append(access)
    return reads


def _chain(access, fmt) -> list:
    """The index variables of ``access`` in ``fmt``'s level order."""
    return [access.indices[d] for d in fmt.dims]


def _no_order(stmt, reads: dict, several: list) -> NotationError:
    """Why no loop order serves ``stmt``: the sparse tensors ``several`` are read at several
    index tuples whose level orders contradict (one stored copy has one level order)."""
    column = reads[several[0]][1].column
    listed = "; ".join(" and ".join(map(str, reads[name])) for name in several)
    return NotationError(
        f"column {column}: no loop order serves {stmt.text!r}: it reads {listed}, whose levels "
        "no one nesting of the loops walks in storage order, and a sparse tensor is stored "
        "once, in one level order; pass the tensor read in another order as an operand of its "
        "own (its transpose)")


def _reordered(fmt, access, loop: tuple):
    """``fmt``'s level kinds over ``access``'s dimensions in ``loop``'s order."""
    dims = tuple(sorted(fmt.dims, key=lambda d: loop.index(access.indices[d])))
    return fmt if dims == fmt.dims else _levels(fmt, dims, fmt.kinds)


def _as_rows(fmt):
    """A matrix result's format computed as CSR over its (planned) level order: a DCSR, DCSC
    or COO result whose compressed rows no loop order assembles (SpGEMM's ``i, k, j``)."""
    kinds = ("dense", "compressed")
    return fmt if fmt.kinds == kinds else _levels(fmt, fmt.dims, kinds)


def _levels(fmt, dims: tuple, kinds: tuple):
    """``fmt`` stored in levels ``kinds`` over ``dims``; a result keeps its declared encoding,
    to which a call converts it."""
    levels = ", ".join(f"d{d} : {kind}" for d, kind in zip(dims, kinds))
    encoding = Encoding.parse(f"map = ({', '.join(f'd{d}' for d in range(len(dims)))}) -> "
                              f"({levels})")
    return replace(fmt, kinds=kinds, dims=dims, encoding=encoding,
                   result=fmt.result or fmt.encoding)


def _assembles(planned: dict, lhs, loop: tuple, reads: dict) -> bool:
    """Whether the lowering assembles the result (its format in ``planned``) under ``loop``:
    dense; or some operand compressed at one of its variables (a sparse result some merge
    fills, not one written at every coordinate) and its variables the outermost loops in its
    level order, or, for CSR, its rows the outermost loop (a summed variable between its two:
    Gustavson's workspace)."""
    fmt = planned[lhs.name]
    if fmt.is_dense:
        return True
    merged = any(kind == "compressed" and access.indices[d] in lhs.indices
                 for name, other in planned.items() if name != lhs.name
                 for access in reads[name] for kind, d in zip(other.kinds, other.dims))
    where = [loop.index(lhs.indices[d]) for d in fmt.dims]
    return merged and (where == list(range(len(where))) or
                       (fmt.kinds == ("dense", "compressed") and where[0] == 0))


def _levels_text(fmt, access) -> str:
    """``fmt``'s levels as ``i (dense), j (compressed)``."""
    return ", ".join(f"{access.indices[d]} ({kind})" for d, kind in zip(fmt.dims, fmt.kinds))


def _topological(preferred: list, chains: list):
    before = {v: set() for v in preferred}
    for chain in chains:
        for outer, inner in zip(chain, chain[1:]):
            before[inner].add(outer)
    loop = []
    while len(loop) < len(preferred):
        ready = [v for v in preferred if v not in loop and before[v] <= set(loop)]
        if not ready:
            return None
        loop.append(ready[0])
    return tuple(loop)
