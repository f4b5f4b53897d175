"""The short path of repeated plain calls on a torch sparse CSR tensor with float32 CPU torch
tensors (``ops.plain_calls.PlainTorchCall``): taken from the third call of some sizes, equal to
scipy into outputs that held NaN (rows 4 and 89 empty), its index arrays checked at every call
(int32 and int64, as torch keeps them), and every call autograd would record or autocast would
type left to the general path, gradients included."""

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparsetir.backend.inline_checks import ROWS, TILES
from sparsetir.errors import SparseTIRError, SparseTIRTypeError
from sparsetir.ops import plain_calls
from sparsetir.ops.plain import INLINE_MIN_FEATURES, checks_inline
from sparsetir.schedule.cpu_target import host_target
from cpu_targets import AVX2, AVX512
from operator_calls import FEAT, M_ROWS, N_COLS, call, expected, operands
from sparse_inputs import skewed_csr


def csr_tensor(A, index_dtype=torch.int64):
    return torch.sparse_csr_tensor(torch.from_numpy(A.indptr).to(index_dtype),
                                   torch.from_numpy(A.indices).to(index_dtype),
                                   torch.from_numpy(A.data), A.shape)


def scipy_matrix():
    """Rows 4 and 89 (the last) empty, row 7 full."""
    return skewed_csr(M_ROWS, N_COLS, seed=3, density=0.1)


def tensors(op, seed=0):
    return tuple(None if a is None else torch.from_numpy(a) for a in operands(op, seed))


def prepared(op):
    """``(A, T, X, Y)`` after three calls of ``op`` on them: the short path is taken."""
    A = scipy_matrix()
    T = csr_tensor(A)
    X, Y = tensors(op)
    for _ in range(3):
        call(T, op, X, Y)
    return A, T, X, Y


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("op", ["spmm", "spmm_unweighted", "sddmm"])
def test_from_the_third_call_on_the_short_path_equals_scipy(op, index_dtype, general_path):
    A = scipy_matrix()
    T = csr_tensor(A, index_dtype)
    for seed in range(5):
        X, Y = tensors(op, seed)
        out = torch.full((A.nnz,) if op == "sddmm" else (M_ROWS, FEAT), float("nan")) \
            if seed % 2 else None
        result = call(T, op, X, Y, out)
        assert type(result) is torch.Tensor and (out is None or result is out)
        want = expected(A, op, X.numpy(), None if Y is None else Y.numpy())
        np.testing.assert_allclose(result.numpy(), want, rtol=1e-5, atol=1e-5)
    assert len(general_path) == 2            # the first two calls: seen once, then prepared
    assert any(isinstance(c, plain_calls.PlainTorchCall)
               for c in plain_calls._calls.values())     # pylint: disable=protected-access


@pytest.mark.parametrize("op", ["spmm", "sddmm"])
def test_index_arrays_changed_in_place_are_checked_at_every_call(op, general_path):
    A, T, X, Y = prepared(op)
    reached = len(general_path)
    row = 10
    last = int(T.crow_indices()[row + 1]) - 1
    T.col_indices()[last] = N_COLS                              # out of range: refused
    with pytest.raises(SparseTIRError, match=str(N_COLS)):
        call(T, op, X, Y)
    assert len(general_path) > reached                          # the general path named it
    T.col_indices()[last] = int(A.indices[last])
    T.crow_indices()[row + 1] = T.crow_indices()[row] - 1      # indptr falls: refused
    with pytest.raises(SparseTIRError, match="indptr"):
        call(T, op, X, Y)


def test_calls_autograd_records_keep_their_gradient(general_path):
    A, T, X, _ = prepared("spmm")
    reached = len(general_path)
    W = X.clone().requires_grad_()
    Y = ops.spmm(T, W)
    Y.sum().backward()
    np.testing.assert_allclose(W.grad.numpy(), A.T @ np.ones((M_ROWS, FEAT), np.float32),
                               rtol=1e-5, atol=1e-5)
    with torch.no_grad():                                       # nothing to record: short
        taken = ops.spmm(T, W)
    assert taken.grad_fn is None and len(general_path) == reached + 1
    np.testing.assert_allclose(taken.numpy(), A @ X.numpy(), rtol=1e-5, atol=1e-5)


def test_a_call_under_autocast_is_typed_by_autocast(general_path):
    """The short path would have given float32."""
    A, T, X, _ = prepared("spmm")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result = ops.spmm(T, X)
    assert result.dtype == torch.bfloat16
    np.testing.assert_allclose(result.float().numpy(), A @ X.numpy(), rtol=2e-2, atol=5e-2)


def test_an_output_of_another_kind_takes_the_general_path(general_path):
    A, T, X, _ = prepared("spmm")
    out = np.full((M_ROWS, FEAT), np.nan, np.float32)
    reached = len(general_path)
    assert ops.spmm(T, X, out=out) is out
    assert len(general_path) == reached + 1
    np.testing.assert_allclose(out, A @ X.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["spmm", "sddmm"])
def test_a_call_inside_a_torch_func_transform_is_refused_by_name(op, general_path):
    """Once a short path was prepared, the tensor's arrays, unreadable inside the transform,
    raised torch's own "Sparse CSR tensors do not have strides"."""
    _, T, X, Y = prepared(op)
    with pytest.raises(SparseTIRTypeError, match="torch.func transform"):
        torch.func.grad(lambda x: call(T, op, x, Y).sum())(X)


def test_a_tensor_read_inside_a_torch_func_transform_is_refused_by_name():
    """Operands the transform does not wrap, a first call: torch raised "Sparse CSR tensors do
    not have strides" when the matrix's arrays were read."""
    A = scipy_matrix()
    T = csr_tensor(A)
    X = tensors("spmm")[0]
    with pytest.raises(SparseTIRTypeError, match="A is read inside a torch.func transform"):
        torch.func.grad(lambda w: (ops.spmm(T, X) * w).sum())(torch.ones(M_ROWS, FEAT))


@pytest.mark.parametrize("cpu, feat, per", [(AVX512, 128, ROWS), (AVX2, 128, TILES),
                                            (AVX512, 256, TILES), (AVX2, 64, ROWS),
                                            (AVX512, 32, TILES), (AVX2, 100, ROWS)])
def test_int64_indices_are_checked_per_row_where_one_register_tile_covers_it(cpu, feat, per):
    """Each row's loop checks its indices where one register tile (or one scalar loop, 100
    features) holds the whole row: with several tiles it would check them once per tile, so
    the tile is checked before its rows."""
    with host_target(cpu):
        assert checks_inline("spmm", "int64", feat) == per
    assert checks_inline("sddmm", "int64", 128) == TILES
    assert checks_inline("spmm", "int32", 128) == TILES      # scipy's: per tile everywhere


@pytest.mark.parametrize("feat, per", [(INLINE_MIN_FEATURES, ROWS), (32, TILES), (256, TILES)])
@pytest.mark.parametrize("op", ["spmm", "spmm_unweighted"])
def test_spmm_checks_its_int64_indices_inside_at_every_call(op, feat, per, general_path,
                                                           monkeypatch):
    """The kernel checks torch's int64 indices inside (``plain.checks_inline``: each row's
    loop from ``INLINE_MIN_FEATURES`` features on where one register tile covers the row,
    else each tile before its rows): right
    into NaN outputs, and every array changed in place is refused by name or, unsorted,
    computed by the general path. A refusal the kernel made after writing part of ``out``
    bumps its version: autograd refuses a graph that saved it."""
    A = scipy_matrix()
    T = csr_tensor(A)
    X = torch.from_numpy(np.random.default_rng(1).standard_normal((N_COLS, feat)).astype(
        np.float32))
    weighted = op == "spmm"

    def checked_call():
        out = torch.full((M_ROWS, feat), float("nan"))
        result = ops.spmm(T, X, out=out, weighted=weighted)
        values = T.values().numpy() if weighted else np.ones(A.nnz, np.float32)
        current = scipy.sparse.csr_matrix((values, T.col_indices().numpy(),
                                           T.crow_indices().numpy()), shape=A.shape)
        np.testing.assert_allclose(result.numpy(), current @ X.numpy(), rtol=1e-5, atol=1e-5)

    for _ in range(3):
        checked_call()
    taken = [c for c in plain_calls._calls.values()]      # pylint: disable=protected-access
    assert len(taken) == 1 and taken[0].inline_checks == per and len(general_path) == 2
    checked_call()
    assert len(general_path) == 2                               # the short path
    refused = []
    run_kernel = type(taken[0]).run_kernel
    monkeypatch.setattr(type(taken[0]), "run_kernel", lambda call, *args: refused.append(
        run_kernel(call, *args)) or refused[-1])
    cols, rows = T.col_indices(), T.crow_indices()
    row = 7                                                     # the full row
    first = int(rows[row])
    spoiled = [(cols, first, N_COLS, str(N_COLS)), (cols, first, -1, "-1"),
               (rows, row + 1, first - 1, "indptr"), (rows, 0, 1, "indptr"),
               (rows, M_ROWS, A.nnz - 1, "indptr")]
    for array, position, value, message in spoiled:
        saved = int(array[position])
        array[position] = value
        out = torch.ones(M_ROWS, feat)
        weight = torch.ones(M_ROWS, feat, requires_grad=True)
        loss = (out * weight).sum()                             # saves out for backward
        reached = len(general_path)
        with pytest.raises(SparseTIRError, match=message):
            ops.spmm(T, X, out=out, weighted=weighted)
        assert refused[-1] is False and len(general_path) == reached + 1  # short, then general
        if array is cols:                       # refused by the kernel: out partly written
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                loss.backward()
        array[position] = saved
    reached = len(general_path)
    second = int(cols[first + 1])
    for swap in [(int(cols[first + 1]), int(cols[first])),      # a row out of order
                 (int(cols[first]), int(cols[first]))]:         # a repeated column
        cols[first], cols[first + 1] = swap
        checked_call()                          # the general path sorts, sums the repeats
    assert len(general_path) == reached + 2
    cols[first + 1] = second
    checked_call()
    assert len(general_path) == reached + 2                     # the short path again
