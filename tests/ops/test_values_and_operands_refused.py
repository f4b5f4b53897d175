"""Operands refused by name where a torch error, a numpy result without a gradient or an
internal name came out before: matrix values that require grad with a numpy X (the values'
gradient was dropped: a numpy result), ``from_csr`` values of a dtype or device the operators
do not take (torch's "unsupported ScalarType" or "Cannot copy out of meta tensor"), a nested X
(torch's "Internal error"), an integer X or Y (named ``lhs_data``), ``tune`` without feature
sizes (a bare "'NoneType' object is not iterable")."""

import numpy as np
import pytest
import torch

import sparsetir.ops as ops
from sparsetir.errors import SparseTIRTypeError
from sparse_inputs import skewed_csr

A = skewed_csr(30, 20, seed=2, density=0.2)


def _learnable():
    values = torch.tensor(A.data, requires_grad=True)
    return values, ops.SparseMatrix.from_csr(A.indptr, A.indices, values, A.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_that_require_grad_with_a_numpy_x_are_refused(dtype):
    values, M = _learnable()
    if dtype == np.float64:
        values = torch.tensor(A.data, dtype=torch.float64, requires_grad=True)
        M = ops.SparseMatrix.from_csr(A.indptr, A.indices, values, A.shape)
    X = np.random.default_rng(0).standard_normal((20, 4)).astype(dtype)
    with pytest.raises(TypeError, match="values .* require grad, but X is a numpy array"):
        ops.spmm(M, X)
    with pytest.raises(TypeError, match="values .* require grad, but X is a numpy array"):
        ops.spmm(M, X, out=np.full((30, 4), np.nan, dtype))
    with torch.no_grad():                                   # read as data: allowed
        np.testing.assert_allclose(ops.spmm(M, X), A.astype(dtype) @ X, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ops.spmm(M, X, weighted=False),     # the values are not read
                               (A != 0).astype(dtype) @ X, rtol=1e-5, atol=1e-5)
    U = np.ones((30, 4), dtype)
    np.testing.assert_allclose(ops.sddmm(M, U, X), (X.sum(1))[A.indices], rtol=1e-5)
    Y = ops.spmm(M, torch.from_numpy(X))                    # the torch call keeps the graph
    Y.sum().backward()
    np.testing.assert_allclose(values.grad.numpy(), X.sum(1)[A.indices], rtol=1e-5)


@pytest.mark.parametrize("values, message", [
    (torch.ones(1, dtype=torch.bfloat16), "values is bfloat16; .* pass values.to"),
    (torch.ones(1, device="meta"), "values is on meta; sparsetir.ops runs on the CPU")])
def test_from_csr_names_values_it_does_not_take(values, message):
    values = values.expand(A.nnz)
    with pytest.raises(TypeError, match=message):
        ops.SparseMatrix.from_csr(A.indptr, A.indices, values, A.shape)


@pytest.mark.parametrize("prepared", [False, True])
def test_a_nested_x_is_refused_by_name(prepared):
    M = ops.SparseMatrix(A)
    if prepared:
        for _ in range(2):
            ops.spmm(M, torch.ones(20, 3))
            ops.sddmm(M, torch.ones(30, 3), torch.ones(20, 3))
    nested = torch.nested.nested_tensor([torch.ones(20, 3)])
    with pytest.raises(TypeError, match="X is a nested torch tensor"):
        ops.spmm(M, nested)
    with pytest.raises(TypeError, match="Y is a nested torch tensor"):
        ops.sddmm(M, torch.ones(30, 3), nested)


def test_operands_of_a_dtype_no_operator_takes_are_named():
    X = np.ones((20, 4), np.int32)
    with pytest.raises(TypeError, match="X must be float32, float64, bfloat16 or float16, "
                                        "got int32"):
        ops.spmm(A, X)
    with pytest.raises(TypeError, match="Y must be float32, .* got int64"):
        ops.sddmm(A, np.ones((30, 4), np.float32), np.ones((20, 4), np.int64))
    with pytest.raises(TypeError, match="X must be .* got >f4"):
        ops.spmm(ops.SparseMatrix(A), np.ones((20, 4), ">f4"))


def test_tune_without_feature_sizes_names_the_argument():
    with pytest.raises(SparseTIRTypeError, match="feat_sizes must be one item or a list"):
        ops.tune(ops.SparseMatrix(A), None)


def test_segment_reduce_names_values_of_a_dtype_it_does_not_take():
    with pytest.raises(TypeError, match="value must be float32, .* got int32"):
        ops.segment_reduce(np.array([2, 1]), np.ones((3, 2), np.int32))
    np.testing.assert_array_equal(
        ops.segment_reduce(np.array([2, 0, 1]), np.float32([[1], [2], [7]])).ravel(), [3, 0, 7])


@pytest.mark.parametrize("x_dtype, y_dtype", [(np.float32, np.float64),
                                              (torch.float16, torch.bfloat16)])
def test_sddmm_names_a_dtype_mixture_as_x_and_y(x_dtype, y_dtype):
    """The refusal named gsddmm's parameters (lhs_data, rhs_data; lhs_data was Y)."""
    A = skewed_csr(30, 20, seed=1)
    X, Y = np.ones((30, 4), np.float32), np.ones((20, 4), np.float32)
    if isinstance(x_dtype, torch.dtype):
        X, Y = torch.from_numpy(X).to(x_dtype), torch.from_numpy(Y).to(y_dtype)
    else:
        X, Y = X.astype(x_dtype), Y.astype(y_dtype)
    with pytest.raises(SparseTIRTypeError, match=r"^X and Y have different dtypes"):
        ops.sddmm(A, X, Y)
