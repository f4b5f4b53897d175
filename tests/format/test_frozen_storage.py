"""Storage that cannot change under what was computed from it (issue 34).

Every array a ``SparseTensor`` or ``ops.SparseMatrix`` gives is a view numpy refuses to make
writable (``format.frozen``), also after pickling and copying; a ``SparseTensor``'s attributes
are fixed; ``from_arrays`` checks every length before it allocates anything; ``from_csr``
takes a list of values.
"""

import copy
import pickle
import tracemalloc

import numpy as np
import pytest
import scipy.sparse

import sparsetir
from sparsetir import ops
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError
from sparsetir.format import Encoding, SparseTensor, encoded_spmm
from sparsetir.format.frozen import frozen

DENSE = np.float32([[1, 0, 2, 0, 0, 0, 0, 0], [0] * 8, [0, 0, 0, 0, 0, 0, 0, 6],
                    [0, 0, 3, 4, 0, 5, 0, 0]])
TWO_OF_FOUR = np.float32([[1, 0, 2, 0, 0, 0, 0, 0], [0] * 8, [0, 0, 0, 0, 0, 0, 0, 6],
                          [0, 0, 3, 4, 0, 5, 0, 0]])
ENCODINGS = {"CSR": "CSR", "DCSR": "DCSR", "COO (AoS)": "COO", "COO (SoA)": "COO_SOA",
             "BSR": Encoding.named("BSR", block=(2, 4)), "2:4": "2:4", "CSC 8-bit":
             Encoding.named("CSC", crd_width=8), "dense": "dense"}


def _public_arrays(tensor):
    """Every array the tensor gives a user."""
    arrays = [("values", tensor.values), ("lvl_coords()", tensor.lvl_coords())]
    for level in range(tensor.encoding.lvl_rank):
        arrays += [(f"positions({level})", tensor.positions(level)),
                   (f"coordinates({level})", tensor.coordinates(level)),
                   (f"coordinates_buffer({level})", tensor.coordinates_buffer(level))]
    return [(name, array) for name, array in arrays if array is not None]


def _cannot_be_made_writable(array, name):
    assert not array.flags.writeable, name
    with pytest.raises(ValueError, match="WRITEABLE"):
        array.flags.writeable = True
    base = array.base
    while isinstance(base, np.ndarray):         # nor can anything it is a view of
        with pytest.raises(ValueError, match="WRITEABLE"):
            base.flags.writeable = True
        base = base.base
    assert isinstance(base, bytes), name


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("how", ["made", "pickled", "deep-copied", "copied"])
def test_no_array_of_a_sparse_tensor_can_be_made_writable(name, how):
    tensor = SparseTensor.from_dense(TWO_OF_FOUR if name == "2:4" else DENSE, ENCODINGS[name])
    again = {"made": lambda t: t, "pickled": lambda t: pickle.loads(pickle.dumps(t)),
             "deep-copied": copy.deepcopy, "copied": copy.copy}[how](tensor)
    for array_name, array in _public_arrays(again):
        _cannot_be_made_writable(array, array_name)
    np.testing.assert_array_equal(again.to_dense(), tensor.to_dense())
    assert again.encoding == tensor.encoding and again.dim_shape == tensor.dim_shape


def test_a_sliced_tensor_survives_pickling_as_its_window():
    enc = Encoding.parse("#sparse_tensor.encoding<{ map = (d0 : #sparse_tensor<slice(1, 2, 1)>,"
                         " d1 : #sparse_tensor<slice(0, 4, 2)>) -> (d0 : dense, "
                         "d1 : compressed) }>")
    tensor = SparseTensor.from_dense(DENSE, enc)
    again = pickle.loads(pickle.dumps(tensor))
    np.testing.assert_array_equal(again.to_dense(), DENSE[1:3, 0:8:2])
    np.testing.assert_array_equal(again.to_dense(), tensor.to_dense())


def test_the_attributes_of_a_sparse_tensor_are_fixed():
    tensor = SparseTensor.from_dense(DENSE, "CSR")
    for name, value in (("values", np.zeros(tensor.nse, np.float32)), ("dim_shape", (2, 2)),
                        ("encoding", Encoding.named("CSC")), ("nse", 0)):
        with pytest.raises(AttributeError, match=f"SparseTensor.{name} cannot be"):
            setattr(tensor, name, value)
        with pytest.raises(AttributeError, match=f"SparseTensor.{name} cannot be deleted"):
            delattr(tensor, name)
    np.testing.assert_array_equal(tensor.to_dense(), DENSE)


def test_the_callers_arrays_stay_theirs():
    values = np.float32([1, 2, 3])
    tensor = SparseTensor.from_arrays("CSR", (2, 3), [None, [0, 2, 3]], [None, [0, 2, 1]],
                                      values)
    values[0] = 100                               # the caller's array, not the tensor's
    assert values.flags.writeable
    assert tensor.to_dense()[0, 0] == 1 and tensor.values[0] == 1


def test_every_view_of_the_storage_agrees_after_a_refused_write():
    """The attack of the issue: coordinates made writable and changed made the tensor two
    tensors (to_dense from a cached walk, encoded_spmm from the new array)."""
    tensor = SparseTensor.from_dense(DENSE, "CSR")
    tensor.to_dense()                              # the walk is cached now
    with pytest.raises(ValueError):
        tensor.coordinates(1).flags.writeable = True
    with pytest.raises(ValueError):
        tensor.coordinates(1)[0] = 5
    kernel = encoded_spmm("CSR", feat_size=3)
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    y = np.full((4, 3), np.nan, np.float32)
    sparsetir.build(sparsetir.lower_sparse_iter(kernel.func), "llvm")(
        *kernel.arguments(tensor, x, y))
    np.testing.assert_allclose(y, tensor.to_dense() @ x)
    np.testing.assert_allclose(y, DENSE @ x)


def test_frozen_keeps_shape_dtype_and_byte_order():
    big_endian = np.array([[1, 2], [3, 4]], ">i4")
    copy_ = frozen(big_endian)
    assert copy_.dtype == np.dtype("int32") and copy_.dtype.isnative
    assert copy_.tolist() == [[1, 2], [3, 4]]
    assert frozen(np.float64(2.5)).shape == ()
    assert frozen(np.zeros((0, 3))).shape == (0, 3)
    assert frozen(None) is None
    assert frozen(np.arange(10)[::3], np.int8).tolist() == [0, 3, 6, 9]


# ---- lengths before allocation ---------------------------------------------------------------

@pytest.mark.parametrize("encoding, shape, positions, coordinates, values, message", [
    ("dense", (2**31, 2**31), [None, None], [None, None], np.ones(4),
     "values has 4 elements, expected 4611686018427387904"),
    ("CSR", (2**31, 2**31), [None, [0, 1]], [None, [0]], np.ones(1),
     "positions has 2 elements, expected 2147483649"),
    (Encoding.named("BSR", block=(2**15, 2**15)), (2**30, 2**30),
     [None, np.r_[0, np.ones(2**15, np.int64)], None, None], [None, [0], None, None],
     np.ones(3), "values has 3 elements, expected 1073741824"),
    ("2:4", (2**31, 2**33), [None] * 3, [None, None, [0, 1]], np.ones(2),
     "coordinates has 2 elements, expected 9223372036854775808"),
])
def test_from_arrays_checks_lengths_before_allocating(encoding, shape, positions, coordinates,
                                                      values, message):
    tracemalloc.start()
    try:
        with pytest.raises(SparseTIRValueError, match=message):
            SparseTensor.from_arrays(encoding, shape, positions, coordinates, values)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**24, f"{peak} bytes allocated before the refusal"


def test_a_large_sparse_tensor_with_few_entries_still_assembles():
    tensor = SparseTensor.from_arrays("DCSR", (2**31, 2**31), [[0, 1], [0, 2]], [[5], [7, 9]],
                                      np.float32([1, 2]))
    coords, values = tensor.to_coo()
    assert coords.tolist() == [[5, 5], [7, 9]] and values.tolist() == [1, 2]


# ---- ops.SparseMatrix --------------------------------------------------------------------------

def _matrix_arrays(matrix):
    arrays = {name: getattr(matrix, name) for name in
              ("indptr", "indices", "data", "source_order", "multiplicity")}
    arrays.update({"in_degrees()": matrix.in_degrees(), "out_degrees()": matrix.out_degrees(),
                   "empty_rows()": matrix.empty_rows(), "transposed()[1]": matrix.transposed()[1],
                   "row_tiles(3)[0]": matrix.row_tiles(3)[0],
                   "row_tiles(3)[1]": matrix.row_tiles(3)[1],
                   "reorder()[1]": matrix.reorder("degree")[1]})
    return {name: array for name, array in arrays.items() if array is not None}


@pytest.mark.parametrize("how", ["made", "pickled", "deep-copied"])
def test_no_array_of_a_sparse_matrix_can_be_made_writable(how):
    coo = scipy.sparse.coo_matrix((np.float32([3, 1, 2, 5, 4]), ([2, 0, 0, 2, 2], [1, 3, 0, 1, 0])),
                                  shape=(4, 4))           # unsorted, a duplicate, an empty row
    matrix = ops.SparseMatrix(coo)
    again = {"made": lambda m: m, "pickled": lambda m: pickle.loads(pickle.dumps(m)),
             "deep-copied": copy.deepcopy}[how](matrix)
    arrays = _matrix_arrays(again)
    assert {"source_order", "multiplicity", "empty_rows()"} <= set(arrays)
    for name, array in arrays.items():
        _cannot_be_made_writable(array, name)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_allclose(ops.spmm(again, x), coo.toarray() @ x)
    np.testing.assert_array_equal(again.source_order, matrix.source_order)


def test_the_degrees_a_matrix_keeps_cannot_be_changed_under_its_mean():
    matrix = ops.SparseMatrix(scipy.sparse.csr_matrix(np.float32([[1, 1], [0, 0], [0, 1]])))
    with pytest.raises(ValueError):
        matrix.in_degrees()[0] = 100
    np.testing.assert_allclose(ops.copy_u_mean(matrix, np.float32([[2], [4]])).ravel(),
                               [3, 0, 4])


def test_from_csr_takes_a_list_of_values_as_numpy_reads_it():
    matrix = ops.SparseMatrix.from_csr([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], (2, 3))
    assert matrix.dtype == np.float64 and matrix.data.tolist() == [1, 2, 3]
    x = np.arange(6, dtype=np.float64).reshape(3, 2)
    want = scipy.sparse.csr_matrix(([1.0, 2.0, 3.0], [0, 2, 1], [0, 2, 3]), shape=(2, 3)) @ x
    np.testing.assert_allclose(ops.gspmm(matrix, "mul", "sum", x, matrix.values[:, None]), want)
    with pytest.raises(SparseTIRTypeError, match="values is int64; sparsetir.ops computes in "
                                                 "float32 or float64"):
        ops.SparseMatrix.from_csr([0, 2, 3], [0, 2, 1], [1, 2, 3], (2, 3))
    with pytest.raises(SparseTIRValueError, match=r"values must have one value per index \(3\)"):
        ops.SparseMatrix.from_csr([0, 2, 3], [0, 2, 1], [1.0, 2.0], (2, 3))


def test_to_dense_of_a_huge_tensor_is_refused_by_its_size():
    tensor = SparseTensor.from_coo([[0], [0]], [1.0], (2**31, 2**31), "COO")
    with pytest.raises(SparseTIRValueError, match=r"to_dense of shape \(2147483648, 2147483648\) "
                                                  "would need 4611686018427387904 elements"):
        tensor.to_dense()
