"""The sizes an algebra kernel may reach, checked before anything is allocated.

A result (any format) with more than ``WIDE_POSITIONS`` (2**31 - 1) stored coordinates or
values, or a dense result of more than that many elements, is computed by the statement's
kernels generated with int64 positions (``index_dtype``: one set per index type, built at the
first such call and kept); its size is computed exactly first (Python ints, and ``count``
counts in int64) and a result whose arrays cannot fit in the machine's memory is refused with
``SparseTIRMemoryError`` (a ``MemoryError``) naming its size and bytes, before anything is
allocated (``check_result_memory``). Operands keep int32 positions: one of more than
``INDEX_LIMIT`` elements is refused by name (``check_elements``). A call that needs a
workspace (SpGEMM into CSR: Gustavson's dense row per chunk of rows) is refused with
``MemoryError`` when the workspaces its threads hold at once need more than the memory.

Example
-------
>>> index_dtype(2**31 - 1), index_dtype(2**31)
('int32', 'int64')
>>> check_elements("c", (46341, 46341), "the dense operand")
Traceback (most recent call last):
sparsetir.errors.SparseTIRValueError: the dense operand c has 46341 x 46341 = 2147488281 elements, past the 2147483647 (2**31 - 1) that co-iteration kernels address with int32 positions; nothing was allocated
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..errors import SparseTIRMemoryError, SparseTIRValueError

INDEX_LIMIT = int(np.iinfo(np.int32).max)
"""The most positions (stored entries, dense elements) int32 positions address."""
WIDE_POSITIONS = INDEX_LIMIT
"""A result with more positions than this is computed with int64 positions (``index_dtype``).
Tests lower it to reach that path with small matrices."""
_LIMIT_TEXT = (f"{INDEX_LIMIT} (2**31 - 1) that co-iteration kernels address with int32 "
               "positions; nothing was allocated")


def index_dtype(positions: int) -> str:
    """The index type of the kernels that compute a result of ``positions`` stored entries
    (or dense elements): ``"int32"`` up to ``WIDE_POSITIONS``, else ``"int64"``."""
    return "int64" if positions > WIDE_POSITIONS else "int32"


def wider(*dtypes: str) -> str:
    """The widest of index types ``dtypes`` (``wider("int32", "int64") == "int64"``)."""
    return max(dtypes, key=lambda d: np.dtype(d).itemsize)


def check_result_memory(stmt, index: str, positions: int, values: int, dtype: str,
                        what: str = "stored values") -> int:
    """The bytes of a result of ``positions`` positions and coordinates (of type ``index``) and
    ``values`` values (``dtype``), after checking the machine's memory holds them
    (``SparseTIRMemoryError`` naming the result, its size and the bytes otherwise).

    Example
    -------
    >>> from sparsetir.algebra.notation import parse
    >>> check_result_memory(parse("A(i,j) = b(i) * c(j)"), "int64", 2**33 + 2, 2**32, "float64")
    Traceback (most recent call last):
    sparsetir.errors.SparseTIRMemoryError: 'A(i,j) = b(i) * c(j)': the result A would hold 4294967296 stored values (int64 positions): 103079215120 bytes, more than this machine's ... bytes of memory; nothing was allocated. Compute it in pieces (e.g. by rows)
    """
    needed = positions * np.dtype(index).itemsize + values * np.dtype(dtype).itemsize
    memory = physical_memory()
    if memory is not None and needed > memory:
        raise SparseTIRMemoryError(
            f"{stmt.text!r}: the result {stmt.lhs.name} would hold {values} {what} ({index} "
            f"positions): {needed} bytes, more than this machine's {memory} bytes of memory; "
            "nothing was allocated. Compute it in pieces (e.g. by rows)")
    return needed


def check_elements(name: str, shape, what: str) -> int:
    """The element count of ``shape`` (a dense operand ``name``), after checking int32
    positions address it."""
    elements = math.prod(int(s) for s in shape)
    if elements > INDEX_LIMIT:
        sizes = " x ".join(str(int(s)) for s in shape) + " = " if len(shape) > 1 else ""
        raise SparseTIRValueError(f"{what} {name} has {sizes}{elements} elements, past the "
                                  f"{_LIMIT_TEXT}")
    return elements


def check_workspace(stmt, per_chunk: int, chunks: int, threads: int) -> int:
    """The bytes of the workspaces ``chunks`` chunks of rows allocate, ``per_chunk`` bytes each,
    after checking that those ``threads`` threads hold at once fit the machine's memory
    (``MemoryError`` naming them otherwise)."""
    held = per_chunk * max(1, min(chunks, threads))
    memory = physical_memory()
    if memory is not None and held > memory:
        raise MemoryError(
            f"{stmt.text!r}: the row workspaces of {stmt.lhs.name} need {per_chunk} bytes per "
            f"chunk of rows ({min(chunks, threads)} at once on {threads} "
            f"thread{'s' if threads != 1 else ''}: {held} bytes), "
            f"more than this machine's {memory} bytes of memory; nothing was allocated. The "
            "workspace is a dense row of the result's columns: compute fewer columns at a time")
    return held


def physical_memory():
    """The machine's memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
