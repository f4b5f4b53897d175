"""The sizes an algebra kernel may reach, checked before anything is allocated.

Co-iteration kernels address their arrays with int32 positions: a result (any format) with more
than ``INDEX_LIMIT`` stored coordinates or values, or a dense operand or result with more than
``INDEX_LIMIT`` elements, is refused by name with its size, computed exactly (Python ints, and
``count`` counts in int64), before its arrays are allocated. A call that needs a workspace
(SpGEMM into CSR: Gustavson's dense row per chunk of rows) is refused with ``MemoryError``
when the workspaces its threads hold at once need more than the machine's memory.

Example
-------
>>> check_elements("A", (46341, 46341), "the dense result")
Traceback (most recent call last):
sparsetir.errors.SparseTIRValueError: the dense result A has 46341 x 46341 = 2147488281 elements, past the 2147483647 (2**31 - 1) that co-iteration kernels address with int32 positions; nothing was allocated
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..errors import SparseTIRValueError

INDEX_LIMIT = int(np.iinfo(np.int32).max)
"""The most positions (stored entries, dense elements) a co-iteration kernel addresses."""
_LIMIT_TEXT = (f"{INDEX_LIMIT} (2**31 - 1) that co-iteration kernels address with int32 "
               "positions; nothing was allocated")


def check_positions(stmt, count: int, what: str) -> int:
    """``count``, the number of ``what`` (say ``"stored values"``) the result of ``stmt``
    holds, after checking int32 positions address them.

    Example
    -------
    >>> from sparsetir.algebra.notation import parse
    >>> check_positions(parse("A(i,j) = b(i) * c(j)"), 2**32 + 131073, "stored values")
    Traceback (most recent call last):
    sparsetir.errors.SparseTIRValueError: 'A(i,j) = b(i) * c(j)': the result A would hold 4295098369 stored values, past the 2147483647 (2**31 - 1) that co-iteration kernels address with int32 positions; nothing was allocated
    """
    if count > INDEX_LIMIT:
        raise SparseTIRValueError(f"{stmt.text!r}: the result {stmt.lhs.name} would hold {count} "
                                  f"{what}, past the {_LIMIT_TEXT}")
    return count


def check_elements(name: str, shape, what: str) -> int:
    """The element count of ``shape`` (a dense operand or result ``name``), after checking int32
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
