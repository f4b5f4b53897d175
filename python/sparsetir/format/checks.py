"""The one input check of every conversion routine in ``sparsetir.format``.

Each routine reads its arguments through these functions, so all of them accept and refuse
the same things (numpy arrays, lists, CPU torch or TVM tensors): index arrays are 1-D
arrays of integers (not bools, not floats, which would be truncated), non-negative and in
range of the shape; value arrays are 1-D floating-point arrays with one value per index;
sizes are integers (not bools, not ``2.5``); and every id a routine writes must fit its
output index type ``idtype`` (``idtype=np.int64`` when it does not). Valid inputs of
another integer type, or strided views, are converted, not refused.

No routine builds an array of ``MAX_ELEMENTS = 2**40`` elements or more (8 TiB as int64): the
size an output would need is computed exactly, with Python ints, before anything is allocated,
and a size argument that asks for more (a block size, a bucket width, a tile...) is refused by
name with the size it would need, as is one that alone is a dimension of ``2**40`` or more.

Every refusal is a ``ValueError`` naming the argument; a value of the wrong kind raises
``FormatTypeError``, which is also a ``TypeError``.

The rules of a row pointer and of the coordinates of a sparse axis are stated once, here
(:func:`row_pointer_problem`, :func:`coordinates_problem`): the conversion routines raise what
they find as ``ValueError``, and a kernel call (``sparsetir.runtime.validate``) as
``ArgumentError`` naming the kernel's parameter.

Example
-------
>>> check_csr([0, 2, 1, 2], [0, 1], (3, 3))
Traceback (most recent call last):
...
sparsetir.errors.SparseTIRValueError: indptr is not monotone: indptr[1] = 2 > indptr[2] = 1
>>> index_array("indices", [[0], [1]])
Traceback (most recent call last):
...
sparsetir.errors.SparseTIRValueError: indices must be a 1-D array, got shape (2, 1)
"""

from __future__ import annotations

import operator

import numpy as np
from ..errors import FormatTypeError, SparseTIRValueError

_INT64_MAX = np.iinfo(np.int64).max
MAX_ELEMENTS = 2**40


def count(name: str, value, positive: bool = True, dimension: bool = False) -> int:
    """``value`` as an int after checking it is an integer (a bool is not) that is positive
    (or, with ``positive=False``, not negative) and, with ``dimension=True`` (a length of
    an output axis), below ``MAX_ELEMENTS``.

    Example
    -------
    >>> count("tile", 2.5)
    Traceback (most recent call last):
    sparsetir.errors.FormatTypeError: tile must be a positive integer, got 2.5
    """
    what = "a positive integer" if positive else "a non-negative integer"
    if isinstance(value, (bool, np.bool_)) or getattr(value, "dtype", None) == np.bool_:
        raise FormatTypeError(f"{name} must be {what}, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise FormatTypeError(f"{name} must be {what}, got {value!r}") from None
    if number < int(positive):
        raise SparseTIRValueError(f"{name} must be {what}, got {number}")
    if dimension and number >= MAX_ELEMENTS:
        raise SparseTIRValueError(f"{name} = {number} is a dimension of the output: it must be below "
                         "2**40")
    return number


def check_size(what: str, need: int) -> int:
    """``need``, the exact element count of an array about to be built, after checking it is
    below ``MAX_ELEMENTS``; ``what`` names the arguments that ask for it.

    Example
    -------
    >>> check_size("bs = 2**20: 1 block of bs x bs", 2**40)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRValueError: bs = 2**20: 1 block of bs x bs would need 1099511627776 elements; ...
    """
    if need >= MAX_ELEMENTS:
        raise SparseTIRValueError(f"{what} would need {need} elements; sparsetir.format builds no "
                         "array of 2**40 elements or more")
    return need


def floor_div(values: np.ndarray, divisor: int) -> np.ndarray:
    """``values // divisor`` for an int64 array and a positive int that may pass int64 (where
    numpy raises ``OverflowError``).

    Example
    -------
    >>> floor_div(np.array([-3, 0, 7]), 2**70).tolist()
    [-1, 0, 0]
    """
    if divisor <= _INT64_MAX:
        return values // divisor
    return np.where(values < 0, -1, 0)


def index_type(idtype) -> np.dtype:
    """``idtype`` as a numpy dtype after checking it is a signed integer type."""
    try:
        dtype = np.dtype(idtype)
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind != "i":
        raise FormatTypeError(f"idtype must be a signed integer type such as np.int32 or "
                              f"np.int64, got {idtype!r}")
    return dtype


def _array(name: str, value) -> np.ndarray:
    """``value`` as a numpy array (a TVM tensor, read through DLPack, included); refusals
    name ``name``."""
    try:
        if hasattr(value, "__dlpack__") and not hasattr(value, "__array__"):
            return np.from_dlpack(value)
        return np.asarray(value)
    except Exception as err:  # noqa: BLE001  (ragged lists, GPU tensors numpy cannot read...)
        raise FormatTypeError(f"{name} cannot be read as an array: {err}") from None


def index_array(name: str, value) -> np.ndarray:
    """``value`` as a 1-D int64 array after checking it is one of non-negative integers (an
    empty list passes).

    Example
    -------
    >>> index_array("indices", np.array([0, 2], np.uint8)).dtype
    dtype('int64')
    >>> index_array("indices", [0.0, 2.7])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    sparsetir.errors.FormatTypeError: indices must hold integers, got float64 (floats ...)
    """
    array = _array(name, value)
    if array.ndim != 1:
        raise SparseTIRValueError(f"{name} must be a 1-D array, got shape {array.shape}")
    if array.dtype.kind not in "iu":
        if array.size == 0 and array.dtype.kind in "fO":     # [] comes as float64
            return np.zeros(0, np.int64)
        why = {"b": " (a bool is not an index)", "f": " (floats would be truncated)",
               "O": " (at most int64)"}.get(array.dtype.kind, "")
        raise FormatTypeError(f"{name} must hold integers, got {array.dtype}{why}")
    if array.dtype.kind == "u" and array.size and array.max() > _INT64_MAX:
        p = int(np.argmax(array > _INT64_MAX))
        raise SparseTIRValueError(f"{name}[{p}] = {array[p]} is out of range (more than int64 holds)")
    array = array.astype(np.int64, copy=False)
    negative = np.flatnonzero(array < 0)
    if negative.size:
        p = int(negative[0])
        raise SparseTIRValueError(f"{name}[{p}] = {array[p]} is out of range (negative)")
    return array


def value_array(name: str, value, length: int) -> np.ndarray:
    """``value`` after checking it is a 1-D floating-point array of ``length`` values (one
    per index)."""
    array = _array(name, value)
    if array.ndim != 1:
        raise SparseTIRValueError(f"{name} must be a 1-D array of {length} values, got shape "
                         f"{array.shape}")
    if array.size != length:
        raise SparseTIRValueError(f"{name} has {array.size} values, indices {length}")
    if array.dtype.kind != "f":
        raise FormatTypeError(f"{name} must hold floating-point values, got {array.dtype}")
    return array


def matrix_shape(shape, names=("shape[0]", "shape[1]")) -> tuple:
    """``(rows, cols)`` as ints after checking ``shape`` is a pair of non-negative integers;
    a refusal calls them ``names`` (the caller's own arguments, say ``num_rows``)."""
    try:
        rows, cols = shape
    except (TypeError, ValueError):
        raise FormatTypeError(f"shape must be a pair (rows, cols), got {shape!r}") from None
    return count(names[0], rows, False), count(names[1], cols, False)


def check_csr(indptr, indices, shape, names=("shape[0]", "shape[1]")) -> tuple:
    """``(indptr, indices)`` as int64 arrays after checking they describe a CSR matrix of
    ``shape``: ``indptr`` has ``rows + 1`` entries from 0 to ``len(indices)``, never falling,
    and every column id is in ``[0, cols)``; ``ValueError`` names the first problem, and
    ``names`` are what the caller calls ``rows`` and ``cols``.

    Example
    -------
    >>> check_csr([0, 1], [3], (1, 3))
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRValueError: indices[0] = 3 is out of range [0, 3)
    """
    rows, cols = matrix_shape(shape, names)
    indptr = index_array("indptr", indptr)
    indices = index_array("indices", indices)
    if indptr.size != rows + 1:
        raise SparseTIRValueError(f"indptr has {indptr.size} entries, a matrix of {names[0]} = {rows} "
                         f"rows needs {rows + 1}")
    problem = (row_pointer_problem(indptr, indices.size, "indptr", "len(indices)")
               or coordinates_problem(indices, cols, "indices"))
    if problem is not None:
        raise SparseTIRValueError(problem)
    return indptr, indices


def row_pointer_problem(indptr: np.ndarray, nnz: int, name: str = "indptr",
                        end: str = "nnz") -> str | None:
    """What makes the integer array ``indptr`` no row pointer over ``nnz`` entries, or None:
    it is empty, does not start at 0 and end at ``nnz`` (called ``end`` in the message), or
    falls somewhere. The message calls the array ``name``.

    Example
    -------
    >>> row_pointer_problem(np.array([0, 2, 1, 3]), 3)
    'indptr is not monotone: indptr[1] = 2 > indptr[2] = 1'
    """
    if indptr.size == 0:
        return f"{name} is empty: a row pointer has at least one entry"
    if indptr[0] != 0 or indptr[-1] != nnz:
        target = str(nnz) if end == str(nnz) else f"{end} = {nnz}"
        return (f"{name} must start at 0 and end at {target}, got {indptr[0]} and "
                f"{indptr[-1]}")
    drops = np.flatnonzero(indptr[1:] < indptr[:-1])
    if drops.size:
        r = int(drops[0])
        return (f"{name} is not monotone: {name}[{r}] = {indptr[r]} > "
                f"{name}[{r + 1}] = {indptr[r + 1]}")
    return None


def coordinates_problem(indices: np.ndarray, bound: int, name: str = "indices",
                        row_starts: np.ndarray | None = None, width: int | None = None,
                        sorted_rows: bool = False) -> str | None:
    """What makes the integer array ``indices`` no coordinates of an axis of length ``bound``,
    or None: a value outside ``[0, bound)``, or, with ``sorted_rows``, a row whose values do
    not increase strictly. Rows are delimited by the valid row pointer ``row_starts`` (CSR),
    else have ``width`` slots (ELL; a slot may repeat the previous value, the padding of a
    short row), else are one row. The message calls the array ``name``.

    Example
    -------
    >>> coordinates_problem(np.array([0, 5, 2]), 4)
    'indices[1] = 5 is out of range [0, 4)'
    >>> coordinates_problem(np.array([0, 2, 1, 3]), 4, row_starts=np.array([0, 3, 4]),
    ...                     sorted_rows=True)
    'indices is not sorted within row 0: indices[2] = 1 follows indices[1] = 2'
    """
    p = first_outside(indices, 0, bound)
    if p is not None:
        return f"{name}[{p}] = {indices[p]} is out of range [0, {bound})"
    if not sorted_rows or indices.size < 2:
        return None
    # A pair (p - 1, p) must increase unless p begins a new row.
    continues_row = np.ones(indices.size - 1, dtype=bool)
    if row_starts is not None:
        starts = row_starts[(row_starts > 0) & (row_starts < indices.size)]
        continues_row[starts - 1] = False
    elif width is not None:
        continues_row[width - 1::width] = False
    padded = row_starts is None and width is not None
    descends = indices[1:] < indices[:-1] if padded else indices[1:] <= indices[:-1]
    unsorted = np.flatnonzero(continues_row & descends)
    if not unsorted.size:
        return None
    p = int(unsorted[0]) + 1
    if row_starts is not None:
        row = int(np.searchsorted(row_starts, p, "right")) - 1
    else:
        row = 0 if width is None else p // width
    return (f"{name} is not sorted within row {row}: {name}[{p}] = {indices[p]} follows "
            f"{name}[{p - 1}] = {indices[p - 1]}")


def first_outside(values: np.ndarray, low: int, high: int) -> int | None:
    """The first position of ``values`` holding a value outside ``[low, high)``, or None.

    Example
    -------
    >>> first_outside(np.array([0, 3, 1]), 0, 3)
    1
    """
    outside = np.flatnonzero((values < low) | (values >= high))
    return int(outside[0]) if outside.size else None


def as_index(values: np.ndarray, idtype: np.dtype, what: str) -> np.ndarray:
    """The non-negative int64 ``values`` as ``idtype`` (checked by ``index_type``), after
    checking they fit: ``what`` says which argument they come from when they do not.

    Example
    -------
    >>> as_index(np.array([2**31]), np.dtype(np.int32), "the ids")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sparsetir.errors.SparseTIRValueError: the ids reach 2147483648, more than idtype int32 holds: pass idtype=np.int64
    """
    dtype = np.dtype(idtype)
    if values.size and int(values.max()) > np.iinfo(dtype).max:
        raise SparseTIRValueError(f"{what} reach {int(values.max())}, more than idtype {dtype.name} "
                         "holds: pass idtype=np.int64")
    return values.astype(dtype)
