"""Checks on the index arrays of sparse formats, run on host copies before a kernel call.

Compiled kernels trust their index data: an out-of-range column index or a
decreasing row pointer reads or writes outside a buffer.  Each check here
costs O(nnz) vectorised numpy work.  The rules are the ones the conversion routines of
``sparsetir.format`` apply (``format.checks.row_pointer_problem``,
``coordinates_problem``); here a problem is an ``ArgumentError`` naming the kernel's
parameter.  The compiled form of these checks (``compiled_checks``) runs first on a call;
when it finds a problem, these say which.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from tvm import tirx

from ..errors import ArgumentError
from ..format.checks import coordinates_problem, first_outside, row_pointer_problem
from .signature import IndicesCheck, IndptrCheck, ValueDomainCheck, evaluate_int


def check_indptr(name: str, indptr: np.ndarray, nnz: int, end: str = "nnz") -> None:
    """Check a CSR row pointer.

    Parameters
    ----------
    name : str
        Parameter name, used in error messages.
    indptr : numpy.ndarray
        Flat row pointer.
    nnz : int
        Required last entry (``end`` names it in the message).

    Raises
    ------
    ArgumentError
        Unless ``indptr[0] == 0``, the entries are non-decreasing and ``indptr[-1] == nnz``.

    Examples
    --------
    >>> check_indptr("indptr", np.array([0, 2, 1, 3]), 3)
    Traceback (most recent call last):
    ...
    sparsetir.errors.ArgumentError: indptr 'indptr': indptr is not monotone: indptr[1] = 2 > indptr[2] = 1
    """
    problem = row_pointer_problem(indptr, nnz, name, end)
    if problem is not None:
        raise ArgumentError(f"indptr '{name}': {problem}")


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
    ...
    sparsetir.errors.ArgumentError: indices 'indices': indices[1] = 5 is out of range [0, 4)
    """
    problem = coordinates_problem(indices, bound, name, row_starts, width, strictly_increasing)
    if problem is not None:
        raise ArgumentError(f"indices '{name}': {problem}")


def check_value_domain(name: str, values: np.ndarray, low: int, high: int) -> None:
    """Check that every value lies in ``[low, high)``.

    Examples
    --------
    >>> check_value_domain("etype", np.array([0, 3, 1]), 0, 3)
    Traceback (most recent call last):
    ...
    sparsetir.errors.ArgumentError: values 'etype': etype[1] = 3 is outside the declared domain [0, 3)
    """
    p = first_outside(values, low, high)
    if p is not None:
        raise ArgumentError(f"values '{name}': {name}[{p}] = {values[p]} is outside the "
                            f"declared domain [{low}, {high})")


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
    >>> n, nnz = tirx.Var("n", "int32"), tirx.Var("nnz", "int32")
    >>> checks = (IndptrCheck("indptr", nnz), IndicesCheck("indices", n, "indptr", None, False))
    >>> arrays = {"indptr": np.array([0, 2, 3]), "indices": np.array([0, 4, 1])}
    >>> run_checks(checks, arrays, {nnz: 3, n: 5})        # passes: returns None
    >>> run_checks(checks, arrays, {nnz: 3, n: 4})
    Traceback (most recent call last):
    ...
    sparsetir.errors.ArgumentError: indices 'indices': indices[1] = 4 is out of range [0, 4)
    """
    for check in sorted(checks, key=lambda check: isinstance(check, IndicesCheck)):
        if isinstance(check, IndptrCheck):
            check_indptr(check.param, arrays[check.param], evaluate_int(check.nnz, env),
                         str(check.nnz))
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
