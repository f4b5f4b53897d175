"""``sparsetir.format.row_segments``: CSR rows cut into segments of bounded length.

Every segment lies in one row, holds at most ``max_nnz`` nonzeros and at least one, the
segments tile the nonzeros in CSR order, and a row's segments are consecutive; empty rows have
none. Bad input is refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest

from sparsetir.errors import SparseTIRValueError
from sparsetir.format import row_segments


def _indptr(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, 50)
    lengths[[0, 7, 49]] = 0                                  # empty rows, first and last too
    lengths[20] = 1000                                       # one long row
    return np.concatenate([[0], np.cumsum(lengths)])


@pytest.mark.parametrize("max_nnz", [1, 3, 32, 5000])
@pytest.mark.parametrize("seed", [0, 1])
def test_segments_tile_each_row_in_bounded_runs(seed, max_nnz):
    indptr = _indptr(seed)
    seg_ptr, seg_rows = row_segments(indptr, max_nnz)
    assert seg_ptr.dtype == seg_rows.dtype == np.int32
    assert seg_ptr[0] == 0 and seg_ptr[-1] == indptr[-1] and seg_ptr.size == seg_rows.size + 1
    lengths = np.diff(seg_ptr)
    assert (lengths >= 1).all() and (lengths <= max_nnz).all()
    assert (np.diff(seg_rows) >= 0).all()                    # a row's segments are consecutive
    for row in range(indptr.size - 1):
        mine = np.flatnonzero(seg_rows == row)
        expected = -(-(indptr[row + 1] - indptr[row]) // max_nnz)
        assert mine.size == expected
        if mine.size:
            assert seg_ptr[mine[0]] == indptr[row] and seg_ptr[mine[-1] + 1] == indptr[row + 1]


def test_no_nonzeros_no_segments():
    seg_ptr, seg_rows = row_segments([0, 0, 0], 4)
    assert seg_ptr.tolist() == [0] and seg_rows.size == 0


def test_int64_on_request():
    seg_ptr, seg_rows = row_segments([0, 3], 2, idtype=np.int64)
    assert seg_ptr.dtype == seg_rows.dtype == np.int64 and seg_ptr.tolist() == [0, 2, 3]


@pytest.mark.parametrize("indptr, max_nnz, error, message", [
    ([0, 3, 2], 2, SparseTIRValueError,
     r"indptr is not monotone: indptr\[1\] = 3 > indptr\[2\] = 2"),
    ([1, 3], 2, SparseTIRValueError, "indptr must start at 0"),
    ([], 2, SparseTIRValueError, "indptr is empty"),
    ([0, 3], 0, ValueError, "max_nnz"),
    ([0, 3], 1.5, TypeError, "max_nnz"),
    ([0.0, 3.0], 2, TypeError, "indptr"),
])
def test_bad_input_is_refused_by_name(indptr, max_nnz, error, message):
    with pytest.raises(error, match=message):
        row_segments(indptr, max_nnz)
