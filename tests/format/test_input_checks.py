"""The one input check of ``sparsetir.format``: every conversion routine refuses the same bad
inputs by name (index arrays of shape (nnz, 1), of floats or bools; ids its output index type
cannot hold; sizes that are bools or floats; values that are integers), converts valid inputs
of other integer types and strided views, and pads with values that are exactly +0."""

import numpy as np
import pytest
import scipy.sparse

from sparsetir.format import (column_part_hyb, condense, csf_to_ell3d, csr_pad, csr_to_bsr,
                              csr_to_ell, row_tiles)
from sparsetir.errors import SparseTIRValueError
from sparsetir.format import FormatTypeError, encoded_spmm

# rows: [0, 2], [], [1], [2, 0, 2] (unsorted, a duplicate), [] ; 5 x 3
INDPTR = np.array([0, 2, 2, 3, 6, 6])
INDICES = np.array([0, 2, 1, 2, 0, 2])
DATA = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)
SHAPE = (5, 3)


def _one_relation(indptr, indices, data, shape, idtype=np.int32, size=2):
    """csf_to_ell3d over the CSR as one relation whose rows are the matrix rows."""
    rows = np.arange(INDPTR.size - 1)
    return csf_to_ell3d([0, rows.size], rows, indptr, indices, [1, 2], rows_per_block=size,
                        idtype=idtype)


# every routine as f(indptr, indices, data, shape, idtype, size)
ROUTINES = {
    "csr_to_bsr": lambda ip, ix, d, s, idtype=np.int32, size=2:
        csr_to_bsr(ip, ix, d, s, size, idtype=idtype),
    "csr_to_ell": lambda ip, ix, d, s, idtype=np.int32, size=2:
        csr_to_ell(ip, ix, d, s, [size], idtype=idtype),
    "csr_pad": lambda ip, ix, d, s, idtype=np.int32, size=2:
        csr_pad(ip, ix, d, s, size, idtype=idtype),
    "column_part_hyb": lambda ip, ix, d, s, idtype=np.int32, size=2:
        column_part_hyb(*s, ip, ix, size, [1, 2], data=d, idtype=idtype),
    "condense": lambda ip, ix, d, s, idtype=np.int32, size=2:
        condense(ip, ix, size, 2, num_cols=s[1], idtype=idtype),
    "csf_to_ell3d": _one_relation,
}
SHAPED = ["csr_to_bsr", "csr_to_ell", "csr_pad", "column_part_hyb"]   # take shape and data


def _call(name, **change):
    args = dict(ip=INDPTR, ix=INDICES, d=DATA, s=SHAPE)
    args.update(change)
    return ROUTINES[name](args.pop("ip"), args.pop("ix"), args.pop("d"), args.pop("s"), **args)


BAD_INDEX_ARRAYS = [
    ("ix", INDICES[:, None], ValueError, "1-D"),
    ("ix", INDICES.astype(np.float64), TypeError, "integers, got float64"),
    ("ix", INDICES + 0.5, TypeError, "truncated"),
    ("ix", INDICES.astype(bool), TypeError, "bool"),
    ("ix", [0, 2, 1, 2, 0, 2**70], TypeError, "integers"),
    ("ip", INDPTR[:, None], ValueError, "1-D"),
    ("ip", INDPTR.astype(np.float32), TypeError, "integers, got float32"),
]


@pytest.mark.parametrize("name", ROUTINES)
@pytest.mark.parametrize("arg, value, error, message", BAD_INDEX_ARRAYS)
def test_every_routine_refuses_bad_index_arrays(name, arg, value, error, message):
    """(nnz, 1) arrays were broadcast, floats truncated, bools taken as 0/1: now refused."""
    with pytest.raises(error, match=message) as refused:
        _call(name, **{arg: value})
    assert isinstance(refused.value, ValueError)      # the documented contract, for every one
    assert ("indices" if arg == "ix" else "indptr") in str(refused.value)


@pytest.mark.parametrize("name", ROUTINES)
@pytest.mark.parametrize("size", [True, 2.5, 2.0, "2", 0, -1])
def test_every_routine_refuses_sizes_that_are_not_positive_integers(name, size):
    with pytest.raises(ValueError, match="positive integer") as refused:
        _call(name, size=size)
    assert isinstance(refused.value, TypeError) == (size not in (0, -1))


@pytest.mark.parametrize("name", ROUTINES)
@pytest.mark.parametrize("idtype", [np.float32, np.uint32, "x", bool])
def test_every_routine_refuses_an_idtype_that_is_no_signed_integer(name, idtype):
    with pytest.raises(FormatTypeError, match="idtype must be a signed integer type"):
        _call(name, idtype=idtype)


@pytest.mark.parametrize("name", SHAPED)
@pytest.mark.parametrize("data, error, message", [
    (DATA.astype(np.int64), TypeError, "floating-point values, got int64"),
    (DATA.astype(bool), TypeError, "floating-point values, got bool"),
    (DATA.astype(np.complex64), TypeError, "floating-point values, got complex64"),
    (DATA[:, None], ValueError, "1-D array of 6 values"),
    (DATA[:5], ValueError, "data has 5 values"),
])
def test_value_arrays_must_be_1d_floats_one_per_index(name, data, error, message):
    with pytest.raises(error, match=message):
        _call(name, d=data)


@pytest.mark.parametrize("name", ["csr_to_bsr", "csr_to_ell", "csr_pad"])
@pytest.mark.parametrize("shape, message", [
    ((5,), "shape must be a pair"), ((5, 3, 1), "shape must be a pair"), (5, "pair"),
    ((5.0, 3), r"shape\[0\] must be a non-negative integer"),
    ((5, True), r"shape\[1\] must be a non-negative integer"), ((5, -3), r"shape\[1\]")])
def test_shapes_must_be_pairs_of_integers(name, shape, message):
    with pytest.raises(ValueError, match=message):
        _call(name, s=shape)


@pytest.mark.parametrize("num_rows, num_cols, message", [
    (5.0, 3, "num_rows must be a non-negative integer"), (True, 3, "num_rows"),
    (5, -3, "num_cols must be a non-negative integer"), (5, "3", "num_cols")])
def test_column_part_hyb_takes_integer_sizes(num_rows, num_cols, message):
    with pytest.raises(ValueError, match=message):
        column_part_hyb(num_rows, num_cols, INDPTR, INDICES, 2, [1, 2])


def test_row_tiles_checks_its_inputs_the_same_way():
    with pytest.raises(ValueError, match="row_indices must be a 1-D array"):
        row_tiles(np.array([[0], [1]]), 3, 1)
    with pytest.raises(TypeError, match="row_indices must hold integers"):
        row_tiles([0.5, 1.5], 3, 1)
    with pytest.raises(TypeError, match="num_rows must be a non-negative integer"):
        row_tiles([0, 1], 3.0, 1)
    with pytest.raises(ValueError, match="row_indices.* out of range"):
        row_tiles([-1, 1], 3, 1)
    big = np.zeros(5, np.int64)
    assert row_tiles(big, 1, 1, idtype=np.int64).tolist() == [0, 5]


# ----------------------------------------------------------------- ids past int32

BIG = 2**31 + 7                   # two columns past int32: wrapped, they would become one


@pytest.mark.parametrize("name", ROUTINES)
def test_ids_past_int32_are_refused_for_int32_outputs_and_kept_for_int64(name):
    indices = INDICES + (BIG - 3)               # columns BIG-3 .. BIG-1
    shape = (5, BIG)
    with pytest.raises(ValueError, match="more than idtype int32 holds: pass idtype=np.int64"):
        _call(name, ix=indices, s=shape, size=1)
    got = _call(name, ix=indices, s=shape, size=1, idtype=np.int64)
    assert _columns(name, got) == set((indices // 1).tolist())


def _columns(name, got) -> set:
    """The column ids a routine's output names on real (unmasked) entries."""
    if name == "csr_to_bsr":
        return set(got[1].tolist())
    if name in ("csr_to_ell", "column_part_hyb"):
        buckets = got if name == "csr_to_ell" else [b for part in got for b in part]
        return {c for b in buckets for c in b.col_indices[b.mask == 1].tolist()}
    if name == "csr_pad":
        return set(got[1][got[2] == 1].tolist())
    if name == "condense":
        k, _, s = np.nonzero(got[2])
        return set(got[1][k, s].tolist())
    return {c for cols, mask in zip(got[2], got[3]) for c in cols[mask == 1].tolist()}


def test_block_ids_that_fit_need_no_int64():
    """csr_to_bsr writes block column ids: columns past int32 in blocks of 4 fit int32."""
    _, indices, _ = csr_to_bsr([0, 1], [BIG - 1], [1.0], (1, BIG), 4)
    assert indices.dtype == np.int32 and indices.tolist() == [(BIG - 1) // 4]


def test_padding_past_int32_is_refused_by_name():
    with pytest.raises(ValueError, match="would hold 4294967296 entries, more than idtype "
                                         "int32 holds: pass idtype=np.int64"):
        csr_pad([0, 1, 2], [0, 0], [1.0, 1.0], (2, 1), 2**31)
    with pytest.raises(ValueError, match="more than idtype int64 holds$"):
        csr_pad([0, 1, 2], [0, 0], [1.0, 1.0], (2, 1), 2**62, idtype=np.int64)


def test_huge_column_counts_do_not_overflow_the_block_keys():
    """csr_to_bsr and condense paired blocks as row * columns + column, which overflowed
    int64 for 2**40 columns and merged blocks of different rows."""
    cols = 2**62
    indptr, indices = [0, 1, 2, 3], [5, cols - 1, 5]
    ip, ix, blocks = csr_to_bsr(indptr, indices, [1.0, 2.0, 3.0], (3, cols), 1,
                                idtype=np.int64)
    assert ip.tolist() == [0, 1, 2, 3] and ix.tolist() == [5, cols - 1, 5]
    assert blocks.ravel().tolist() == [1.0, 2.0, 3.0]
    gi, ti, mask = condense(indptr, indices, 1, 1, num_cols=cols, idtype=np.int64)
    assert gi.tolist() == [0, 1, 2, 3] and ti.ravel().tolist() == [5, cols - 1, 5]


# ------------------------------------------------------------ valid inputs, converted


def _views():
    wide = np.zeros((INDICES.size, 2), np.int64)
    wide[:, 0] = INDICES
    return [("int64 indptr, uint16 indices", INDPTR.astype(np.int64), INDICES.astype(np.uint16)),
            ("lists", INDPTR.tolist(), INDICES.tolist()),
            ("a strided view", INDPTR.astype(np.int32), wide[:, 0]),
            ("uint64 indptr", INDPTR.astype(np.uint64), INDICES.astype(np.int8))]


@pytest.mark.parametrize("name", ROUTINES)
@pytest.mark.parametrize("what, indptr, indices", _views(), ids=[v[0] for v in _views()])
def test_other_integer_types_and_views_are_converted(name, what, indptr, indices):
    reference = _call(name, ip=INDPTR.astype(np.int32), ix=INDICES.astype(np.int32))
    got = _call(name, ip=indptr, ix=indices)
    for a, b in zip(_flat(got), _flat(reference)):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


def _flat(value) -> list:
    if isinstance(value, np.ndarray):
        return [value]
    if value is None:
        return []
    return [array for item in value for array in _flat(item)]


@pytest.mark.parametrize("name", ["csr_to_ell", "column_part_hyb", "csr_pad", "csr_to_bsr"])
def test_padding_values_are_exactly_zero_and_the_matrix_rebuilds(name):
    """NaN, inf and -0.0 among the real values: padding slots still hold +0.0, so they add
    nothing whatever column they name."""
    data = np.array([np.nan, -0.0, np.inf, 2.0, -5.0, 1.0], np.float64)
    got = _call(name, d=data, size=4)
    expected = scipy.sparse.csr_matrix((data, INDICES, INDPTR), shape=SHAPE).toarray()
    dense = np.zeros(SHAPE)
    if name == "csr_to_bsr":
        ip, ix, blocks = got
        rows = np.repeat(np.arange(INDPTR.size - 1), np.diff(INDPTR))
        real = set(zip(rows.tolist(), INDICES.tolist()))
        block_rows = np.repeat(np.arange(ip.size - 1), np.diff(ip))
        for k, i, j in np.ndindex(blocks.shape):
            row, col, value = block_rows[k] * 4 + i, ix[k] * 4 + j, blocks[k, i, j]
            if (row, col) in real:
                dense[row, col] += value
            else:
                assert value == 0 and not np.signbit(value), (row, col, value)
    else:
        if name == "csr_pad":
            ip, ix, mask, values = got
            rows = np.repeat(np.arange(ip.size - 1), np.diff(ip))
            buckets = [(rows[:, None], ix[:, None], mask[:, None], values[:, None])]
        else:
            flat = got if name == "csr_to_ell" else [b for part in got for b in part]
            buckets = [(np.broadcast_to(b.row_indices[:, None], b.mask.shape), b.col_indices,
                        b.mask, b.data) for b in flat]
        for rows, cols, mask, values in buckets:
            padding = values[mask == 0]
            assert (padding == 0).all() and not np.signbit(padding).any()
            real = mask == 1
            np.add.at(dense, (rows[real], cols[real]), values[real])
    np.testing.assert_array_equal(np.isnan(dense), np.isnan(expected))
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(dense[finite], expected[finite])


# ----------------------------------------------------------------- one rule for calls too

@pytest.mark.parametrize("indptr, indices, problem", [
    ([0, 2, 1, 6, 6, 6], INDICES, r"indptr is not monotone: indptr\[1\] = 2 > indptr\[2\] = 1"),
    ([0, 2, 2, 3, 6, 5], INDICES, r"indptr must start at 0 and end at len\(indices\) = 6, got 0 "
                                  "and 5"),
    ([1, 2, 2, 3, 6, 6], INDICES, r"indptr must start at 0 and end at len\(indices\) = 6, got 1 "
                                  "and 6"),
    (INDPTR, [0, 2, 1, 3, 0, 2], r"indices\[3\] = 3 is out of range \[0, 3\)"),
])
def test_conversions_and_kernel_calls_refuse_index_arrays_in_the_same_words(indptr, indices,
                                                                           problem):
    """``format.check_csr`` (every conversion routine) and a kernel call's numpy checks
    (``runtime.validate``) apply one rule and say the same, each naming its argument."""
    from sparsetir.runtime import ArgumentError, check_indices, check_indptr
    with pytest.raises(ValueError, match=f"^{problem}$"):
        csr_to_bsr(indptr, indices, np.ones(6, np.float32), SHAPE, 2)
    indptr, indices = np.asarray(indptr), np.asarray(indices)
    with pytest.raises(ArgumentError, match=f"^(indptr|indices) '(indptr|indices)': {problem}$"):
        check_indptr("indptr", indptr, indices.size, end="len(indices)")
        check_indices("indices", indices, SHAPE[1], row_starts=indptr)


def test_bucket_widths_are_refused_with_a_sparsetir_error():
    """A width of 0 raised the built-in ValueError (the message was already clear)."""
    with pytest.raises(SparseTIRValueError, match="buckets must be a list of positive"):
        column_part_hyb(2, 2, np.int32([0, 1, 2]), np.int32([0, 1]), 1, [0, 2])


def test_an_encoded_kernel_takes_a_numpy_feature_size():
    assert "T.dense_fixed(T.int64(4)" in encoded_spmm("CSR", feat_size=np.int64(4)).func.script()
