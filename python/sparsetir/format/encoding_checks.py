"""Whether a dimension-to-level map with its level types is a valid MLIR level map.

``check_levels`` raises ``EncodingError`` at the first problem, at the column of the text it was
parsed from when ``where`` gives the offsets (else naming the level):

- a level expression is a dimension ``d``, ``d floordiv c`` or ``d mod c`` (``c > 0``); any
  affine expression is allowed only where a symbol occurs in it (MLIR's jagged-diagonal ELL);
- each dimension is stored by exactly one ``d`` level or by one ``d floordiv c`` and one
  ``d mod c`` level (same ``c``);
- a ``floordiv`` level comes before the ``mod`` level of its dimension;
- a ``structured[n, m]`` level is the innermost one, every level before it is dense, and it reads
  ``d mod m`` of the only blocked dimension;
- the first ``singleton`` level follows a ``compressed`` or ``loose_compressed`` level, every
  level after it is a singleton too (the COO region), and all of them are ``soa`` or none is;
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
    _check_types(levels, where, dim_names, sym_names)
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
        if taken["mod"][0] < taken["floordiv"][0]:
            raise where.level(taken["mod"][0], f"'{name} mod {taken['mod'][1]}' comes before "
                              f"its '{name} floordiv {taken['floordiv'][1]}' (expected the "
                              "floordiv level first)")
        if taken["floordiv"][1] != taken["mod"][1]:
            raise where.level(taken["mod"][0], f"'{name} mod {taken['mod'][1]}' does not match "
                              f"'{name} floordiv {taken['floordiv'][1]}' (expected the same "
                              "block size)")
    if dim_defs is not None:
        _check_definitions(dim_rank, levels, dim_defs, where)


def _check_types(levels, where, dim_names, sym_names) -> None:
    """The level-type rules of the module docstring."""
    kinds = [kind for _, kind in levels]
    last = len(levels) - 1
    for index, kind in enumerate(kinds):
        if kind.kind == "structured":
            _check_structured(levels, index, where, dim_names, sym_names)
        if kind.kind != "singleton":
            continue
        before = kinds[index - 1] if index else None
        if before is None or before.kind not in ("compressed", "loose_compressed"):
            raise where.level(index, "a singleton level must follow a compressed or "
                              f"loose_compressed level, got {before or 'none'}", True)
        after = next((k for k in range(index + 1, last + 1)
                      if kinds[k].kind != "singleton"), None)
        if after is not None:
            raise where.level(after, f"every level after a singleton level is a singleton, got "
                              f"{kinds[after]}", True)
        mixed = next((k for k in range(index + 1, last + 1) if kinds[k].soa != kind.soa), None)
        if mixed is not None:
            raise where.level(mixed, "the singleton levels of a COO region are all soa or none "
                              f"is: level {index} is {kind}, level {mixed} is {kinds[mixed]}",
                              True)
        return


def _check_structured(levels, index, where, dim_names, sym_names) -> None:
    """A ``structured[n, m]`` level: innermost, dense levels before it, ``d mod m`` of the
    only blocked dimension."""
    expr, kind = levels[index]
    if index != len(levels) - 1:
        raise where.level(index, f"{kind} must be the innermost (last) level", True)
    outer = next((k for k, (_, lt) in enumerate(levels[:index]) if lt.kind != "dense"), None)
    if outer is not None:
        raise where.level(outer, f"every level before a {kind} level is dense, got "
                          f"{levels[outer][1]}", True)
    op, dim, factor = classify(expr)
    if op != "mod" or factor != kind.m:
        raise where.level(index, f"expected 'd mod {kind.m}' for a {kind} level, got "
                          f"'{expr.text(dim_names, sym_names)}'")
    other = next((k for k, (e, _) in enumerate(levels) if classify(e)[0] == "mod"
                  and classify(e)[1] != dim), None)
    if other is not None:
        shown = levels[other][0].text(dim_names, sym_names)
        raise where.level(other, f"a {kind} level blocks only its own dimension "
                          f"({dim_names[dim]}), got '{shown}'")


SAMPLE_BLOCKS = sorted(set(range(17)) | {97, 997, 9973} | {2**k + d for k in range(5, 61, 5)
                                                           for d in (-1, 0, 1)})
"""Blocks a definition is checked at: a wrong term such as ``ib floordiv 3`` first shows at
block 3 (the first three alone missed it), ``ib floordiv 1000`` at 1023 and 1024."""


def _check_definitions(dim_rank: int, levels, dim_defs, where) -> None:
    """Each explicit ``d = expr(levels)`` gives ``d`` back from the level values of ``d``, at
    the first, second and last element of ``SAMPLE_BLOCKS`` blocks of every block size."""
    factors = {classify(expr)[2] for expr, _ in levels} | {1}
    samples = np.unique(np.array([block * factor + offset for factor in factors
                                  for block in SAMPLE_BLOCKS for offset in (0, 1, factor - 1)
                                  if 0 <= block * factor + offset < 2**62], np.int64))
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

