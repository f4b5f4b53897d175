"""MLIR's textual sparse encoding, read into its parts (``parse_encoding``).

The grammar read (a recursive descent over tokens that remember their offset, so that every
error names the column and what was expected)::

    encoding := [ "#sparse_tensor.encoding" "<" ] [ "{" ] entry ("," entry)* [","] [ "}" ] [ ">" ]
              | map
    entry    := "map" "=" map | WIDTH_KEY "=" INT
    map      := [ "[" names "]" ] [ "{" names "}" ] "(" dim ("," dim)* ")" "->"
                "(" lvl ("," lvl)* ")"
    dim      := NAME [ ":" "#sparse_tensor" "<" "slice" "(" v "," v "," v ")" ">" ]
              | NAME "=" affine
    lvl      := [ NAME "=" ] affine ":" NAME [ "[" INT "," INT "]" ] [ "(" NAME ("," NAME)* ")" ]
    affine   := term ("+" term)*,  term := atom (("*" | "floordiv" | "mod") atom)*,
    atom     := INT | NAME | "(" affine ")"

``WIDTH_KEY`` is ``posWidth``/``crdWidth`` or MLIR's older ``pointerBitWidth``/``indexBitWidth``;
``block2_4`` is read as ``structured[2, 4]``; ``//`` starts a comment. Whether the map is a
valid level map is checked afterwards (``encoding_checks``), with the columns kept here.

Example
-------
>>> parts = parse_encoding("map = (i, j) -> (j : dense, i : compressed), crdWidth = 16")
>>> [str(level.type) for level in parts.levels], parts.widths
(['dense', 'compressed'], {'pos': 0, 'crd': 16})
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

from .affine import Affine
from .encoding_types import KINDS, PROPERTIES, EncodingError, LevelType, Slice, \
    allowed_properties

_TOKEN = re.compile(r"\s+|//[^\n]*|(?P<tok>#[A-Za-z_][\w.]*|[A-Za-z_][\w$]*|[0-9]+|->"
                    r"|[()\[\]{}<>,:=*+?-])")
_WIDTH_KEYS = {"posWidth": "pos", "crdWidth": "crd", "pointerBitWidth": "pos",
               "indexBitWidth": "crd"}
_WIDTHS = (0, 8, 16, 32, 64)
_OLD_STRUCTURED = re.compile(r"block(\d+)_(\d+)")
_INT64_MAX = 2**63 - 1
_MAX_EXPR_TOKENS = 200      # one level expression: bounds the nesting (no deep recursion)


class Token(NamedTuple):
    """A token and its offset in the text."""
    text: str
    offset: int


class ParsedLevel(NamedTuple):
    """A level as written: its expression, type and the offsets of both (for errors)."""
    expr: Affine
    type: LevelType
    expr_offset: int
    type_offset: int


class ParsedEncoding(NamedTuple):
    """What ``parse_encoding`` read. ``dim_defs`` holds the explicit form's ``d = expr of
    level variables`` (``None`` in the plain form) with their offsets; ``dim_offsets`` the
    offsets of the dimension names; ``locate(offset)`` gives ``(line, column)``."""
    dim_names: tuple
    sym_names: tuple
    slices: tuple
    levels: tuple
    widths: dict
    dim_defs: Optional[tuple]
    dim_offsets: tuple
    text: str

    def error(self, message: str, offset: int) -> EncodingError:
        """An ``EncodingError`` at ``offset`` of the text."""
        return _error(self.text, message, offset)


def _error(text: str, message: str, offset: int) -> EncodingError:
    line = text.count("\n", 0, offset) + 1
    return EncodingError(message, offset - (text.rfind("\n", 0, offset) + 1) + 1, line)


def _is_number(token: str) -> bool:
    """Whether ``token`` is a decimal number (ASCII digits: ``str.isdigit`` takes "²" too)."""
    return token.isascii() and token.isdigit()


def tokenize(text: str) -> list:
    """The tokens of ``text`` (an unknown character is an error at its column)."""
    tokens, offset = [], 0
    while offset < len(text):
        match = _TOKEN.match(text, offset)
        if match is None:
            raise _error(text, f"unexpected character {text[offset]!r}", offset)
        if match.group("tok"):
            tokens.append(Token(match.group("tok"), offset))
        offset = match.end()
    return tokens


class _Reader:
    """A cursor over the tokens, with the helpers the grammar needs."""

    def __init__(self, text: str):
        self.text, self.tokens, self.at = text, tokenize(text), 0
        self.expr_start = 0

    def peek(self, ahead: int = 0) -> Optional[str]:
        index = self.at + ahead
        return self.tokens[index].text if index < len(self.tokens) else None

    def offset(self) -> int:
        return self.tokens[self.at].offset if self.at < len(self.tokens) else len(self.text)

    def fail(self, expected: str) -> EncodingError:
        got = self.peek()
        shown = "the end of the text" if got is None else repr(got)
        return _error(self.text, f"expected {expected}, got {shown}", self.offset())

    def take(self, expected: Optional[str] = None, what: Optional[str] = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise self.fail(what or repr(expected))
        self.at += 1
        return token

    def accept(self, token: str) -> bool:
        if self.peek() == token:
            self.at += 1
            return True
        return False

    def name(self, what: str) -> str:
        token = self.peek()
        if token is None or not re.fullmatch(r"[A-Za-z_][\w$]*", token):
            raise self.fail(what)
        self.at += 1
        return token

    def integer(self, what: str) -> int:
        token = self.peek()
        if token is None or not _is_number(token):
            raise self.fail(what)
        if len(token) > len(str(_INT64_MAX)) or int(token) > _INT64_MAX:
            raise _error(self.text, f"expected {what} below 2**63, got {token}", self.offset())
        self.at += 1
        return int(token)

    def names(self, close: str, what: str) -> list:
        """``name ("," name)* close`` (the opening bracket taken already), with offsets."""
        found = []
        while True:
            offset = self.offset()
            found.append((self.name(what), offset))
            if not self.accept(","):
                self.take(close, f"',' or {close!r}")
                return found


def parse_encoding(text: str) -> ParsedEncoding:
    """The parts of MLIR encoding ``text`` (with or without the ``#sparse_tensor.encoding<``
    wrapper); ``EncodingError`` at the first token that does not fit the grammar."""
    reader = _Reader(text)
    wrapped = reader.accept("#sparse_tensor.encoding")
    if wrapped:
        reader.take("<")
    entries, seen = {"widths": {"pos": 0, "crd": 0}}, set()
    if not wrapped and (reader.peek() in ("(", "[") or
                        reader.peek() == "{" and reader.peek(2) != "="):   # a bare map
        entries["map"] = _map(reader)
        if reader.peek() is not None:
            raise reader.fail("the end of the map")
        return ParsedEncoding(**entries["map"], widths=entries["widths"], text=text)
    braced = reader.accept("{")
    while True:
        offset = reader.offset()
        key = reader.name("'map', 'posWidth' or 'crdWidth'")
        kind = "map" if key == "map" else _WIDTH_KEYS.get(key)
        if kind is None:
            raise _error(text, f"expected 'map', 'posWidth' or 'crdWidth', got {key!r}", offset)
        if kind in seen:
            raise _error(text, f"{key} is given twice", offset)
        seen.add(kind)
        reader.take("=")
        if kind == "map":
            entries["map"] = _map(reader)
        else:
            width_offset = reader.offset()
            width = reader.integer(f"a width ({', '.join(map(str, _WIDTHS))})")
            if width not in _WIDTHS:
                raise _error(text, f"expected a width of {', '.join(map(str, _WIDTHS))}, got "
                             f"{width}", width_offset)
            entries["widths"][kind] = width
        if not reader.accept(",") or reader.peek() in (None, "}", ">"):   # MLIR: trailing ','
            break
    if braced:
        reader.take("}", "',' or '}'")
    if wrapped:
        reader.take(">")
    if reader.peek() is not None:
        raise reader.fail("the end of the encoding")
    if "map" not in entries:
        raise _error(text, "expected a 'map = (...) -> (...)' entry", 0)
    return ParsedEncoding(**entries["map"], widths=entries["widths"], text=text)


def _map(reader: _Reader) -> dict:
    """``map``'s parts (see the module docstring)."""
    symbols, level_vars = [], None
    for _ in range(2):
        if reader.accept("["):
            symbols = reader.names("]", "a symbol name")
        elif reader.accept("{"):
            level_vars = reader.names("}", "a level variable name")
    reader.take("(", "'(' opening the dimensions")
    dims, slices, defs = [], [], []
    while True:
        offset = reader.offset()
        dims.append((reader.name("a dimension name"), offset))
        slice_ = None
        if level_vars is not None:
            reader.take("=", "'=' (the explicit form defines each dimension)")
            defs.append((_expression(reader, {name: ("dim", k) for k, (name, _) in
                                              enumerate(level_vars)}, "a level variable"),
                         offset))
        elif reader.accept(":"):
            slice_ = _slice(reader)
        slices.append(slice_)
        if not reader.accept(","):
            reader.take(")", "',' or ')'")
            break
    reader.take("->", "'->'")
    reader.take("(", "'(' opening the levels")
    scope = {name: ("dim", k) for k, (name, _) in enumerate(dims)}
    scope.update({name: ("sym", k) for k, (name, _) in enumerate(symbols)})
    _no_clash(reader.text, dims, symbols)
    levels = []
    while True:
        if level_vars is not None:
            offset = reader.offset()
            name = reader.name("a level variable")
            if len(levels) >= len(level_vars) or name != level_vars[len(levels)][0]:
                expected = level_vars[len(levels)][0] if len(levels) < len(level_vars) \
                    else "no more levels"
                raise _error(reader.text, f"expected level variable {expected!r} here, got "
                             f"{name!r}", offset)
            reader.take("=", f"'=' (the explicit form binds each level: '{name} = ...')")
        expr_offset = reader.offset()
        expr = _expression(reader, scope, "a dimension or symbol")
        reader.take(":", "':' and a level type")
        type_offset = reader.offset()
        levels.append(ParsedLevel(expr, _level_type(reader), expr_offset, type_offset))
        if not reader.accept(","):
            reader.take(")", "',' or ')'")
            break
    if level_vars is not None and len(levels) != len(level_vars):
        raise _error(reader.text, f"expected {len(level_vars)} levels (one per level variable),"
                     f" got {len(levels)}", reader.offset() - 1)
    return dict(dim_names=tuple(name for name, _ in dims),
                sym_names=tuple(name for name, _ in symbols), slices=tuple(slices),
                levels=tuple(levels), dim_defs=tuple(defs) if level_vars is not None else None,
                dim_offsets=tuple(offset for _, offset in dims))


def _no_clash(text: str, dims: list, symbols: list) -> None:
    """Every dimension and symbol name is declared once."""
    seen = set()
    for name, offset in [*symbols, *dims]:
        if name in seen:
            raise _error(text, f"the name {name!r} is declared twice", offset)
        seen.add(name)


def _slice(reader: _Reader) -> Slice:
    """``#sparse_tensor<slice(offset, size, stride)>`` (after the ':')."""
    reader.take("#sparse_tensor", "'#sparse_tensor<slice(...)>'")
    reader.take("<")
    reader.take("slice", "'slice'")
    reader.take("(")
    values = []
    for position, what in enumerate(("offset", "size", "stride")):
        if position:
            reader.take(",", f"',' and the slice's {what}")
        if reader.accept("?"):
            values.append(None)
            continue
        offset = reader.offset()
        value = reader.integer(f"the slice's {what} (an integer or '?')")
        if what != "offset" and value == 0:
            raise _error(reader.text, f"expected a positive slice {what}, got 0", offset)
        values.append(value)
    reader.take(")")
    reader.take(">")
    return Slice(*values)


def _expression(reader: _Reader, scope: dict, what: str) -> Affine:
    """One affine expression of at most ``_MAX_EXPR_TOKENS`` tokens."""
    reader.expr_start = reader.at
    return _affine(reader, scope, what)


def _affine(reader: _Reader, scope: dict, what: str) -> Affine:
    """``term ("+" term)*``."""
    expr = _term(reader, scope, what)
    while reader.accept("+"):
        expr = Affine.binary("add", expr, _term(reader, scope, what))
    return expr


def _term(reader: _Reader, scope: dict, what: str) -> Affine:
    """``atom (("*" | "floordiv" | "mod") atom)*``."""
    expr = _atom(reader, scope, what)
    while reader.peek() in ("*", "floordiv", "mod"):
        offset, token = reader.offset(), reader.take()
        op = "mul" if token == "*" else token
        rhs = _atom(reader, scope, what)
        if not rhs.is_symbolic() and (op != "mul" or not expr.is_symbolic()):
            side = "one side of '*'" if op == "mul" else f"the right side of '{op}'"
            raise _error(reader.text, f"expected {side} to be a constant or a symbol "
                         "expression (MLIR's affine maps are linear in the dimensions)", offset)
        expr = Affine.binary(op, expr, rhs)
    return expr


def _atom(reader: _Reader, scope: dict, what: str) -> Affine:
    """An integer, a declared name, or a parenthesised expression."""
    if reader.at - reader.expr_start > _MAX_EXPR_TOKENS:
        raise _error(reader.text, f"expected an expression of at most {_MAX_EXPR_TOKENS} "
                     "tokens, got a longer one", reader.offset())
    if reader.accept("("):
        expr = _affine(reader, scope, what)
        reader.take(")", "')'")
        return expr
    token = reader.peek()
    if token is not None and _is_number(token):
        return Affine.const(reader.integer("an integer"))
    offset = reader.offset()
    name = reader.name(f"{what}, an integer or '('")
    if name not in scope:
        raise _error(reader.text, f"expected {what}, got the undeclared name {name!r}", offset)
    kind, position = scope[name]
    return Affine.dim(position) if kind == "dim" else Affine.sym(position)


def _level_type(reader: _Reader) -> LevelType:
    """``NAME [ "[" n "," m "]" ] [ "(" property ("," property)* ")" ]``."""
    offset = reader.offset()
    name = reader.name("a level type (" + ", ".join(KINDS) + ")")
    fields = {}
    old = _OLD_STRUCTURED.fullmatch(name)
    if old:
        name, fields["n"], fields["m"] = "structured", int(old[1]), int(old[2])
    elif name == "structured":
        reader.take("[", "'[' and structured's n, m")
        fields["n"] = reader.integer("structured's n")
        reader.take(",")
        fields["m"] = reader.integer("structured's m")
        reader.take("]")
    if name not in KINDS:
        raise _error(reader.text, f"expected a level type ({', '.join(KINDS)}), got {name!r}",
                     offset)
    if name == "structured" and not 0 < fields["n"] <= fields["m"]:
        raise _error(reader.text, f"expected structured[n, m] with 0 < n <= m, got "
                     f"[{fields['n']}, {fields['m']}]", offset)
    if reader.accept("("):
        for word, word_offset in reader.names(")", "a level property (nonunique, nonordered, soa)"):
            if word not in PROPERTIES:
                raise _error(reader.text, "expected a level property (nonunique, nonordered, "
                             f"soa), got {word!r}", word_offset)
            if word not in allowed_properties(name):
                raise _error(reader.text, f"{name} levels cannot be {word}", word_offset)
            fields[{"nonunique": "unique", "nonordered": "ordered"}.get(word, word)] = \
                word == "soa"
    return LevelType(name, **fields)
