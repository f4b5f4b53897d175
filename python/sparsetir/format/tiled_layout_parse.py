"""XLA's text of a layout, read into its parts: ``f32[3,5]{1,0:T(2,2)}``.

The grammar is XLA's (HLO text, ``xla/tiled_layout.md``): an optional shape prefix (element type
and bounds), then braces holding the minor-to-major order of the dimensions and, after a colon,
one or more tiles ``T(a,b)(c,d)``, each entry a positive size or ``*`` (combine this dimension
with the next more minor one). Element types are read in any case (``F32`` and ``f32``). Other
layout attributes of HLO text (``E(16)``, ``S(1)``, ...) and dynamic bounds (``<=3``, ``?``) are
refused. A refusal is a :class:`TiledLayoutError` naming the column (1-based) and what was
expected there.

Example
-------
>>> parse_layout("F32[3,5]{1,0:T(2,2)}")
LayoutText(element_type='f32', shape=(3, 5), minor_to_major=(1, 0), tiles=((2, 2),), columns={...})
>>> parse_layout("{1,0:T(2,x)}")
Traceback (most recent call last):
sparsetir.format.tiled_layout_parse.TiledLayoutError: column 10 of '{1,0:T(2,x)}': expected a tile size (a positive integer or '*'), found 'x'
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import SparseTIRValueError

COMBINE = -1
"""A tile entry ``*``: the dimension is combined with the next more minor one (XLA's -1)."""

ELEMENT_TYPES = {
    "pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16",
    "f32": "float32", "f64": "float64", "c64": "complex64", "c128": "complex128",
    "bf16": None, "s4": None, "u4": None, "s2": None, "u2": None,
    "f8e4m3fn": None, "f8e5m2": None,
}
"""XLA's element types, by their lower-case HLO name, with the numpy dtype holding one (None:
numpy has none, so arrays of that type are not checked against it)."""


class TiledLayoutError(SparseTIRValueError):
    """A layout that does not parse or does not fit its shape; the message says where.

    ``part`` names the part of the layout at fault (``"shape"``, ``"minor_to_major"``, or
    ``("tile", n)``), so that ``TiledLayout.parse`` can give its column in the text."""

    def __init__(self, message: str, part=None):
        super().__init__(message)
        self.part = part


class LayoutText(NamedTuple):
    """The parts of a layout's text, not yet checked against each other, and the column
    where each starts (``columns``: part name or ``("tile", n)`` -> 1-based column)."""

    element_type: str | None
    shape: tuple | None
    minor_to_major: tuple
    tiles: tuple
    columns: dict | None = None


MAX_DIGITS = 19          # 2**63 has 19: a longer number is past any size an array can have


class _Reader:
    """A cursor over the text; every refusal names the column it stands at."""

    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def fail(self, expected: str):
        found = repr(self.text[self.pos]) if self.pos < len(self.text) else "the end"
        raise TiledLayoutError(f"column {self.pos + 1} of {self.text!r}: expected {expected}, "
                               f"found {found}")

    def skip_space(self):
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self, char: str) -> bool:
        self.skip_space()
        return self.text.startswith(char, self.pos)

    def expect(self, char: str, expected: str | None = None):
        if not self.peek(char):
            self.fail(expected or repr(char))
        self.pos += len(char)

    def word(self) -> str:
        self.skip_space()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isalnum():
            self.pos += 1
        return self.text[start:self.pos]

    def integer(self, expected: str, star: bool = False) -> int:
        """A decimal integer (``*`` too where ``star``: returned as ``COMBINE``)."""
        if star and self.peek("*"):
            self.pos += 1
            return COMBINE
        self.skip_space()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in "0123456789":
            self.pos += 1
        if start == self.pos:
            self.fail(expected)
        if self.pos - start > MAX_DIGITS:
            self.pos = start
            self.fail(f"{expected} of at most {MAX_DIGITS} digits")
        return int(self.text[start:self.pos])

    def integers(self, closers: str, expected: str, star: bool = False) -> tuple:
        """Comma-separated integers (none at all is allowed) up to one of the characters
        ``closers``, which is consumed: ``(values, the closer found)``."""
        values = []
        if not any(self.peek(c) for c in closers):
            values.append(self.integer(expected, star))
            while self.peek(","):
                self.pos += 1
                values.append(self.integer(expected, star))
        for close in closers:
            if self.peek(close):
                self.pos += 1
                return tuple(values), close
        self.fail(" or ".join(repr(c) for c in "," + closers))


def parse_layout(text: str) -> LayoutText:
    """The parts of ``text``, XLA's layout with or without its shape prefix."""
    if not isinstance(text, str):
        raise TiledLayoutError(f"a layout is text, got {type(text).__name__}")
    reader = _Reader(text)
    element_type = shape = None
    columns = {}
    if not reader.peek("{"):
        start = reader.pos
        element_type = reader.word().lower()
        if element_type not in ELEMENT_TYPES:
            reader.pos = start
            reader.fail("'{' or an element type (" + ", ".join(ELEMENT_TYPES) + ")")
        reader.expect("[")
        columns["shape"] = reader.pos + 1
        shape = reader.integers("]", "a static array bound (a non-negative integer)")[0]
    reader.expect("{")
    columns["minor_to_major"] = reader.pos + 1
    minor_to_major, close = reader.integers("}:", "a dimension number")
    tiles = []
    if close == ":":
        reader.expect("T", "a tile 'T(...)' (only tiles are supported)")
        reader.expect("(")
        while True:
            columns["tile", len(tiles)] = reader.pos
            tiles.append(reader.integers(")", "a tile size (a positive integer or '*')",
                                         star=True)[0])
            if not reader.peek("("):
                break
            reader.pos += 1
        reader.expect("}", "'(' (another tile) or '}'")
    reader.skip_space()
    if reader.pos != len(text):
        reader.fail("the end of the layout")
    return LayoutText(element_type, shape, minor_to_major, tuple(tiles), columns)


def format_layout(parts: LayoutText) -> str:
    """The text of ``parts``; ``parse_layout`` reads it back to equal parts."""
    prefix = ""
    if parts.element_type is not None:
        prefix = f"{parts.element_type}[{','.join(map(str, parts.shape))}]"
    tiles = "".join("(" + ",".join("*" if t == COMBINE else str(t) for t in tile) + ")"
                    for tile in parts.tiles)
    return f"{prefix}{{{','.join(map(str, parts.minor_to_major))}{':T' + tiles if tiles else ''}}}"
