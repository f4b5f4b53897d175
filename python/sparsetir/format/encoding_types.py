"""The parts of an MLIR sparse encoding: level types, levels, dimension slices, and the error.

A ``LevelType`` is one of MLIR's level formats with its properties (``compressed(nonunique)``,
``singleton(soa)``, ``structured[2, 4]``); a ``Level`` pairs it with the level's expression of
the dimensions; a ``Slice`` is a dimension's ``#sparse_tensor<slice(offset, size, stride)>``
(``None`` for a dynamic ``?``).

Example
-------
>>> LevelType("compressed", unique=False)
LevelType('compressed(nonunique)')
>>> LevelType("structured", n=2, m=4).has_positions
False
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from ..errors import SparseTIRValueError
from .affine import Affine

KINDS = ("dense", "compressed", "loose_compressed", "singleton", "structured")
PROPERTIES = ("nonunique", "nonordered", "soa")


def allowed_properties(kind: str) -> tuple:
    """The properties MLIR allows on a level of ``kind`` (``soa`` only on singletons)."""
    return {"dense": (), "structured": (), "singleton": PROPERTIES}.get(
        kind, ("nonunique", "nonordered"))


class EncodingError(SparseTIRValueError):
    """A sparse encoding that does not parse or is not a valid level map; the message starts
    with the column (and line, for text of several lines) and says what was expected.

    ``column`` and ``line`` are 1-based (None when the encoding was not built from text)."""

    def __init__(self, message: str, column: Optional[int] = None, line: Optional[int] = None):
        where = "" if column is None else (f"column {column}: " if line in (None, 1)
                                           else f"line {line}, column {column}: ")
        super().__init__(where + message)
        self.column, self.line = column, line


@dataclass(frozen=True)
class LevelType:
    """One level's storage format: ``kind`` is one of ``KINDS``; ``unique``/``ordered`` are
    False for MLIR's ``nonunique``/``nonordered``; ``soa`` marks a singleton level stored as its
    own array; ``n``, ``m`` are a ``structured[n, m]`` level's counts (0 otherwise)."""
    kind: str
    unique: bool = True
    ordered: bool = True
    soa: bool = False
    n: int = 0
    m: int = 0

    def __post_init__(self):
        for name in ("unique", "ordered", "soa"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise EncodingError(f"LevelType {name} must be True or False, got "
                                    f"{getattr(self, name)!r}")
            object.__setattr__(self, name, bool(getattr(self, name)))
        for name in ("n", "m"):
            if isinstance(getattr(self, name), (bool, np.bool_)) \
                    or not isinstance(getattr(self, name), numbers.Integral) \
                    or not 0 <= getattr(self, name) < 2**63:
                raise EncodingError(f"LevelType {name} must be an integer from 0 to 2**63 - 1, "
                                    f"got {getattr(self, name)!r}")
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.kind not in KINDS:
            raise EncodingError(f"expected a level type ({', '.join(KINDS)}), got {self.kind!r}")
        if self.kind == "structured" and not 0 < self.n <= self.m:
            raise EncodingError(f"expected structured[n, m] with 0 < n <= m, got "
                                f"[{self.n}, {self.m}]")
        for word, on in (("nonunique", not self.unique), ("nonordered", not self.ordered),
                         ("soa", self.soa)):
            if on and word not in allowed_properties(self.kind):
                raise EncodingError(f"{self.kind} levels cannot be {word}")

    @property
    def has_positions(self) -> bool:
        """Whether the level stores a positions array (compressed and loose_compressed)."""
        return self.kind in ("compressed", "loose_compressed")

    @property
    def has_coordinates(self) -> bool:
        """Whether the level stores a coordinates array (all but dense)."""
        return self.kind != "dense"

    def __str__(self) -> str:
        name = f"structured[{self.n}, {self.m}]" if self.kind == "structured" else self.kind
        properties = [word for word, on in (("nonunique", not self.unique),
                                            ("nonordered", not self.ordered),
                                            ("soa", self.soa)) if on]
        return f"{name}({', '.join(properties)})" if properties else name

    def __repr__(self) -> str:
        return f"LevelType({str(self)!r})"


class Slice(NamedTuple):
    """A dimension slice: ``offset``, ``size``, ``stride`` (each an int, or None for ``?``)."""
    offset: Optional[int]
    size: Optional[int]
    stride: Optional[int]

    def __str__(self) -> str:
        shown = ["?" if value is None else str(value) for value in self]
        return f"#sparse_tensor<slice({', '.join(shown)})>"

    @staticmethod
    def checked(given, dim: int) -> "Slice":
        """``given`` (a ``Slice`` or an ``(offset, size, stride)`` tuple) for dimension
        ``dim``, its values checked as the text parser checks them: an offset of 0 or more, a
        size and stride of 1 or more, each below 2**63, or None for ``?``.

        Example
        -------
        >>> Slice.checked((1, None, 2), 0)
        Slice(offset=1, size=None, stride=2)
        """
        values = tuple(given) if isinstance(given, (tuple, list)) else ()
        if len(values) != 3:
            raise EncodingError(f"dimension {dim}'s slice must be (offset, size, stride), got "
                                f"{given!r}")
        for value, what, least in zip(values, ("offset", "size", "stride"), (0, 1, 1)):
            if value is not None and (isinstance(value, (bool, np.bool_))
                                      or not isinstance(value, numbers.Integral)
                                      or not least <= value < 2**63):
                raise EncodingError(f"dimension {dim}'s slice {what} must be None ('?') or an "
                                    f"integer from {least} to 2**63 - 1, got {value!r}")
        return Slice(*(None if v is None else int(v) for v in values))

    def resolved(self, extent: int) -> tuple:
        """``(offset, size, stride)`` over a dimension of ``extent`` elements: a dynamic offset
        is 0, a dynamic stride 1, a dynamic size reaches the end. A slice that does not fit in
        the dimension raises."""
        offset = 0 if self.offset is None else self.offset
        stride = 1 if self.stride is None else self.stride
        size = -(-(extent - offset) // stride) if self.size is None else self.size
        if offset > extent or (size > 0 and offset + (size - 1) * stride >= extent):
            raise SparseTIRValueError(f"{self} does not fit in a dimension of size {extent}: "
                                      f"it reaches index {offset + max(size - 1, 0) * stride}")
        return offset, max(size, 0), stride


class Level(NamedTuple):
    """One level: its ``type``, its expression ``expr`` of the dimensions, and what the
    expression is: ``op`` ``"id"`` (the dimension ``dim`` itself), ``"floordiv"`` / ``"mod"``
    (of ``dim`` by ``factor``), or ``"expr"`` (anything else; ``dim`` None)."""
    type: LevelType
    expr: Affine
    op: str
    dim: Optional[int]
    factor: int


def classify(expr: Affine) -> tuple:
    """``(op, dim, factor)`` of a level expression (see ``Level``)."""
    if expr.op == "dim":
        return "id", expr.value, 1
    if expr.op in ("floordiv", "mod") and expr.lhs.op == "dim" and expr.rhs.op == "const" \
            and expr.rhs.value > 0:
        return expr.op, expr.lhs.value, expr.rhs.value
    return "expr", None, 1
