"""``SparseTensor``: a tensor stored as MLIR's sparse_tensor dialect stores it.

For each level ``l`` of its ``Encoding``: ``positions(l)`` and ``coordinates(l)`` (numpy arrays
of exactly the width ``posWidth``/``crdWidth`` give: ``int8`` .. ``int64``, width 0 meaning
``int64``; ``None`` where the level stores none), and one ``values`` array. Made from a dense
array, a scipy matrix, coordinates, or the arrays themselves (MLIR's ``assemble``, checked), and
converted to any other encoding; all vectorised. Stored blocks keep their explicit zeros, as MLIR
does (``nse`` counts them), and a block that reaches past the shape is stored whole (its
padding is not part of the tensor). A width too small for the data raises instead of wrapping.

For a slice encoding the storage is the underlying tensor's (``base_shape``) and the tensor is
the slice of it (``dim_shape``, what ``to_dense`` and ``to_coo`` give); converting to a slice
encoding takes the tensor as the underlying one.

The storage is private: a tensor copies the arrays it is made from once (changing the caller's
arrays afterwards changes nothing), and everything computed from it (conversions, its walk,
kernels bound by ``declare`` and ``sparsetir.algebra``, pickles) reads that copy. The arrays it
hands out (``values``, ``positions``, ``coordinates``, ``coordinates_buffer``, ``lvl_coords``)
are read-only copies of it, made at first use and kept, which numpy will not make writable:
writing one through an alias that ignores the flag (``torch.from_numpy``, a raw pointer)
changes only that copy, never the tensor or anything computed from it. (``storage()``, and the
arguments ``declare``'s kernels are given, are the private arrays themselves: never write them.)

Example
-------
>>> import numpy as np
>>> from sparsetir.format import Encoding
>>> x = np.array([[1, 0, 2, 0, 0, 0, 0, 0], [0] * 8, [0] * 8, [0, 0, 3, 4, 0, 5, 0, 0]])
>>> t = SparseTensor.from_dense(x, Encoding.named("DCSR", crd_width=8))
>>> t.positions(0).tolist(), t.coordinates(0).tolist(), t.coordinates(1).dtype
([0, 2], [0, 3], dtype('int8'))
>>> bool((t.convert(Encoding.named("BSR", block=(2, 4))).to_dense() == x).all())
True
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse

from ..errors import SparseTIRTypeError, SparseTIRValueError
from .checks import check_size
from .encoding import Encoding
from .frozen import frozen
from .storage_levels import assemble, coo_region_end, traverse


class SparseTensor:
    """A tensor in MLIR's storage (see the module docstring); made by the class methods.

    Attributes
    ----------
    encoding : Encoding
    dim_shape : tuple of int
        The tensor's shape (a slice encoding's slice).
    base_shape : tuple of int
        The stored tensor's shape (``dim_shape`` unless the encoding has slices).
    lvl_shape : tuple of int
        The level sizes of the stored tensor.
    values : numpy.ndarray (a read-only copy of the private storage that cannot be made
        writable, as are the arrays of ``positions``, ``coordinates``, ``coordinates_buffer``
        and ``lvl_coords``; see the module docstring)
    nse : int
        The number of stored values (``values.size``).
    dtype : numpy.dtype
        The values' dtype.
    symbols : tuple of int
        The values of the map's symbols.
    """

    def __init__(self, encoding: Encoding, shape, positions, coordinates, values, symbols):
        """Use the class methods; this keeps copies of checked arrays as they are (each
        copied once, into memory numpy will not make writable: ``format.frozen``)."""
        self.encoding, self.symbols = encoding, tuple(symbols)
        self.base_shape = encoding._shape(shape)          # pylint: disable=protected-access
        self.lvl_shape = encoding.lvl_shape(self.base_shape, symbols or None)
        self.dim_shape = self.base_shape if encoding.slices is None else tuple(
            piece.resolved(size)[1] if piece is not None else size
            for piece, size in zip(encoding.slices, self.base_shape))
        self._positions = [frozen(array) for array in positions]
        self._coordinates = [frozen(array) for array in coordinates]
        self._values = frozen(values)
        self.nse, self.dtype = int(self._values.size), self._values.dtype
        self._walk = None
        self._public = {}         # the read-only copies handed out, by array

    @property
    def values(self) -> np.ndarray:
        """The stored values (a read-only copy: see the module docstring)."""
        return self._handed_out("values", self._values)

    def __setattr__(self, name: str, value) -> None:
        if name in _FIXED and (name in self.__dict__ or name == "values"):
            raise AttributeError(f"SparseTensor.{name} cannot be changed: what was computed from "
                                 "the tensor keeps its arrays; make a new tensor "
                                 "(SparseTensor.from_arrays)")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if name in _FIXED:
            raise AttributeError(f"SparseTensor.{name} cannot be deleted")
        super().__delattr__(name)

    def __reduce__(self):
        """Copies and pickles are assembled again from the arrays (checked, as
        ``from_arrays`` checks them), so an unpickled tensor's arrays are frozen too."""
        return SparseTensor.from_arrays, (self.encoding, self.base_shape,
                                          list(self._positions), list(self._coordinates),
                                          self._values, self.symbols or None)

    # ---- constructors -------------------------------------------------------------------

    @classmethod
    def from_coo(cls, coords, values, shape, encoding, symbols=None) -> "SparseTensor":
        """The tensor of ``shape`` whose entries are at ``coords`` (integers, ``(rank, N)``)
        with ``values`` (duplicates summed; explicit zeros kept, except that a structured
        level stores no zero). For a slice encoding, ``shape`` and ``coords`` are the
        underlying tensor's.

        Example
        -------
        >>> t = SparseTensor.from_coo([[1, 0], [2, 2]], [5., 7.], (2, 3), "COO")
        >>> t.coordinates(0).tolist(), t.coordinates(1).tolist(), t.values.tolist()
        ([0, 1], [2, 2], [7.0, 5.0])
        """
        enc = Encoding.named(encoding)
        shape = enc._shape(shape)                          # pylint: disable=protected-access
        coords = _index_array("coords", coords, 2)
        if coords.shape[0] != enc.dim_rank:
            raise SparseTIRValueError(f"coords must have {enc.dim_rank} rows (one per dimension),"
                                      f" got shape {coords.shape}")
        values = _values(values, coords.shape[1])
        for dim, (row, size) in enumerate(zip(coords, shape)):
            bad = np.flatnonzero((row < 0) | (row >= size))
            if bad.size:
                raise SparseTIRValueError(f"coords[{dim}, {bad[0]}] = {row[bad[0]]} is out of "
                                          f"range [0, {size})")
        symbols = enc._symbols(symbols)                    # pylint: disable=protected-access
        lvl_shape = enc.lvl_shape(shape, symbols or None)
        lvl = enc.to_levels(coords, symbols or None)
        if enc.level_types[-1].kind == "structured":
            keep = values != 0
            lvl, values = lvl[:, keep], values[keep]
        lvl, values = _sorted_unique(lvl, values, lvl_shape)
        positions, coordinates, stored = assemble(enc, lvl_shape, lvl, values)
        positions = [_fit(a, enc.pos_dtype, f"positions of level {l}", "posWidth")
                     for l, a in enumerate(positions)]
        coordinates = [_fit(a, enc.crd_dtype, f"coordinates of level {l}", "crdWidth")
                       for l, a in enumerate(coordinates)]
        return cls(enc, shape, positions, coordinates, stored, symbols)

    @classmethod
    def from_dense(cls, array, encoding, symbols=None) -> "SparseTensor":
        """The nonzeros of ``array`` in ``encoding`` (a slice encoding stores all of ``array``
        and is its slice)."""
        array = np.asarray(array)
        if not _numeric(array.dtype):
            raise SparseTIRTypeError(f"array must hold numbers, got dtype {array.dtype}")
        coords = np.stack(np.nonzero(array)) if array.ndim else np.zeros((0, 0), np.int64)
        return cls.from_coo(coords, array[tuple(coords)], array.shape, encoding, symbols)

    @classmethod
    def from_scipy(cls, matrix, encoding) -> "SparseTensor":
        """The stored entries of scipy sparse ``matrix`` (duplicates summed, explicit zeros
        kept) in ``encoding``."""
        if not scipy.sparse.issparse(matrix):
            raise SparseTIRTypeError(f"matrix must be a scipy sparse matrix, got "
                                     f"{type(matrix).__name__}")
        coo = matrix.tocoo()
        coords = getattr(coo, "coords", None) or (coo.row, coo.col)     # 1-D arrays: coords
        return cls.from_coo(np.stack(coords), coo.data, coo.shape, encoding)

    @classmethod
    def from_arrays(cls, encoding, shape, positions, coordinates, values,
                    symbols=None) -> "SparseTensor":
        """MLIR's ``assemble``: a tensor over the given arrays, checked (positions that rise and
        stay in range, coordinates in range and ordered where the level is, one value per
        stored position). ``positions`` and ``coordinates`` have one entry per level, None where
        the level stores none; integer arrays are converted to the widths' dtypes when every
        value fits (else refused).

        Example
        -------
        >>> t = SparseTensor.from_arrays("CSR", (2, 3), [None, [0, 2, 3]], [None, [0, 2, 1]],
        ...                              np.float32([1, 2, 3]))
        >>> t.to_dense().tolist()
        [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]
        """
        enc = Encoding.named(encoding)
        symbols = enc._symbols(symbols)                    # pylint: disable=protected-access
        arrays = {}
        for what, given, width, wanted in (("positions", positions, "posWidth", "has_positions"),
                                           ("coordinates", coordinates, "crdWidth",
                                            "has_coordinates")):
            if not isinstance(given, (list, tuple)):
                raise SparseTIRTypeError(f"{what} must be a list with one entry per level "
                                         f"(None where a level has none), got "
                                         f"{type(given).__name__}")
            if len(given) != enc.lvl_rank:
                raise SparseTIRValueError(f"{what} needs one entry per level ({enc.lvl_rank}), "
                                          f"got {len(given)}")
            dtype = enc.pos_dtype if what == "positions" else enc.crd_dtype
            arrays[what] = []
            for level, (array, kind) in enumerate(zip(given, enc.level_types)):
                name = f"{what}[{level}]"
                if (array is not None) != getattr(kind, wanted):
                    raise SparseTIRValueError(f"{name}: a {kind} level stores "
                                              f"{'' if getattr(kind, wanted) else 'no '}{what}")
                arrays[what].append(None if array is None else _fit(
                    _index_array(name, array, 1, as_int64=False), dtype, name, width))
        tensor = cls(enc, shape, arrays["positions"], arrays["coordinates"],
                     _values(values, None), symbols)      # each array copied once, there
        lvl, slots = tensor._walked()                      # checks the arrays
        if enc.is_block:
            outside = (enc.to_dims(lvl) >= np.array(tensor.base_shape)[:, None]).any(axis=0)
            if (tensor._values[slots][outside] != 0).any():
                raise SparseTIRValueError("values: a stored block holds a nonzero past the "
                                          f"tensor's shape {tensor.base_shape}")
        return tensor

    def convert(self, encoding, symbols=None) -> "SparseTensor":
        """This tensor in ``encoding`` (its stored entries moved, explicit zeros kept except
        in a structured level); a symbol map takes ``symbols`` (default: this tensor's)."""
        coords, values = self.to_coo()
        target = Encoding.named(encoding)
        if symbols is None and target.sym_count:
            symbols = self.symbols or None
        return SparseTensor.from_coo(coords, values, self.dim_shape, target, symbols)

    # ---- accessors ----------------------------------------------------------------------

    def positions(self, level: int):
        """Level ``level``'s positions (``posWidth``'s dtype), None where it stores none;
        ``loose_compressed`` positions are ``(lo, hi)`` pairs, one per parent position."""
        level = self._level(level)
        return self._handed_out(f"positions{level}", self._positions[level])

    def coordinates(self, level: int):
        """Level ``level``'s own coordinates (``crdWidth``'s dtype), None for a dense level."""
        level = self._level(level)
        return self._handed_out(f"coordinates{level}", self._coordinates[level])

    def coordinates_buffer(self, level: int):
        """The buffer level ``level``'s coordinates live in: for the levels of an AoS COO region
        (``compressed(nonunique)`` and the singletons after it that are not ``soa``) MLIR's one
        interleaved buffer ``[c_l0, c_l1, ..., c_l0, c_l1, ...]``, else ``coordinates(level)``."""
        level = self._level(level)
        region = self._aos_region(level)
        if region is None:
            return self.coordinates(level)
        return frozen(np.stack([self._coordinates[l] for l in region], 1).ravel())

    def lvl_coords(self) -> np.ndarray:
        """Every stored value's level coordinates (int64, ``(lvl_rank, nse)`` for storage
        reached from the root), in the order of ``values``."""
        return self._handed_out("lvl_coords", self._walked()[0])

    def to_coo(self) -> tuple:
        """``(coords, values)``: the tensor's entries (int64 ``(rank, K)``, in the order of
        ``values``; for a slice encoding only those inside the slice, in its coordinates)."""
        coords, values = self._stored_entries()
        if self.encoding.slices is None:
            return coords, values
        coords, inside, _ = slice_window(coords, self.encoding.slices, self.base_shape)
        return coords, values[inside]

    def _stored_entries(self) -> tuple:
        """``(coords, values)`` of the stored tensor (``base_shape``), in the order of
        ``values``, without the padding of blocks that reach past the shape."""
        lvl, slots = self._walked()
        coords, values = self.encoding.to_dims(lvl), self._values[slots]
        if self.encoding.is_block:
            inside = (coords < np.array(self.base_shape)[:, None]).all(axis=0)
            if not inside.all():
                coords, values = coords[:, inside], values[inside]
        return coords, values

    def to_dense(self) -> np.ndarray:
        """The tensor as a dense numpy array (repeated coordinates summed)."""
        check_size(f"to_dense of shape {self.dim_shape}", math.prod(self.dim_shape))
        dense = np.zeros(self.dim_shape, self.dtype)
        coords, values = self.to_coo()
        np.add.at(dense, tuple(coords), values)
        return dense

    def to_scipy(self) -> scipy.sparse.csr_matrix:
        """A 2-D tensor as a scipy CSR matrix of its stored entries (explicit zeros kept)."""
        if len(self.dim_shape) != 2:
            raise SparseTIRValueError(f"to_scipy needs a 2-D tensor, this one has shape "
                                      f"{self.dim_shape}")
        coords, values = self.to_coo()
        if values.dtype.name in ("float16", "bfloat16"):
            raise SparseTIRTypeError(f"scipy.sparse holds no {values.dtype} values: convert "
                                     "them first (SparseTensor.from_arrays with "
                                     "values.astype(np.float32))")
        return scipy.sparse.coo_matrix((values, (coords[0], coords[1])),
                                       shape=self.dim_shape).tocsr()

    def storage_text(self) -> str:
        """The storage, laid out as MLIR's ``sparse_tensor.print`` lays it out: ``nse``, the
        dimension and level sizes, then ``pos[l]``/``crd[l]`` of each level that has them
        (for an AoS COO region, MLIR's one interleaved buffer as ``crd`` of its first level and
        nothing for the others), and the values.

        Example
        -------
        >>> print(SparseTensor.from_dense(np.eye(2, dtype=np.float32), "CSR").storage_text())
        nse = 2
        dim = ( 2, 2 )
        lvl = ( 2, 2 )
        pos[1] : ( 0, 1, 2 )
        crd[1] : ( 0, 1 )
        values : ( 1, 1 )
        """
        def row(array) -> str:
            shown = [format(value, "g") if isinstance(value, float) else str(value)
                     for value in array.tolist()]
            return f"( {', '.join(shown)} )"
        lines = [f"nse = {self.nse}", f"dim = {row(np.array(self.dim_shape))}",
                 f"lvl = {row(np.array(self.lvl_shape))}"]
        for level in range(self.encoding.lvl_rank):
            region = self._aos_region(level)
            crd = self._coordinates[level] if region is None else \
                self.coordinates_buffer(level) if region[0] == level else None
            for key, array in (("pos", self._positions[level]), ("crd", crd)):
                if array is not None:
                    lines.append(f"{key}[{level}] : {row(array)}")
        lines.append(f"values : {row(self._values)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"SparseTensor(dim_shape={self.dim_shape}, nse={self.nse}, "
                f"encoding={self.encoding.map_text!r})")

    # ---- helpers ------------------------------------------------------------------------

    def _level(self, level: int) -> int:
        if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or \
                not 0 <= level < self.encoding.lvl_rank:
            raise SparseTIRValueError(f"level must be in [0, {self.encoding.lvl_rank}), got "
                                      f"{level!r}")
        return int(level)

    def _aos_region(self, level: int):
        """The levels sharing level ``level``'s AoS buffer, or None when it has its own."""
        types = self.encoding.level_types
        for start, kind in enumerate(types):
            if kind.has_positions:
                region = [l for l in range(start, coo_region_end(types, start) + 1)
                          if not types[l].soa]
                if len(region) > 1 and level in region:
                    return region
        return None

    def _handed_out(self, name: str, array):
        """The read-only copy of the private ``array`` handed to users as ``name`` (made once;
        None stays None)."""
        if array is not None and name not in self._public:
            self._public[name] = frozen(array)
        return self._public.get(name)

    def storage(self) -> tuple:
        """``(positions, coordinates, values)``: the private arrays themselves (lists with
        one entry per level, None where a level stores none), for binding to kernels without
        a copy. Never write them, nor hand them to users (``positions`` and the other
        accessors give copies)."""
        return list(self._positions), list(self._coordinates), self._values

    def _walked(self) -> tuple:
        """``(lvl_coords, slots)`` in the order of ``values`` (computed once)."""
        if self._walk is None:
            lvl, slots = traverse(self.encoding, self.lvl_shape, self._positions,
                                  self._coordinates, self.nse, "the tensor's")
            if slots.size > 1 and (np.diff(slots) < 0).any():
                order = np.argsort(slots, kind="stable")
                lvl, slots = lvl[:, order], slots[order]
            lvl.setflags(write=False)                      # private: never handed out
            slots.setflags(write=False)
            self._walk = (lvl, slots)
        return self._walk


def slice_window(coords, slices, shape) -> tuple:
    """The entries at ``coords`` (int64, ``(rank, K)``) of a tensor of ``shape`` seen through
    dimension ``slices`` (a ``Slice`` or None per dimension): ``(coordinates in the window of
    the entries inside it, mask of those entries, the window's shape)``. A slice that does not
    fit in its dimension raises ``SparseTIRValueError``.

    Example
    -------
    >>> from sparsetir.format import Slice
    >>> c, inside, shape = slice_window(np.array([[0, 1, 3]]), (Slice(1, 2, 2),), (4,))
    >>> c.tolist(), inside.tolist(), shape
    ([[0, 1]], [False, True, True], (2,))
    """
    coords = np.array(coords, np.int64)
    inside = np.ones(coords.shape[1], bool)
    window = []
    for dim, piece in enumerate(slices):
        if piece is None:
            window.append(int(shape[dim]))
            continue
        offset, size, stride = piece.resolved(shape[dim])
        shifted = coords[dim] - offset
        inside &= (shifted >= 0) & (shifted % stride == 0) & (shifted // stride < size)
        coords[dim] = shifted // stride
        window.append(size)
    return coords[:, inside], inside, tuple(window)


_FIXED = frozenset({"encoding", "symbols", "base_shape", "lvl_shape", "dim_shape", "values",
                    "nse", "dtype"})
"""The attributes of a ``SparseTensor`` that cannot change once made."""


def _index_array(name: str, array, ndim: int, as_int64: bool = True) -> np.ndarray:
    """An integer array of ``ndim`` dimensions as int64 (``as_int64=False``: in its own
    integer dtype; bools and floats refused)."""
    array = np.asarray(array)
    if array.size == 0 and array.dtype.kind == "f":
        array = array.astype(np.int64)
    if array.dtype.kind not in "iu":
        raise SparseTIRTypeError(f"{name} must hold integers, got dtype {array.dtype}")
    if array.ndim != ndim and not (ndim == 2 and array.size == 0):
        raise SparseTIRValueError(f"{name} must be {ndim}-D, got shape {array.shape}")
    if array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
        raise SparseTIRValueError(f"{name} holds {array.max()}, beyond int64")
    return array.astype(np.int64, copy=False) if as_int64 else array


def _numeric(dtype) -> bool:
    """Integers, floats (``ml_dtypes``' bfloat16 too) and complex numbers; not booleans."""
    return dtype.kind in "iufc" or dtype.name == "bfloat16"


def _values(values, size) -> np.ndarray:
    """A 1-D numeric values array (of ``size`` elements unless None), checked (the tensor
    keeps a frozen copy: the caller's array stays as it was, writable)."""
    values = np.asarray(values)
    if not _numeric(values.dtype):
        raise SparseTIRTypeError(f"values must hold numbers, got dtype {values.dtype}")
    if values.ndim != 1 or (size is not None and values.size != size):
        want = "a 1-D array" if size is None else f"{size} values (one per coordinate)"
        raise SparseTIRValueError(f"values must be {want}, got shape {values.shape}")
    return values


def _fit(array, dtype: np.dtype, name: str, width: str):
    """``array`` in ``dtype`` (itself when it is of ``dtype``: the tensor copies it), refused
    when a value does not fit (instead of wrapping)."""
    if array is None:
        return None
    if array.size:
        top, low = int(array.max()), int(array.min())
        info = np.iinfo(dtype)
        if top > info.max or low < info.min:
            raise SparseTIRValueError(
                f"{name} holds {top if top > info.max else low}, which {width} = "
                f"{info.bits} (numpy {dtype}) cannot hold: use a wider {width}")
    return array.astype(dtype, copy=False)


def _sorted_unique(lvl: np.ndarray, values: np.ndarray, lvl_shape) -> tuple:
    """The entries sorted lexicographically by level coordinates, duplicates summed."""
    if lvl.shape[1] < 2:
        return lvl, values
    radix = 1
    for size in lvl_shape:
        radix *= max(size, 1)
    if radix < 2**62:
        key = np.zeros(lvl.shape[1], np.int64)
        for row, size in zip(lvl, lvl_shape):
            key = key * max(size, 1) + row
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.concatenate([[True], key[1:] != key[:-1]])
    else:
        order = np.lexsort(lvl[::-1])
        ordered = lvl[:, order]
        first = np.concatenate([[True], (ordered[:, 1:] != ordered[:, :-1]).any(axis=0)])
    lvl, values = lvl[:, order], values[order]
    if first.all():
        return lvl, values
    starts = np.flatnonzero(first)
    return lvl[:, starts], np.add.reduceat(values, starts)
