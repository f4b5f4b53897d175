"""``Encoding``: MLIR's sparse_tensor encoding, parsed, printed, named and mapped.

One line says the format: the level types, a dimension-to-level map (permutations, blocks with
``floordiv``/``mod``, symbols), index widths and dimension slices. ``Encoding.parse`` reads
MLIR's text (with or without ``#sparse_tensor.encoding<{ ... }>``), ``str`` prints it back in
MLIR's canonical form (``d0``, ``s0`` ...; widths only when not 0), and ``Encoding.named``
gives the common formats by name. Two encodings are equal when they mean the same (the names
of dimensions do not matter). Bad text or a map that is not a level map raises
``EncodingError`` naming the column.

Example
-------
>>> bsr = Encoding.parse("map = (i, j) -> (i floordiv 2 : dense, j floordiv 3 : compressed, "
...                      "i mod 2 : dense, j mod 3 : dense), crdWidth = 16")
>>> bsr == Encoding.named("BSR", block=(2, 3), crd_width=16), bsr.block_shape, bsr.crd_dtype
(True, (2, 3), dtype('int16'))
>>> print(Encoding.named("CSC"))
#sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed) }>
"""

from __future__ import annotations

import operator
from typing import Optional

import numpy as np

from ..errors import SparseTIRTypeError, SparseTIRValueError
from .affine import Affine
from .encoding_checks import Where, check_levels, inverse
from .encoding_parser import parse_encoding
from .encoding_types import EncodingError, Level, LevelType, Slice, classify

_DTYPES = {0: np.dtype(np.int64), 8: np.dtype(np.int8), 16: np.dtype(np.int16),
           32: np.dtype(np.int32), 64: np.dtype(np.int64)}


class Encoding:
    """A sparse tensor encoding (see the module docstring).

    Parameters
    ----------
    levels : sequence of (Affine, LevelType)
        Each level's expression of the dimensions and its type, outermost first.
    dim_rank : int
    sym_count : int
        How many symbols (``s0`` ...) the expressions may read.
    slices : sequence of Slice or None, optional
        One per dimension (None: the dimension is not sliced).
    pos_width, crd_width : int
        0 (native, int64), 8, 16, 32 or 64.

    Attributes
    ----------
    dim_rank, lvl_rank : int
    levels : tuple of Level
    level_types : tuple of LevelType
    lvl_to_dim : tuple of int or None
        The dimension of each level when the map is a permutation.
    block_shape : tuple of int
        Each dimension's block size (1 where it is not blocked).
    pos_width, crd_width : int
    pos_dtype, crd_dtype : numpy.dtype
    symbols : tuple of str
    slices : tuple of (Slice or None) or None
    is_permutation, is_block : bool
    """

    def __init__(self, levels, dim_rank: int, *, sym_count: int = 0, slices=None,
                 pos_width: int = 0, crd_width: int = 0, _where: Optional[Where] = None,
                 _dim_defs=None):
        levels = tuple((expr, kind) for expr, kind in levels)
        for name, width in (("pos_width", pos_width), ("crd_width", crd_width)):
            if width not in _DTYPES:
                raise EncodingError(f"{name} must be one of 0, 8, 16, 32, 64, got {width!r}")
        if not levels:
            raise EncodingError("an encoding has at least one level")
        _check_parts(levels, dim_rank, sym_count)
        check_levels(dim_rank, sym_count, levels, _where, _dim_defs)
        if slices is not None:
            if not isinstance(slices, (list, tuple)):
                raise EncodingError(f"slices must be a list with one Slice (or None) per "
                                    f"dimension, got {slices!r}")
            slices = tuple(None if s is None else Slice.checked(s, dim)
                           for dim, s in enumerate(slices))
            if len(slices) != dim_rank:
                raise EncodingError(f"expected one slice per dimension ({dim_rank}), got "
                                    f"{len(slices)}")
            slices = None if all(s is None for s in slices) else slices
        self.dim_rank, self.lvl_rank, self.sym_count = dim_rank, len(levels), sym_count
        self.levels = tuple(Level(kind, expr, *classify(expr)) for expr, kind in levels)
        self.level_types = tuple(kind for _, kind in levels)
        self.slices = slices
        self.pos_width, self.crd_width = pos_width, crd_width
        self.pos_dtype, self.crd_dtype = _DTYPES[pos_width], _DTYPES[crd_width]
        self.symbols = tuple(f"s{k}" for k in range(sym_count))
        self.inverse = inverse(dim_rank, levels)
        ids = [level.dim for level in self.levels]
        self.is_permutation = all(level.op == "id" for level in self.levels) and \
            sorted(ids) == list(range(dim_rank))
        self.lvl_to_dim = tuple(ids) if self.is_permutation else None
        self.block_shape = tuple(factor for _, _, factor in self.inverse)
        self.is_block = any(factor > 1 for factor in self.block_shape)

    @classmethod
    def parse(cls, text: str) -> "Encoding":
        """The encoding MLIR ``text`` writes (see the module docstring)."""
        if not isinstance(text, str):
            raise SparseTIRTypeError(f"Encoding.parse takes a str, got {type(text).__name__}")
        parsed = parse_encoding(text)
        slices = parsed.slices if any(s is not None for s in parsed.slices) else None
        return cls([(level.expr, level.type) for level in parsed.levels], len(parsed.dim_names),
                   sym_count=len(parsed.sym_names), slices=slices,
                   pos_width=parsed.widths["pos"], crd_width=parsed.widths["crd"],
                   _where=Where(parsed), _dim_defs=parsed.dim_defs)

    @classmethod
    def named(cls, name, rank: Optional[int] = None, block=None, *, pos_width: int = 0,
              crd_width: int = 0) -> "Encoding":
        """A common encoding by name (case does not matter): ``"dense"`` (``rank``, default 2),
        ``"sparse"`` (a compressed vector), ``"CSR"``, ``"CSC"``, ``"DCSR"``, ``"DCSC"``,
        ``"COO"`` (AoS; ``"COO_SOA"``; ``rank`` default 2), ``"CSF"`` (``rank``, default 3),
        ``"BSR"``/``"BSC"`` (``block=(rows, columns)``), ``"2:4"`` (alias ``"NV24"``). An
        ``Encoding`` is returned as is, and any other string is read as MLIR text, so every API
        that takes a format can pass it through here.

        Example
        -------
        >>> print(Encoding.named("COO", rank=3).map_text)
        (d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique), d2 : singleton)
        """
        if isinstance(name, Encoding):
            return name
        if not isinstance(name, str):
            raise SparseTIRTypeError(f"a format is an Encoding or a str, got {type(name).__name__}")
        key = name.strip().upper().replace("-", "_")
        make = _NAMED.get(key)
        if make is None:
            if "->" in name:
                return cls.parse(name).with_widths(pos_width or None, crd_width or None)
            raise SparseTIRValueError(f"unknown format name {name!r}: expected one of "
                                      f"{', '.join(_NAMES)} or MLIR encoding text")
        if (block is None) == (key in ("BSR", "BSC")):
            raise SparseTIRValueError(f"{name} takes block=(rows, columns)" if block is None
                                      else f"{name} takes no block (only BSR and BSC do)")
        rank = _rank(name, rank, key)
        return cls(make(rank, block and _block(block)), rank, pos_width=pos_width,
                   crd_width=crd_width)

    def with_widths(self, pos_width: Optional[int] = None, crd_width: Optional[int] = None) \
            -> "Encoding":
        """This encoding with other ``posWidth``/``crdWidth`` (None keeps one)."""
        return Encoding([(level.expr, level.type) for level in self.levels], self.dim_rank,
                        sym_count=self.sym_count, slices=self.slices,
                        pos_width=self.pos_width if pos_width is None else pos_width,
                        crd_width=self.crd_width if crd_width is None else crd_width)

    def without_slices(self) -> "Encoding":
        """This encoding with no dimension slices."""
        return Encoding([(level.expr, level.type) for level in self.levels], self.dim_rank,
                        sym_count=self.sym_count, pos_width=self.pos_width,
                        crd_width=self.crd_width)

    @property
    def map_text(self) -> str:
        """The map in MLIR's canonical text: ``(d0, d1) -> (d0 : dense, d1 : compressed)``."""
        dims = [f"d{k}" if self.slices is None or self.slices[k] is None else
                f"d{k} : {self.slices[k]}" for k in range(self.dim_rank)]
        symbols = f"[{', '.join(self.symbols)}]" if self.symbols else ""
        levels = ", ".join(f"{level.expr} : {level.type}" for level in self.levels)
        return f"{symbols}({', '.join(dims)}) -> ({levels})"

    def __str__(self) -> str:
        widths = "".join(f", {key} = {width}" for key, width in (
            ("posWidth", self.pos_width), ("crdWidth", self.crd_width)) if width)
        return f"#sparse_tensor.encoding<{{ map = {self.map_text}{widths} }}>"

    def __repr__(self) -> str:
        return f"Encoding.parse({str(self)!r})"

    def _key(self) -> tuple:
        return (self.dim_rank, self.sym_count, tuple((l.expr, l.type) for l in self.levels),
                self.slices, self.pos_width, self.crd_width)

    def __eq__(self, other) -> bool:
        return isinstance(other, Encoding) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def lvl_shape(self, dim_shape, symbols=None) -> tuple:
        """The level sizes of a tensor of ``dim_shape`` (a ``d floordiv c`` level has
        ``ceil(n / c)`` coordinates, ``d mod c`` has ``c``; a symbolic level one more than
        its value at the last coordinates, which needs ``symbols``)."""
        dim_shape = self._shape(dim_shape)
        syms = self._symbols(symbols)
        sizes = []
        for level in self.levels:
            if level.op == "id":
                sizes.append(dim_shape[level.dim])
            elif level.op == "floordiv":
                sizes.append(-(-dim_shape[level.dim] // level.factor))
            elif level.op == "mod":
                sizes.append(level.factor)
            else:
                sizes.append(self._symbolic_size(level, dim_shape, syms))
        return tuple(sizes)

    def _symbolic_size(self, level, dim_shape, syms) -> int:
        """One more than the greatest value of a symbolic level's expression over the
        shape; refused where it can be negative, divides by 0 or leaves int64."""
        where = f"level {self.levels.index(level)} ({level.expr}) of {self.map_text}"
        try:
            lo, hi = level.expr.bounds([max(size - 1, 0) for size in dim_shape], syms)
        except ValueError as err:
            raise SparseTIRValueError(f"{where}, symbols {tuple(syms)}: {err}") from None
        if lo < 0:
            raise SparseTIRValueError(f"{where} can be {lo} with symbols {tuple(syms)}: a "
                                      "level coordinate must not be negative")
        return hi + 1

    def to_levels(self, dim_coords, symbols=None) -> np.ndarray:
        """The level coordinates (int64, ``(lvl_rank, N)``) of dimension coordinates
        ``(dim_rank, N)``."""
        dims = _coordinates(dim_coords, self.dim_rank, "dim_coords", "dimension")
        syms = self._symbols(symbols)
        return np.stack([np.broadcast_to(level.expr.evaluate(dims, syms), dims.shape[1:])
                         for level in self.levels]).astype(np.int64, copy=False)

    def to_dims(self, lvl_coords) -> np.ndarray:
        """The dimension coordinates (int64, ``(dim_rank, N)``) of level coordinates."""
        lvls = _coordinates(lvl_coords, self.lvl_rank, "lvl_coords", "level")
        if not self.dim_rank:
            return np.zeros((0,) + lvls.shape[1:], np.int64)
        return np.stack([lvls[outer] if inner is None else lvls[outer] * factor + lvls[inner]
                         for outer, inner, factor in self.inverse])

    def _symbols(self, symbols) -> tuple:
        """The symbols' values, checked: one non-negative int per symbol."""
        if not self.sym_count:
            return ()
        if symbols is None or len(symbols) != self.sym_count:
            raise SparseTIRValueError(f"the map reads {self.sym_count} symbol(s) "
                                      f"({', '.join(self.symbols)}): pass symbols=(...) with "
                                      "one value each")
        return _naturals("symbols", symbols)

    def _shape(self, dim_shape) -> tuple:
        """``dim_shape`` as a tuple of ints, checked against the rank."""
        shape = _naturals("the shape", dim_shape)
        if len(shape) != self.dim_rank:
            raise SparseTIRValueError(f"expected a shape of {self.dim_rank} sizes for "
                                      f"{self.map_text}, got {tuple(dim_shape)}")
        return shape


def _naturals(what: str, values) -> tuple:
    """``values`` as a tuple of ints in [0, 2**63), else a SparseTIR error naming ``what``."""
    try:
        ints = tuple(operator.index(value) for value in values)
    except TypeError:
        raise SparseTIRTypeError(f"{what} must be integers, got {values!r}") from None
    if any(isinstance(value, (bool, np.bool_)) for value in values):
        raise SparseTIRTypeError(f"{what} must be integers, got {values!r}")
    if any(not 0 <= value < 2**63 for value in ints):
        raise SparseTIRValueError(f"{what} must be integers in [0, 2**63), got {ints}")
    return ints


def _check_parts(levels, dim_rank, sym_count) -> None:
    """The constructor's arguments have the right types, and the expressions read only the
    declared dimensions and symbols (SparseTIR errors instead of Python's)."""
    for what, count in (("dim_rank", dim_rank), ("sym_count", sym_count)):
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise SparseTIRTypeError(f"{what} must be a non-negative int, got {count!r}")
    for index, (expr, kind) in enumerate(levels):
        if not isinstance(expr, Affine) or not isinstance(kind, LevelType):
            raise SparseTIRTypeError(f"level {index}: expected (Affine, LevelType), got "
                                     f"({type(expr).__name__}, {type(kind).__name__})")
        for op, count, name in (("dim", dim_rank, "dimension"), ("sym", sym_count, "symbol")):
            outside = [k for k in expr.leaves(op) if not 0 <= k < count]
            if outside:
                raise EncodingError(f"level {index}: {name} {outside[0]} is not declared "
                                    f"(there are {count})")
        if any(value > 2**63 - 1 for value in expr.leaves("const")):
            raise EncodingError(f"level {index}: a constant of '{expr}' is 2**63 or more")


def _rank(name: str, rank, key: str) -> int:
    fixed = {"SPARSE": 1, "CSR": 2, "CSC": 2, "DCSR": 2, "DCSC": 2, "BSR": 2, "BSC": 2,
             "2:4": 2, "NV24": 2}
    default = {"DENSE": 2, "CSF": 3}.get(key, 2)
    if key in fixed:
        if rank not in (None, fixed[key]):
            raise SparseTIRValueError(f"{name} has rank {fixed[key]}, got rank={rank!r}")
        return fixed[key]
    rank = default if rank is None else rank
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
        raise SparseTIRValueError(f"rank must be a positive integer, got {rank!r}")
    return int(rank)


def _block(block) -> tuple:
    try:
        rows, cols = (operator.index(size) for size in block)
    except (TypeError, ValueError):
        raise SparseTIRValueError(f"block must be (rows, columns), got {block!r}") from None
    if rows < 1 or cols < 1:
        raise SparseTIRValueError(f"block sizes must be positive, got {block!r}")
    return rows, cols


_DENSE, _COMPRESSED = LevelType("dense"), LevelType("compressed")


def _levels(dims, kinds) -> list:
    """Levels storing dimensions ``dims`` as they are, with level types ``kinds``."""
    return [(Affine.dim(dim), kind) for dim, kind in zip(dims, kinds)]


def _coo(rank: int, soa: bool) -> list:
    """COO: ``compressed(nonunique)`` then singletons (AoS, or SoA with ``soa``)."""
    return _levels(range(rank), [LevelType("compressed", unique=rank == 1)] + [
        LevelType("singleton", unique=k == rank - 1, soa=soa) for k in range(1, rank)])


def _blocks(block: tuple, outer: int) -> list:
    """BSR (``outer`` 0) or BSC (``outer`` 1): a dense level of block rows (columns), a
    compressed level of blocks, the block's elements row-major."""
    def part(op: str, dim: int) -> Affine:
        return Affine.binary(op, Affine.dim(dim), Affine.const(block[dim]))
    return [(part("floordiv", outer), _DENSE), (part("floordiv", 1 - outer), _COMPRESSED),
            (part("mod", 0), _DENSE), (part("mod", 1), _DENSE)]


def _two_four() -> list:
    """NVIDIA's 2:4: two stored values in each group of four columns of a row."""
    def group(op: str) -> Affine:
        return Affine.binary(op, Affine.dim(1), Affine.const(4))
    return [(Affine.dim(0), _DENSE), (group("floordiv"), _DENSE),
            (group("mod"), LevelType("structured", n=2, m=4))]


# name -> (rank, block) -> levels
_NAMED = {
    "DENSE": lambda rank, _: _levels(range(rank), [_DENSE] * rank),
    "SPARSE": lambda rank, _: _levels([0], [_COMPRESSED]),
    "CSR": lambda rank, _: _levels([0, 1], [_DENSE, _COMPRESSED]),
    "CSC": lambda rank, _: _levels([1, 0], [_DENSE, _COMPRESSED]),
    "DCSR": lambda rank, _: _levels([0, 1], [_COMPRESSED] * 2),
    "DCSC": lambda rank, _: _levels([1, 0], [_COMPRESSED] * 2),
    "COO": lambda rank, _: _coo(rank, False),
    "COO_SOA": lambda rank, _: _coo(rank, True),
    "CSF": lambda rank, _: _levels(range(rank), [_COMPRESSED] * rank),
    "BSR": lambda rank, block: _blocks(block, 0),
    "BSC": lambda rank, block: _blocks(block, 1),
    "2:4": lambda rank, _: _two_four(),
}
_NAMED["NV24"] = _NAMED["2:4"]
_NAMES = ("dense", "sparse", "CSR", "CSC", "DCSR", "DCSC", "COO", "COO_SOA", "CSF", "BSR", "BSC",
          "2:4")

__all__ = ["Encoding", "EncodingError", "LevelType", "Slice"]


def _coordinates(coords, rank: int, name: str, what: str) -> np.ndarray:
    """``coords`` as int64, checked to hold one row per dimension or level (``(rank, N)``)."""
    array = np.asarray(coords, np.int64)
    if array.ndim < 1 or array.shape[0] != rank:
        raise SparseTIRValueError(f"{name} must have one row per {what} ({rank}, then the "
                                  f"coordinates), got shape {array.shape}")
    return array
