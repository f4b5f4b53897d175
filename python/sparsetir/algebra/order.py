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
format); a result is converted after the kernel (``SparseTensor.convert``). A sparse result
that no order fills by a merge (``a(i) = B(i,j)`` over a CSC ``B``: its rows lie inside its
columns) is written at every coordinate instead, computed dense and stored whole: the fewest
operands are converted so that none is compressed at a result index (``B`` read as CSR).
``OrderPlan`` prints what was chosen (``k.plan``). Only a sparse tensor read in index orders no one
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
    orders agree: the order is then the one ``generate`` takes) so that a sparse result is
    assembled by a merge; where no order does, the fewest conversions after which no operand
    is compressed at a result index (the result is written at every coordinate: computed
    dense and stored whole, as ``AlgebraKernel`` does). ``NotationError`` where no order
    serves (a sparse tensor read in index orders that contradict)."""
    reads = _reads(stmt)
    tensors = {name: formats[name] for name in reads}
    lhs = stmt.lhs
    preferred = [lhs.indices[d] for d in tensors[lhs.name].dims] + list(stmt.reduction_vars)
    operands = {name: fmt for name, fmt in tensors.items() if name != lhs.name}
    # a whole result is computed dense in loop order: its own levels do not constrain the loop
    for candidates, fills in ((tensors, _assembles), (operands, _written_whole)):
        for loop, planned, converted in _candidates(candidates, reads, preferred, lhs):
            if fills(planned, lhs, loop, reads):
                changes = tuple((name, tensors[name], planned[name]) for name in converted
                                if planned[name] != tensors[name])
                return OrderPlan(stmt, loop, {**formats, **{name: planned[name]
                                                            for name in converted}}, changes)
    # every sparse tensor read once: converting them all to ``preferred`` assembles the result
    # (some operand compressed at a result index) or writes it whole (none), so only a tensor
    # read in several index orders leaves no plan
    several = [name for name, fmt in tensors.items() if not fmt.is_dense and len(reads[name]) > 1]
    raise _no_order(stmt, reads, several)


def _candidates(tensors: dict, reads: dict, preferred: list, lhs):
    """Each ``(loop, planned formats, converted names)`` of ``tensors`` (name -> declared
    ``LevelFormat``) in the order ``plan_order`` weighs them: fewest conversions first (a
    sparse tensor read once converts to the loop's order), dense operands' orders kept where
    they fit, the earliest tensors kept, ``preferred`` loop order first; a converted matrix
    result also computed as CSR (``_as_rows``).

    Example
    -------
    >>> from sparsetir.algebra.notation import parse
    >>> from sparsetir.algebra.storage import level_format
    >>> stmt = parse("a(i) = D(i,j)")
    >>> fmts = {"D": level_format("CSC", 2, "D")}
    >>> list(dict.fromkeys((loop, converted) for loop, _, converted in
    ...                    _candidates(fmts, _reads(stmt), ["i", "j"], stmt.lhs)))
    [(('j', 'i'), ()), (('i', 'j'), ('D',)), (('j', 'i'), ('D',))]
    """
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
                    yield loop, planned, converted
                    if lhs.name in converted and len(lhs.indices) == 2:   # a matrix result may
                        yield loop, {**planned, lhs.name: _as_rows(planned[lhs.name])}, converted


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
    dense; or filled by a merge (``_merged``: not one written at every coordinate) with its
    variables the outermost loops in its level order, or, for CSR, its rows the outermost loop
    (a summed variable between its two: Gustavson's workspace)."""
    fmt = planned[lhs.name]
    if fmt.is_dense:
        return True
    where = [loop.index(lhs.indices[d]) for d in fmt.dims]
    return _merged(planned, lhs, reads) and (
        where == list(range(len(where))) or
        (fmt.kinds == ("dense", "compressed") and where[0] == 0))


def _written_whole(planned: dict, lhs, _loop: tuple, reads: dict) -> bool:
    """Whether no operand in ``planned`` is compressed at a result index, so every merge of a
    result index walks it whole and the result is written at every coordinate (under any
    loop order; the signature is ``_assembles``'s)."""
    return not _merged(planned, lhs, reads)


def _merged(planned: dict, lhs, reads: dict) -> bool:
    """Whether some operand in ``planned`` is compressed at one of the result's indices."""
    return any(kind == "compressed" and access.indices[d] in lhs.indices
               for name, other in planned.items() if name != lhs.name
               for access in reads[name] for kind, d in zip(other.kinds, other.dims))


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
