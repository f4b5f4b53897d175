"""sparsetir.ops: results equal scipy's for every input kind, outputs that held garbage,
empty rows; kernels come back from the disk cache in a new process; bad input is refused."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparsetir import ArgumentError
from sparse_inputs import skewed_csr


def matrix(rows=70, cols=45, seed=0):
    return skewed_csr(rows, cols, seed, density=0.08)


def pattern(A):
    P = A.copy()
    P.data[:] = 1
    return P


@pytest.mark.parametrize("feat", [1, 8, 24, 32, 64])
def test_spmm_equals_scipy(feat):
    A = matrix()
    X = np.random.default_rng(1).standard_normal((45, feat)).astype(np.float32)
    out = np.full((70, feat), np.nan, np.float32)
    M = ops.SparseMatrix(A)
    assert ops.spmm(M, X, out=out) is out
    np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ops.spmm(M, X, weighted=False), pattern(A) @ X,
                               rtol=1e-5, atol=1e-5)


def test_vector_operand_gives_vector():
    A = matrix()
    x = np.arange(45, dtype=np.float32)
    y = ops.spmm(A, x)
    assert y.shape == (70,)
    np.testing.assert_allclose(y, A @ x, rtol=1e-5)


@pytest.mark.parametrize("feat", [4, 32, 48])
def test_sddmm_equals_reference(feat):
    A = matrix()
    rng = np.random.default_rng(2)
    X = rng.standard_normal((70, feat)).astype(np.float32)
    Y = rng.standard_normal((45, feat)).astype(np.float32)
    out = np.full(A.nnz, np.nan, np.float32)
    ops.sddmm(A, X, Y, out=out)
    coo = ops.SparseMatrix(A).to_scipy().tocoo()
    np.testing.assert_allclose(out, np.einsum("ij,ij->i", X[coo.row], Y[coo.col]),
                               rtol=1e-4, atol=1e-4)


def test_torch_in_torch_out():
    A = matrix()
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                 torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data), size=A.shape)
    X = torch.randn(45, 16)
    Y = ops.spmm(At, X)
    assert isinstance(Y, torch.Tensor)
    torch.testing.assert_close(Y, torch.from_numpy(A @ X.numpy()), rtol=1e-5, atol=1e-5)
    vals = ops.sddmm(At, torch.randn(70, 16), X)
    assert isinstance(vals, torch.Tensor) and vals.shape == (A.nnz,)


def test_matrix_is_a_private_validated_copy():
    A = matrix()
    M = ops.SparseMatrix(A)
    X = np.ones((45, 8), np.float32)
    expected = A @ X
    A.indices[:] = 10**6                 # the caller's arrays change: M does not
    np.testing.assert_allclose(ops.spmm(M, X), expected, rtol=1e-5)
    with pytest.raises(ValueError):
        M.indices[0] = 0


def test_calls_on_a_matrix_convert_and_copy_none_of_it():
    M = ops.SparseMatrix(matrix())
    X = np.ones((45, 8), np.float32)
    ops.spmm(M, X)
    (bound,) = M.prepared.values()
    passed = {param: value.data_ptr() for param, value in zip(
        bound.kernel.signature.params, bound._values) if hasattr(value, "data_ptr")}
    # the matrix's sealed arrays (private: what kernels read), passed as they are
    assert passed[next(p for p in passed if p.name == "indices")] == \
        M._sealed["indices"].ctypes.data
    assert passed[next(p for p in passed if p.name == "a")] == M._sealed["data"].ctypes.data
    assert not M.indices.flags.writeable and not M.data.flags.writeable


def test_matrix_arrays_are_read_only_and_not_what_kernels_read():
    from sparsetir.runtime.arguments import is_sealed
    M = ops.SparseMatrix(matrix())
    for array in (M.indptr, M.indices, M.data, *M.row_tiles(4)):
        assert not array.flags.writeable and not is_sealed(array)
    assert all(is_sealed(array) for array in M._sealed.values())
    with pytest.raises(ValueError):
        M._sealed["indices"].flags.writeable = True    # sealed memory underneath


def test_copies_and_pickles_are_matrices_of_their_own():
    import copy
    import pickle
    A = matrix()
    M = ops.SparseMatrix(A)
    X = np.ones((45, 8), np.float32)
    ops.spmm(M, X)                                     # with a bound kernel to leave behind
    for twin in (copy.copy(M), copy.deepcopy(M), pickle.loads(pickle.dumps(M))):
        assert twin is not M and not twin.prepared
        np.testing.assert_allclose(ops.spmm(twin, X), A @ X, rtol=1e-5)


def test_zero_features():
    M = ops.SparseMatrix(matrix())
    assert ops.spmm(M, np.zeros((45, 0), np.float32)).shape == (70, 0)
    assert ops.sddmm(M, np.zeros((70, 0), np.float32), np.zeros((45, 0), np.float32)).tolist() \
        == [0.0] * M.nnz


def _descending_indptr(A):
    A.indptr[2], A.indptr[3] = A.indptr[3] + 1, A.indptr[2]    # scipy does not look again
    return A


def _index_out_of_range(A):
    A.indices[0] = 99
    return A


@pytest.mark.parametrize("corrupt, message", [(_descending_indptr, "not monotone"),
                                              (_index_out_of_range, "out of range")])
def test_malformed_matrix_is_refused(corrupt, message):
    with pytest.raises(ValueError, match=message):
        ops.SparseMatrix(corrupt(matrix()))


def test_bad_dense_operands_are_refused():
    M = ops.SparseMatrix(matrix())
    with pytest.raises(ValueError, match="45 rows"):
        ops.spmm(M, np.ones((44, 8), np.float32))
    with pytest.raises(TypeError, match="float32"):
        ops.spmm(M, np.ones((45, 8)))
    with pytest.raises(ValueError, match="shape"):
        ops.spmm(M, np.ones((45, 8), np.float32), out=np.empty((70, 9), np.float32))
    with pytest.raises(ValueError, match="features"):
        ops.sddmm(M, np.ones((70, 8), np.float32), np.ones((45, 4), np.float32))
    with pytest.raises(TypeError, match="scipy sparse"):
        ops.spmm(np.ones((70, 45)), np.ones((45, 8), np.float32))


def test_repeated_calls_check_every_operand():
    """After a first call prepares the fast path, later calls are right for any out they
    get (NaN-filled, torch, strided) and still refuse what the first call would have."""
    A = matrix()
    M = ops.SparseMatrix(A)
    X = np.random.default_rng(4).standard_normal((45, 8)).astype(np.float32)
    expected = A @ X
    ops.spmm(M, X)
    assert ("spmm", np.ndarray, (45, 8)) in M.calls
    for _ in range(2):
        out = np.full((70, 8), np.nan, np.float32)
        assert ops.spmm(M, X, out=out) is out
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    torch_out = ops.spmm(M, torch.from_numpy(X))
    assert isinstance(torch_out, torch.Tensor)
    np.testing.assert_allclose(torch_out.numpy(), expected, rtol=1e-5, atol=1e-5)
    wide = np.full((70, 16), np.nan, np.float32)
    ops.spmm(M, X, out=wide[:, ::2])
    np.testing.assert_allclose(wide[:, ::2], expected, rtol=1e-5, atol=1e-5)
    retyped = X.copy()
    retyped.dtype = np.int32                    # same shape, other dtype, changed in place
    with pytest.raises(TypeError, match="float32"):
        ops.spmm(M, retyped)
    with pytest.raises(ValueError, match="shape"):
        ops.spmm(M, X, out=np.empty(70 * 8, np.float32))
    values = np.full(M.nnz, np.nan, np.float32)
    X70 = np.ones((70, 8), np.float32)
    ops.sddmm(M, X70, X)
    ops.sddmm(M, X70, X, out=values)
    rows = np.repeat(np.arange(70), np.diff(M.indptr))
    np.testing.assert_allclose(values, (X70[rows] * X[M.indices]).sum(axis=1), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
@pytest.mark.parametrize("warm", [False, True])
def test_found_by_attack(warm):
    """Cold and after a good call alike: torch's negative bit is honoured, mixed numpy/torch
    SDDMM operands refused, ``weighted`` taken as a truth value, no output written into the
    matrix's own (read-only) arrays through a torch view of them."""
    A = matrix()
    M = ops.SparseMatrix(A)
    X = np.random.default_rng(5).standard_normal((45, 8)).astype(np.float32)
    X70 = np.ones((70, 8), np.float32)
    if warm:
        ops.spmm(M, torch.from_numpy(X))
        ops.sddmm(M, X70, X)
        ops.sddmm(M, torch.from_numpy(X70), torch.from_numpy(X))
    negative = torch._neg_view(torch.from_numpy(X.copy()))          # holds -X
    np.testing.assert_allclose(ops.spmm(M, negative).numpy(), A @ -X, rtol=1e-5, atol=1e-5)
    out = torch._neg_view(torch.full((70, 8), float("nan")))
    ops.spmm(M, torch.from_numpy(X), out=out)
    np.testing.assert_allclose(out.resolve_neg().numpy(), A @ X, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="both be numpy arrays or both torch"):
        ops.sddmm(M, X70, torch.from_numpy(X))
    np.testing.assert_allclose(ops.spmm(M, X, weighted=np.array(False)), pattern(A) @ X,
                               rtol=1e-5, atol=1e-5)
    data = M.data.copy()
    with pytest.raises(ArgumentError, match="'out' shares memory"):
        ops.sddmm(M, X70, X, out=torch.from_numpy(M.data))
    np.testing.assert_array_equal(M.data, data)
    with pytest.raises(ArgumentError, match="zero tensor"):
        ops.spmm(M, X, out=torch._efficientzerotensor((70, 8)))
    emptied = torch.tensor(X)
    emptied.untyped_storage().resize_(0)              # numel unchanged, no memory
    with pytest.raises(ArgumentError, match="'X': has no memory"):
        ops.spmm(M, emptied)
    shrunk = torch.tensor(X)
    shrunk.untyped_storage().resize_(8)               # two floats left under 360
    with pytest.raises(ArgumentError, match="'X': reaches past the end of its storage"):
        ops.spmm(M, shrunk)
    small_out = torch.zeros((70, 8))
    small_out.untyped_storage().resize_(4)
    with pytest.raises(ArgumentError, match="'out': reaches past the end of its storage"):
        ops.spmm(M, torch.from_numpy(X), out=small_out)


def test_second_process_loads_kernels_from_disk(tmp_path, monkeypatch):
    script = textwrap.dedent("""
        import time, numpy as np, scipy.sparse, sparsetir.ops as ops, sparsetir.driver.cache as c
        compiled = []
        original = c._compile_and_store
        c._compile_and_store = lambda *a: compiled.append(1) or original(*a)
        A = scipy.sparse.random(30, 20, density=0.2, format="csr", dtype=np.float32)
        X = np.ones((20, 16), np.float32)
        assert np.allclose(ops.spmm(A, X), A @ X, atol=1e-5)
        print(len(compiled))
    """)
    env = {"SPARSETIR_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.split()[-1] for _ in range(2)]
    assert runs == ["1", "0"]
    assert len(list((tmp_path / "kernels").iterdir())) == 1
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    ops.clear_cache()
    assert not (tmp_path / "kernels").exists()


def test_strided_inputs_and_outputs_get_the_result():
    A = matrix()
    X = np.asfortranarray(np.random.default_rng(3).standard_normal((45, 16)).astype(np.float32))
    wide = np.full((70, 32), np.nan, np.float32)
    out = wide[:, ::2]                                   # a strided view of the caller's array
    ops.spmm(A, X, out=out)
    np.testing.assert_allclose(wide[:, ::2], A @ X, rtol=1e-5, atol=1e-5)
    assert np.isnan(wide[:, 1::2]).all()
    vals = np.full(2 * A.nnz, np.nan, np.float32)[::2]
    ops.sddmm(A, np.ones((70, 16), np.float32), X, out=vals)
    assert np.isfinite(vals).all()
    t_out = torch.full((70, 32), float("nan"))[:, ::2]
    ops.spmm(A, torch.from_numpy(np.ascontiguousarray(X)), out=t_out)
    torch.testing.assert_close(t_out, torch.from_numpy(A @ X), rtol=1e-5, atol=1e-5)


def test_the_callers_matrix_is_never_changed():
    """Unsorted, duplicated float32 CSR (and torch CSR sharing its memory) stay as they were."""
    A = scipy.sparse.csr_matrix((np.array([1, 2, 3, 4, 5], np.float32), np.array([3, 0, 3, 1, 1]),
                                 np.array([0, 3, 5, 5])), shape=(3, 4))
    before = A.toarray()
    X = np.arange(8, dtype=np.float32).reshape(4, 2)
    first = ops.spmm(A, X)
    np.testing.assert_array_equal(A.toarray(), before)
    np.testing.assert_allclose(ops.spmm(A, X), first)
    np.testing.assert_allclose(first, before @ X)
    U = torch.sparse_csr_tensor(torch.tensor([0, 2]), torch.tensor([2, 0]),
                                torch.tensor([1.0, 2.0]), (1, 3))
    dense = U.to_dense().clone()
    ops.spmm(U, np.eye(3, dtype=np.float32))
    torch.testing.assert_close(U.to_dense(), dense)


@pytest.mark.parametrize("threads", ["0", "-1", "auto", "3", "\u00b2"])
def test_any_thread_setting_gives_the_right_answer(threads, monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", threads)
    A = matrix()
    out = np.full((70, 4), 7, np.float32)
    ops.spmm(A, np.ones((45, 4), np.float32), out=out)
    np.testing.assert_allclose(out, A @ np.ones((45, 4), np.float32), rtol=1e-5)


@pytest.mark.parametrize("after_a_good_call", [False, True])
def test_errors_name_what_the_user_passed(after_a_good_call):
    """Refused alike on the first call and on calls after a good one (the prepared path)."""
    M = ops.SparseMatrix(matrix())
    X = np.ones((45, 8), np.float32)
    X70 = np.ones((70, 8), np.float32)
    square = ops.SparseMatrix(scipy.sparse.random(45, 45, density=0.1, format="csr",
                                                  dtype=np.float32))
    if after_a_good_call:
        ops.spmm(M, X, out=np.empty((70, 8), np.float32))
        ops.spmm(square, X)
        ops.sddmm(M, X70, X)
    frozen = np.empty((70, 8), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        ops.spmm(M, X, out=frozen)
    shared = np.lib.stride_tricks.as_strided(np.zeros(8, np.float32), (70, 8), (0, 4),
                                             writeable=True)
    with pytest.raises(ValueError, match="out has elements that share memory"):
        ops.spmm(M, X, out=shared)
    with pytest.raises(TypeError, match="out must be a numpy array"):
        ops.spmm(M, X, out=[[0.0] * 8] * 70)
    with pytest.raises(ArgumentError, match="'out' shares memory with argument 'X'") as refused:
        ops.spmm(square, X, out=X)
    assert "'y'" not in str(refused.value) and "'x'" not in str(refused.value)
    assert M.nnz <= X.size
    with pytest.raises(ArgumentError, match="'out' shares memory with argument 'Y'"):
        ops.sddmm(M, X70, X, out=X.reshape(-1)[:M.nnz])
    with pytest.raises(TypeError, match="complex"):
        ops.SparseMatrix(matrix() * 1j)
    with pytest.raises(TypeError, match="2 dimensions"):
        ops.SparseMatrix(scipy.sparse.coo_array(np.ones(5)))
