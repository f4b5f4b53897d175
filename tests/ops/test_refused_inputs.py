"""What ``sparsetir.ops`` refuses by name instead of answering wrong: a matrix whose values are
not float32 (a float64 1e39 became inf), torch tensors that require grad while grad mode is on
(their gradient vanished), tensors of ``torch.func`` transforms and sparse tensors as dense
operands (torch's raw "Cannot access data pointer"), and an inference tensor as ``out``
outside inference mode (torch refuses to write one; it used to be written). Every case is
tried on the first call and on a matrix whose calls are prepared (the fast path), for X, Y and
``out``."""

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparse_inputs import skewed_csr


@pytest.fixture(scope="module")
def A():
    return skewed_csr(30, 20, seed=3, density=0.15)


@pytest.fixture(params=[False, True], ids=["cold", "prepared"])
def M(request, A):
    M = ops.SparseMatrix(A)
    if request.param:
        ops.spmm(M, torch.ones(20, 4))
        ops.sddmm(M, torch.ones(30, 4), torch.ones(20, 4))
        ops.spmm(M, torch.ones(20, 4), out=torch.empty(30, 4))
    return M


@pytest.mark.parametrize("dtype", [np.longdouble, np.int64, np.int32, bool, np.complex64])
def test_values_that_are_not_float32_or_float64_are_refused_by_name(A, dtype):
    bad = A.astype(dtype)
    message = f"A is {np.dtype(dtype).name}; sparsetir.ops computes in float32 or float64: " \
              r"pass A.astype\(np.float32\)"
    with pytest.raises(TypeError, match=message):
        ops.spmm(bad, np.ones((20, 4), np.float32))
    with pytest.raises(TypeError, match=message):
        ops.sddmm(bad, np.ones((30, 4), np.float32), np.ones((20, 4), np.float32))
    with pytest.raises(TypeError, match=f"matrix is {np.dtype(dtype).name}"):
        ops.SparseMatrix(bad)


def test_a_float64_value_past_float32_is_not_turned_into_inf():
    A = scipy.sparse.csr_matrix(np.array([[1e39, 0.0], [0.0, 1.0]]))
    with pytest.raises(TypeError, match="A is float64 and X float32: .* casts nothing"):
        ops.spmm(A, np.ones((2, 1), np.float32))
    np.testing.assert_array_equal(ops.spmm(A, np.ones((2, 1))).ravel(), [1e39, 1.0])
    near_max = scipy.sparse.csr_matrix(np.float32([[3e38, 0.0], [0.0, 1.0]]))
    np.testing.assert_allclose(ops.spmm(near_max, np.ones((2, 1), np.float32)).ravel(),
                               [3e38, 1.0], rtol=1e-6)


def test_torch_sparse_values_must_be_float32(A):
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                 torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data.astype(np.float64)), size=A.shape)
    with pytest.raises(TypeError, match=r"A is float64 and X float32"):
        ops.spmm(At, torch.ones(20, 4))
    np.testing.assert_allclose(ops.spmm(At.float(), torch.ones(20, 4)).numpy(),
                               A @ np.ones((20, 4), np.float32), rtol=1e-5)


def _calls_y(M):
    return torch.linspace(-1, 1, 80).reshape(20, 4)


def _calls_x30(M):
    return torch.linspace(-2, 1, 120).reshape(30, 4)


def _calls(M):
    """(name of the refused operand, call) for X, Y and out of both operators."""
    X20, X30, Y = torch.randn(20, 4), _calls_x30(M), _calls_y(M)
    return {
        "spmm X": lambda t: ops.spmm(M, t(X20)),
        "spmm out": lambda t: ops.spmm(M, X20, out=t(torch.zeros(30, 4))),
        "sddmm X": lambda t: ops.sddmm(M, t(X30), Y),
        "sddmm Y": lambda t: ops.sddmm(M, X30, t(Y)),
        "sddmm out": lambda t: ops.sddmm(M, X30, Y, out=t(torch.zeros(M.nnz))),
    }


@pytest.mark.parametrize("call", ["spmm X", "sddmm X", "sddmm Y"])
def test_operands_that_require_grad_get_their_gradient(M, call):
    operand = None

    def tracked(t):
        nonlocal operand
        operand = t.requires_grad_()
        return operand
    result = _calls(M)[call](tracked)
    assert result.grad_fn is not None
    (expected,) = torch.autograd.grad(result.sum(), operand)
    dense = torch.from_numpy(M.to_scipy().toarray())
    reference = {"spmm X": lambda t: dense @ t, "sddmm X": lambda t: (t @ _calls_y(M).T)
                 [dense != 0], "sddmm Y": lambda t: (_calls_x30(M) @ t.T)[dense != 0]}
    leaf = operand.detach().requires_grad_()
    (wanted,) = torch.autograd.grad(reference[call](leaf).sum(), leaf)
    torch.testing.assert_close(expected, wanted)


@pytest.mark.parametrize("call", ["spmm out", "sddmm out"])
def test_an_out_leaf_that_requires_grad_is_refused_as_torch_does(M, call):
    with pytest.raises(ValueError, match="out is a leaf tensor that requires grad"):
        _calls(M)[call](lambda t: t.requires_grad_())


@pytest.mark.parametrize("call", ["spmm X", "spmm out", "sddmm X", "sddmm Y", "sddmm out"])
def test_tensors_that_require_grad_are_data_under_no_grad(M, call):
    with torch.no_grad():                     # grad mode off: read as data, as DGL does
        result = _calls(M)[call](lambda t: t.requires_grad_())
    assert not result.requires_grad or call.endswith("out")


def test_under_no_grad_the_answer_is_right(A, M):
    X = torch.randn(20, 4, requires_grad=True)
    with torch.no_grad():
        Y = ops.spmm(M, X)
    np.testing.assert_allclose(Y.numpy(), A @ X.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_a_sparse_matrix_that_requires_grad_is_refused(A):
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                 torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data), size=A.shape, requires_grad=True)
    with pytest.raises(TypeError, match="A requires grad"):
        ops.spmm(At, torch.ones(20, 4))
    with pytest.raises(TypeError, match="matrix requires grad"):
        ops.SparseMatrix(At)


@pytest.mark.parametrize("call", ["spmm X", "spmm out", "sddmm X", "sddmm Y", "sddmm out"])
@pytest.mark.parametrize("layout", ["to_sparse", "to_sparse_csr"])
def test_sparse_tensors_as_dense_operands_are_refused_by_name(M, call, layout):
    if layout == "to_sparse_csr" and call == "sddmm out":
        pytest.skip("torch has no 1-D CSR tensor")
    operand = call.split()[1]
    kind = "sparse_coo" if layout == "to_sparse" else "sparse_csr"
    with pytest.raises(TypeError, match=f"{operand} is a {kind} torch tensor"):
        _calls(M)[call](lambda t: getattr(t, layout)())


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_torch_func_transforms_are_refused_by_name(M, operator):
    def f(x):
        if operator == "spmm":
            return ops.spmm(M, x)
        return ops.sddmm(M, x, torch.ones(20, 4))
    rows = 20 if operator == "spmm" else 30
    message = "X is a tensor of a torch.func transform"
    with pytest.raises(TypeError, match=message):
        torch.vmap(f)(torch.randn(3, rows, 4))
    with pytest.raises(TypeError, match=message):
        torch.func.grad(lambda x: f(x).sum())(torch.randn(rows, 4))


@pytest.mark.parametrize("matrix", ["SparseMatrix", "torch CSR"])
def test_an_inference_out_is_refused_outside_inference_mode(M, A, matrix):
    T = M if matrix == "SparseMatrix" else torch.sparse_csr_tensor(
        torch.from_numpy(A.indptr), torch.from_numpy(A.indices), torch.from_numpy(A.data),
        A.shape)
    X, Y = torch.rand(20, 4), torch.rand(30, 4)
    with torch.inference_mode():
        out, values = torch.full((30, 4), float("nan")), torch.full((A.nnz,), float("nan"))
    for _ in range(4):                                   # the short path is prepared by now
        with pytest.raises(ValueError, match="out is an inference tensor"):
            ops.spmm(T, X, out=out)
        with pytest.raises(ValueError, match="out is an inference tensor"):
            ops.sddmm(T, Y, X, out=values)
    assert torch.isnan(out).all() and torch.isnan(values).all()
    with torch.inference_mode():                         # where torch writes it, so does ops
        ops.spmm(T, X, out=out)
        ops.sddmm(T, Y, X, out=values)
    np.testing.assert_allclose(out.numpy(), A @ X.numpy(), rtol=1e-5, atol=1e-5)
    rows = np.repeat(np.arange(30), np.diff(A.indptr))
    np.testing.assert_allclose(values.numpy(), np.einsum("ef,ef->e", Y.numpy()[rows],
                                                         X.numpy()[A.indices]), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_an_inference_out_of_another_dtype_is_refused_as_out(M, dtype):
    """float64 and half precision go through graph_ops, whose kernel names its own parameter
    (``y``): the operator refuses first, by the user's name."""
    X = torch.rand(20, 4, dtype=dtype)
    with torch.inference_mode():
        out = torch.full((30, 4), float("nan"), dtype=dtype)
    with pytest.raises(ValueError, match="^out is an inference tensor"):
        ops.spmm(M, X, out=out)
    assert torch.isnan(out).all()
