"""Whether a dimension-to-level map with its level types is a valid MLIR level map.

``check_levels`` raises ``EncodingError`` at the first problem, at the column of the text it was
parsed from when ``where`` gives the offsets (else naming the level):

- a level expression is a dimension ``d``, ``d floordiv c`` or ``d mod c`` (``c > 0``); any
  affine expression is allowed only where a symbol occurs in it (MLIR's jagged-diagonal ELL);
- each dimension is stored by exactly one ``d`` level or by one ``d floordiv c`` and one
  ``d mod c`` level (same ``c``);
- a ``structured[n, m]`` level is the innermost one and reads ``d mod m``;
- a ``singleton`` level follows a ``nonunique`` level, and a ``nonunique`` level is followed by
  a ``singleton`` level (the two make a COO region);
- in the explicit form, each dimension's definition inverts the level expressions.

Example
-------
>>> from sparsetir.format import Encoding
>>> Encoding.parse("(i, j) -> (i : dense, i : compressed)")
Traceback (most recent call last):
sparsetir.format.encoding_types.EncodingError: column 23: dimension i is used twice (levels 0 and 1)
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .encoding_types import EncodingError, classify


class Where:
    """Where the parts of a parsed map are, for errors: ``dim_offsets``, each level's
    ``expr_offset``/``type_offset``, the explicit form's ``dim_defs``, and the names."""

    def __init__(self, parsed):
        self.parsed = parsed

    def level(self, index: int, message: str, at_type: bool = False) -> EncodingError:
        level = self.parsed.levels[index]
        return self.parsed.error(message, level.type_offset if at_type else level.expr_offset)

    def dim(self, index: int, message: str) -> EncodingError:
        return self.parsed.error(message, self.parsed.dim_offsets[index])

    def names(self) -> tuple:
        return self.parsed.dim_names, self.parsed.sym_names


class _Plain:
    """The errors of a map built in code: they name the level or dimension."""

    def __init__(self, dim_rank: int, sym_count: int):
        self.dim_rank, self.sym_count = dim_rank, sym_count

    def level(self, index: int, message: str, at_type: bool = False) -> EncodingError:
        del at_type
        return EncodingError(f"level {index}: {message}")

    def dim(self, index: int, message: str) -> EncodingError:
        return EncodingError(f"dimension {index}: {message}")

    def names(self) -> tuple:
        return [f"d{k}" for k in range(self.dim_rank)], [f"s{k}" for k in range(self.sym_count)]


def check_levels(dim_rank: int, sym_count: int, levels, where: Optional[Where] = None,
                 dim_defs=None) -> None:
    """Raise ``EncodingError`` unless ``levels`` (``(expr, LevelType)`` pairs) is a valid level
    map of ``dim_rank`` dimensions (see the module docstring)."""
    where = where or _Plain(dim_rank, sym_count)
    dim_names, sym_names = where.names()
    uses = [dict() for _ in range(dim_rank)]
    for index, (expr, _) in enumerate(levels):
        op, dim, factor = classify(expr)
        shown = expr.text(dim_names, sym_names)
        if op == "expr":
            if not expr.has_symbol():
                raise where.level(index, "expected a dimension, 'd floordiv c' or 'd mod c' "
                                  f"(c > 0) as a level expression, got '{shown}'")
            continue
        taken = uses[dim]
        clash = next((taken[key] for key in ({"id", "floordiv", "mod"} if op == "id"
                                             else {"id", op}) if key in taken), None)
        if clash is not None:
            raise where.level(index, f"dimension {dim_names[dim]} is used twice (levels "
                              f"{clash[0]} and {index})")
        taken[op] = (index, factor)
    for dim, taken in enumerate(uses):
        name = dim_names[dim]
        if not taken:
            raise where.dim(dim, f"dimension {name} is used by no level (expected '{name}', "
                            f"or '{name} floordiv c' and '{name} mod c')")
        if "id" in taken:
            continue
        for op, other in (("floordiv", "mod"), ("mod", "floordiv")):
            if op in taken and other not in taken:
                index, factor = taken[op]
                raise where.level(index, f"'{name} {op} {factor}' without its '{name} {other} "
                                  f"{factor}'")
        if taken["floordiv"][1] != taken["mod"][1]:
            raise where.level(taken["mod"][0], f"'{name} mod {taken['mod'][1]}' does not match "
                              f"'{name} floordiv {taken['floordiv'][1]}' (expected the same "
                              "block size)")
    _check_types(levels, where, dim_names, sym_names)
    if dim_defs is not None:
        _check_definitions(dim_rank, levels, dim_defs, where)


def _check_types(levels, where, dim_names, sym_names) -> None:
    """The level-type rules of the module docstring."""
    last = len(levels) - 1
    for index, (expr, kind) in enumerate(levels):
        if kind.kind == "structured":
            if index != last:
                raise where.level(index, f"{kind} must be the innermost (last) level", True)
            op, _, factor = classify(expr)
            if op != "mod" or factor != kind.m:
                raise where.level(index, f"expected 'd mod {kind.m}' for a {kind} level, got "
                                  f"'{expr.text(dim_names, sym_names)}'")
        if kind.kind == "singleton":
            before = levels[index - 1][1] if index else None
            if before is None or before.unique or before.kind == "dense":
                raise where.level(index, "a singleton level must follow a nonunique level "
                                  "(compressed(nonunique) or singleton(nonunique)), got "
                                  f"{before if before is not None else 'none'}", True)
        if not kind.unique and (index == last or levels[index + 1][1].kind != "singleton"):
            raise where.level(index, f"a nonunique level ({kind}) must be followed by a "
                              "singleton level", True)


def _check_definitions(dim_rank: int, levels, dim_defs, where) -> None:
    """Each explicit ``d = expr(levels)`` gives ``d`` back from the level values of ``d``."""
    factor = max([classify(expr)[2] for expr, _ in levels] + [1])
    samples = np.arange(3 * factor + 2, dtype=np.int64)
    for dim, (definition, offset) in enumerate(dim_defs):
        point = [np.ones_like(samples) for _ in range(dim_rank)]
        point[dim] = samples
        values = [expr.evaluate(point, ()) for expr, _ in levels]
        got = np.broadcast_to(definition.evaluate(values, ()), samples.shape)
        wrong = np.flatnonzero(got != samples)
        if wrong.size:
            name = where.names()[0][dim]
            raise where.parsed.error(
                f"the definition of {name} does not invert the level expressions (at {name} = "
                f"{samples[wrong[0]]} it gives {got[wrong[0]]})", offset)


def inverse(dim_rank: int, levels) -> list:
    """For each dimension, ``(outer, inner, factor)``: the dimension is ``lvl[outer] * factor
    + lvl[inner]`` (``inner`` None and ``factor`` 1 when level ``outer`` stores it as is); the
    map is checked already."""
    found = [dict() for _ in range(dim_rank)]
    for index, (expr, _) in enumerate(levels):
        op, dim, factor = classify(expr)
        if op != "expr":
            found[dim][op] = (index, factor)
    return [(taken["id"][0], None, 1) if "id" in taken else
            (taken["floordiv"][0], taken["mod"][0], taken["mod"][1]) for taken in found]

