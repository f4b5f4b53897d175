"""CSR padded so that every row's length is a multiple of a given number."""

from __future__ import annotations

import numpy as np

from .checks import (MAX_ELEMENTS, as_index, check_csr, check_size, count, floor_div, index_type,
                     value_array)
from ..errors import SparseTIRValueError


def csr_pad(indptr, indices, data, shape, multiple=32, idtype=np.int32) -> tuple:
    """``(indptr, indices, mask, data)``: the CSR matrix with each row's length rounded up to
    a multiple of ``multiple``.

    A padded slot repeats its row's last real column (so it stays in range), has ``mask`` 0
    (int8, 1 on real entries) and value exactly 0. Empty rows stay empty. ``indptr`` and
    ``indices`` are ``idtype``; ``data`` keeps its dtype, or is ``None`` when ``data`` is
    ``None``. Inputs, and the padded size (under 2**40 entries), are checked as
    ``sparsetir.format.checks`` says.

    Example
    -------
    >>> ip, ix, m, d = csr_pad([0, 3, 3, 4], [0, 2, 5, 1], [1.0, 2.0, 3.0, 4.0], (3, 6), 2)
    >>> ip.tolist(), ix.tolist(), m.tolist()
    ([0, 4, 4, 6], [0, 2, 5, 5, 1, 1], [1, 1, 1, 0, 1, 0])
    >>> d.tolist()
    [1.0, 2.0, 3.0, 0.0, 4.0, 0.0]
    """
    idtype = index_type(idtype)
    step = count("multiple", multiple)
    indptr, indices = check_csr(indptr, indices, shape)
    data = None if data is None else value_array("data", data, indices.size)
    length = np.diff(indptr)
    pieces = -floor_div(-length, step)
    total = step * int(pieces.sum())                 # exact: Python ints, before allocating
    what = f"rows padded to multiples of multiple = {step}"
    if total > np.iinfo(idtype).max:
        fix = ": pass idtype=np.int64" if total < MAX_ELEMENTS else ""
        raise SparseTIRValueError(f"{what} would hold {total} entries, more than idtype {idtype.name} "
                         f"holds{fix}")
    check_size(what, total)
    padded = pieces * step if total else pieces      # all 0 (and step may pass int64)
    new_indptr = np.concatenate([[0], np.cumsum(padded)])
    row_of = np.repeat(np.arange(length.size), padded)
    pos = np.arange(new_indptr[-1]) - new_indptr[:-1][row_of]
    row_len = length[row_of]
    valid = pos < row_len
    src = indptr[:-1][row_of] + np.minimum(pos, row_len - 1)
    values = None
    if data is not None:
        values = np.where(valid, data[src], np.zeros((), data.dtype))
    return (new_indptr.astype(idtype),
            as_index(indices[src], idtype, "the column ids in indices"), valid.astype(np.int8),
            values)
