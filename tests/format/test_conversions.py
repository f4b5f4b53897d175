"""Run-time format conversions (``sparsetir.format``) against plain-Python references.

Every routine is checked on seeded random matrices with empty rows, a row longer than the
largest bucket, shapes that are multiples of nothing, and a matrix with no nonzeros: its
arrays equal a loop-by-loop reference, the matrix rebuilt from them equals ``A.toarray()``,
and bad input raises ``ValueError`` naming the problem.
"""

import numpy as np
import pytest
import scipy.sparse
import tvm

from sparsetir.format import compat
from sparsetir.format import (EllBucket, column_part_hyb, condense, csf_to_ell3d, csr_pad,
                              csr_to_ell, row_tiles)

BUCKETS = [1, 2, 4, 8]


def random_csr(m, n, seed, long_row=30, max_len=12):
    """CSR with unsorted distinct columns per row, every 5th row empty, one row of
    ``long_row`` entries (capped at ``n``)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, min(max_len, n) + 1, m) if n else np.zeros(m, int)
    lengths[::5] = 0
    if m > 1:
        lengths[1] = min(long_row, n)
    indices = [rng.choice(n, size=k, replace=False) for k in lengths]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = np.concatenate(indices + [np.zeros(0, int)]).astype(np.int32)
    data = rng.uniform(0.5, 1.5, indices.size).astype(np.float32)
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(m, n))


MATRICES = {
    "37x53": lambda: random_csr(37, 53, 0),
    "61x17": lambda: random_csr(61, 17, 1, long_row=17),
    "no-nonzeros": lambda: scipy.sparse.csr_matrix((9, 5), dtype=np.float32),
    "no-rows": lambda: scipy.sparse.csr_matrix((0, 4), dtype=np.float32),
    "one-entry": lambda: scipy.sparse.csr_matrix(([2.0], ([0], [2])), shape=(1, 3)),
}


# ----------------------------------------------------------------------------- references


def ref_ell(rows_entries, buckets, indices, data):
    """Bucketed ELL from ``rows_entries``: a list of ``(row, [entry ids])`` in row order."""
    out = [([], [], [], []) for _ in buckets]
    for row, entries in rows_entries:
        if not entries:
            continue
        b = next((i for i, w in enumerate(buckets) if len(entries) <= w), len(buckets) - 1)
        w = buckets[b]
        for s in range(0, len(entries), w):
            piece = entries[s:s + w]
            pad = w - len(piece)
            out[b][0].append(row)
            out[b][1].append([indices[e] for e in piece] + [indices[piece[-1]]] * pad)
            out[b][2].append([1] * len(piece) + [0] * pad)
            out[b][3].append([data[e] for e in piece] + [0] * pad if data is not None else None)
    return [(np.array(r, int), np.array(c, int).reshape(-1, w), np.array(k).reshape(-1, w),
             np.array(d, float).reshape(-1, w) if data is not None else None)
            for (r, c, k, d), w in zip(out, buckets)]


def assert_bucket(got, want, width, idtype=np.int32):
    assert isinstance(got, EllBucket)
    assert got.row_indices.dtype == idtype and got.col_indices.dtype == idtype
    assert got.mask.dtype == np.int8
    assert got.col_indices.shape == got.mask.shape == (got.row_indices.size, width)
    np.testing.assert_array_equal(got.row_indices, want[0])
    np.testing.assert_array_equal(got.col_indices, want[1])
    np.testing.assert_array_equal(got.mask, want[2])
    if want[3] is None:
        assert got.data is None
    else:
        assert got.data.shape == got.mask.shape
        np.testing.assert_allclose(got.data, want[3])


def dense_from_buckets(buckets, shape):
    dense = np.zeros(shape)
    for b in buckets:
        rows = np.broadcast_to(b.row_indices[:, None], b.col_indices.shape)
        np.add.at(dense, (rows, b.col_indices), b.data * b.mask)
    return dense


def csr_rows(a):
    return [(r, list(range(a.indptr[r], a.indptr[r + 1]))) for r in range(a.shape[0])]


# ------------------------------------------------------------------------------ csr_to_ell


@pytest.mark.parametrize("name", MATRICES)
@pytest.mark.parametrize("buckets", [BUCKETS, [3], [2, 5, 6]])
def test_csr_to_ell(name, buckets):
    a = MATRICES[name]()
    got = csr_to_ell(a.indptr, a.indices, a.data, a.shape, buckets)
    want = ref_ell(csr_rows(a), buckets, a.indices, a.data)
    assert len(got) == len(buckets)
    for g, w, width in zip(got, want, buckets):
        assert_bucket(g, w, width)
        assert np.all(np.diff(g.row_indices) >= 0)
        assert g.data.dtype == a.data.dtype
    np.testing.assert_allclose(dense_from_buckets(got, a.shape), a.toarray())
    assert sum(int(b.mask.sum()) for b in got) == a.nnz


def test_csr_to_ell_without_data_and_int64():
    a = MATRICES["37x53"]()
    got = csr_to_ell(a.indptr, a.indices, None, a.shape, BUCKETS, idtype=np.int64)
    for g, w, width in zip(got, ref_ell(csr_rows(a), BUCKETS, a.indices, None), BUCKETS):
        assert_bucket(g, w, width, np.int64)
    # the long row (30 entries) is four consecutive pieces of width 8
    last = got[-1]
    assert last.row_indices.tolist().count(1) == 4
    assert last.mask[last.row_indices == 1].sum() == 30


# ------------------------------------------------------------------------- column_part_hyb


@pytest.mark.parametrize("name", MATRICES)
@pytest.mark.parametrize("parts", [1, 3, 8])
def test_column_part_hyb(name, parts):
    a = MATRICES[name]()
    m, n = a.shape
    got = column_part_hyb(m, n, a.indptr, a.indices, parts, BUCKETS, data=a.data)
    assert len(got) == parts and all(len(p) == len(BUCKETS) for p in got)
    size = -(-n // parts)
    dense = np.zeros(a.shape)
    for p, part in enumerate(got):
        rows_entries = [(r, [e for e in entries if a.indices[e] // size == p])
                        for r, entries in csr_rows(a)]
        want = ref_ell(rows_entries, BUCKETS, a.indices, a.data)
        for g, w, width in zip(part, want, BUCKETS):
            assert_bucket(g, w, width)
            real = g.col_indices[g.mask == 1]
            assert np.all((real >= p * size) & (real < (p + 1) * size))
        dense += dense_from_buckets(part, a.shape)
    np.testing.assert_allclose(dense, a.toarray())


def test_column_part_hyb_without_data():
    a = MATRICES["37x53"]()
    got = column_part_hyb(*a.shape, a.indptr, a.indices, 2, BUCKETS)
    assert all(b.data is None for part in got for b in part)
    assert sum(int(b.mask.sum()) for part in got for b in part) == a.nnz


@pytest.mark.parametrize("tile", [1, 4, 7, 100])
def test_row_tiles(tile):
    a = MATRICES["37x53"]()
    rows = csr_to_ell(a.indptr, a.indices, a.data, a.shape, BUCKETS)[-1].row_indices
    got = row_tiles(rows, a.shape[0], tile)
    num_tiles = -(-a.shape[0] // tile)
    want = [sum(1 for r in rows if r < t * tile) for t in range(num_tiles + 1)]
    assert got.dtype == np.int32
    assert got.tolist() == want and got[-1] == rows.size
    assert row_tiles([], 0, 4).tolist() == [0]


# -------------------------------------------------------------------------------- condense


def ref_condense(a, t, g):
    indptr, groups, masks = [0], [], []
    for start in range(0, a.shape[0], t):
        cols = sorted({int(c) for r in range(start, min(start + t, a.shape[0]))
                       for c in a.indices[a.indptr[r]:a.indptr[r + 1]]})
        for s in range(0, len(cols), g):
            chunk = cols[s:s + g]
            groups.append(chunk + [chunk[-1]] * (g - len(chunk)))
            mask = np.zeros((t, g), int)
            for r in range(start, min(start + t, a.shape[0])):
                for c in a.indices[a.indptr[r]:a.indptr[r + 1]]:
                    if c in chunk:
                        mask[r - start, chunk.index(c)] = 1
            masks.append(mask)
        indptr.append(len(groups))
    return indptr, np.array(groups, int).reshape(-1, g), np.array(masks).reshape(-1, t, g)


@pytest.mark.parametrize("name", MATRICES)
@pytest.mark.parametrize("t,g", [(1, 1), (4, 3), (16, 8), (5, 64)])
def test_condense(name, t, g):
    a = MATRICES[name]()
    group_indptr, tile_indices, mask = condense(a.indptr, a.indices, t, g)
    want = ref_condense(a, t, g)
    assert group_indptr.dtype == tile_indices.dtype == np.int32 and mask.dtype == np.int8
    assert group_indptr.tolist() == want[0]
    assert len(want[0]) == -(-a.shape[0] // t) + 1
    np.testing.assert_array_equal(tile_indices, want[1])
    np.testing.assert_array_equal(mask, want[2])
    # rebuild the sparsity pattern from the tiles
    pattern = np.zeros((-(-a.shape[0] // t) * t, a.shape[1]))
    for i in range(len(group_indptr) - 1):
        for k in range(group_indptr[i], group_indptr[i + 1]):
            np.add.at(pattern, (slice(i * t, (i + 1) * t), tile_indices[k]), mask[k])
    np.testing.assert_array_equal(pattern[:a.shape[0]], a.toarray() != 0)


def test_condense_num_cols():
    assert condense([0, 1], [2], 2, 2, num_cols=3)[1].tolist() == [[2, 2]]
    with pytest.raises(ValueError, match="out of range"):
        condense([0, 1], [3], 2, 2, num_cols=3)


# ---------------------------------------------------------------------------- csf_to_ell3d


def random_csf(num_rels, m, n, seed):
    """A (relation, row, column) CSF: per relation a random subset of rows, some empty,
    relation 0 has a row of 25 columns."""
    rng = np.random.default_rng(seed)
    indptr_0, rows, indptr_1, cols = [0], [], [0], []
    for rel in range(num_rels):
        chosen = np.sort(rng.choice(m, size=rng.integers(0, m + 1), replace=False))
        for i, r in enumerate(chosen):
            k = 25 if rel == 0 and i == 0 else int(rng.integers(0, 7))
            rows.append(int(r))
            cols.extend(rng.choice(n, size=min(k, n), replace=False).tolist())
            indptr_1.append(len(cols))
        indptr_0.append(len(rows))
    return indptr_0, rows, indptr_1, cols


def ref_ell3d(indptr_0, rows, indptr_1, cols, buckets, block_rows):
    out = []
    for w, r in zip(buckets, block_rows):
        indptr, row_blocks, col_blocks, mask_blocks = [0], [], [], []
        for rel in range(len(indptr_0) - 1):
            fibers = [(rows[i], list(range(indptr_1[i], indptr_1[i + 1])))
                      for i in range(indptr_0[rel], indptr_0[rel + 1])]
            fibers = [(row, e) for row, e in fibers
                      if e and next((i for i, x in enumerate(buckets) if len(e) <= x),
                                    len(buckets) - 1) == buckets.index(w)]
            ell = ref_ell(fibers, [w], cols, None)[0]
            for s in range(0, ell[0].size, r):
                take = list(range(s, min(s + r, ell[0].size)))
                take += [take[-1]] * (r - len(take))
                real = np.arange(r) < ell[0].size - s
                row_blocks.append(ell[0][take])
                col_blocks.append(ell[1][take])
                mask_blocks.append(ell[2][take] * real[:, None])
            indptr.append(len(row_blocks))
        out.append((indptr, np.array(row_blocks).reshape(-1, r),
                    np.array(col_blocks).reshape(-1, r, w),
                    np.array(mask_blocks).reshape(-1, r, w)))
    return out


@pytest.mark.parametrize("seed,num_rels,m,n", [(0, 3, 11, 30), (1, 1, 1, 1), (2, 5, 7, 9)])
@pytest.mark.parametrize("buckets,block_rows", [([1, 2, 4, 8], [8, 4, 2, 1]), ([3], [1]),
                                                ([2, 5], [3, 3])])
def test_csf_to_ell3d(seed, num_rels, m, n, buckets, block_rows):
    csf = random_csf(num_rels, m, n, seed)
    got = csf_to_ell3d(*csf, buckets, rows_per_block=block_rows)
    assert all(len(x) == len(buckets) for x in got)
    tensor = np.zeros((num_rels, m, n))
    for b, (w, r) in enumerate(zip(buckets, block_rows)):
        indptr, row_indices, col_indices, mask = (x[b] for x in got)
        want = ref_ell3d(*csf, buckets, block_rows)[b]
        assert indptr.dtype == row_indices.dtype == col_indices.dtype == np.int32
        assert mask.dtype == np.int8
        assert indptr.tolist() == want[0]
        np.testing.assert_array_equal(row_indices, want[1])
        np.testing.assert_array_equal(col_indices, want[2])
        np.testing.assert_array_equal(mask, want[3])
        rel = np.repeat(np.arange(num_rels), np.diff(indptr))
        np.add.at(tensor, (rel[:, None, None], row_indices[:, :, None], col_indices), mask)
    expected = np.zeros_like(tensor)
    indptr_0, rows, indptr_1, cols = csf
    for rel in range(num_rels):
        for i in range(indptr_0[rel], indptr_0[rel + 1]):
            expected[rel, rows[i], cols[indptr_1[i]:indptr_1[i + 1]]] += 1
    np.testing.assert_array_equal(tensor, expected)


def test_csf_to_ell3d_empty():
    ip, ri, ci, m = csf_to_ell3d([0, 0, 0], [], [0], [], [2, 4], rows_per_block=2)
    assert [x.tolist() for x in ip] == [[0, 0, 0], [0, 0, 0]]
    assert [x.shape for x in ci] == [(0, 2, 2), (0, 2, 4)]


# --------------------------------------------------------------------------------- csr_pad


@pytest.mark.parametrize("name", MATRICES)
@pytest.mark.parametrize("multiple", [1, 4, 32])
def test_csr_pad(name, multiple):
    a = MATRICES[name]()
    indptr, indices, mask, data = csr_pad(a.indptr, a.indices, a.data, a.shape, multiple)
    want_indptr, want_indices, want_mask, want_data = [0], [], [], []
    for r in range(a.shape[0]):
        entries = list(range(a.indptr[r], a.indptr[r + 1]))
        pad = -len(entries) % multiple
        last = [a.indices[e] for e in entries[-1:]]   # empty rows get no padding
        want_indices += [a.indices[e] for e in entries] + last * pad
        want_mask += [1] * len(entries) + [0] * pad
        want_data += [a.data[e] for e in entries] + [0] * pad
        want_indptr.append(len(want_indices))
    assert indptr.dtype == indices.dtype == np.int32 and mask.dtype == np.int8
    assert data.dtype == a.data.dtype
    assert indptr.tolist() == want_indptr
    assert indices.tolist() == want_indices and mask.tolist() == want_mask
    np.testing.assert_allclose(data, np.array(want_data, float))
    assert np.all(np.diff(indptr) % multiple == 0)
    rebuilt = scipy.sparse.csr_matrix((data, indices, indptr), shape=a.shape)
    np.testing.assert_allclose(rebuilt.toarray(), a.toarray())
    assert csr_pad(a.indptr, a.indices, None, a.shape, multiple)[3] is None


# ------------------------------------------------------------------------------ bad input

GOOD = ([0, 2, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], (3, 3))
NOT_MONOTONE = ([0, 2, 1, 3], [0, 2, 1], [1.0, 2.0, 3.0], (3, 3))
OUT_OF_RANGE = ([0, 2, 2, 3], [0, 3, 1], [1.0, 2.0, 3.0], (3, 3))
NEGATIVE = ([0, 2, 2, 3], [0, -1, 1], [1.0, 2.0, 3.0], (3, 3))
SHORT_DATA = ([0, 2, 2, 3], [0, 2, 1], [1.0, 2.0], (3, 3))


def ell(csr, buckets=(1, 2)):
    return csr_to_ell(*csr, list(buckets))


def hyb(csr, parts=2, buckets=(1, 2)):
    indptr, indices, data, shape = csr
    return column_part_hyb(*shape, indptr, indices, parts, list(buckets), data=data)


def cond(csr, t=2, g=2):
    return condense(csr[0], csr[1], t, g)


def ell3d(csr, buckets=(1, 2), rows_per_block=1):
    indptr, indices, _, _ = csr   # level 0: one relation over all rows of the CSR
    return csf_to_ell3d([0, len(indptr) - 1], list(range(len(indptr) - 1)), indptr, indices,
                        list(buckets), rows_per_block=rows_per_block)


def pad(csr, multiple=4):
    return csr_pad(*csr, multiple)


BAD = [
    (ell, (NOT_MONOTONE,), "not monotone"),
    (ell, (OUT_OF_RANGE,), "out of range"),
    (ell, (SHORT_DATA,), "data has 2 values"),
    (ell, (GOOD, []), "non-empty"),
    (ell, (GOOD, [2, 2]), "strictly increasing"),
    (ell, (GOOD, [4, 2]), "strictly increasing"),
    (ell, (GOOD, [0, 2]), "positive"),
    (ell, (GOOD, [-1]), "positive"),
    (ell, (GOOD, [1.5]), "integers"),
    (hyb, (NOT_MONOTONE,), "not monotone"),
    (hyb, (OUT_OF_RANGE,), "out of range"),
    (hyb, (SHORT_DATA,), "data has 2 values"),
    (hyb, (GOOD, 0), "num_col_parts must be a positive integer"),
    (hyb, (GOOD, -2), "num_col_parts must be a positive integer"),
    (hyb, (GOOD, 2, []), "non-empty"),
    (hyb, (GOOD, 2, [3, 1]), "strictly increasing"),
    (hyb, (GOOD, 2, [0]), "positive"),
    (cond, (NOT_MONOTONE,), "not monotone"),
    (cond, (NEGATIVE,), "out of range"),
    (cond, (GOOD, 0), "tile must be a positive integer"),
    (cond, (GOOD, 2, -1), "group must be a positive integer"),
    (ell3d, (NOT_MONOTONE,), "CSF level 1: indptr is not monotone"),
    (ell3d, (NEGATIVE,), "CSF level 1: .*out of range"),
    (ell3d, (GOOD, []), "non-empty"),
    (ell3d, (GOOD, [2, 1]), "strictly increasing"),
    (ell3d, (GOOD, [0, 1]), "positive"),
    (ell3d, (GOOD, [1, 2], 0), "rows_per_block must be a positive integer"),
    (ell3d, (GOOD, [1, 2], [1]), "rows_per_block has 1 entries"),
    (pad, (NOT_MONOTONE,), "not monotone"),
    (pad, (OUT_OF_RANGE,), "out of range"),
    (pad, (SHORT_DATA,), "data has 2 values"),
    (pad, (GOOD, 0), "multiple must be a positive integer"),
    (pad, (GOOD, -32), "multiple must be a positive integer"),
]


@pytest.mark.parametrize("fn,args,message", BAD,
                         ids=[f"{fn.__name__}-{message[:24]}" for fn, _, message in BAD])
def test_bad_input_is_refused(fn, args, message):
    with pytest.raises(ValueError, match=message):
        fn(*args)


def test_bad_csf_levels_are_refused():
    with pytest.raises(ValueError, match="CSF level 0: indptr is not monotone"):
        csf_to_ell3d([0, 2, 1], [0], [0, 1], [0], [1])
    with pytest.raises(ValueError, match="csf_indptr_1 has 3 entries"):
        csf_to_ell3d([0, 1], [0], [0, 1, 2], [0, 1], [1])
    with pytest.raises(ValueError, match="csf_indptr_0 must be a non-empty"):
        csf_to_ell3d([], [], [0], [], [1])


def test_bad_row_tiles_are_refused():
    with pytest.raises(ValueError, match="tile_rows must be a positive integer"):
        row_tiles([0, 1], 4, 0)
    with pytest.raises(ValueError, match="not sorted"):
        row_tiles([2, 1], 4, 2)
    with pytest.raises(ValueError, match="out of range"):
        row_tiles([0, 4], 4, 2)


# ------------------------------------------------------------ SparseTIR's forms (compat)


@pytest.mark.parametrize("name", ["37x53", "61x17", "no-nonzeros"])
def test_compat_column_part_hyb_is_sparsetirs_form(name):
    """``(row_indices, col_indices, mask)`` nested ``[part][bucket]``, int32 TVM tensors, padding
    column 0; otherwise ``sparsetir.format.column_part_hyb``'s buckets."""
    a = MATRICES[name]()
    ip, ix = tvm.runtime.tensor(a.indptr), tvm.runtime.tensor(a.indices)
    rows, cols, mask = compat.column_part_hyb(*a.shape, ip, ix, 3, BUCKETS)
    native = column_part_hyb(*a.shape, a.indptr, a.indices, 3, BUCKETS)
    assert [len(x) for x in (rows, cols, mask)] == [3, 3, 3]
    for p in range(3):
        for b, width in enumerate(BUCKETS):
            r, c, m = (x[p][b].numpy() for x in (rows, cols, mask))
            assert r.dtype == c.dtype == m.dtype == np.int32
            assert c.shape == m.shape == (r.size, width)
            bucket = native[p][b]
            np.testing.assert_array_equal(r, bucket.row_indices)
            np.testing.assert_array_equal(m, bucket.mask)
            np.testing.assert_array_equal(c, np.where(bucket.mask, bucket.col_indices, 0))


def test_compat_condense_pads_with_column_zero():
    group_indptr, tile_indices, mask = compat.condense([0, 2, 3, 4], [1, 5, 5, 0], 2, 2)
    assert group_indptr.numpy().tolist() == [0, 1, 2]
    assert tile_indices.numpy().tolist() == [[1, 5], [0, 0]]
    assert mask.numpy().dtype == np.int32 and mask.numpy().shape == (2, 2, 2)
    _, tiles, _ = compat.condense([0, 1, 2], [4, 4], 2, 2)       # one column: slot 1 is padding
    assert tiles.numpy().tolist() == [[4, 0]]
    assert condense([0, 1, 2], [4, 4], 2, 2)[1].tolist() == [[4, 4]]


def test_compat_csf_to_ell3d_takes_sparsetirs_order():
    csf = random_csf(3, 11, 30, 0)
    tensors = [tvm.runtime.tensor(np.asarray(x, np.int32)) for x in csf]
    ip, ri, ci, m = compat.csf_to_ell3d(*tensors, [8, 4, 2, 1], [1, 2, 4, 8])
    native = csf_to_ell3d(*csf, [1, 2, 4, 8], rows_per_block=[8, 4, 2, 1])
    for b in range(4):
        np.testing.assert_array_equal(ip[b].numpy(), native[0][b])
        np.testing.assert_array_equal(ri[b].numpy(), native[1][b])
        np.testing.assert_array_equal(m[b].numpy(), native[3][b])
        np.testing.assert_array_equal(ci[b].numpy(), np.where(native[3][b], native[2][b], 0))
        assert ci[b].numpy().dtype == m[b].numpy().dtype == np.int32


def test_sparsetirs_positional_csf_to_ell3d_says_what_to_write():
    csf = random_csf(2, 5, 9, 1)
    with pytest.raises(TypeError, match=r"buckets=nnz_cols_bkt, rows_per_block=nnz_rows_bkt\)"
                                        r" here, or sparsetir.format.compat.csf_to_ell3d"):
        csf_to_ell3d(*csf, [8, 4, 2, 1], [1, 2, 4, 8])


def test_tvm_tensors_are_read_as_arrays():
    a = MATRICES["37x53"]()
    got = csr_to_ell(tvm.runtime.tensor(a.indptr), tvm.runtime.tensor(a.indices),
                     tvm.runtime.tensor(a.data), a.shape, BUCKETS)
    want = csr_to_ell(a.indptr, a.indices, a.data, a.shape, BUCKETS)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.col_indices, w.col_indices)
        np.testing.assert_array_equal(g.data, w.data)
