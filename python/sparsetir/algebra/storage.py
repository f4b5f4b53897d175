"""Operands and results of algebra kernels: level formats and their arrays (vectorised numpy).

A format is an ``Encoding`` (``Encoding.named`` names or MLIR text) read as a list of level
kinds (``"dense"`` / ``"compressed"``) and the dimension each level holds. Kernels take, per
compressed level, a position array (``pos``) and a coordinate array (``crd``), and the values in
storage order; ``Levels`` holds them.

Example
-------
>>> import numpy as np
>>> fmt = level_format("CSR", 2, "B")
>>> lv = from_dense(np.array([[0., 1.], [2., 0.]]), fmt, "float64")
>>> lv.pos[1].tolist(), lv.crd[1].tolist(), lv.vals.tolist()
([0, 1, 2], [1, 0], [1.0, 2.0])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import scipy.sparse

from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..format import Encoding, SparseTensor, check_csr
from ..format.checks import coordinates_problem, row_pointer_problem
from ..format.storage import slice_window
from .sizes import INDEX_LIMIT, check_elements


KERNEL_DTYPES = ("float16", "float32", "float64")
"""The value types a kernel computes in (``numpy.longdouble`` has no TVM type)."""


@dataclass(frozen=True)
class LevelFormat:
    """The levels of one operand: ``kinds[l]`` holds dimension ``dims[l]``."""

    kinds: tuple
    dims: tuple
    encoding: object
    result: object = None      # the declared encoding when the kernel stores another (COO)
    slices: tuple = None       # the declared dimension slices (an operand is their window)

    @property
    def is_dense(self) -> bool:
        return all(k == "dense" for k in self.kinds)

    @cached_property
    def stored(self):
        """The encoding of the arrays a kernel produces or reads: 32-bit positions and
        coordinates, no slices (those arrays hold the window itself)."""
        return self.encoding.without_slices().with_widths(pos_width=32, crd_width=32)


@dataclass
class Levels:
    """A tensor's storage: ``pos[l]``/``crd[l]`` (None for a dense level), values, dim shape."""

    shape: tuple
    pos: list
    crd: list
    vals: np.ndarray


def compile_arguments(formats, dtype) -> tuple:
    """``compile``'s ``formats`` as a dict (tensor name -> format) and ``dtype`` as a numpy
    float type name; ``SparseTIRTypeError`` naming the argument otherwise."""
    if formats is None:
        formats = {}
    if not isinstance(formats, Mapping):
        raise SparseTIRTypeError("formats must map tensor names to formats, e.g. "
                                 f"{{'A': 'CSR'}}, got {type(formats).__name__}")
    for key in formats:
        if not isinstance(key, str):
            raise SparseTIRTypeError(f"formats: the keys are tensor names (str), got {key!r}")
    return dict(formats), kernel_dtype(dtype)


def kernel_dtype(dtype) -> str:
    """``dtype`` as the name of a float type kernels compute in; ``SparseTIRTypeError``
    naming it otherwise (an integer type, ``float128``, a string numpy does not know).

    >>> kernel_dtype(np.float32)
    'float32'
    >>> kernel_dtype("int32")
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRTypeError: dtype must be a float type (e.g. 'float64'), got 'int32'
    """
    try:
        kind = np.dtype(dtype).kind
    except (TypeError, ValueError):
        kind = None
    if kind != "f":
        raise SparseTIRTypeError(f"dtype must be a float type (e.g. 'float64'), got {dtype!r}")
    if np.dtype(dtype).name not in KERNEL_DTYPES:
        raise SparseTIRTypeError(f"dtype {np.dtype(dtype).name} ({dtype!r}) has no TVM type: "
                                 f"kernels compute in {', '.join(KERNEL_DTYPES)}")
    return str(np.dtype(dtype))


def level_format(spec, rank: int, name: str) -> LevelFormat:
    """The ``LevelFormat`` of ``spec`` (a name of ``Encoding.named``, MLIR text or an
    ``Encoding``; None: dense) for operand ``name`` of ``rank`` dimensions."""
    if spec is None or (isinstance(spec, str) and spec.lower() == "dense"):
        return LevelFormat(("dense",) * rank, tuple(range(rank)), None)
    try:
        if isinstance(spec, str) and spec.upper() in ("CSF", "SPARSE"):
            enc = Encoding.named(spec, rank=rank)
        else:
            enc = Encoding.named(spec)
    except (ValueError, TypeError) as err:
        raise SparseTIRValueError(f"format of {name}: {err}") from None
    structured = [str(lt) for lt in enc.level_types if lt.kind == "structured"]
    if structured:
        raise SparseTIRValueError(f"format of {name}: {spec!r} has structured levels "
                                  f"({', '.join(structured)}), which co-iteration does not walk "
                                  "(dense and compressed levels only)")
    if enc.dim_rank != rank or enc.lvl_rank != rank:
        raise SparseTIRValueError(f"format of {name}: {spec!r} has {enc.dim_rank} dimensions "
                                  f"and {enc.lvl_rank} levels, but {name} is used with {rank} "
                                  "indices")
    dims = enc.lvl_to_dim
    if dims is not None and all(lt.kind == "dense" for lt in enc.level_types):
        # dense data: a numpy array in the caller's layout, whatever the declared order
        return LevelFormat(("dense",) * rank, tuple(range(rank)), None, slices=enc.slices)
    if dims is None or enc.is_block:
        raise SparseTIRValueError(f"format of {name}: {spec!r} is not a permutation of the "
                                  "dimensions; co-iteration takes dense and compressed levels")
    types = enc.level_types
    if len(types) > 1 and types[0].kind == "compressed" and \
            all(lt.kind == "singleton" for lt in types[1:]):
        # COO: computed over compressed levels (DCSR for a matrix), converted back in results
        text = ", ".join(f"d{d} : compressed" for d in dims)
        stored = Encoding.parse(f"map = ({', '.join(f'd{d}' for d in range(rank))}) -> ({text})")
        return LevelFormat(("compressed",) * rank, tuple(dims), stored, enc, enc.slices)
    kinds = []
    for level in enc.levels:
        lt = level.type
        if lt.kind not in ("dense", "compressed") or not lt.unique or not lt.ordered:
            raise SparseTIRValueError(f"format of {name}: level type {lt} is not supported "
                                      "(dense or compressed, unique and ordered)")
        kinds.append(lt.kind)
    return LevelFormat(tuple(kinds), tuple(dims), enc, slices=enc.slices)


def to_levels(value, fmt: LevelFormat, dtype: str, name: str, rank: int) -> Levels:
    """The storage of operand ``name`` (numpy array, scipy sparse matrix, SparseTensor) in
    ``fmt``; values must already have ``dtype`` (no silent cast). Where ``fmt`` has dimension
    slices the operand is their window: of a ``SparseTensor`` whose encoding has these slices,
    its own window (what ``to_coo`` gives); of anything else, the window of the whole value
    (what ``SparseTensor.convert`` / ``from_scipy`` / ``from_dense`` to the encoding give)."""
    if fmt.slices is not None and not (isinstance(value, SparseTensor)
                                       and value.encoding.slices == fmt.slices):
        return _window(value, fmt, dtype, name, rank)
    if scipy.sparse.issparse(value):
        _check_dtype(value.dtype, dtype, name)
        if rank != 2:
            raise SparseTIRValueError(f"operand {name}: a scipy matrix is 2-D, but {name} has "
                                      f"{rank} indices")
        if value.ndim != 2:
            raise SparseTIRValueError(f"operand {name}: a scipy matrix is 2-D, got {value.ndim}-D")
        _check_scipy(value, name)
        fast = _compressed_rows(value, fmt)
        if fast is not None:
            return fast
        if value.format in ("csr", "csc"):        # checked in full, as ops.SparseMatrix does
            major, minor = value.shape if value.format == "csr" else value.shape[::-1]
            _refuse(name, check_csr, value.indptr, value.indices, (major, minor))
        coo = value.tocoo()
        for what, ids, size in (("row", coo.row, coo.shape[0]), ("column", coo.col, coo.shape[1])):
            problem = coordinates_problem(ids, size, f"{what} ids")
            if problem is not None:
                raise SparseTIRValueError(f"operand {name}: {problem}")
        coo.sum_duplicates()
        coords = np.vstack([coo.row, coo.col]).astype(np.int64)
        return from_coords(coords, coo.data, tuple(value.shape), fmt, dtype)
    if isinstance(value, SparseTensor):
        _check_dtype(np.dtype(value.dtype), dtype, name)
        if len(value.dim_shape) != rank:
            raise SparseTIRValueError(f"operand {name}: a {len(value.dim_shape)}-D tensor for "
                                      f"{rank} indices")
        same = _same_levels(value, fmt, name)
        if same is not None:
            return same
        coords, vals = value.to_coo()
        return from_coords(np.asarray(coords, np.int64), np.asarray(vals), tuple(value.dim_shape),
                           fmt, dtype, canonical=False)
    if isinstance(value, (np.ndarray, float, int, np.generic)):
        array = np.asarray(value)
        _check_dtype(array.dtype, dtype, name)
        if array.ndim != rank:
            raise SparseTIRValueError(f"operand {name}: a {array.ndim}-D array for {rank} indices")
        if fmt.is_dense:
            check_elements(name, array.shape, "the dense operand")
        return from_dense(array, fmt, dtype)
    raise SparseTIRTypeError(f"operand {name}: expected a numpy array, a scipy sparse matrix or "
                             f"a SparseTensor, got {type(value).__name__}")


def _window(value, fmt: LevelFormat, dtype: str, name: str, rank: int) -> Levels:
    """The storage of the window ``fmt``'s slices cut out of operand ``name`` (taken whole)."""
    whole = replace(fmt, slices=None)
    full = to_levels(value, whole, dtype, name, rank)
    coords = dim_coords(full, whole)
    try:
        coords, inside, shape = slice_window(coords, fmt.slices, full.shape)
    except SparseTIRValueError as err:
        raise SparseTIRValueError(f"operand {name}: {err} (its format's slice)") from None
    return from_coords(coords, full.vals[inside], shape, whole, dtype)


def from_dense(array: np.ndarray, fmt: LevelFormat, dtype: str) -> Levels:
    """The storage of a dense array's nonzeros in ``fmt`` (the array itself when dense)."""
    if fmt.is_dense:
        return Levels(array.shape, [None] * array.ndim, [None] * array.ndim,
                      np.ascontiguousarray(array.transpose(fmt.dims), dtype).reshape(-1))
    coords = np.vstack(np.nonzero(array)).astype(np.int64) if array.ndim else \
        np.zeros((0, 1), np.int64)
    return from_coords(coords, array[tuple(coords)], array.shape, fmt, dtype)


def from_coords(coords, vals, shape, fmt: LevelFormat, dtype: str,
                canonical: bool = True) -> Levels:
    """Build ``fmt``'s arrays from unique coordinates ``coords`` (dims x nnz)."""
    shape = tuple(int(s) for s in shape)
    if fmt.is_dense:
        dense = np.zeros(shape, dtype)
        dense[tuple(coords)] = vals
        return from_dense(dense, fmt, dtype)
    lvl = coords[list(fmt.dims)] if coords.size else np.zeros((len(fmt.dims), 0), np.int64)
    order = _lexicographic(lvl, [shape[d] for d in fmt.dims], stable=not canonical)
    lvl, vals = lvl[:, order], np.asarray(vals)[order]
    if not canonical and lvl.shape[1] > 1:
        same = np.all(lvl[:, 1:] == lvl[:, :-1], axis=0)
        if same.any():
            keep = np.concatenate([[True], ~same])
            vals = np.add.reduceat(vals, np.flatnonzero(keep))
            lvl = lvl[:, keep]
    nnz = lvl.shape[1]
    pos, crd = [], []
    parent = np.zeros(nnz, np.int64)        # position of each nonzero's prefix at the last level
    parents = 1                             # number of positions of the last level
    changed = np.zeros(nnz, bool)
    for l, kind in enumerate(fmt.kinds):
        size = shape[fmt.dims[l]]
        if nnz:
            changed = changed | np.concatenate([[True], lvl[l, 1:] != lvl[l, :-1]])
        if kind == "dense":
            parent = parent * size + lvl[l]
            parents *= size
            check_elements(f"{shape}", (parents,), "a dense level of the operand of shape")
            pos.append(None)
            crd.append(None)
            continue
        check_elements(f"of level {l} (dimension {fmt.dims[l]}) of the operand of shape {shape}",
                       (parents + 1,), "the row pointer")          # before it is allocated
        prefix_new = changed.copy()
        starts = np.flatnonzero(prefix_new)
        counts = np.bincount(parent[starts], minlength=parents) if nnz else np.zeros(parents, int)
        index = np.int64 if len(starts) > INDEX_LIMIT else np.int32    # as ``_same_levels``
        pos.append(np.concatenate([[0], np.cumsum(counts)]).astype(index))
        crd.append(lvl[l, starts].astype(index))
        parent = np.cumsum(prefix_new) - 1
        parents = len(starts)
    values = np.zeros(parents, dtype)          # a dense last level stores its zeros too
    values[parent] = vals
    return Levels(shape, pos, crd, values)


def _lexicographic(lvl: np.ndarray, sizes: list, stable: bool) -> np.ndarray:
    """The order that sorts the columns of ``lvl`` (levels x entries, each level's coordinates
    below its size in ``sizes``) lexicographically: one sort of a combined int64 key where the
    sizes' product fits (2.5x faster than ``np.lexsort`` on a million entries), else
    ``np.lexsort``; ``stable`` keeps equal columns in order."""
    if not lvl.shape[1]:
        return np.zeros(0, np.int64)
    if np.prod([float(max(s, 1)) for s in sizes]) >= 2.0 ** 62:
        return np.lexsort(lvl[::-1])
    key = np.zeros(lvl.shape[1], np.int64)
    for row, size in zip(lvl, sizes):
        key = key * size + row
    return np.argsort(key, kind="stable" if stable else None)


def dim_coords(levels: Levels, fmt: LevelFormat) -> np.ndarray:
    """Each stored value's coordinates by dimension (int64, ``(rank, nnz)``, storage order)."""
    coords = np.zeros((len(fmt.dims), len(levels.vals)), np.int64)
    for level, crd in enumerate(level_coords(levels, fmt)):
        coords[fmt.dims[level]] = crd
    return coords


def to_result(levels: Levels, fmt: LevelFormat):
    """A sparse result as a ``SparseTensor`` whose encoding is ``fmt``'s with the kernel's
    index type: 32-bit positions and coordinates, 64-bit for a result computed with int64
    positions (``algebra.sizes``). The arrays come from the kernel, sorted and unique by
    construction, so they are kept as they are (``SparseTensor.from_arrays`` would check them
    again, at twice the kernel's cost); a result the kernel stores in other levels (COO, or
    another level order: ``order``) is converted to its declared encoding."""
    wide = any(p is not None and p.dtype == np.int64 for p in levels.pos)
    width = 64 if wide else 32
    encoding = fmt.stored.with_widths(pos_width=width, crd_width=width)
    if fmt.result is None:
        return SparseTensor(encoding, levels.shape, levels.pos, levels.crd, levels.vals, ())
    declared = fmt.result.with_widths(pos_width=width, crd_width=width)
    kinds = tuple(lt.kind for lt in declared.level_types)
    if not wide and set(kinds) <= {"dense", "compressed"}:    # another level order: sorted
        order = LevelFormat(kinds, tuple(declared.lvl_to_dim), declared)   # here (int32)
        out = from_coords(dim_coords(levels, fmt), levels.vals, levels.shape, order,
                          levels.vals.dtype)
        return SparseTensor(declared, out.shape, out.pos, out.crd, out.vals, ())
    tensor = SparseTensor(encoding, levels.shape, levels.pos, levels.crd, levels.vals, ())
    return tensor.convert(declared)                    # COO (singleton levels), or int64


def to_dense(levels: Levels, fmt: LevelFormat) -> np.ndarray:
    """The dense array of ``levels`` (explicit zeros and all)."""
    coords = level_coords(levels, fmt)
    dense = np.zeros(levels.shape, levels.vals.dtype)
    dims = [None] * len(fmt.dims)
    for l, d in enumerate(fmt.dims):
        dims[d] = coords[l]
    if dims:
        dense[tuple(dims)] = levels.vals
    return dense


def level_coords(levels: Levels, fmt: LevelFormat) -> list:
    """Each stored value's coordinate per level (storage order)."""
    coords = [np.zeros(1, np.int64)]
    count = 1
    out = []
    for l, kind in enumerate(fmt.kinds):
        size = levels.shape[fmt.dims[l]]
        if kind == "dense":
            out = [np.repeat(c, size) for c in out]
            out.append(np.tile(np.arange(size), count))
            count *= size
        else:
            lengths = np.diff(levels.pos[l])
            out = [np.repeat(c, lengths) for c in out]
            out.append(levels.crd[l].astype(np.int64))
            count = len(levels.crd[l])
    del coords
    return out


def _same_levels(tensor, fmt: LevelFormat, name: str):
    """A SparseTensor's own arrays (as int32, or int64 where its positions pass int32) when it
    is stored in ``fmt``'s levels, else None."""
    enc = tensor.encoding
    kinds = tuple(lt.kind if lt.unique and lt.ordered else None for lt in enc.level_types)
    if kinds != fmt.kinds or enc.lvl_to_dim != fmt.dims or enc.slices is not None:
        return None
    positions, coordinates, values = tensor.storage()
    pos, crd = [], []
    for level, kind in enumerate(kinds):
        if kind == "dense":
            pos.append(None)
            crd.append(None)
            continue
        p, c = positions[level], coordinates[level]
        if max(tensor.dim_shape, default=0) > INDEX_LIMIT:
            raise SparseTIRValueError(f"operand {name}: a dimension of {tensor.dim_shape} is "
                                      f"past the {INDEX_LIMIT} coordinates kernels address")
        index = np.int64 if len(p) and p[-1] > INDEX_LIMIT else np.int32   # the int64 kernels
        pos.append(p.astype(index, copy=False))                          # read it then
        crd.append(c.astype(index, copy=False))
    return Levels(tuple(tensor.dim_shape), pos, crd, np.ascontiguousarray(values))


def _compressed_rows(value, fmt: LevelFormat):
    """A canonical scipy CSR (CSC) matrix's own arrays for a CSR (CSC) format, else None."""
    layout = {("dense", "compressed"): {(0, 1): "csr", (1, 0): "csc"}}.get(fmt.kinds, {})
    want = layout.get(fmt.dims)
    if want is None or value.format != want or not value.has_canonical_format:
        return None
    major = value.shape[fmt.dims[0]]
    if len(value.indptr) != major + 1:
        return None
    return Levels(tuple(value.shape), [None, value.indptr.astype(np.int32, copy=False)],
                  [None, value.indices.astype(np.int32, copy=False)],
                  np.ascontiguousarray(value.data))


def _check_scipy(value, name: str) -> None:
    """The row pointer of a scipy CSR (CSC) operand: ``indptr`` has one entry per row
    (column) and one more, starts at 0, ends at ``len(indices)`` and never falls (the rule of
    ``format.checks.row_pointer_problem``, which ``ops.SparseMatrix`` applies); its indices
    are then checked by the kernel's call (range and order), or here in full where the matrix
    is converted. No operand of more than ``INDEX_LIMIT`` entries (int32 positions)."""
    if value.format not in ("csr", "csc"):
        return
    major = value.shape[0 if value.format == "csr" else 1]
    indptr, indices = value.indptr, value.indices
    if indptr.ndim != 1 or indptr.size != major + 1:
        raise SparseTIRValueError(f"operand {name}: indptr has {indptr.size} entries, a "
                                  f"{value.format.upper()} matrix of {major} "
                                  f"{'rows' if value.format == 'csr' else 'columns'} needs "
                                  f"{major + 1}")
    if indices.size > INDEX_LIMIT:
        raise SparseTIRValueError(f"operand {name}: {indices.size} stored entries, past the "
                                  f"{INDEX_LIMIT} that co-iteration kernels address with int32 "
                                  "positions")
    problem = row_pointer_problem(indptr, indices.size, "indptr", "len(indices)")
    if problem is not None:
        raise SparseTIRValueError(f"operand {name}: {problem}")
    if value.data.shape != indices.shape:
        raise SparseTIRValueError(f"operand {name}: {value.data.size} values for "
                                  f"{indices.size} indices")


def _refuse(name: str, check, *args) -> None:
    """``check(*args)``, its ``ValueError`` (a ``SparseTIRValueError``) naming operand
    ``name``."""
    try:
        check(*args)
    except SparseTIRValueError as err:
        raise SparseTIRValueError(f"operand {name}: {err}") from None


def _check_dtype(got, want: str, name: str) -> None:
    if np.dtype(got) != np.dtype(want):
        raise SparseTIRTypeError(f"operand {name}: values are {np.dtype(got)}, the kernel "
                                 f"computes in {want}; convert them first (nothing is cast), "
                                 "or compile without dtype to take the operands' type")
