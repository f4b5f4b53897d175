"""An ``out`` that shares memory with an operand, or whose own elements overlap, is refused by
name on every path. Before: an ``out`` made with ``as_strided`` so that its rows overlap gave a
silently wrong result (only a stride of 0 was refused), and an ``out`` over an operand went
through wherever sparsetir copied first (SDDMM's ``Y`` off a cache line, a non-contiguous
``out``, a plain scipy matrix whose ``data`` the ``out`` viewed): the kernel read the copy, and
the result was written over the caller's operand."""

import numpy as np
import pytest
import scipy.sparse
import torch
from numpy.lib.stride_tricks import as_strided

import sparsetir.ops as ops
from sparsetir import ArgumentError
from sparsetir.runtime.arguments import shares_elements
from sparse_inputs import skewed_csr

ROWS, COLS, FEAT = 40, 40, 16


@pytest.fixture(params=["scipy", "wrapped"])
def matrix(request):
    A = skewed_csr(ROWS, COLS, seed=5, density=0.3)       # empty rows, ~12 nonzeros a column
    return A, (A if request.param == "scipy" else ops.SparseMatrix(A))


def test_an_out_whose_rows_overlap_is_refused_not_answered_wrong(matrix):
    A, M = matrix
    X = np.random.default_rng(0).standard_normal((COLS, FEAT)).astype(np.float32)
    buffer = np.zeros(ROWS * FEAT, np.float32)
    overlapping = as_strided(buffer, (ROWS, FEAT), (4, 4))      # out[i, j] is out[i+1, j-1]
    ops.spmm(M, X)
    ops.spmm(M, X)
    for _ in range(2):
        with pytest.raises(ValueError, match="out has elements that share memory"):
            ops.spmm(M, X, out=overlapping)
    np.testing.assert_array_equal(buffer, 0)
    tensor = torch.zeros(ROWS * FEAT).as_strided((ROWS, FEAT), (1, 1))
    with pytest.raises(ValueError, match="out has elements that share memory"):
        ops.spmm(M, torch.from_numpy(X), out=tensor)


def test_shares_elements_sees_overlapping_strides_and_only_them():
    assert not shares_elements((6, 4), (16, 4), 4)           # C order
    assert not shares_elements((6, 4), (4, 24), 4)           # Fortran order
    assert not shares_elements((3, 2), (8, 12), 4)           # interleaved, each its own place
    assert not shares_elements((2, 2), (-16, 4), 4)          # reversed rows
    assert not shares_elements((0, 4), (0, 4), 4)            # no elements
    assert shares_elements((6, 4), (4, 4), 4)                # rows overlap
    assert shares_elements((5, 3), (0, 4), 4)                # broadcast
    assert shares_elements((4,), (2,), 4)                    # elements overlap by half
    assert shares_elements((3, 2), (8, 12), 16)              # wider elements: now they touch


def test_an_out_over_a_gathered_operand_that_is_copied_first_is_refused():
    """SDDMM copies a Y that starts 16 bytes past a line onto one (``ops.alignment``) when its
    rows are gathered often: the check is on the caller's Y, not on the copy, on the general
    path and on the short path of a prepared call."""
    A = skewed_csr(ROWS, COLS, seed=5, density=0.3)
    M = ops.SparseMatrix(A)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((ROWS, FEAT)).astype(np.float32)
    buffer = np.zeros(COLS * FEAT + 32, np.float32)
    start = ((-buffer.ctypes.data) % 64 + 16) // 4
    Y = buffer[start:start + COLS * FEAT].reshape(COLS, FEAT)
    assert Y.ctypes.data % 64 == 16
    Y[:] = rng.standard_normal((COLS, FEAT))
    kept = Y.copy()
    expected = ops.sddmm(M, X, kept)
    for _ in range(3):
        np.testing.assert_allclose(ops.sddmm(M, X, Y), expected, rtol=1e-5, atol=1e-5)
    for target in (M, A):
        with pytest.raises(ArgumentError, match="'out' shares memory with argument 'Y'"):
            ops.sddmm(target, X, Y, out=Y.reshape(-1)[:A.nnz])
        np.testing.assert_array_equal(Y, kept)


def test_a_non_contiguous_out_over_x_is_refused(matrix):
    A, M = matrix
    both = np.zeros((COLS, 2 * FEAT), np.float32)
    both[:, ::2] = np.random.default_rng(2).standard_normal((COLS, FEAT))
    X = both[:, ::2]
    kept = X.copy()
    with pytest.raises(ArgumentError, match="'out' shares memory with argument 'X'"):
        ops.spmm(M, X, out=X)
    np.testing.assert_array_equal(X, kept)
    np.testing.assert_allclose(ops.spmm(M, X, out=both[:, 1::2]), A @ kept, rtol=1e-5,
                               atol=1e-5)                  # the other columns: no overlap


@pytest.mark.parametrize("part", ["data", "indices"])
def test_a_plain_call_into_the_matrix_own_arrays_is_refused(part):
    A = scipy.sparse.random(32, 32, density=0.125, format="csr", dtype=np.float32,
                            random_state=1)               # 128 nonzeros
    X = np.ones((32, 4), np.float32)
    before = A.copy()
    out = getattr(A, part)[:128].view(np.float32).reshape(32, 4)
    with pytest.raises(ArgumentError, match=f"'out' shares memory with argument 'A.{part}'"):
        ops.spmm(A, X, out=out)
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(A, name), getattr(before, name))


def test_an_out_beside_its_operands_is_still_taken(matrix):
    """Arrays that are views of one buffer but do not overlap are no alias."""
    A, M = matrix
    block = np.full((COLS + ROWS, FEAT), np.nan, np.float32)
    block[:COLS] = np.random.default_rng(3).standard_normal((COLS, FEAT))
    for _ in range(3):
        block[COLS:] = np.nan
        ops.spmm(M, block[:COLS], out=block[COLS:])
        np.testing.assert_allclose(block[COLS:], A @ block[:COLS], rtol=1e-5, atol=1e-5)


def test_torch_views_of_one_tensor_that_do_not_overlap_are_taken():
    """Column halves and even and odd rows of one tensor share no element (a test by the
    first and last byte alone refused them)."""
    A = skewed_csr(ROWS, COLS, seed=5, density=0.3)
    M = ops.SparseMatrix(A)
    whole = torch.randn(COLS, 2 * FEAT)
    X, out = whole[:, :FEAT], whole[:, FEAT:]
    for _ in range(3):
        out.fill_(float("nan"))                            # the result must not depend on it
        expected = A @ X.numpy()
        np.testing.assert_allclose(ops.spmm(M, X, out=out).numpy(), expected, rtol=1e-5,
                                   atol=1e-5)
    rows = torch.randn(2 * COLS, FEAT)
    even, odd = rows[0::2], rows[1::2]
    odd.fill_(float("nan"))
    expected = A @ even.numpy()
    np.testing.assert_allclose(ops.spmm(M, even, out=odd).numpy(), expected, rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(ArgumentError, match="'out' shares memory with argument 'X'"):
        ops.spmm(M, whole[:, :FEAT], out=whole[:, FEAT - 1:2 * FEAT - 1])


def test_an_out_over_a_torch_sparse_matrix_values_is_refused():
    A = skewed_csr(ROWS, COLS, seed=5, density=0.3)
    T = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                torch.from_numpy(A.indices.astype(np.int64)),
                                torch.from_numpy(A.data.copy()), A.shape)
    kept = T.values().clone()
    X = torch.randn(COLS, 4)
    out = T.values()[:ROWS * 4].view(ROWS, 4)
    with pytest.raises(ArgumentError, match=r"'out' shares memory with argument 'A.values\(\)'"):
        ops.spmm(T, X, out=out)
    assert torch.equal(T.values(), kept)
