"""Checks on the index arrays of sparse formats, run on host copies before a kernel call.

Compiled kernels trust their index data: an out-of-range column index or a
decreasing row pointer reads or writes outside a buffer.  Each check here
costs O(nnz) vectorised numpy work.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from tvm import tirx

from ..errors import ArgumentError
from .signature import IndicesCheck, IndptrCheck, ValueDomainCheck, evaluate_int


def check_indptr(name: str, indptr: np.ndarray, nnz: int) -> None:
    """Check a CSR row pointer.

    Parameters
    ----------
    name : str
        Parameter name, used in error messages.
    indptr : numpy.ndarray
        Flat row pointer.
    nnz : int
        Required last entry.

    Raises
    ------
    ArgumentError
        Unless ``indptr[0] == 0``, the entries are non-decreasing and ``indptr[-1] == nnz``.

    Examples
    --------
    >>> check_indptr("indptr", np.array([0, 2, 1, 3]), 3)
    Traceback (most recent call last):
    ArgumentError: indptr 'indptr': not non-decreasing at row 1 (2 > 1)
    """
    if indptr.size == 0:
        raise ArgumentError(f"indptr '{name}': is empty, it needs at least one entry")
    if indptr[0] != 0:
        raise ArgumentError(f"indptr '{name}': first entry {indptr[0]} != 0")
    decreasing = np.flatnonzero(indptr[1:] < indptr[:-1])
    if decreasing.size:
        row = decreasing[0]
        raise ArgumentError(
            f"indptr '{name}': not non-decreasing at row {row} ({indptr[row]} > {indptr[row + 1]})"
        )
    if indptr[-1] != nnz:
        raise ArgumentError(f"indptr '{name}': last entry {indptr[-1]} != nnz {nnz}")


def check_indices(
    name: str,
    indices: np.ndarray,
    bound: int,
    row_starts: np.ndarray | None = None,
    width: int | None = None,
    strictly_increasing: bool = False,
) -> None:
    """Check the coordinates of a sparse axis.

    Parameters
    ----------
    name : str
        Parameter name, used in error messages.
    indices : numpy.ndarray
        Flat indices, row after row.
    bound : int
        Every index must lie in ``[0, bound)``.
    row_starts : numpy.ndarray, optional
        A valid row pointer delimiting the rows (CSR).
    width : int, optional
        Fixed row width (ELL), used when `row_starts` is None.  Without
        either, all indices form one row.
    strictly_increasing : bool
        Whether indices must increase strictly within each row; in rows of a fixed `width`
        (ELL) a slot may repeat the previous index, the padding of a short row.

    Raises
    ------
    ArgumentError
        On the first index out of range, or the first row that is not sorted.

    Examples
    --------
    >>> check_indices("indices", np.array([0, 5, 2]), 4)
    Traceback (most recent call last):
    ArgumentError: indices 'indices': value 5 at position 1 out of range [0, 4)
    """
    outside = np.flatnonzero((indices < 0) | (indices >= bound))
    if outside.size:
        position = outside[0]
        raise ArgumentError(
            f"indices '{name}': value {indices[position]} at position {position} out of range [0, {bound})"
        )
    if not strictly_increasing or indices.size < 2:
        return
    # A pair (p - 1, p) must increase unless p begins a new row.
    continues_row = np.ones(indices.size - 1, dtype=bool)
    if row_starts is not None:
        starts = row_starts[(row_starts > 0) & (row_starts < indices.size)]
        continues_row[starts - 1] = False
    elif width is not None:
        continues_row[width - 1 :: width] = False
    # In a row of fixed width (ELL) a slot may repeat the previous coordinate: padding.
    padded = row_starts is None and width is not None
    descends = indices[1:] < indices[:-1] if padded else indices[1:] <= indices[:-1]
    unsorted = np.flatnonzero(continues_row & descends)
    if unsorted.size:
        position = unsorted[0] + 1
        if row_starts is not None:
            row = np.searchsorted(row_starts, position, "right") - 1
        else:
            row = 0 if width is None else position // width
        raise ArgumentError(
            f"indices '{name}': not sorted within row {row} "
            f"({indices[position]} follows {indices[position - 1]} at position {position})"
        )


def check_value_domain(name: str, values: np.ndarray, low: int, high: int) -> None:
    """Check that every value lies in ``[low, high)``.

    Examples
    --------
    >>> check_value_domain("etype", np.array([0, 3, 1]), 0, 3)
    Traceback (most recent call last):
    ArgumentError: values 'etype': value 3 at position 1 outside the declared domain [0, 3)
    """
    outside = np.flatnonzero((values < low) | (values >= high))
    if outside.size:
        position = outside[0]
        raise ArgumentError(f"values '{name}': value {values[position]} at position {position} "
                            f"outside the declared domain [{low}, {high})")


def run_checks(checks, arrays: Mapping[str, np.ndarray], env: Mapping[tirx.Var, int]) -> None:
    """Run a signature's checks, row pointers first.

    Parameters
    ----------
    checks : sequence of IndptrCheck or IndicesCheck
        The checks of a :class:`~sparsetir.runtime.Signature`.
    arrays : mapping of str to numpy.ndarray
        Flat host data of every buffer the checks name.
    env : mapping of tvm.tirx.Var to int
        Scalar arguments, for the ``nnz``, ``bound`` and ``width`` expressions.

    Raises
    ------
    ArgumentError
        From the first check that fails.

    Examples
    --------
    >>> run_checks(signature.checks, {"indptr": indptr, "indices": indices}, {nnz_var: 91, n_var: 1000})
    """
    for check in sorted(checks, key=lambda check: isinstance(check, IndicesCheck)):
        if isinstance(check, IndptrCheck):
            check_indptr(check.param, arrays[check.param], evaluate_int(check.nnz, env))
        elif isinstance(check, ValueDomainCheck):
            check_value_domain(check.param, arrays[check.param], evaluate_int(check.min, env),
                               evaluate_int(check.max, env))
        else:
            check_indices(
                check.param,
                arrays[check.param],
                evaluate_int(check.bound, env),
                row_starts=None if check.indptr is None else arrays[check.indptr],
                width=None if check.width is None else evaluate_int(check.width, env),
                strictly_increasing=check.sorted,
            )
