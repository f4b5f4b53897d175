"""The affine expressions of an MLIR dimension-to-level map: a tiny tree, printed and evaluated.

An ``Affine`` is a constant, a dimension ``d<k>``, a symbol ``s<k>``, or ``a + b``, ``a * b``,
``a floordiv b``, ``a mod b`` of two of them. Dimensions and symbols are held by position, so
two maps that differ only in their names are equal (``==`` and ``hash`` compare the tree).
Printing uses MLIR's canonical names and puts parentheses only where the left-to-right reading
of ``+`` below ``*``/``floordiv``/``mod`` needs them.

Example
-------
>>> import numpy as np
>>> block = Affine.binary("floordiv", Affine.dim(1), Affine.const(4))
>>> str(block), block.evaluate([np.arange(2), np.arange(9, 11)], ()).tolist()
('d1 floordiv 4', [2, 2])
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

_PRECEDENCE = {"add": 1, "mul": 2, "floordiv": 2, "mod": 2}
_SPELLING = {"add": "+", "mul": "*", "floordiv": "floordiv", "mod": "mod"}


class Affine(NamedTuple):
    """One node: ``op`` is ``"const"`` / ``"dim"`` / ``"sym"`` (``value`` the number or the
    position) or a binary ``"add"``, ``"mul"``, ``"floordiv"``, ``"mod"`` of ``lhs`` and
    ``rhs``."""
    op: str
    value: int = 0
    lhs: Optional["Affine"] = None
    rhs: Optional["Affine"] = None

    @staticmethod
    def const(value: int) -> "Affine":
        """The constant ``value``."""
        return Affine("const", int(value))

    @staticmethod
    def dim(position: int) -> "Affine":
        """Dimension ``d<position>``."""
        return Affine("dim", int(position))

    @staticmethod
    def sym(position: int) -> "Affine":
        """Symbol ``s<position>``."""
        return Affine("sym", int(position))

    @staticmethod
    def binary(op: str, lhs: "Affine", rhs: "Affine") -> "Affine":
        """``lhs op rhs``; a sum or product in MLIR's canonical form (as MLIR builds it:
        constants folded, the constant or symbolic operand on the right, ``+ 0`` and ``* 1``
        dropped), so that it prints as MLIR prints it."""
        if op in ("add", "mul"):
            return _canonical(op, lhs, rhs)
        return Affine(op, 0, lhs, rhs)

    def is_symbolic(self) -> bool:
        """Whether the expression reads no dimension (constants and symbols only)."""
        return not self.dims()

    def dims(self) -> set:
        """The positions of the dimensions the expression reads."""
        return self.leaves("dim")

    def leaves(self, op: str) -> set:
        """The values of the leaves of kind ``op`` (``"dim"``, ``"sym"``, ``"const"``)."""
        if self.lhs is None:
            return {self.value} if self.op == op else set()
        return self.lhs.leaves(op) | self.rhs.leaves(op)

    def has_symbol(self) -> bool:
        """Whether a symbol occurs in the expression."""
        return bool(self.leaves("sym"))

    def evaluate(self, dims, syms) -> np.ndarray:
        """The expression's value at dimension values ``dims`` (int64 arrays or ints, by
        position) and symbol values ``syms``."""
        if self.op == "const":
            return np.int64(self.value)
        if self.op == "dim":
            return np.asarray(dims[self.value], np.int64)
        if self.op == "sym":
            return np.int64(syms[self.value])
        lhs, rhs = self.lhs.evaluate(dims, syms), self.rhs.evaluate(dims, syms)
        if self.op == "add":
            return lhs + rhs
        if self.op == "mul":
            return lhs * rhs
        return lhs // rhs if self.op == "floordiv" else lhs % rhs

    def bounds(self, dim_highs, syms) -> tuple:
        """``(lo, hi)``, Python ints: the least and greatest value the expression takes with
        each dimension ``k`` in ``[0, dim_highs[k]]`` and symbols ``syms``. Raises
        ``ValueError`` on a division by a range holding 0 or below, or a value past int64 (the
        dtype ``evaluate`` computes in).

        Example
        -------
        >>> wrap = Affine.binary("mod", Affine.dim(0), Affine.sym(0))
        >>> wrap.bounds([9], [4])
        (0, 3)
        """
        if self.op == "const":
            lo = hi = self.value
        elif self.op == "dim":
            lo, hi = 0, int(dim_highs[self.value])
        elif self.op == "sym":
            lo = hi = int(syms[self.value])
        else:
            (a, b), (c, d) = self.lhs.bounds(dim_highs, syms), self.rhs.bounds(dim_highs, syms)
            if self.op == "add":
                lo, hi = a + c, b + d
            elif self.op == "mul":
                products = (a * c, a * d, b * c, b * d)
                lo, hi = min(products), max(products)
            elif c <= 0:
                raise ValueError(f"{self} divides by {self.rhs}, which can be {c}")
            elif self.op == "floordiv":
                lo, hi = min(a // c, a // d), max(b // c, b // d)
            else:                       # mod: itself when below the divisor, else 0..d-1
                lo, hi = (a, b) if 0 <= a and b < c else (0, d - 1)
        if lo < -(1 << 63) or hi >= 1 << 63:
            raise ValueError(f"{self} reaches {hi if hi >= 1 << 63 else lo}, past int64")
        return lo, hi

    def text(self, dim_names, sym_names) -> str:
        """The expression in MLIR's syntax with the given names."""
        if self.op == "const":
            return str(self.value)
        if self.op in ("dim", "sym"):
            return (dim_names if self.op == "dim" else sym_names)[self.value]
        level = _PRECEDENCE[self.op]

        def side(node: "Affine", right: bool) -> str:
            inner = node.text(dim_names, sym_names)
            node_level = _PRECEDENCE.get(node.op, 3)
            return f"({inner})" if node_level < level or (right and node_level == level) \
                else inner
        return f"{side(self.lhs, False)} {_SPELLING[self.op]} {side(self.rhs, True)}"

    def __str__(self) -> str:
        return self.text(_Names("d"), _Names("s"))


def _canonical(op: str, lhs: Affine, rhs: Affine) -> Affine:
    """``lhs op rhs`` (``op`` ``"add"`` or ``"mul"``) simplified by MLIR's rules for building
    affine sums and products."""
    fold = (lambda a, b: a + b) if op == "add" else (lambda a, b: a * b)
    if lhs.op == "const" and rhs.op == "const":
        return Affine.const(fold(lhs.value, rhs.value))
    if (lhs.op == "const" or (lhs.is_symbolic() and not rhs.is_symbolic())) and \
            (lhs.is_symbolic() or rhs.is_symbolic()):
        return Affine.binary(op, rhs, lhs)
    if rhs.op == "const":
        if rhs.value == (0 if op == "add" else 1):
            return lhs
        if op == "mul" and rhs.value == 0:
            return rhs
    if lhs.op == op and lhs.rhs.op == "const":
        if rhs.op == "const":           # (x + 2) + 3 -> x + 5, (x * 2) * 3 -> x * 6
            return Affine.binary(op, lhs.lhs, Affine.const(fold(lhs.rhs.value, rhs.value)))
        return Affine.binary(op, Affine.binary(op, lhs.lhs, rhs), lhs.rhs)   # constant last
    return Affine(op, 0, lhs, rhs)


class _Names:
    """``prefix<k>`` for any position ``k`` (MLIR's canonical names ``d0``, ``s0`` ...)."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def __getitem__(self, position: int) -> str:
        return f"{self.prefix}{position}"

