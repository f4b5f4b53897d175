"""Private storage: nothing a user can reach changes what sparsetir computes from a tensor
(issue 34, the hole left by read-only arrays).

``torch.from_numpy`` ignores numpy's read-only flag, and a raw pointer (ctypes) ignores
everything, so the arrays a ``SparseTensor`` or ``ops.SparseMatrix`` hands out are copies of
its private storage: writing them through such an alias changes only that copy. The
caller's own arrays are copied once at construction. Every result is checked against scipy
(or numpy) of the data the tensor was made from, after the writes; ``np.frombuffer``,
``memoryview`` and ``ctypes.from_buffer`` of the handed-out arrays are refused outright.
"""

import copy
import ctypes
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse

import sparsetir
import sparsetir.algebra as alg
from sparsetir import ops
from sparsetir.format import Encoding, SparseTensor, encoded_spmm
from sparsetir.ops.graph_tensors import graph_tensors

torch = pytest.importorskip("torch")

DENSE = np.float32([[1, 0, 2, 0, 0, 0, 0, 0], [0] * 8, [0, 0, 0, 0, 0, 0, 0, 6],
                    [0, 0, 3, 4, 0, 5, 0, 0]])            # row 1 empty
ENCODINGS = {"CSR": "CSR", "DCSR": "DCSR", "COO (AoS)": "COO", "COO (SoA)": "COO_SOA",
             "CSC": "CSC", "BSR": Encoding.named("BSR", block=(2, 4)),
             "CSR 8-bit": Encoding.named("CSR", crd_width=8, pos_width=8), "dense": "dense"}


def _handed_out(tensor):
    """Every array the tensor gives a user, by name."""
    arrays = {"values": tensor.values, "lvl_coords()": tensor.lvl_coords()}
    for level in range(tensor.encoding.lvl_rank):
        arrays.update({f"positions({level})": tensor.positions(level),
                       f"coordinates({level})": tensor.coordinates(level),
                       f"coordinates_buffer({level})": tensor.coordinates_buffer(level)})
    return {name: array for name, array in arrays.items() if array is not None and array.size}


def _scribble(array):
    """Write through a torch alias (which ignores numpy's read-only flag): every element
    moved to another value of its dtype that an index array could still hold."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)       # "The given NumPy array is not writable"
        alias = torch.from_numpy(array)
    if alias.is_floating_point():
        alias.fill_(99.0)
    else:
        alias.copy_(torch.flip(alias, [0]) if alias.dim() == 1 else alias.flip(-1))
        alias[..., 0] = 0


def _spmm(tensor, x):
    kernel = encoded_spmm(tensor.encoding, feat_size=x.shape[1])
    y = np.full((tensor.dim_shape[0], x.shape[1]), np.nan, np.float32)
    built = sparsetir.build(sparsetir.lower_sparse_iter(kernel.func), "llvm")
    built(*kernel.arguments(tensor, x, y))
    return y


@pytest.mark.parametrize("name", ENCODINGS)
def test_writing_the_handed_out_arrays_through_torch_changes_no_result(name):
    tensor = SparseTensor.from_dense(DENSE, ENCODINGS[name])
    tensor.to_dense()                                      # its walk is cached now
    arrays = _handed_out(tensor)
    before = {key: array.copy() for key, array in arrays.items()}
    for array in arrays.values():
        _scribble(array)
    assert any(not np.array_equal(arrays[k], before[k]) for k in arrays)   # the writes landed
    want = scipy.sparse.csr_matrix(DENSE)
    np.testing.assert_array_equal(tensor.to_dense(), DENSE)
    np.testing.assert_array_equal(tensor.to_scipy().toarray(), want.toarray())
    np.testing.assert_array_equal(tensor.convert("CSR").to_dense(), DENSE)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(tensor)).to_dense(), DENSE)
    np.testing.assert_array_equal(copy.deepcopy(tensor).to_dense(), DENSE)
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    np.testing.assert_allclose(ops.spmm(ops.SparseMatrix(tensor), x), want @ x)
    if name != "dense":
        b = tensor if name in ("CSR", "DCSR") else tensor.convert("CSR")
        k = alg.compile("a(i) = B(i,j) * c(j)", formats={"B": "CSR"}, dtype="float32")
        np.testing.assert_allclose(k(B=b, c=np.arange(8, dtype=np.float32)),
                                   want @ np.arange(8, dtype=np.float32))
    if name in ("CSR", "DCSR", "COO (AoS)", "CSC", "CSR 8-bit"):
        np.testing.assert_allclose(_spmm(tensor, x), want @ x)


def test_a_raw_pointer_write_changes_only_the_copy_it_reached():
    tensor = SparseTensor.from_dense(DENSE, "CSR")
    values = tensor.values
    nines = np.full(values.size, 9, values.dtype)
    ctypes.memmove(values.ctypes.data, nines.ctypes.data, values.nbytes)
    assert values.tolist() == [9] * values.size          # the handed-out copy changed
    np.testing.assert_array_equal(tensor.to_dense(), DENSE)
    assert tensor.values is values                        # kept: what the user was given


@pytest.mark.parametrize("name", ["values", "positions(1)", "coordinates(1)", "lvl_coords()"])
def test_buffer_aliases_of_the_handed_out_arrays_are_refused(name):
    array = _handed_out(SparseTensor.from_dense(DENSE, "CSR"))[name]
    view = np.frombuffer(array, array.dtype)
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="WRITEABLE"):
        view.flags.writeable = True
    with pytest.raises(TypeError):
        memoryview(array)[0] = 1
    with pytest.raises(TypeError):
        ctypes.c_char.from_buffer(array)


def test_the_storage_is_not_what_is_handed_out():
    tensor = SparseTensor.from_dense(DENSE, "DCSR")
    positions, coordinates, values = tensor.storage()
    assert values is not tensor.values and coordinates[1] is not tensor.coordinates(1)
    for array in (values, positions[0], coordinates[1]):
        assert not array.flags.writeable
        with pytest.raises(ValueError, match="WRITEABLE"):
            array.flags.writeable = True
    np.testing.assert_array_equal(values, tensor.values)


@pytest.mark.parametrize("made", ["from_arrays", "from_coo", "from_dense", "from_scipy"])
def test_the_callers_arrays_changed_afterwards_change_no_result(made):
    csr = scipy.sparse.csr_matrix(DENSE)
    indptr, indices, data = csr.indptr.copy(), csr.indices.copy(), csr.data.copy()
    coo = csr.tocoo()
    coords = np.stack([coo.row, coo.col]).astype(np.int64)
    dense = DENSE.copy()
    tensor = {"from_arrays": lambda: SparseTensor.from_arrays(
                  "CSR", DENSE.shape, [None, indptr], [None, indices], data),
              "from_coo": lambda: SparseTensor.from_coo(coords, data, DENSE.shape, "CSR"),
              "from_dense": lambda: SparseTensor.from_dense(dense, "CSR"),
              "from_scipy": lambda: SparseTensor.from_scipy(csr, "CSR")}[made]()
    for array in (indptr, indices, data, coords, dense, csr.data, csr.indices):
        array[...] = np.flip(array) if array.ndim == 1 else 0
    np.testing.assert_array_equal(tensor.to_dense(), DENSE)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(tensor)).to_dense(), DENSE)


def test_from_arrays_keeps_a_frozen_copy_in_the_given_widths():
    """int32 arrays for a 32-bit encoding: stored as int32, apart from the caller's."""
    enc = Encoding.named("CSR", pos_width=32, crd_width=32)
    indptr, indices = np.int32([0, 2, 2, 3, 6]), np.int32([0, 2, 7, 2, 3, 5])
    tensor = SparseTensor.from_arrays(enc, DENSE.shape, [None, indptr], [None, indices],
                                      np.float32([1, 2, 6, 3, 4, 5]))
    stored = tensor.storage()[0][1]
    assert stored.dtype == np.int32 and not np.shares_memory(stored, indptr)
    assert isinstance(stored.base.base, bytes)             # frozen's copy
    np.testing.assert_array_equal(tensor.to_dense(), DENSE)


# ---- ops.SparseMatrix --------------------------------------------------------------------------

def _duplicated(dtype=np.float64):
    """Unsorted, with a duplicate (multiplicity, source_order) and an empty row."""
    return scipy.sparse.coo_matrix((np.array([3, 1, 2, 5, 4], dtype), ([2, 0, 0, 2, 2],
                                                                      [1, 3, 0, 1, 0])),
                                   shape=(4, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_writing_a_matrix_s_public_arrays_through_torch_changes_no_result(dtype):
    coo = _duplicated(dtype)
    matrix = ops.SparseMatrix(coo)
    before = ops.SparseMatrix(coo)
    for name in ("indptr", "indices", "data", "source_order", "multiplicity"):
        _scribble(getattr(matrix, name))
    assert matrix.data.tolist() == [99] * matrix.nnz      # the public copy changed
    want = coo.toarray()
    x = np.arange(8, dtype=dtype).reshape(4, 2)
    np.testing.assert_allclose(ops.spmm(matrix, x), want @ x)               # dtype's own path
    np.testing.assert_allclose(ops.spmm(matrix, torch.from_numpy(x).requires_grad_()).detach(),
                               want @ x)                                     # autograd path
    np.testing.assert_array_equal(matrix.to_scipy().toarray(), want)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(matrix)).to_scipy().toarray(), want)
    transpose, perm = matrix.transposed()
    np.testing.assert_array_equal(transpose.to_scipy().toarray(), want.T)
    edges = matrix.edge_matrix()
    np.testing.assert_array_equal(edges.to_scipy().toarray(), want)
    np.testing.assert_array_equal(edges.source_order, before.edge_matrix().source_order)
    reordered, order = matrix.reorder("degree")
    np.testing.assert_array_equal(reordered.to_scipy().toarray(), want[order][:, order])


def test_a_pickled_matrix_keeps_its_private_source_order_and_multiplicity():
    matrix = ops.SparseMatrix(_duplicated())
    order, counts = matrix.source_order.copy(), matrix.multiplicity.copy()
    _scribble(matrix.source_order)
    _scribble(matrix.multiplicity)
    again = pickle.loads(pickle.dumps(matrix))
    np.testing.assert_array_equal(again.source_order, order)
    np.testing.assert_array_equal(again.multiplicity, counts)
    assert matrix.storage("source_order").tolist() == order.tolist()
    with pytest.raises(sparsetir.SparseTIRValueError, match="stores no array 'rows'"):
        matrix.storage("rows")


def test_writing_a_matrix_s_derived_arrays_through_torch_changes_no_result():
    """Degrees, empty rows, edge ids and the transpose's permutation: each call hands out a
    copy; the operators (mean, max with its argmax edges, their gradients) read kept ones."""
    dense = np.float64([[1, 0, 2, 0], [0, 0, 0, 0], [3, 4, 0, 5], [0, 6, 0, 0]])
    matrix = ops.SparseMatrix(scipy.sparse.csr_matrix(dense))
    for array in (matrix.in_degrees(), matrix.out_degrees(), matrix.empty_rows(),
                  matrix.edge_ids(), matrix.transposed()[1]):
        _scribble(array)
    assert matrix.in_degrees().tolist() == [2, 0, 3, 1]
    assert matrix.empty_rows().tolist() == [1] and matrix.edge_ids().tolist() == list(range(6))
    assert matrix.in_degrees() is not matrix.in_degrees()
    x = torch.arange(8, dtype=torch.float64).reshape(4, 2).requires_grad_()
    mean = ops.copy_u_mean(matrix, x)
    mask = torch.from_numpy(dense != 0)
    want = (mask.double() @ x) / mask.sum(1, keepdim=True).clamp(min=1)
    torch.testing.assert_close(mean, want)
    grad, = torch.autograd.grad(mean.sum(), x)
    torch.testing.assert_close(grad, (mask.double() / mask.sum(1, keepdim=True).clamp(min=1))
                               .sum(0)[:, None].expand(4, 2))
    largest = ops.copy_u_max(matrix, x.detach())
    want_max = torch.stack([torch.where(mask[v][:, None], x.detach(), -torch.inf).amax(0)
                            if mask[v].any() else torch.zeros(2) for v in range(4)])
    torch.testing.assert_close(largest, want_max.double())


def test_graph_tensors_are_copies_of_their_own():
    matrix = ops.SparseMatrix(scipy.sparse.csr_matrix(DENSE))
    arrays = graph_tensors(matrix)
    _scribble(matrix.data)
    _scribble(matrix.indices)
    np.testing.assert_array_equal(arrays.data.numpy(), scipy.sparse.csr_matrix(DENSE).data)
    np.testing.assert_array_equal(arrays.indices.numpy(), scipy.sparse.csr_matrix(DENSE).indices)
