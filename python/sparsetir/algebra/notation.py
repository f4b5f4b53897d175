"""TACO's index notation: ``A(i,j) = B(i,j) + C(i,j)`` parsed into a small expression tree.

Grammar: ``access = expr`` where an expression is built from accesses ``B(i,j)`` (a name with
no parentheses is a scalar), numbers, ``+ - * /``, unary ``-`` and parentheses. A statement
needs an index variable; constants (and what they fold to) are finite, at most
``LARGEST_CONSTANT`` in magnitude, and never a zero divisor or a zero factor of a tensor term.
Errors are ``NotationError`` (a ``SparseTIRValueError``) naming the column. Parentheses and
unary minuses nest at most ``MAX_NESTING`` levels, the tree at most ``MAX_DEPTH``; a long sum or
product (more than ``BALANCE_AFTER`` operands) is read as a balanced tree.

Example
-------
>>> stmt = parse("a(i) = B(i,j) * c(j)")
>>> stmt.lhs.indices, stmt.reduction_vars
(('i',), ('j',))
>>> str(stmt.rhs)
'(B(i,j) * c(j))'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from ..errors import SparseTIRValueError


LARGEST_CONSTANT = 3.4028234663852886e38
"""The largest constant (in magnitude) a statement may hold or fold to: TVMScript's parser
refuses a larger literal even as ``T.float64``."""


MAX_NESTING = 64
"""The most parentheses and unary minuses a statement nests."""
MAX_DEPTH = 128
"""The deepest expression tree a statement may make (the generated Stage I script nests as
deep, and Python reads at most 200 nested parentheses)."""
BALANCE_AFTER = 16
"""A chain of ``+``/``-`` (or ``*``) of more operands is read as a balanced tree: a
1,200-term sum nests 11 levels, not 1,200 (the sum's rounding then follows the tree)."""


class NotationError(SparseTIRValueError):
    """A statement in index notation that cannot be read or makes no sense."""


@dataclass(frozen=True)
class Access:
    """``name(i, j)``: a tensor read (or, on the left, written) at index variables."""

    name: str
    indices: tuple
    column: int
    index_columns: tuple = ()

    def __str__(self) -> str:
        return f"{self.name}({','.join(self.indices)})"


@dataclass(frozen=True)
class Const:
    """A number (``column``: where it is written)."""

    value: float
    column: int = 0

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Neg:
    """``-x``."""

    operand: object

    def __str__(self) -> str:
        return f"(-{self.operand})"


@dataclass(frozen=True)
class Binary:
    """``a op b`` with ``op`` in ``+ - * /`` (``column``: the operator's)."""

    op: str
    a: object
    b: object
    column: int = 0

    def __str__(self) -> str:
        return f"({self.a} {self.op} {self.b})"


@dataclass(frozen=True)
class Statement:
    """``lhs = rhs``."""

    lhs: Access
    rhs: object
    text: str

    @cached_property
    def accesses(self) -> tuple:
        """The reads of the right-hand side, left to right (worked out once: every call of a
        kernel reads them)."""
        return tuple(_accesses(self.rhs))

    @property
    def reduction_vars(self) -> tuple:
        """Index variables of the right-hand side missing on the left (summed over), in order of
        appearance."""
        seen = []
        for access in self.accesses:
            for v in access.indices:
                if v not in self.lhs.indices and v not in seen:
                    seen.append(v)
        return tuple(seen)


_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_]\w*)"
                    r"|(?P<op>[-+*/=(),]))")


def parse(text: str) -> Statement:
    """Parse one statement; raises ``NotationError`` naming the column of the problem."""
    if not isinstance(text, str):
        raise NotationError(f"expected the statement as a string, got {type(text).__name__}")
    tokens = _tokenize(text)
    parser = _Parser(text, tokens)
    lhs = parser.access()
    parser.expect("=")
    rhs = parser.expr()
    if parser.peek() is not None:
        parser.fail(f"unexpected {parser.peek()[1]!r}")
    if _depth(rhs) > MAX_DEPTH:
        raise NotationError(f"column {lhs.column}: the right-hand side nests {_depth(rhs)} "
                            f"operations deep, past the limit of {MAX_DEPTH} (the generated "
                            "script nests as deep); compute a part into a tensor of its own "
                            f"in {text!r}")
    stmt = Statement(lhs, rhs, text)
    _check(stmt)
    return stmt


def _tokenize(text: str) -> list:
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if not match:
            col = pos + len(text[pos:]) - len(text[pos:].lstrip()) + 1
            raise NotationError(f"column {col}: cannot read {text[col - 1]!r} in {text!r}")
        kind = match.lastgroup
        start = match.start(kind) + 1
        tokens.append((kind, match.group(kind), start))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str, tokens: list):
        self.text, self.tokens, self.pos = text, tokens, 0
        self.depth = 0

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def column(self) -> int:
        tok = self.peek()
        return tok[2] if tok else len(self.text) + 1

    def fail(self, message: str):
        raise NotationError(f"column {self.column()}: {message} in {self.text!r}")

    def take(self):
        tok = self.peek()
        if tok is None:
            self.fail("unexpected end of the statement")
        self.pos += 1
        return tok

    def expect(self, op: str) -> None:
        tok = self.peek()
        if tok is None or tok[1] != op:
            self.fail(f"expected {op!r}")
        self.pos += 1

    def access(self) -> Access:
        tok = self.peek()
        if tok is None or tok[0] != "name":
            self.fail("expected a tensor name")
        self.pos += 1
        indices, columns = [], []
        nxt = self.peek()
        if nxt is not None and nxt[1] == "(":
            self.pos += 1
            if self.peek() is not None and self.peek()[1] == ")":
                self.pos += 1
                return Access(tok[1], (), tok[2])
            while True:
                idx = self.peek()
                if idx is None or idx[0] != "name":
                    self.fail("expected an index variable")
                self.pos += 1
                indices.append(idx[1])
                columns.append(idx[2])
                sep = self.take()
                if sep[1] == ")":
                    break
                if sep[1] != ",":
                    self.pos -= 1
                    self.fail("expected ',' or ')'")
        return Access(tok[1], tuple(indices), tok[2], tuple(columns))

    def expr(self):
        return self.chain(self.term, "+-")

    def term(self):
        return self.chain(self.unary, "*/")

    def chain(self, operand, ops: str):
        """``operand (op operand)*`` with ``op`` in ``ops``: grouped from the left, or, past
        ``BALANCE_AFTER`` operands, as a balanced tree (``a - b`` as ``a + (-b)``; a chain
        with ``/`` stays grouped from the left)."""
        nodes, links = [operand()], []
        while self.peek() is not None and self.peek()[1] in ops:
            links.append(self.take())
            nodes.append(operand())
        if len(nodes) > BALANCE_AFTER and not any(op[1] == "/" for op in links):
            signed = [nodes[0]] + [Neg(n) if op[1] == "-" else n for op, n in zip(links, nodes[1:])]
            return _balanced(signed, [op[2] for op in links], ops[0])
        node = nodes[0]
        for op, right in zip(links, nodes[1:]):
            node = Binary(op[1], node, right, op[2])
        return node

    def nested(self, parse):
        """``parse()`` one level deeper (a parenthesis or a unary minus): at most
        ``MAX_NESTING`` levels."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail(f"the expression nests deeper than {MAX_NESTING} levels (parentheses and "
                      "unary minus), the limit of index notation here; compute a part into a "
                      "tensor of its own")
        node = parse()
        self.depth -= 1
        return node

    def unary(self):
        tok = self.peek()
        if tok is not None and tok[1] == "-":
            self.pos += 1
            return Neg(self.nested(self.unary))
        if tok is not None and tok[1] == "(":
            self.pos += 1
            node = self.nested(self.expr)
            self.expect(")")
            return node
        if tok is not None and tok[0] == "num":
            self.pos += 1
            return Const(float(tok[1]), tok[2])
        return self.access()


def signed_terms(expr, sign: int = 1) -> list:
    """The additive terms of ``expr`` in order, as ``(sign, term)`` (``sign`` 1 or -1):
    ``B - (C - D)`` gives ``[(1, B), (-1, C), (1, D)]``."""
    if isinstance(expr, Binary) and expr.op in "+-":
        return signed_terms(expr.a, sign) + \
            signed_terms(expr.b, sign if expr.op == "+" else -sign)
    if isinstance(expr, Neg):
        return signed_terms(expr.operand, -sign)
    return [(sign, expr)]


def _balanced(nodes: list, columns: list, op: str):
    """``nodes[0] op nodes[1] op ...`` as a balanced tree (``columns``: each ``op``'s)."""
    if len(nodes) == 1:
        return nodes[0]
    half = len(nodes) // 2
    return Binary(op, _balanced(nodes[:half], columns[:half - 1], op),
                  _balanced(nodes[half:], columns[half:], op), columns[half - 1])


def _depth(expr) -> int:
    """The depth of the tree ``expr`` (an access or a number: 1), without recursion."""
    deepest, stack = 0, [(expr, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, Neg):
            stack.append((node.operand, depth + 1))
        elif isinstance(node, Binary):
            stack += [(node.a, depth + 1), (node.b, depth + 1)]
    return deepest


def _accesses(expr):
    if isinstance(expr, Access):
        yield expr
    elif isinstance(expr, Neg):
        yield from _accesses(expr.operand)
    elif isinstance(expr, Binary):
        yield from _accesses(expr.a)
        yield from _accesses(expr.b)


def _check(stmt: Statement) -> None:
    lhs = stmt.lhs
    if not lhs.indices and not any(a.indices for a in stmt.accesses):
        raise NotationError(f"column {lhs.column}: {stmt.text!r} has no index variable, so "
                            "there is nothing to iterate; write at least one, e.g. "
                            "'s = b(i) * c(i)'")
    _check_constants(stmt.rhs, stmt.text)
    if len(set(lhs.indices)) != len(lhs.indices):
        raise NotationError(f"column {lhs.column}: {lhs} repeats an index variable")
    used = {v for a in stmt.accesses for v in a.indices}
    for v, col in zip(lhs.indices, lhs.index_columns):
        if v not in used:
            raise NotationError(f"column {col}: index {v} of {lhs} does not appear on "
                                f"the right-hand side of {stmt.text!r}")
    ranks = {}
    for access in (lhs,) + stmt.accesses:
        if len(set(access.indices)) != len(access.indices):
            raise NotationError(f"column {access.column}: {access} repeats an index variable")
        if ranks.setdefault(access.name, len(access.indices)) != len(access.indices):
            raise NotationError(f"column {access.column}: {access.name} is used with "
                                f"{ranks[access.name]} and {len(access.indices)} indices")
    if lhs.name in {a.name for a in stmt.accesses}:
        raise NotationError(f"column {lhs.column}: the result {lhs.name} is also read")


def _check_constants(expr, text: str):
    """Refuse what the sparse algebra cannot represent: a constant that is not a finite float64
    (``1e400``; past ``LARGEST_CONSTANT``, TVMScript's largest literal, is refused too) or a
    division by a constant zero (``/ 0``, ``/ 1e-400``), both of which would
    make ``0 * c`` or ``0 / c`` something other than the 0 every unstored element stands for;
    and a tensor term multiplied by a constant zero (``0 * B(i,j)``, ``1e-400 * B(i,j)``),
    which TVM folds away with the operand's read. Returns the value of a constant ``expr``,
    None when it reads a tensor."""
    if isinstance(expr, Access):
        return None
    if isinstance(expr, Const):
        value = expr.value
        column = expr.column
    elif isinstance(expr, Neg):
        inner = _check_constants(expr.operand, text)
        return None if inner is None else -inner
    else:
        a, b = _check_constants(expr.a, text), _check_constants(expr.b, text)
        column = expr.column
        if expr.op == "/" and b == 0:
            raise NotationError(f"column {column}: {expr} divides by zero in {text!r}")
        if expr.op == "*" and 0 in (a, b) and None in (a, b):
            raise NotationError(f"column {column}: {expr} multiplies by the constant zero; "
                                f"the term is 0 wherever it is defined, drop it from {text!r}")
        if a is None or b is None:
            return None
        value = a + b if expr.op == "+" else a - b if expr.op == "-" else \
            a * b if expr.op == "*" else a / b
    if not abs(value) <= LARGEST_CONSTANT:
        raise NotationError(f"column {column}: the constant {expr} is not finite or past "
                            f"{LARGEST_CONSTANT:.8g}, the largest literal TVMScript reads, "
                            f"in {text!r}")
    return value
