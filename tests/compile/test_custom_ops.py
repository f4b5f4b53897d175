"""``torch.ops.sparsetir.*`` pass ``torch.library.opcheck`` (schema, fake tensors, autograd
registration, AOT dispatch) and give the numbers of the eager operators, gradients included.

The test graph has empty rows, an empty column and a row with several edges; outputs that the
eager operators fill are compared against scipy/torch references elsewhere (tests/ops), here
against the eager operators themselves."""

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparsetir.errors import SparseTIRError
from sparsetir.ops import SparseMatrix
from sparsetir.ops.graph_tensors import graph_tensors

OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
                 "test_aot_dispatch_dynamic")


def graph(m=7, n=6, seed=0):
    rng = np.random.default_rng(seed)
    dense = (rng.random((m, n)) < 0.4) * rng.standard_normal((m, n))
    dense[2] = 0                              # an empty row
    dense[:, 4] = 0                           # a source with no edge
    dense[5, :] = rng.standard_normal(n)      # a full row
    return SparseMatrix(scipy.sparse.csr_matrix(dense.astype(np.float32)))


def leaf(*shape, seed=1, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype).requires_grad_()


M = graph()
T = graph_tensors(M)


def opcheck(op, args):
    torch.library.opcheck(op, args, test_utils=OPCHECK_TESTS)


@pytest.mark.parametrize("reduce_op", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("op", ["mul", "add", "sub", "div", "copy_lhs", "copy_rhs"])
def test_gspmm_opcheck(op, reduce_op):
    lhs = None if op == "copy_rhs" else leaf(M.shape[1], 2, 3)
    rhs = None if op == "copy_lhs" else leaf(M.nnz, 2, 1, seed=2)
    if op == "div":
        rhs = (rhs.detach().abs() + 0.5).requires_grad_()
    opcheck(torch.ops.sparsetir.gspmm.default, (T.indptr, T.indices, op, reduce_op, lhs, rhs))


@pytest.mark.parametrize("op,targets", [("dot", "uv"), ("mul", "ue"), ("add", "vu"),
                                        ("sub", "ev"), ("div", "uv"), ("copy_lhs", "ev"),
                                        ("copy_rhs", "uv")])
def test_gsddmm_opcheck(op, targets):
    rows = {"u": M.shape[1], "v": M.shape[0], "e": M.nnz}
    lhs = None if op == "copy_rhs" else leaf(rows[targets[0]], 2, 3)
    rhs = None if op == "copy_lhs" else leaf(rows[targets[1]], 2, 3, seed=2)
    if op == "div":
        rhs = (rhs.detach().abs() + 0.5).requires_grad_()
    opcheck(torch.ops.sparsetir.gsddmm.default,
            (T.indptr, T.indices, op, lhs, rhs, targets[0], targets[1]))


def test_edge_softmax_opcheck():
    opcheck(torch.ops.sparsetir.edge_softmax.default, (T.indptr, T.indices, leaf(M.nnz, 2, 1)))


@pytest.mark.parametrize("reducer", ["sum", "max", "min", "mean"])
def test_segment_reduce_opcheck(reducer):
    opcheck(torch.ops.sparsetir.segment_reduce.default,
            (torch.tensor([2, 0, 3, 1]), leaf(6, 4), reducer))


def test_typed_products_opcheck():
    a, b = leaf(5, 3), leaf(2, 3, 4, seed=2)
    opcheck(torch.ops.sparsetir.gather_mm.default, (a, b, torch.tensor([1, 0, 1, 1, 0])))
    opcheck(torch.ops.sparsetir.segment_mm.default, (a, b, torch.tensor([2, 3])))


def grads(result, inputs):
    weights = torch.randn(result.shape, generator=torch.Generator().manual_seed(9))
    return torch.autograd.grad((result * weights).sum(), inputs)


@pytest.mark.parametrize("reduce_op", ["sum", "max", "mean"])
def test_gspmm_operator_matches_the_eager_operator(reduce_op):
    x, e = leaf(M.shape[1], 3), leaf(M.nnz, 1, seed=2)
    eager = ops.gspmm(M, "mul", reduce_op, x, e)
    traced = torch.ops.sparsetir.gspmm(T.indptr, T.indices, "mul", reduce_op, x, e)[0]
    torch.testing.assert_close(traced, eager, rtol=1e-6, atol=0)
    for ours, theirs in zip(grads(traced, (x, e)), grads(eager, (x, e))):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0)


def test_tensors_of_no_live_matrix_are_read_as_a_checked_matrix():
    """An exported program may hold copies of the arrays: the operator makes the matrix from
    them (and refuses broken ones by name)."""
    x = torch.randn(M.shape[1], 3)
    copied = torch.ops.sparsetir.gspmm(T.indptr.clone(), T.indices.clone(), "copy_lhs", "sum",
                                       x, None)[0]
    torch.testing.assert_close(copied, ops.copy_u_sum(M, x))
    broken = T.indices.clone()
    broken[0] = 99
    with pytest.raises(SparseTIRError, match="99"):
        torch.ops.sparsetir.gspmm(T.indptr.clone(), broken, "copy_lhs", "sum", x, None)


@pytest.mark.parametrize("copy", [False, True])
def test_compiled_spmm_keeps_the_gradient_of_from_csr_values(copy):
    """A ``from_csr`` values tensor requiring grad gets its gradient through a compiled
    ``spmm``, as eagerly (the traced call read the matrix's copied data: ``w.grad`` stayed
    None while ``x.grad`` was filled). ``copy``: ``SparseMatrix(M)`` keeps the tensor too."""
    A = scipy.sparse.random(8, 6, density=0.3, format="csr", dtype=np.float32, random_state=0)
    w = torch.rand(A.nnz, requires_grad=True)
    M = SparseMatrix.from_csr(A.indptr, A.indices, w, A.shape)
    M = SparseMatrix(M) if copy else M
    assert graph_tensors(M).values is w
    x = torch.randn(6, 3, requires_grad=True)
    compiled = torch.compile(lambda x: ops.spmm(M, x), fullgraph=True, backend="aot_eager")
    y = compiled(x)
    W = torch.randn_like(y)
    (y * W).sum().backward()
    Aw = scipy.sparse.csr_matrix((w.detach().numpy(), A.indices, A.indptr), A.shape)
    dense = torch.from_numpy(Aw.toarray())
    rows = np.repeat(np.arange(8), np.diff(A.indptr))
    assert torch.allclose(y, dense @ x.detach(), atol=1e-5)
    want_w = (W.numpy()[rows] * x.detach().numpy()[A.indices]).sum(1)
    assert w.grad is not None and np.allclose(w.grad.numpy(), want_w, atol=1e-5)
    assert torch.allclose(x.grad, dense.T @ W, atol=1e-5)


@pytest.mark.parametrize("call, message", [
    (lambda ip, ix, x: torch.ops.sparsetir.gspmm(ip, ix, "copy_lhs", "sum", None, None)[0],
     "op 'copy_lhs' reads lhs_data, got None"),
    (lambda ip, ix, x: torch.ops.sparsetir.gspmm(ip, ix, "frob", "sum", x, None)[0],
     "op must be one of"),
    (lambda ip, ix, x: torch.ops.sparsetir.gsddmm(ip, ix, "dot", x, x, "u", "w"),
     "rhs_target must be one of"),
    (lambda ip, ix, x: torch.ops.sparsetir.gather_mm(x, x, torch.zeros(8, dtype=torch.int64)),
     r"b must have shape \(R, D1, D2\)"),
])
def test_fake_implementations_refuse_by_name(call, message):
    """Traced, the operators' fake implementations refuse what the operator refuses eagerly,
    with its message (they raised AttributeError / IndexError on the missing shapes)."""
    A = scipy.sparse.random(8, 8, density=0.3, format="csr", dtype=np.float32, random_state=0)
    arrays = graph_tensors(SparseMatrix(A))
    x = torch.randn(8, 4)
    with pytest.raises(SparseTIRError, match=message):
        call(arrays.indptr, arrays.indices, x)
    compiled = torch.compile(lambda x: call(arrays.indptr, arrays.indices, x), fullgraph=True,
                             backend="aot_eager")
    with pytest.raises(Exception, match=message):
        compiled(x)
