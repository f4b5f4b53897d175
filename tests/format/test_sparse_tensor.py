"""``sparsetir.format.SparseTensor``: MLIR's storage arrays, conversions, widths and slices.

The expected arrays of the 4x8 matrix below were written by hand from the definitions of the
level types (``dense``: no arrays; ``compressed``: positions ``P + 1`` and one coordinate per
child; ``loose_compressed``: ``(lo, hi)`` per parent; ``compressed(nonunique)`` + ``singleton``:
COO; ``structured[2, 4]``: two in-group offsets per group of four), not from our output; they are
the arrays MLIR's ``sparse_tensor.print`` shows for this matrix in its storage test.
"""

import numpy as np
import pytest
import scipy.sparse

from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError
from sparsetir.format import Encoding, SparseTensor

X = np.array([[1, 0, 2, 0, 0, 0, 0, 0],
              [0, 0, 0, 0, 0, 0, 0, 0],
              [0, 0, 0, 0, 0, 0, 0, 0],
              [0, 0, 3, 4, 0, 5, 0, 0]], dtype=np.float32)

BSR_VALUES = [1, 0, 2, 0, 0, 0, 0, 0,    # block (0, 0): rows 0-1, columns 0-3, row-major
              0, 0, 0, 0, 0, 0, 3, 4,    # block (1, 0)
              0, 0, 0, 0, 0, 5, 0, 0]    # block (1, 1)

# name: (encoding, lvl_shape, {level: positions}, {level: coordinates}, values)
STORAGE = {
    "CSR": ("CSR", (4, 8), {1: [0, 2, 2, 2, 5]}, {1: [0, 2, 2, 3, 5]}, [1, 2, 3, 4, 5]),
    "DCSR": ("DCSR", (4, 8), {0: [0, 2], 1: [0, 2, 5]}, {0: [0, 3], 1: [0, 2, 2, 3, 5]},
             [1, 2, 3, 4, 5]),
    "CSC": ("CSC", (8, 4), {1: [0, 1, 1, 3, 4, 4, 5, 5, 5]}, {1: [0, 0, 3, 3, 3]},
            [1, 2, 3, 4, 5]),
    "DCSC": ("DCSC", (8, 4), {0: [0, 4], 1: [0, 1, 3, 4, 5]}, {0: [0, 2, 3, 5],
                                                                1: [0, 0, 3, 3, 3]},
             [1, 2, 3, 4, 5]),
    "BSR": ("(i, j) -> (i floordiv 2 : dense, j floordiv 4 : compressed, i mod 2 : dense, "
            "j mod 4 : dense)", (2, 2, 2, 4), {1: [0, 1, 3]}, {1: [0, 0, 1]}, BSR_VALUES),
    "BSR-compressed": ("(i, j) -> (i floordiv 2 : compressed, j floordiv 4 : compressed, "
                       "i mod 2 : dense, j mod 4 : dense)", (2, 2, 2, 4),
                       {0: [0, 2], 1: [0, 1, 3]}, {0: [0, 1], 1: [0, 0, 1]}, BSR_VALUES),
    "BSR-column-major": ("(i, j) -> (i floordiv 2 : compressed, j floordiv 4 : compressed, "
                         "j mod 4 : dense, i mod 2 : dense)", (2, 2, 4, 2),
                         {0: [0, 2], 1: [0, 1, 3]}, {0: [0, 1], 1: [0, 0, 1]},
                         [1, 0, 0, 0, 2, 0, 0, 0,     # block (0, 0) column by column
                          0, 0, 0, 0, 0, 3, 0, 4,
                          0, 0, 0, 5, 0, 0, 0, 0]),
    "BSC": ("(i, j) -> (j floordiv 4 : dense, i floordiv 2 : compressed, i mod 2 : dense, "
            "j mod 4 : dense)", (2, 2, 2, 4), {1: [0, 2, 3]}, {1: [0, 1, 1]},
            BSR_VALUES),         # block column 0 holds blocks (0, 0), (1, 0); column 1 (1, 1)
    "BSC-compressed": ("(i, j) -> (j floordiv 4 : compressed, i floordiv 2 : compressed, "
                       "i mod 2 : dense, j mod 4 : dense)", (2, 2, 2, 4),
                       {0: [0, 2], 1: [0, 2, 3]}, {0: [0, 1], 1: [0, 1, 1]}, BSR_VALUES),
    "BSC-column-major": ("(i, j) -> (j floordiv 4 : compressed, i floordiv 2 : compressed, "
                         "j mod 4 : dense, i mod 2 : dense)", (2, 2, 4, 2),
                         {0: [0, 2], 1: [0, 2, 3]}, {0: [0, 1], 1: [0, 1, 1]},
                         [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 4,
                          0, 0, 0, 5, 0, 0, 0, 0]),
    "dense": ("dense", (4, 8), {}, {}, X.ravel().tolist()),
    "dense-transposed": ("(i, j) -> (j : dense, i : dense)", (8, 4), {}, {}, X.T.ravel().tolist()),
    "COO-AoS": ("COO", (4, 8), {0: [0, 5]}, {0: [0, 0, 3, 3, 3], 1: [0, 2, 2, 3, 5]},
                [1, 2, 3, 4, 5]),
    "COO-SoA": ("COO_SOA", (4, 8), {0: [0, 5]}, {0: [0, 0, 3, 3, 3], 1: [0, 2, 2, 3, 5]},
                [1, 2, 3, 4, 5]),
    "loose_compressed": ("(i, j) -> (i : dense, j : loose_compressed)", (4, 8),
                         {1: [0, 2, 2, 2, 2, 2, 2, 5]}, {1: [0, 2, 2, 3, 5]}, [1, 2, 3, 4, 5]),
    "2:4": ("map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), "
            "crdWidth = 8", (4, 2, 4), {},
            {2: [0, 2, 0, 1,  0, 1, 0, 1,  0, 1, 0, 1,  2, 3, 0, 1]},
            [1, 2, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,  3, 4, 0, 5]),
}


@pytest.mark.parametrize("name", STORAGE)
def test_storage_arrays(name):
    """``from_dense`` stores exactly the hand-written arrays, of the widths' dtypes."""
    text, lvl_shape, positions, coordinates, values = STORAGE[name]
    enc = Encoding.named(text)
    t = SparseTensor.from_dense(X, enc)
    assert t.dim_shape == (4, 8) and t.lvl_shape == lvl_shape
    assert t.nse == len(values) and t.values.tolist() == values
    for level in range(enc.lvl_rank):
        pos, crd = t.positions(level), t.coordinates(level)
        assert (pos is None) == (level not in positions)
        assert (crd is None) == (level not in coordinates)
        if pos is not None:
            assert pos.tolist() == positions[level] and pos.dtype == enc.pos_dtype
        if crd is not None:
            assert crd.tolist() == coordinates[level] and crd.dtype == enc.crd_dtype
    assert np.array_equal(t.to_dense(), X)
    again = SparseTensor.from_arrays(enc, (4, 8), [positions.get(l) for l in range(enc.lvl_rank)],
                                     [coordinates.get(l) for l in range(enc.lvl_rank)],
                                     np.float32(values))
    assert np.array_equal(again.to_dense(), X)


def test_two_four_coordinates_are_int8():
    t = SparseTensor.from_dense(X, STORAGE["2:4"][0])
    assert t.coordinates(2).dtype == np.int8 and t.values.dtype == np.float32


def test_coo_buffers():
    """AoS COO: each level's own coordinates, and MLIR's interleaved buffer; SoA: no buffer."""
    aos = SparseTensor.from_dense(X, "COO")
    interleaved = [0, 0, 0, 2, 3, 2, 3, 3, 3, 5]
    assert aos.coordinates_buffer(0).tolist() == interleaved
    assert aos.coordinates_buffer(1).tolist() == interleaved
    soa = SparseTensor.from_dense(X, "COO_SOA")
    assert soa.coordinates_buffer(0).tolist() == [0, 0, 3, 3, 3]
    assert soa.coordinates_buffer(1).tolist() == [0, 2, 2, 3, 5]
    assert SparseTensor.from_dense(X, "CSR").coordinates_buffer(0) is None


def encodings_2d():
    """Every 2-D encoding the issue names (no slices)."""
    return {name: Encoding.named(text) for name, (text, *_) in STORAGE.items()} | {
        "dense": Encoding.named("dense"),
        "BSR-2x3": Encoding.named("BSR", block=(2, 3)),
        "BCOO": Encoding.parse("(i, j) -> (i : loose_compressed(nonunique), j : singleton)"),
        "ELL": Encoding.parse("[c](i, j) -> (c * 3 * i : dense, i : dense, j : compressed)"),
        "unordered-COO": Encoding.parse("(i, j) -> (i : compressed(nonunique, nonordered), "
                                        "j : singleton(nonordered))"),
    }


def test_conversions_between_every_pair():
    """Every encoding converts to every other; ``to_dense`` is the matrix throughout."""
    encodings = encodings_2d()
    made = {name: SparseTensor.from_dense(X, enc, symbols=(2,) if enc.sym_count else None)
            for name, enc in encodings.items()}
    for source, tensor in made.items():
        for target, enc in encodings.items():
            converted = tensor.convert(enc, symbols=(1,) if enc.sym_count else None)
            assert converted.encoding == enc
            assert np.array_equal(converted.to_dense(), X), (source, target)


def random_matrix(m, n, seed, density=0.15):
    """A float64 scipy CSR matrix with every third row empty."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((m, n)) < density, rng.standard_normal((m, n)), 0.0)
    dense[::3] = 0.0
    return scipy.sparse.csr_matrix(dense)


@pytest.mark.parametrize("name", ["CSR", "CSC", "DCSR", "DCSC", "COO-AoS", "COO-SoA", "BSR",
                                  "BSR-2x3", "BSC", "loose_compressed", "BCOO"])
def test_scipy_round_trip(name):
    """Random matrices (empty rows, shapes that are not multiples of the blocks) survive
    ``from_scipy`` and ``to_scipy``; block formats add only stored zeros."""
    enc = encodings_2d()[name]
    for shape, seed in (((13, 21), 0), ((7, 5), 1), ((0, 4), 2), ((6, 0), 3)):
        A = random_matrix(*shape, seed)
        t = SparseTensor.from_scipy(A, enc)
        assert t.dim_shape == shape and t.dtype == np.float64
        B = t.to_scipy()
        assert np.array_equal(B.toarray(), A.toarray())
        if not enc.is_block:
            assert t.nse == A.nnz


def test_two_four_refuses_three_in_a_group():
    y = X.copy()
    y[1, 4:7] = 1
    with pytest.raises(SparseTIRValueError, match=r"at most 2 nonzeros in each group of 4; "
                                                   r"group 3 \(in level order\) has 3"):
        SparseTensor.from_dense(y, "2:4")


def test_stored_zeros():
    """``from_scipy`` keeps explicit zeros and sums duplicates; a structured level drops zeros."""
    A = scipy.sparse.coo_matrix(([1.0, 2.0, 0.0, 5.0], ([0, 0, 1, 1], [1, 1, 0, 3])),
                                shape=(2, 4))
    t = SparseTensor.from_scipy(A, "CSR")
    assert t.positions(1).tolist() == [0, 1, 3] and t.coordinates(1).tolist() == [1, 0, 3]
    assert t.values.tolist() == [3.0, 0.0, 5.0]
    s = SparseTensor.from_scipy(A, "2:4")
    assert s.coordinates(2).tolist() == [0, 1, 0, 3] and s.values.tolist() == [0, 3, 0, 5]


@pytest.mark.parametrize("width, dtype", [(8, np.int8), (16, np.int16), (32, np.int32),
                                          (64, np.int64), (0, np.int64)])
def test_widths(width, dtype):
    enc = Encoding.named("DCSC", pos_width=width, crd_width=width)
    t = SparseTensor.from_dense(X, enc)
    for level in range(2):
        assert t.positions(level).dtype == dtype and t.coordinates(level).dtype == dtype
    assert np.array_equal(t.to_dense(), X)


def test_widths_too_small_raise():
    wide = np.zeros((2, 300), np.float32)
    wide[1, 299] = 1
    with pytest.raises(SparseTIRValueError, match=r"coordinates of level 1 holds 299, which "
                                                   r"crdWidth = 8 \(numpy int8\) cannot hold"):
        SparseTensor.from_dense(wide, Encoding.named("CSR", crd_width=8))
    full = np.ones((1, 200), np.float32)
    with pytest.raises(SparseTIRValueError, match="positions of level 1 holds 200, which "
                                                  "posWidth = 8"):
        SparseTensor.from_dense(full, Encoding.named("CSR", pos_width=8))
    assert SparseTensor.from_dense(full, Encoding.named("CSR", pos_width=16)).positions(1)[-1] \
        == 200
    with pytest.raises(SparseTIRValueError, match=r"coordinates\[1\] holds 299"):
        SparseTensor.from_arrays(Encoding.named("CSR", crd_width=8), (2, 300), [None, [0, 0, 1]],
                                 [None, [299]], np.float32([1]))


def test_slices():
    """A slice encoding stores the underlying tensor and is its slice; conversions to and from
    it go through the slice."""
    enc = Encoding.parse("(i : #sparse_tensor<slice(1, 2, 2)>, j : #sparse_tensor<slice(?, ?, 2)>)"
                         " -> (i : dense, j : compressed)")
    t = SparseTensor.from_dense(X, enc)
    assert t.base_shape == (4, 8) and t.dim_shape == (2, 4)
    assert t.positions(1).tolist() == [0, 2, 2, 2, 5]          # the underlying CSR
    expected = X[1::2, ::2]                                    # rows 1, 3; columns 0, 2, 4, 6
    assert np.array_equal(t.to_dense(), expected)
    csr = t.convert("CSR")
    assert csr.dim_shape == (2, 4) and np.array_equal(csr.to_dense(), expected)
    assert csr.positions(1).tolist() == [0, 0, 1] and csr.coordinates(1).tolist() == [1]
    offset = Encoding.parse("(i, j : #sparse_tensor<slice(2, 3, 1)>) -> (j : dense, "
                            "i : compressed)")
    view = SparseTensor.from_dense(X, "DCSR").convert(offset)
    assert view.dim_shape == (4, 3) and np.array_equal(view.to_dense(), X[:, 2:5])


@pytest.mark.parametrize("piece, reach", [("slice(1, 4, 1)", 4), ("slice(0, 3, 2)", 4),
                                          ("slice(5, ?, 1)", 5)])
def test_slice_past_the_tensor(piece, reach):
    """A slice reaching past the underlying rows raises (it gave rows of zeros before)."""
    enc = f"(i : #sparse_tensor<{piece}>, j) -> (i : dense, j : compressed)"
    with pytest.raises(SparseTIRValueError, match=rf"does not fit in a dimension of size 4: it "
                       rf"reaches index {reach}"):
        SparseTensor.from_dense(X, enc)


def test_three_dimensions():
    """CSF, 3-D COO, a permuted CSF and a 3-D block map, on a tensor with empty slices."""
    rng = np.random.default_rng(4)
    y = np.where(rng.random((5, 6, 7)) < 0.2, rng.standard_normal((5, 6, 7)), 0.0)
    y[2] = 0.0
    encodings = [Encoding.named("CSF"), Encoding.named("COO", rank=3),
                 Encoding.parse("(i, j, k) -> (k : dense, i : compressed, j : compressed)"),
                 Encoding.parse("(i, j, k) -> (i floordiv 2 : dense, j floordiv 3 : dense, "
                                "k floordiv 4 : compressed, i mod 2 : dense, j mod 3 : dense, "
                                "k mod 4 : dense)")]
    tensors = [SparseTensor.from_dense(y, enc) for enc in encodings]
    assert tensors[0].nse == tensors[1].nse == np.count_nonzero(y)
    for tensor in tensors:
        for enc in encodings:
            assert np.array_equal(tensor.convert(enc).to_dense(), y)
    csf = tensors[0]
    i, j, _ = np.nonzero(y)
    assert csf.coordinates(0).tolist() == sorted(set(i.tolist()))
    assert csf.positions(1)[-1] == len(set(zip(i.tolist(), j.tolist())))


def test_from_coo_sums_duplicates():
    t = SparseTensor.from_coo([[1, 0, 1], [2, 2, 2]], [5.0, 7.0, 1.0], (2, 3), "COO")
    assert t.coordinates(0).tolist() == [0, 1] and t.values.tolist() == [7.0, 6.0]
    assert t.to_coo()[0].tolist() == [[0, 1], [2, 2]]


def test_arrays_are_read_only():
    t = SparseTensor.from_dense(X, "CSR")
    for array in (t.values, t.positions(1), t.coordinates(1)):
        with pytest.raises(ValueError):
            array[0] = 1


# (positions, coordinates, values, what the error says), for CSR of shape (3, 4)
BAD_ARRAYS = [
    ([None, [0, 2, 1, 3]], [None, [0, 1, 2]], [1.0] * 3, "positions fall at parent 1"),
    ([None, [1, 2, 2, 3]], [None, [0, 1, 2]], [1.0] * 3, "positions[0] is 1, expected 0"),
    ([None, [0, 2, 2, 4]], [None, [0, 1, 2]], [1.0] * 3,
     "coordinates has 3 elements, expected 4 (positions[-1] of them)"),
    ([None, [0, 2, 2]], [None, [0, 1]], [1.0] * 2,
     "positions has 3 elements, expected 4 (one more than the parent positions)"),
    # arrays longer than the levels give were accepted before (entries nothing reaches)
    ([None, [0, 2, 2, 3, 3]], [None, [0, 1, 2]], [1.0] * 3, "positions has 5 elements, expected 4"),
    ([None, [0, 2, 2, 2]], [None, [0, 1, 2]], [1.0] * 3, "coordinates has 3 elements, expected 2"),
    ([None, [0, 2, 2, 3]], [None, [0, 1, 2]], [1.0] * 4,
     "values has 4 elements, expected 3 (one per position of the last level)"),
    ([None, [0, 2, 2, 3]], [None, [0, 4, 2]], [1.0] * 3, "coordinate 4 is out of range [0, 4)"),
    ([None, [0, 2, 2, 3]], [None, [1, 0, 2]], [1.0] * 3, "coordinates fall (1 then 0)"),
    ([None, [0, 2, 2, 3]], [None, [1, 1, 2]], [1.0] * 3, "coordinates repeat (1 then 1)"),
    ([None, [0, 2, 2, 3]], [None, [0, 1, 2]], [1.0] * 2, "values has 2 elements, expected 3"),
    ([[0, 1], [0, 2, 2, 3]], [None, [0, 1, 2]], [1.0] * 3, "a dense level stores no positions"),
    ([None, None], [None, [0, 1, 2]], [1.0] * 3, "a compressed level stores positions"),
    ([None], [None, [0]], [1.0], "positions needs one entry per level (2)"),
]


@pytest.mark.parametrize("positions, coordinates, values, message", BAD_ARRAYS)
def test_from_arrays_checks(positions, coordinates, values, message):
    with pytest.raises(SparseTIRValueError) as info:
        SparseTensor.from_arrays("CSR", (3, 4), positions, coordinates, np.float64(values))
    assert message in str(info.value)


def test_refused_types():
    with pytest.raises(SparseTIRTypeError, match="must hold integers, got dtype float64"):
        SparseTensor.from_arrays("CSR", (1, 2), [None, [0.0, 1.0]], [None, [0]], [1.0])
    with pytest.raises(SparseTIRTypeError, match="must hold numbers"):
        SparseTensor.from_dense(np.array([["a"]]), "CSR")
    with pytest.raises(SparseTIRTypeError, match="scipy sparse matrix"):
        SparseTensor.from_scipy(X, "CSR")
    with pytest.raises(SparseTIRValueError, match=r"coords\[1, 0\] = 9 is out of range"):
        SparseTensor.from_coo([[0], [9]], [1.0], (2, 3), "CSR")
    with pytest.raises(SparseTIRValueError, match="expected a shape of 2"):
        SparseTensor.from_dense(np.ones(3), "CSR")
    with pytest.raises(SparseTIRValueError, match="to_scipy needs a 2-D tensor"):
        SparseTensor.from_dense(np.ones((2, 2, 2)), "CSF").to_scipy()


def test_bad_arguments_raise_sparsetir_errors():
    """Each of these raised a bare TypeError/ValueError/MemoryError from Python or numpy, or
    was accepted, before."""
    csr = SparseTensor.from_dense(X, "CSR")
    with pytest.raises(SparseTIRTypeError, match="positions must be a list with one entry per "
                       "level"):
        SparseTensor.from_arrays("CSR", (1, 2), None, [None, [0]], [1.0])
    with pytest.raises(SparseTIRTypeError, match=r"the shape must be integers, got \(2\.0, 3\)"):
        SparseTensor.from_coo([[0], [1]], [1.0], (2.0, 3), "CSR")
    with pytest.raises(SparseTIRValueError, match=r"the shape must be integers in \[0, 2\*\*63\)"):
        SparseTensor.from_coo([[0], [1]], [1.0], (2**63, 3), "DCSR")
    with pytest.raises(SparseTIRValueError, match=r"level 1 \(dense\) needs 1048576 x 1048576 "
                       r"= 1099511627776 positions, more than 2\*\*36"):
        SparseTensor.from_coo([[0], [1]], [1.0], (2**20, 2**20), "dense")
    ell = "[s0](i, j) -> (i * (s0 * 4) : dense, i : dense, j : compressed)"
    with pytest.raises(SparseTIRValueError, match=r"symbols must be integers in \[0, 2\*\*63\), "
                       r"got \(-1,\)"):
        SparseTensor.from_dense(X, ell, symbols=(-1,))
    with pytest.raises(SparseTIRValueError, match="level must be in"):
        csr.positions(True)
    mine = np.float32([1, 2, 3])
    t = SparseTensor.from_arrays("CSR", (2, 3), [None, [0, 2, 3]], [None, [0, 2, 1]], mine)
    assert mine.flags.writeable and not np.shares_memory(mine, t.values)   # was locked, shared
    assert not t.values.flags.writeable
    swapped = SparseTensor.from_arrays("CSR", (2, 3), [None, [0, 2, 3]], [None, [0, 2, 1]],
                                       mine.astype(">f4"))
    assert swapped.dtype == np.float32 and swapped.values.tolist() == [1, 2, 3]
    vector = SparseTensor.from_scipy(scipy.sparse.coo_array(X[3]), "sparse")   # 1-D scipy array
    assert vector.coordinates(0).tolist() == [2, 3, 5] and vector.values.tolist() == [3, 4, 5]


def test_blocks_past_the_shape():
    """A 2x3 block map on 4x8 stores whole blocks; the padding of the last block column
    (column 8) is not part of the tensor, and ``from_arrays`` refuses a nonzero there."""
    y = X.copy()
    y[3, 7] = 6
    enc = Encoding.named("BSR", block=(2, 3))
    t = SparseTensor.from_dense(y, enc)
    assert t.lvl_shape == (2, 3, 2, 3) and t.nse == 4 * 6     # blocks (0,0) (1,0) (1,1) (1,2)
    assert t.positions(1).tolist() == [0, 1, 4] and t.coordinates(1).tolist() == [0, 0, 1, 2]
    assert t.values[18:].tolist() == [0, 0, 0, 0, 6, 0]         # rows 2-3, columns 6-8
    assert np.array_equal(t.to_dense(), y) and t.to_coo()[0].shape == (2, 22)
    padded = np.zeros(12, np.float32)
    padded[-1] = 7                                            # block (1, 2): row 3, column 8
    with pytest.raises(SparseTIRValueError, match=r"a nonzero past the tensor's shape \(4, 8\)"):
        SparseTensor.from_arrays(enc, (4, 8), [None, [0, 1, 2], None, None],
                                 [None, [0, 2], None, None], padded)


def test_storage_text():
    """Laid out as MLIR's ``sparse_tensor.print`` shows DCSC for this matrix."""
    assert SparseTensor.from_dense(X, "DCSC").storage_text() == "\n".join([
        "nse = 5", "dim = ( 4, 8 )", "lvl = ( 8, 4 )", "pos[0] : ( 0, 4 )",
        "crd[0] : ( 0, 2, 3, 5 )", "pos[1] : ( 0, 1, 3, 4, 5 )", "crd[1] : ( 0, 0, 3, 3, 3 )",
        "values : ( 1, 2, 3, 4, 5 )"])


@pytest.mark.parametrize("name, crd_lines", [
    # AoS: one buffer, (row, column) of each entry in turn, shown once as crd of level 0
    ("COO", ["crd[0] : ( 0, 0, 0, 2, 3, 2, 3, 3, 3, 5 )"]),
    ("COO_SOA", ["crd[0] : ( 0, 0, 3, 3, 3 )", "crd[1] : ( 0, 2, 2, 3, 5 )"]),
])
def test_storage_text_of_coo(name, crd_lines):
    """MLIR's ``sparse_tensor.print`` shows an AoS COO's coordinates as its one interleaved
    buffer (it printed each level's own array before), an SoA COO's as one array per level."""
    assert SparseTensor.from_dense(X, name).storage_text() == "\n".join([
        "nse = 5", "dim = ( 4, 8 )", "lvl = ( 4, 8 )", "pos[0] : ( 0, 5 )", *crd_lines,
        "values : ( 1, 2, 3, 4, 5 )"])


DS = np.array([[0, 0, 1, 2, 0, 3, 0, 4],        # MLIR's test matrix ds.mtx
               [0, 5, 6, 0, 7, 0, 0, 8],
               [9, 0, 10, 0, 11, 12, 0, 0]], np.float64)
LOOSE = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [0, 0, 5.5, 0], [9, 10, 11, 12],
                  [13, 14, 15, 16]])


@pytest.mark.parametrize("matrix, text, lines", [
    (DS, "(i, j) -> (i : dense, j : loose_compressed)",
     ["pos[1] : ( 0, 4, 4, 8, 8, 12 )", "crd[1] : ( 2, 3, 5, 7, 1, 2, 4, 7, 0, 2, 4, 5 )"]),
    (DS, "map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : block2_4), crdWidth = 8",
     ["crd[2] : ( 2, 3, 1, 3, 1, 2, 0, 3, 0, 2, 0, 1 )"]),
    (LOOSE, "(i, j) -> (i : dense, j : loose_compressed)",
     ["pos[1] : ( 0, 4, 4, 8, 8, 9, 9, 13, 13, 17 )",
      "crd[1] : ( 0, 1, 2, 3, 0, 1, 2, 3, 2, 0, 1, 2, 3, 0, 1, 2, 3 )"]),
])
def test_arrays_mlir_prints(matrix, text, lines):
    """The arrays MLIR's integration tests print for these matrices (sparse_ds.mlir,
    sparse_loose.mlir): loose (lo, hi) pairs side by side, 2:4 in-group offsets."""
    shown = SparseTensor.from_dense(matrix, text).storage_text().split("\n")
    values = matrix[matrix != 0]
    assert shown[3:] == lines + [f"values : ( {', '.join(format(v, 'g') for v in values)} )"]


def test_batched_coo_storage_text():
    """MLIR's batched COO (``dense, loose_compressed(nonunique), singleton``): a (lo, hi) pair
    per batch and the AoS buffer of (row, column) pairs, written by hand for [X, 2 X]."""
    t = SparseTensor.from_dense(np.stack([X, 2 * X]), "(b, i, j) -> (b : dense, "
                                "i : loose_compressed(nonunique), j : singleton)")
    assert t.storage_text() == "\n".join([
        "nse = 10", "dim = ( 2, 4, 8 )", "lvl = ( 2, 4, 8 )", "pos[1] : ( 0, 5, 5, 10 )",
        "crd[1] : ( 0, 0, 0, 2, 3, 2, 3, 3, 3, 5, 0, 0, 0, 2, 3, 2, 3, 3, 3, 5 )",
        "values : ( 1, 2, 3, 4, 5, 2, 4, 6, 8, 10 )"])


def test_coo_regions_mlir_allows():
    """MLIR's verifier allows a singleton after a unique compressed level (one entry per row)
    and a nonunique level with no singleton after it; both were refused before."""
    one_per_row = Encoding.parse("(i, j) -> (i : compressed, j : singleton)")
    y = np.zeros((4, 8), np.float32)
    y[0, 5], y[3, 1] = 1, 2
    t = SparseTensor.from_dense(y, one_per_row)
    assert t.positions(0).tolist() == [0, 2] and t.coordinates(0).tolist() == [0, 3]
    assert t.coordinates(1).tolist() == [5, 1] and t.values.tolist() == [1, 2]
    assert t.coordinates_buffer(0).tolist() == [0, 5, 3, 1]
    assert np.array_equal(t.to_dense(), y)
    with pytest.raises(SparseTIRValueError, match=r"level 0 \(compressed\) is unique, but the "
                       r"entries at level coordinates \[0\] \(parent position 0\) repeat"):
        SparseTensor.from_dense(X, one_per_row)                 # row 0 holds two entries
    vector = SparseTensor.from_dense(X[3], "(i) -> (i : compressed(nonunique))")
    assert vector.positions(0).tolist() == [0, 3] and vector.coordinates(0).tolist() == [2, 3, 5]
    rows = SparseTensor.from_dense(X, "(i, j) -> (i : compressed(nonunique), j : compressed)")
    assert rows.positions(1).tolist() == [0, 2, 5] and np.array_equal(rows.to_dense(), X)


def test_unordered_and_loose_arrays():
    """``from_arrays`` takes what MLIR allows: a nonordered COO with a repeated coordinate
    (summed by ``to_dense``), and loose segments with room after them (slots in the gaps are
    never read)."""
    coo = Encoding.parse("(i, j) -> (i : compressed(nonunique, nonordered), "
                         "j : singleton(nonordered))")
    t = SparseTensor.from_arrays(coo, (2, 3), [[0, 3], None], [[1, 0, 1], [2, 1, 2]],
                                 np.float64([1, 2, 4]))
    assert t.to_dense().tolist() == [[0, 2, 0], [0, 0, 5]]
    assert t.to_coo()[0].tolist() == [[1, 0, 1], [2, 1, 2]]          # in the order of values
    loose = Encoding.parse("(i, j) -> (i : dense, j : loose_compressed)")
    gaps = SparseTensor.from_arrays(loose, (2, 3), [None, [0, 1, 3, 5]],
                                    [None, [2, 99, 99, 0, 1]], np.float64([7, -1, -1, 8, 9]))
    assert gaps.to_dense().tolist() == [[0, 0, 7], [8, 9, 0]]
    assert np.array_equal(gaps.convert("CSR").to_dense(), gaps.to_dense())


def test_other_structured_and_four_dimensions():
    """``structured[1, 4]`` (written by hand) and a 4-D tensor through CSF and a permutation."""
    one_four = Encoding.parse("(i, j) -> (i : dense, j floordiv 4 : dense, "
                              "j mod 4 : structured[1, 4])")
    t = SparseTensor.from_dense(np.float32([[0, 5, 0, 0, 0, 0, 0, 0]]), one_four)
    assert t.coordinates(2).tolist() == [1, 0] and t.values.tolist() == [5, 0]
    rng = np.random.default_rng(7)
    y = np.where(rng.random((3, 4, 2, 5)) < 0.25, 1.0 + rng.random((3, 4, 2, 5)), 0.0)
    permuted = Encoding.parse("(a, b, c, d) -> (d : dense, b : compressed, a : compressed, "
                              "c : compressed)")
    for enc in (Encoding.named("CSF", rank=4), permuted, Encoding.named("COO", rank=4)):
        assert np.array_equal(SparseTensor.from_dense(y, enc).convert(permuted).to_dense(), y)


def test_sparse_vector_and_symbols():
    t = SparseTensor.from_dense(np.float32([0, 3, 0, 4]), "sparse")
    assert t.positions(0).tolist() == [0, 2] and t.coordinates(0).tolist() == [1, 3]
    ell = Encoding.parse("[c](i, j) -> (c * 3 * i : dense, i : dense, j : compressed)")
    with pytest.raises(SparseTIRValueError, match=r"reads 1 symbol\(s\) \(s0\)"):
        SparseTensor.from_dense(X, "CSR").convert(ell)
    t2 = SparseTensor.from_dense(X, "CSR").convert(ell, symbols=(1,))
    assert t2.symbols == (1,) and t2.lvl_shape == (10, 4, 8)
    assert np.array_equal(t2.convert("CSC").to_dense(), X)


@pytest.mark.parametrize("c", [3, 5])
def test_a_symbolic_level_that_wraps_gets_room_for_every_value(c):
    """``i mod c`` holds 0..c-1 wherever it peaks; its size was taken from the last row
    alone (1 for 4 rows and c = 3), and the storage built did not read back."""
    enc = Encoding.parse("[c](i, j) -> (i mod c : dense, i : dense, j : compressed)")
    x = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    assert enc.lvl_shape((4, 3), symbols=(c,))[0] == min(c, 4)   # 4 rows: at most 0..3
    assert np.array_equal(SparseTensor.from_dense(x, enc, symbols=(c,)).to_dense(), x)


@pytest.mark.parametrize("text, symbols, message", [
    ("[c](i, j) -> (i mod c : dense, i : dense, j : compressed)", (0,), "divides by s0"),
    ("[c](i, j) -> (c * 9223372036854775807 * i : dense, i : dense, j : compressed)", (2,),
     "past int64"),
])
def test_a_symbolic_level_that_divides_by_zero_or_overflows_is_named(text, symbols, message):
    enc = Encoding.parse(text)
    with pytest.raises(SparseTIRValueError, match=message):
        enc.lvl_shape((4, 3), symbols=symbols)


def test_overlapping_loose_segments_are_refused():
    """Rows [0, 2) and [0, 2) of a loose level: one stored value in two rows (nse 2, four
    coordinates returned) was accepted."""
    enc = Encoding.parse("(i, j) -> (i : dense, j : loose_compressed)")
    with pytest.raises(SparseTIRValueError, match=r"parents 0 \[0, 2\) and 1 \[0, 2\) overlap"):
        SparseTensor.from_arrays(enc, (2, 4), [None, np.array([0, 2, 0, 2])],
                                 [None, np.array([1, 3])], np.float32([5, 7]))
    fine = SparseTensor.from_arrays(enc, (2, 4), [None, np.array([2, 2, 0, 2])],
                                    [None, np.array([1, 3])], np.float32([5, 7]))
    assert fine.to_dense().tolist() == [[0, 0, 0, 0], [0, 5, 0, 7]]


def test_a_structured_level_of_huge_groups_needs_no_table_of_them():
    """structured[1, 2**32] on a 2 x 3 matrix: the free slots were chosen from a (groups, m)
    table, 8 GiB here; now from the first 2 n columns of each group."""
    enc = Encoding.parse("(i, j) -> (i : dense, j floordiv 4294967296 : dense, "
                         "j mod 4294967296 : structured[1, 4294967296])")
    x = np.array([[1, 0, 0], [0, 0, 2]], np.float32)
    t = SparseTensor.from_dense(x, enc)
    assert t.coordinates(2).tolist() == [0, 2] and np.array_equal(t.to_dense(), x)


def test_bfloat16_values_are_numbers_and_half_values_do_not_reach_scipy():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([[0, 1.5, 0], [2, 0, -3]], dtype=ml_dtypes.bfloat16)
    t = SparseTensor.from_dense(x, "CSR")
    assert t.values.dtype == x.dtype and np.array_equal(t.convert("CSC").to_dense(), x)
    with pytest.raises(SparseTIRTypeError, match="scipy.sparse holds no float16 values"):
        SparseTensor.from_dense(np.eye(2, dtype=np.float16), "CSR").to_scipy()


def test_coordinates_of_the_wrong_rank_are_named():
    with pytest.raises(SparseTIRValueError, match=r"dim_coords must have one row per dimension "
                                                  r"\(2, then the coordinates\), got shape"):
        Encoding.named("CSR").to_levels([[0, 1]])
    with pytest.raises(SparseTIRValueError, match="lvl_coords must have one row per level"):
        Encoding.named("BSR", block=(2, 2)).to_dims([[0], [1]])
