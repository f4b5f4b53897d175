"""Input checks shared by the conversion routines."""

from __future__ import annotations

import numpy as np


def check_csr(indptr, indices, shape) -> tuple:
    """``(indptr, indices)`` as int64 arrays after checking they describe a CSR matrix of
    ``shape``; ``ValueError`` names the first problem.

    Example
    -------
    >>> check_csr([0, 2, 1, 2], [0, 1], (3, 3))
    Traceback (most recent call last):
    ValueError: indptr is not monotone: indptr[1] = 2 > indptr[2] = 1
    """
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    rows, cols = (int(s) for s in shape)
    if indptr.ndim != 1 or indptr.size != rows + 1:
        raise ValueError(f"indptr has {indptr.size} entries, a matrix of {rows} rows needs "
                         f"{rows + 1}")
    if indptr[0] != 0 or indptr[-1] != indices.size:
        raise ValueError(f"indptr must start at 0 and end at len(indices) = {indices.size}, "
                         f"got {indptr[0]} and {indptr[-1]}")
    drops = np.flatnonzero(np.diff(indptr) < 0)
    if drops.size:
        r = int(drops[0])
        raise ValueError(f"indptr is not monotone: indptr[{r}] = {indptr[r]} > "
                         f"indptr[{r + 1}] = {indptr[r + 1]}")
    outside = np.flatnonzero((indices < 0) | (indices >= cols))
    if outside.size:
        p = int(outside[0])
        raise ValueError(f"indices[{p}] = {indices[p]} is out of range [0, {cols})")
    return indptr.astype(np.int64), indices.astype(np.int64)
