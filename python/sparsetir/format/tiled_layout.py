"""XLA's tiled layouts of dense arrays: ``TiledLayout.parse("F32[3,5]{1,0:T(2,2)}")``.

A layout says where each element of a dense array lies in memory, as XLA defines it
(``xla/tiled_layout.md``):

1. ``minor_to_major`` orders the dimensions, most minor first: ``{1,0}`` is row-major,
   ``{0,1}`` column-major. The array is seen in its *physical* order, most major first.
2. Each tile ``T(t_k, ..., t_1)`` in turn applies to the most minor ``k`` dimensions of what
   the step before made. An entry ``*`` first combines that dimension with the next more minor
   one (bounds multiplied, indices row-major). Then every tiled dimension ``d`` becomes
   ``ceil(d / t)`` tiles, and the tile sizes become new most-minor dimensions: index ``e``
   goes to tile ``e // t`` and to ``e % t`` within the tile. The bounds grow to whole tiles:
   that is the padding, whose elements may hold anything and never stand for an element.
3. The linear index is the row-major index in the final (tiled) shape.

So in ``F32[3,5]{1,0:T(2,2)}`` element (2, 3) has tile index (1, 1) and index (0, 1) in its
tile, tiled index (1, 1, 0, 1) in the tiled shape (2, 3, 2, 2): linear index 17 of 24. A
second tile may rearrange a tile's elements (``(8,128)(2,1)``, TPU's 16-bit packing) or group
tiles, and ``F32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}`` is laid out as
``F32[112,110]{1,0:T(2,3)}``.

Every method is vectorised numpy; :meth:`TiledLayout.linear_expr` gives the same index as an
expression of anything with ``+ * // %`` (TIR expressions included: ``tiled_layout_access``
reads a kernel's dense operand through it).

Example
-------
>>> layout = TiledLayout.parse("F32[3,5]{1,0:T(2,2)}")
>>> layout.tiled_index((2, 3)), layout.tiled_shape(), layout.linear_index((2, 3))
((1, 1, 0, 1), (2, 3, 2, 2), 17)
>>> layout.physical_size(), str(layout)
(24, 'f32[3,5]{1,0:T(2,2)}')
>>> flat = layout.to_physical(np.arange(15.0, dtype=np.float32).reshape(3, 5))
>>> bool((layout.from_physical(flat) == np.arange(15.0).reshape(3, 5)).all())
True
"""

from __future__ import annotations

import dataclasses
import math
import operator

import numpy as np

from ..errors import SparseTIRTypeError
from .checks import MAX_ELEMENTS
from .tiled_layout_parse import (COMBINE, ELEMENT_TYPES, LayoutText, TiledLayoutError,
                                 format_layout, parse_layout)

__all__ = ["COMBINE", "TiledLayout", "TiledLayoutError"]

MAX_TILE = 2**62
"""The largest tile size: kernels count tiles in int64 (``(d + t - 1) // t``), which a size
near 2**63 wraps; up to here, the call refuses bounds whose products leave int64."""


@dataclasses.dataclass(frozen=True)
class TiledLayout:
    """A dense array's layout: dimension order, tiles, and optionally its element type and shape.

    Parameters
    ----------
    minor_to_major : tuple of int
        A permutation of ``range(rank)``, the most minor dimension first.
    tiles : tuple of tuple of int
        The tiles, applied in order; an entry ``COMBINE`` (-1, written ``*``) combines the
        dimension with the next more minor one.
    element_type : str, optional
        XLA's element type (``"f32"``), with ``shape``: the prefix of ``F32[3,5]{...}``.
    shape : tuple of int, optional
        The array's bounds; methods taking a ``shape`` use this one when given none.

    Example
    -------
    >>> TiledLayout((1, 0), ((8, 128), (2, 1)))
    TiledLayout('{1,0:T(8,128)(2,1)}')
    """

    minor_to_major: tuple
    tiles: tuple = ()
    element_type: str | None = None
    shape: tuple | None = None

    def __post_init__(self):
        for name in ("minor_to_major", "tiles"):
            if not isinstance(getattr(self, name), (tuple, list)):
                raise SparseTIRTypeError(f"{name} must be a tuple, got "
                                         f"{getattr(self, name)!r}")
        if not all(isinstance(tile, (tuple, list)) for tile in self.tiles):
            raise SparseTIRTypeError(f"tiles must be a tuple of tiles (tuples of sizes), got "
                                     f"{self.tiles!r}")
        rank = len(self.minor_to_major)
        set_field = object.__setattr__.__get__(self)
        set_field("minor_to_major", tuple(_integer("minor_to_major", d, 0, "minor_to_major")
                                          for d in self.minor_to_major))
        if sorted(self.minor_to_major) != list(range(rank)):
            raise TiledLayoutError(f"minor_to_major {self.minor_to_major} is not a permutation "
                                   f"of the {rank} dimensions 0..{rank - 1}", "minor_to_major")
        set_field("tiles", tuple(tuple(tile) for tile in self.tiles))
        tiled_rank = rank
        for number, tile in enumerate(self.tiles):
            tiled_rank = _check_tile(number, tile, tiled_rank)
        if (self.element_type is None) != (self.shape is None):
            raise TiledLayoutError("element_type and shape are given together (the prefix "
                                   "'F32[3,5]') or not at all", "shape")
        if self.element_type is not None:
            set_field("element_type", str(self.element_type).lower())
            if self.element_type not in ELEMENT_TYPES:
                raise TiledLayoutError(f"element_type {self.element_type!r} is not one of "
                                       f"XLA's: {', '.join(ELEMENT_TYPES)}", "shape")
            set_field("shape", _shape(self.shape, rank, "shape"))

    @classmethod
    def parse(cls, text: str) -> TiledLayout:
        """The layout XLA writes as ``text``: ``"{1,0:T(2,2)}"`` or ``"F32[3,5]{1,0:T(2,2)}"``.

        Example
        -------
        >>> TiledLayout.parse("{0,1}").minor_to_major      # column-major
        (0, 1)
        """
        parts = parse_layout(text)
        try:
            return cls(parts.minor_to_major, parts.tiles, parts.element_type, parts.shape)
        except TiledLayoutError as err:
            column = parts.columns.get(err.part, 1)
            raise TiledLayoutError(f"column {column} of {text!r}: {err}", err.part) from None

    def __str__(self) -> str:
        return format_layout(LayoutText(self.element_type, self.shape, self.minor_to_major,
                                        self.tiles))

    def __repr__(self) -> str:
        return f"TiledLayout({str(self)!r})"

    @property
    def dtype(self) -> np.dtype | None:
        """The numpy dtype of the element type (None: no element type, or none in numpy)."""
        name = ELEMENT_TYPES.get(self.element_type)
        return None if name is None else np.dtype(name)

    def tiled_shape(self, shape=None) -> tuple:
        """The bounds of the final tiled array, most major first (padding included)."""
        return self._steps(self._shape(shape), None)[0]

    def tiled_index(self, index, shape=None) -> tuple:
        """The index of element ``index`` in :meth:`tiled_shape`: ints, or arrays when
        ``index`` holds integer arrays (broadcast together, as ``np.ravel_multi_index``)."""
        shape = self._shape(shape)
        return self._steps(shape, _index(index, shape))[1]

    def linear_index(self, index, shape=None):
        """The position of element ``index`` in the flat physical array (an int, or an array
        for arrays of indices).

        Example
        -------
        >>> rows, cols = np.indices((4, 8))
        >>> TiledLayout.parse("{1,0:T(2,4)(2,1)}").linear_index((rows, cols), (4, 8))[:2]
        array([[ 0,  2,  4,  6,  8, 10, 12, 14],
               [ 1,  3,  5,  7,  9, 11, 13, 15]])
        """
        shape = self._shape(shape)
        entries = _index(index, shape)
        if not all(isinstance(e, int) for e in entries):
            self._check_physical(shape, _INT64_LIMIT, "int64 linear indices")
        return self.linear_expr(entries, shape)

    def linear_expr(self, index, shape):
        """:meth:`linear_index` as an expression of ``index`` without checking it: works on
        anything with ``+ * // %`` (TIR expressions: floor division and modulo), with
        ``shape`` made of ints or expressions."""
        tiled_shape, tiled = self._steps(tuple(shape), tuple(index))
        linear = 0
        for bound, entry in zip(tiled_shape, tiled):
            linear = linear * bound + entry
        return linear

    def physical_size(self, shape=None) -> int:
        """The number of elements of the flat physical array, padding included."""
        return math.prod(self.tiled_shape(shape))

    def physical_size_expr(self, shape):
        """:meth:`physical_size` as an expression of the bounds ``shape`` (ints or TIR
        expressions), unchecked, as :meth:`linear_expr`."""
        size = 1
        for bound in self._steps(tuple(shape), None)[0]:
            size = size * bound
        return size

    def to_physical(self, array, fill=0) -> np.ndarray:
        """``array`` laid out: a flat array of :meth:`physical_size` elements of its dtype,
        padding set to ``fill``. The array's dtype must be the layout's element type."""
        array = self._array(array)
        positions = self._positions(array.shape)
        size = self.physical_size(array.shape)
        flat = np.full(size, _fill_value(fill, array.dtype), dtype=array.dtype)
        flat[positions.ravel()] = array.ravel()
        return flat

    def from_physical(self, flat, shape=None) -> np.ndarray:
        """The array of bounds ``shape`` whose layout is the flat array ``flat``."""
        shape = self._shape(shape)
        flat = np.asarray(flat)
        size = self.physical_size(shape)
        if flat.shape != (size,):
            raise TiledLayoutError(f"flat must be a 1-D array of the {size} physical elements "
                                   f"of {shape} in {self}, got shape {flat.shape}")
        self._check_dtype(flat, "flat")
        return flat[self._positions(shape)]

    def _check_physical(self, shape: tuple, limit: int, what: str) -> None:
        """Refuse a physical array of ``limit`` elements or more (padding included)."""
        size = self.physical_size(shape)
        if size >= limit:
            raise TiledLayoutError(f"{self} lays out {shape} in {size} physical elements "
                                   f"(padding included), past {what} ({limit - 1} at most)")

    def _positions(self, shape: tuple) -> np.ndarray:
        """The linear index of every element of an array of bounds ``shape``."""
        self._check_physical(shape, MAX_ELEMENTS, "what an array may hold")
        grid = np.indices(shape, dtype=np.int64, sparse=True)
        return np.broadcast_to(self.linear_expr(grid, shape), shape)

    def _array(self, array) -> np.ndarray:
        if not isinstance(array, np.ndarray):
            raise SparseTIRTypeError(f"array must be a numpy array, got {type(array).__name__}")
        self._shape(array.shape)
        self._check_dtype(array, "array")
        return array

    def _check_dtype(self, array: np.ndarray, name: str):
        if self.dtype is not None and array.dtype != self.dtype:
            raise SparseTIRTypeError(f"{name} has dtype {array.dtype}, the layout {self} holds "
                                     f"{self.dtype} (nothing is cast)")

    def _shape(self, shape) -> tuple:
        """``shape``, checked against the rank, or the layout's own shape."""
        if shape is None:
            if self.shape is None:
                raise TiledLayoutError(f"the layout {self} has no shape: pass shape")
            return self.shape
        shape = _shape(shape, len(self.minor_to_major), "shape")
        if self.shape is not None and shape != self.shape:
            raise TiledLayoutError(f"shape {shape} is not the layout's own {self.shape}")
        if math.prod(shape) >= MAX_ELEMENTS:
            raise TiledLayoutError(f"shape {shape} has {math.prod(shape)} elements, at most "
                                   f"{MAX_ELEMENTS - 1} are supported")
        return shape

    def _steps(self, shape: tuple, index):
        """The tiled bounds and (when ``index`` is not None) the tiled index: the physical
        order, then each tile in turn."""
        order = self.minor_to_major[::-1]
        shape = tuple(shape[d] for d in order)
        index = None if index is None else tuple(index[d] for d in order)
        for tile in self.tiles:
            shape, index = _apply_tile(tile, shape, index)
        return shape, index


_INT64_LIMIT = 2**63
"""Linear indices of arrays of indices are int64: a physical array must have fewer elements."""


def _apply_tile(tile: tuple, shape: tuple, index):
    """One tile on the most minor ``len(tile)`` dimensions of ``shape`` (and ``index``)."""
    keep = len(shape) - len(tile)
    counts, sizes, outer, inner = [], [], [], []
    bound = entry = None
    for t, d, e in zip(tile, shape[keep:], (index or shape)[keep:]):
        if bound is not None:                     # the dimension before was combined into this
            bound, entry = bound * d, entry * d + e
        else:
            bound, entry = d, e
        if t == COMBINE:
            continue
        counts.append((bound + t - 1) // t)
        sizes.append(t)
        if index is not None:
            outer.append(entry // t)
            inner.append(entry % t)
        bound = entry = None
    new_shape = tuple(shape[:keep]) + tuple(counts) + tuple(sizes)
    return new_shape, None if index is None else tuple(index[:keep]) + tuple(outer + inner)


def _fill_value(fill, dtype):
    """``fill`` as a value of ``dtype``, refused by name where it is not a number, or not an
    integer in range for an integer dtype (numpy writes NaN into an int array as INT_MIN,
    and raises a bare ValueError on a string)."""
    given = np.asarray(fill)
    if given.ndim or given.dtype.kind not in "biufc":
        raise SparseTIRTypeError(f"fill must be a number, got {fill!r}")
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        if given.dtype.kind == "c" or not np.isfinite(given) or given != np.floor(given) \
                or not info.min <= int(given) <= info.max:       # int(): exact, 2**63 too
            raise SparseTIRTypeError(f"fill {fill!r} is not a value of the array's dtype "
                                     f"{np.dtype(dtype)}")
    return given.astype(dtype)


def _check_tile(number: int, tile: tuple, rank: int) -> int:
    """The rank after tile ``number``, which must fit the ``rank`` it applies to."""
    part = ("tile", number)
    sizes = [_integer(f"a size of tile {number}", t, 1, part, combine=True, high=MAX_TILE)
             for t in tile]
    if not sizes or len(sizes) > rank:
        raise TiledLayoutError(f"tile {number} has {len(sizes)} sizes; it applies to the most "
                               f"minor dimensions of {rank}, so between 1 and {rank} sizes", part)
    if sizes[-1] == COMBINE:
        raise TiledLayoutError(f"tile {number} ends in '*': the most minor dimension has no "
                               "more minor one to combine with", part)
    return rank - len(sizes) + 2 * sum(t != COMBINE for t in sizes)


def _integer(name: str, value, low: int, part, combine: bool = False, high=None) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise SparseTIRTypeError(f"{name} must be an integer, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise SparseTIRTypeError(f"{name} must be an integer, got {value!r}") from None
    if number < low and not (combine and number == COMBINE):
        raise TiledLayoutError(f"{name} must be at least {low}"
                               f"{' (or -1 for *)' if combine else ''}, got {number}", part)
    if high is not None and number > high:
        raise TiledLayoutError(f"{name} must be at most {high}, got {number}", part)
    return number


def _shape(shape, rank: int, name: str) -> tuple:
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__"):
        raise SparseTIRTypeError(f"{name} must be a sequence of {rank} bounds, got {shape!r}")
    shape = tuple(_integer(f"{name} bound", d, 0, "shape") for d in shape)
    if len(shape) != rank:
        raise TiledLayoutError(f"{name} {shape} has {len(shape)} dimensions, the layout "
                               f"orders {rank}", "shape")
    return shape


def _index(index, shape: tuple) -> tuple:
    """``index`` as a tuple of ints or of broadcast int64 arrays, each inside its bound."""
    if isinstance(index, np.ndarray) and index.ndim == 0 or not hasattr(index, "__len__"):
        raise SparseTIRTypeError(f"index must hold one entry per dimension, got {index!r}")
    if len(index) != len(shape):
        raise TiledLayoutError(f"index has {len(index)} entries, the shape {shape} "
                               f"{len(shape)} dimensions")
    if all(isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in index):
        entries = tuple(int(e) for e in index)
    else:
        arrays = [np.asarray(e) for e in index]
        for position, array in enumerate(arrays):
            if array.dtype.kind not in "iu":
                raise SparseTIRTypeError(f"index entry {position} must hold integers, got "
                                         f"dtype {array.dtype}")
        entries = tuple(np.broadcast_arrays(*[a.astype(np.int64) for a in arrays]))
    for position, (entry, bound) in enumerate(zip(entries, shape)):
        if np.any(np.less(entry, 0)) or np.any(np.greater_equal(entry, bound)):
            raise TiledLayoutError(f"index entry {position} is outside [0, {bound})")
    return entries
