"""Printable merge lattices of a compiled statement, one per index variable.

Each lattice lists its points (the operands walked together, largest first) and the
expression computed where exactly those operands hold the coordinate (absent operands are 0,
so ``B*C`` vanishes without ``C``). A variable iterated over its whole axis says ``dense``.

Example
-------
>>> import sparsetir.algebra
>>> csr = {"A": "CSR", "B": "CSR", "C": "CSR"}
>>> print(sparsetir.algebra.compile("A(i,j) = B(i,j) + C(i,j)", formats=csr).lattices["j"])
j: T.union(B, C)
  B, C : (B(i,j) + C(i,j))
  B    : B(i,j)
  C    : C(i,j)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lower.coiterate.merge_lattice import FULL, lattice_points, simplify
from .notation import Access, Binary, Const, Neg


@dataclass(frozen=True)
class Lattice:
    """The merge lattice of index ``var``: ``points`` (tuples of operand names) and the
    expression at each."""

    var: str
    merge: str
    points: tuple
    cases: tuple

    def __str__(self) -> str:
        if not self.points:
            return f"{self.var}: dense (every coordinate of the axis)"
        width = max(len(", ".join(p)) for p in self.points)
        rows = [f"  {', '.join(p):<{width}} : {c}" for p, c in zip(self.points, self.cases)]
        return "\n".join([f"{self.var}: {self.merge}"] + rows)


class Lattices(dict):
    """Index variable -> ``Lattice``, printed one after another in loop order."""

    def __str__(self) -> str:
        return "\n".join(str(v) for v in self.values())


def lattices_of(stmt, generated) -> Lattices:
    """The lattice of every loop variable of a generated statement."""
    out = Lattices()
    for v in generated.loop_vars:
        tree = generated.merges[v]
        full = {name for name, fmt in generated.tensors.items()
                if _dense_at(fmt, stmt, name, v)}
        simplified = FULL if tree is None else simplify(tree, full)
        points = tuple(lattice_points(simplified))
        text = "dense" if simplified == FULL else _text(tree)
        cases = tuple(str(_fold(stmt.rhs, set(p) | _absent_free(stmt, generated, v, p)))
                      for p in points)
        out[v] = Lattice(v, text, points, cases)
    return out


def _dense_at(fmt, stmt, name, v) -> bool:
    access = next((a for a in stmt.accesses if a.name == name), None)
    if access is None:
        return False
    return any(access.indices[d] == v and k == "dense" for k, d in zip(fmt.kinds, fmt.dims))


def _absent_free(stmt, generated, v, point) -> set:
    """Operands present at every point of ``v``: those not compressed at ``v``."""
    keep = set()
    for access in stmt.accesses:
        fmt = generated.tensors[access.name]
        if not any(access.indices[d] == v and k == "compressed"
                   for k, d in zip(fmt.kinds, fmt.dims)):
            keep.add(access.name)
    return keep


def _fold(expr, present):
    """``expr`` with operands outside ``present`` as 0, folded (None: 0)."""
    if isinstance(expr, Access):
        return expr if expr.name in present else None
    if isinstance(expr, Const):
        return expr
    if isinstance(expr, Neg):
        inner = _fold(expr.operand, present)
        return None if inner is None else Neg(inner)
    a, b = _fold(expr.a, present), _fold(expr.b, present)
    if expr.op == "+":
        return b if a is None else a if b is None else Binary("+", a, b)
    if expr.op == "-":
        return a if b is None else Neg(b) if a is None else Binary("-", a, b)
    return None if a is None or b is None else Binary(expr.op, a, b)


def _text(tree) -> str:
    if isinstance(tree, str):
        return tree
    return f"T.{tree[0]}({', '.join(_text(k) for k in tree[1])})"
