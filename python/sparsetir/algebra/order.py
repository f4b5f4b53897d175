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
prints what was chosen (``k.plan``). Only a sparse tensor read in two index orders
(``B(i,j) + B(j,i)``) cannot be served: one stored copy has one level order.

Example
-------
>>> from sparsetir.algebra.notation import parse
>>> from sparsetir.algebra.storage import level_format
>>> stmt = parse("A(i,j) = B(i,j) + C(i,j)")
>>> fmts = {"A": level_format("CSR", 2, "A"), "B": level_format("DCSR", 2, "B"),
...         "C": level_format("CSC", 2, "C")}
>>> print(plan_order(stmt, fmts))
loop order: i, j
C(i,j): declared levels j (dense), i (compressed); read as i (dense), j (compressed): converted by each call before the kernel
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations

from ..format import Encoding
from .generate import _topological
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
        accesses = _accesses(self.statement)
        for name, declared, kernel in self.conversions:
            access = accesses[name]
            was, now = _levels_text(declared, access), _levels_text(kernel, access)
            if name == self.statement.lhs.name:
                lines.append(f"{access}: computed in levels {now}; converted after the kernel "
                             f"to its declared levels {was}")
            else:
                lines.append(f"{access}: declared levels {was}; read as {now}: converted by "
                             "each call before the kernel")
        return "\n".join(lines)

    __repr__ = __str__


def plan_order(stmt, formats: dict) -> OrderPlan:
    """The loop order of ``stmt`` over tensors in ``formats`` (name -> ``LevelFormat``) that
    converts the fewest sparse tensors to another level order (none where the declared
    orders agree: the order is then the one ``generate`` takes); ``NotationError`` where a
    sparse tensor is read in two index orders."""
    accesses = _accesses(stmt)
    tensors = {name: formats[name] for name in accesses}
    _check_one_order(stmt, tensors)
    lhs = stmt.lhs
    preferred = [lhs.indices[d] for d in tensors[lhs.name].dims] + list(stmt.reduction_vars)
    sparse = [name for name, fmt in tensors.items() if not fmt.is_dense]
    for count in range(len(sparse) + 1):
        for converted in combinations(sparse, count):
            for with_dense in (True, False):   # dense operands' orders where they fit
                chains = [_chain(accesses[name], fmt) for name, fmt in tensors.items()
                          if name not in converted and (with_dense or not fmt.is_dense)]
                loop = _topological(preferred, chains)
                if loop is None:
                    continue
                planned = {name: _reordered(fmt, accesses[name], loop) if name in converted
                           else fmt for name, fmt in tensors.items()}
                if _assembles(planned[lhs.name], lhs, loop):
                    changes = tuple((name, tensors[name], planned[name]) for name in converted
                                    if planned[name].dims != tensors[name].dims)
                    return OrderPlan(stmt, loop, {**formats, **planned}, changes)
    raise AssertionError("every sparse tensor converted to the preferred order assembles")


def _accesses(stmt) -> dict:
    return {stmt.lhs.name: stmt.lhs, **{a.name: a for a in stmt.accesses}}


def _chain(access, fmt) -> list:
    """The index variables of ``access`` in ``fmt``'s level order."""
    return [access.indices[d] for d in fmt.dims]


def _check_one_order(stmt, tensors: dict) -> None:
    """Refuse a sparse tensor read in two index orders: its one copy has one level order."""
    seen = {}
    for access in stmt.accesses:
        if tensors[access.name].is_dense:
            continue
        first = seen.setdefault(access.name, access)
        if sorted(first.indices) == sorted(access.indices) and first.indices != access.indices:
            raise NotationError(
                f"column {access.column}: {access.name} is read as {first} and as {access}, "
                f"whose loops would nest in opposite orders, but a sparse {access.name} is "
                f"stored once, in one level order, in {stmt.text!r}; pass the transposed "
                "tensor as an operand of its own")


def _reordered(fmt, access, loop: tuple):
    """``fmt``'s level kinds over ``access``'s dimensions in ``loop``'s order; its stored
    encoding follows, and a result keeps its declared encoding to be converted to."""
    dims = tuple(sorted(fmt.dims, key=lambda d: loop.index(access.indices[d])))
    if dims == fmt.dims:
        return fmt
    rank = len(dims)
    levels = ", ".join(f"d{d} : {kind}" for d, kind in zip(dims, fmt.kinds))
    encoding = Encoding.parse(f"map = ({', '.join(f'd{d}' for d in range(rank))}) -> ({levels})")
    return replace(fmt, dims=dims, encoding=encoding, result=fmt.result or fmt.encoding)


def _assembles(fmt, lhs, loop: tuple) -> bool:
    """Whether the lowering assembles a result in ``fmt`` under ``loop``: dense, or its
    variables the outermost loops in its level order, or a CSR result whose rows are the
    outermost loop (a summed variable between its two: Gustavson's workspace)."""
    if fmt.is_dense:
        return True
    where = [loop.index(lhs.indices[d]) for d in fmt.dims]
    if where == list(range(len(where))):
        return True
    return fmt.kinds == ("dense", "compressed") and where[0] == 0


def _levels_text(fmt, access) -> str:
    """``fmt``'s levels as ``i (dense), j (compressed)``."""
    return ", ".join(f"{access.indices[d]} ({kind})" for d, kind in zip(fmt.dims, fmt.kinds))
