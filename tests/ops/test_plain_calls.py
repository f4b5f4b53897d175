"""The short path of repeated plain calls (``ops.plain_calls``): prepared at the second plain
call of some sizes, taken from the third on, ``spmm``/``sddmm`` on a scipy CSR matrix and numpy arrays skip the general
path, still check the matrix's arrays at every call, stay equal to scipy into outputs that
held garbage, and hand whatever a check or C plan refuses back to the general path."""

import numpy as np
import pytest
import scipy.sparse

import sparsetir.ops as ops
from sparsetir import ArgumentError
from sparsetir.backend.inline_checks import TILES
from sparsetir.errors import SparseTIRError
from sparsetir.ops import plain_calls
from sparsetir.runtime.kernel import BoundKernel
from operator_calls import FEAT, M_ROWS, N_COLS, call, expected, nan_out, operands
from sparse_inputs import skewed_csr


def matrix(seed=3, index_dtype=np.int32):
    """Rows 4 and 89 (the last) empty, row 7 full."""
    A = skewed_csr(M_ROWS, N_COLS, seed=seed, density=0.1)
    A.indptr, A.indices = A.indptr.astype(index_dtype), A.indices.astype(index_dtype)
    return A


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op", ["spmm", "spmm_unweighted", "sddmm"])
@pytest.mark.parametrize("scipy_type", [scipy.sparse.csr_matrix, scipy.sparse.csr_array])
def test_from_the_second_call_on_the_short_path_equals_scipy(op, index_dtype, scipy_type,
                                                              general_path):
    A = scipy_type(matrix(index_dtype=index_dtype))
    for seed in range(4):
        X, Y = operands(op, seed)
        out = nan_out(A, op) if seed % 2 else None
        result = call(A, op, X, Y, out)
        assert result is out if out is not None else isinstance(result, np.ndarray)
        np.testing.assert_allclose(result, expected(A, op, X, Y), rtol=1e-5, atol=1e-5)
    assert len(general_path) == 2            # the first two calls: seen once, then prepared


def test_sizes_seen_once_prepare_nothing(general_path):
    for rows in (30, 40, 50):                # a sampled subgraph of new sizes at every step
        A = skewed_csr(rows, N_COLS, seed=rows, density=0.1)
        X = operands("spmm")[0]
        np.testing.assert_allclose(ops.spmm(A, X), expected(A, "spmm", X, None),
                                   rtol=1e-5, atol=1e-5)
    assert not plain_calls._calls           # pylint: disable=protected-access


@pytest.mark.parametrize("op", ["spmm", "sddmm"])
def test_arrays_changed_in_place_are_checked_at_every_call(op, general_path):
    """scipy's int32 indices: the prepared kernel checks them inside, per row tile
    (``plain.checks_inline``), with no pass before it."""
    A = matrix()
    X, Y = operands(op)
    call(A, op, X, Y)
    call(A, op, X, Y)                                           # prepared now
    (taken,) = plain_calls._calls.values()       # pylint: disable=protected-access
    assert taken.inline_checks == TILES
    # valid changes: the empty row 4 takes row 5's first entry, a row's last column moves
    assert A.indptr[4] == A.indptr[5] < A.indptr[6]
    A.indptr[5] += 1
    row = 10
    last = A.indptr[row + 1] - 1
    assert A.indices[last - 1] < N_COLS - 2
    A.indices[last] = N_COLS - 2 if A.indices[last] == N_COLS - 1 else N_COLS - 1
    reached = len(general_path)
    np.testing.assert_allclose(call(A, op, X, Y, nan_out(A, op)), expected(A, op, X, Y),
                               rtol=1e-5, atol=1e-5)
    assert len(general_path) == reached                         # still the short path
    saved = int(A.indices[last])
    A.indices[last] = N_COLS                                    # out of range: refused
    with pytest.raises(SparseTIRError, match=str(N_COLS)):
        call(A, op, X, Y)
    A.indices[last] = saved
    A.indptr[row + 1] = A.indptr[row] - 1                       # indptr falls: refused
    with pytest.raises(SparseTIRError, match="indptr"):
        call(A, op, X, Y)


def test_unsorted_columns_leave_the_short_path_for_the_wrapped_one(general_path):
    A = matrix()
    X = operands("spmm")[0]
    ops.spmm(A, X)
    ops.spmm(A, X)
    lo = A.indptr[7]                                            # the full row
    A.indices[lo:lo + 2] = A.indices[lo:lo + 2][::-1].copy()
    A.data[lo:lo + 2] = A.data[lo:lo + 2][::-1].copy()
    reached = len(general_path)
    np.testing.assert_allclose(ops.spmm(A, X, out=nan_out(A, "spmm")),
                               expected(A, "spmm", X, None), rtol=1e-5, atol=1e-5)
    assert len(general_path) == reached + 1


def test_another_matrix_of_the_same_sizes_and_other_dtypes(general_path):
    A, B = matrix(seed=3), matrix(seed=3)
    B.data = np.random.default_rng(9).standard_normal(B.nnz).astype(np.float32)
    X = operands("spmm")[0]
    ops.spmm(A, X)
    ops.spmm(A, X)
    np.testing.assert_allclose(ops.spmm(B, X, out=nan_out(B, "spmm")),
                               expected(B, "spmm", X, None), rtol=1e-5, atol=1e-5)
    wide = B.astype(np.float64)                                 # float64: computed in float64
    result = ops.spmm(wide, X.astype(np.float64))
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, expected(B, "spmm", X, None), rtol=1e-12)
    with pytest.raises(TypeError, match="float32"):
        ops.spmm(A, X.astype(np.float64))


def test_an_output_over_an_operand_is_refused_on_the_short_path_too(general_path):
    A = skewed_csr(N_COLS, N_COLS, seed=4, density=0.1)
    X = operands("spmm")[0]
    ops.spmm(A, X)
    ops.spmm(A, X)
    with pytest.raises(ArgumentError, match="'out' shares memory with argument 'X'"):
        ops.spmm(A, X, out=X)


@pytest.mark.parametrize("op", ["spmm_unweighted", "sddmm"])
def test_an_output_over_data_the_kernel_does_not_read_is_refused_on_the_short_path_too(
        op, general_path):
    """These kernels do not take ``A.data``, so their C plan never saw an ``out`` over it: the
    first such call was refused (the general path), the third and later ones were taken."""
    A = matrix()
    X, Y = operands(op)
    shape = nan_out(A, op).shape
    buffer = np.full(max(A.nnz, int(np.prod(shape))), np.nan, np.float32)
    buffer[:A.nnz] = A.data
    A.data = buffer[:A.nnz]                          # out over it: the buffer's start
    kept = A.copy()
    for _ in range(2):                               # prepares the short path
        call(A, op, X, Y, nan_out(A, op))
    for _ in range(3):
        with pytest.raises(ArgumentError, match="'out' shares memory with argument 'A.data'"):
            call(A, op, X, Y, buffer[:int(np.prod(shape))].reshape(shape))
    np.testing.assert_array_equal(A.data, kept.data)
    reached = len(general_path)
    result = call(A, op, X, Y, nan_out(A, op))       # a separate out: the short path
    assert len(general_path) == reached
    np.testing.assert_allclose(result, expected(kept, op, X, Y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["spmm_unweighted", "sddmm"])
def test_values_these_kernels_do_not_read_are_still_refused_as_before(op, general_path):
    """Unweighted SpMM and SDDMM do not pass ``data`` to their kernel: a matrix of the
    prepared sizes with float64 or misshapen values, or 2-D indices, must still reach the
    general path and its errors."""
    A = matrix()
    X, Y = operands(op)
    call(A, op, X, Y)
    call(A, op, X, Y)                                           # prepared now
    with pytest.raises(TypeError, match="float64"):
        call(A.astype(np.float64), op, X, Y)
    short = matrix()
    short.data = short.data[:-1]
    with pytest.raises(SparseTIRError, match="values"):
        call(short, op, X, Y)
    flat = matrix()
    flat.indices = flat.indices.reshape(1, -1)
    with pytest.raises(SparseTIRError, match="1-D"):
        call(flat, op, X, Y)
    np.testing.assert_allclose(call(A, op, X, Y, nan_out(A, op)), expected(A, op, X, Y),
                               rtol=1e-5, atol=1e-5)


def test_operands_the_c_plan_declines_are_not_prepared_again(general_path, monkeypatch):
    """Nor run through it: the short path declines them before its kernel (and the index
    checks inside it) runs."""
    made, ran = [], []
    real_call = BoundKernel.call_native
    monkeypatch.setattr(BoundKernel, "call_native",
                        lambda self, args: ran.append(1) or real_call(self, args))

    class Counted(plain_calls.PlainCall):
        __slots__ = ()

        def __init__(self, *args):
            made.append(1)
            super().__init__(*args)
    monkeypatch.setattr(plain_calls, "PlainCall", Counted)
    A = matrix()
    X = operands("spmm")[0]
    wide = np.full((M_ROWS, 2 * FEAT), np.nan, np.float32)
    for operand in (X, X, np.asfortranarray(X), np.asfortranarray(X), X[:, :]):
        wide[:] = np.nan
        ops.spmm(A, operand, out=wide[:, :FEAT])                # a column slice: not contiguous
        np.testing.assert_allclose(wide[:, :FEAT], expected(A, "spmm", X, None), rtol=1e-5,
                                   atol=1e-5)
        assert np.isnan(wide[:, FEAT:]).all()
    assert made == [1] and not ran


def test_the_least_recently_used_prepared_call_is_dropped(general_path, monkeypatch):
    monkeypatch.setattr(plain_calls, "KEPT", 2)
    A = matrix()
    rng = np.random.default_rng(5)
    X = {feat: rng.standard_normal((N_COLS, feat)).astype(np.float32) for feat in (4, 8, 12)}

    def kept():
        return sorted(key[-1][1] for key in plain_calls._calls)   # pylint: disable=protected-access
    for feat in (4, 8):
        ops.spmm(A, X[feat])
        ops.spmm(A, X[feat])                                    # prepared
    ops.spmm(A, X[4])                                           # used: now the most recent
    ops.spmm(A, X[12])
    ops.spmm(A, X[12])
    assert kept() == [4, 12]
    for feat in (4, 8, 12):
        np.testing.assert_allclose(ops.spmm(A, X[feat]), expected(A, "spmm", X[feat], None),
                                   rtol=1e-5, atol=1e-5)


def test_wide_spmm_on_int64_scipy_indices_checks_them_inside(general_path):
    """scipy int64 indices at 64 features: the kernel checks them inside
    (``plain.checks_inline``); right into NaN outputs, and an index changed in place is
    refused by name, through the short path first."""
    A = matrix(index_dtype=np.int64)
    X = np.random.default_rng(2).standard_normal((N_COLS, 64)).astype(np.float32)
    for _ in range(3):
        out = np.full((M_ROWS, 64), np.nan, np.float32)
        np.testing.assert_allclose(ops.spmm(A, X, out=out), expected(A, "spmm", X, None),
                                   rtol=1e-5, atol=1e-5)
    (taken,) = plain_calls._calls.values()       # pylint: disable=protected-access
    assert taken.inline_checks and len(general_path) == 2
    first = int(A.indptr[7])
    saved = int(A.indices[first])
    A.indices[first] = N_COLS
    with pytest.raises(SparseTIRError, match=str(N_COLS)):
        ops.spmm(A, X, out=np.full((M_ROWS, 64), np.nan, np.float32))
    assert len(general_path) == 3                # refused on the short path, named by the general
    A.indices[first] = saved
    out = np.full((M_ROWS, 64), np.nan, np.float32)
    np.testing.assert_allclose(ops.spmm(A, X, out=out), expected(A, "spmm", X, None),
                               rtol=1e-5, atol=1e-5)
    assert len(general_path) == 3                # the short path again
