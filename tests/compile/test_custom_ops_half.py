"""``torch.ops.sparsetir.*`` in bfloat16 and float16: the fake implementations give the dtype
the eager operators give (``dtypes.result_dtype``, or the autocast dtype a traced call passes
as ``dtype``), ``torch.compile`` gives the eager operators' numbers and gradients (the same
compiled kernels), and the gradients have their operands' dtypes.

The graph is ``test_custom_ops``'s: empty rows, a source with no edge, a full row; outputs are
checked against a float64 torch reference with half-precision tolerances too, so a kernel that
skipped a row (garbage left in an uninitialised output) fails."""

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparsetir.errors import SparseTIRTypeError
from sparsetir.ops.graph_tensors import graph_tensors

from test_custom_ops import M, OPCHECK_TESTS, grads, leaf

T = graph_tensors(M)
DENSE = torch.from_numpy(M.to_scipy().toarray().astype(np.float64))
HALF = [torch.bfloat16, torch.float16]
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 2e-3, torch.float32: 1e-5}


def opcheck(op, args):
    torch.library.opcheck(op, args, test_utils=OPCHECK_TESTS)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("reduce_op", ["sum", "max"])
def test_gspmm_opcheck_half_and_mixed(dtype, reduce_op):
    x = leaf(M.shape[1], 2, 3, dtype=dtype)
    e = leaf(M.nnz, 2, 1, seed=2)                                  # float32 edge data
    opcheck(torch.ops.sparsetir.gspmm.default, (T.indptr, T.indices, "mul", reduce_op, x, e))
    out = torch.ops.sparsetir.gspmm(T.indptr, T.indices, "mul", reduce_op, x, e)[0]
    assert out.dtype == torch.float32                              # half with float32
    same = torch.ops.sparsetir.gspmm(T.indptr, T.indices, "copy_lhs", reduce_op, x, None)[0]
    assert same.dtype == dtype


@pytest.mark.parametrize("dtype", HALF)
def test_gsddmm_opcheck_with_an_autocast_dtype(dtype):
    x, y = leaf(M.shape[1], 2, 3), leaf(M.shape[0], 2, 3, seed=2)
    args = (T.indptr, T.indices, "dot", x, y, "u", "v", str(dtype).replace("torch.", ""))
    opcheck(torch.ops.sparsetir.gsddmm.default, args)
    assert torch.ops.sparsetir.gsddmm(*args).dtype == dtype


@pytest.mark.parametrize("dtype", HALF)
def test_segment_reduce_opcheck_half_and_autocast(dtype):
    value = leaf(6, 4, dtype=dtype)
    opcheck(torch.ops.sparsetir.segment_reduce.default, (torch.tensor([2, 0, 3, 1]), value, "max"))
    autocast = (torch.tensor([2, 0, 3, 1]), leaf(6, 4), "min", str(dtype).replace("torch.", ""))
    opcheck(torch.ops.sparsetir.segment_reduce.default, autocast)
    assert torch.ops.sparsetir.segment_reduce(*autocast)[0].dtype == dtype


def test_bad_dtype_argument_is_refused_by_name():
    x = torch.randn(M.shape[1], 3)
    with pytest.raises(SparseTIRTypeError, match="dtype"):
        torch.ops.sparsetir.gspmm(T.indptr, T.indices, "copy_lhs", "sum", x, None, "int8")
    with pytest.raises(SparseTIRTypeError, match="lhs_data and rhs_data"):
        torch.ops.sparsetir.gspmm(T.indptr, T.indices, "mul", "sum", x.double(),
                                  torch.randn(M.nnz, 3, dtype=torch.bfloat16))


def test_mixture_is_refused_by_name_while_tracing():
    compiled = torch.compile(lambda x, e: ops.u_mul_e_sum(M, x, e), fullgraph=True,
                             backend="aot_eager")
    with pytest.raises(Exception, match="lhs_data and rhs_data have different dtypes"):
        compiled(torch.randn(M.shape[1], 3, dtype=torch.float64),
                 torch.randn(M.nnz, 3, dtype=torch.bfloat16))


def _model(x, e, y):
    h = ops.gspmm(M, "mul", "sum", x, e)
    s = ops.gsddmm(M, "dot", h, y, "v", "u")
    return ops.gspmm(M, "copy_rhs", "max", None, ops.edge_softmax(M, s)) + h.sum()


@pytest.mark.parametrize("dtype", HALF)
def test_compiled_half_model_matches_eager(dtype):
    x, e, y = (leaf(M.shape[1], 3, dtype=dtype), leaf(M.nnz, 1, seed=2, dtype=dtype),
               leaf(M.shape[1], 3, seed=3, dtype=dtype))
    compiled = torch.compile(_model, fullgraph=True, dynamic=False)
    eager, traced = _model(x, e, y), compiled(x, e, y)
    assert traced.dtype == eager.dtype == dtype
    torch.testing.assert_close(traced, eager, rtol=0, atol=0)
    for ours, theirs, leaf_ in zip(grads(traced.float(), (x, e, y)),
                                   grads(eager.float(), (x, e, y)), (x, e, y)):
        assert ours.dtype == leaf_.dtype
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    weighted = scipy.sparse.csr_matrix((e.detach().double().numpy().ravel(), M.indices,
                                        M.indptr), shape=M.shape)
    expected = weighted @ x.detach().double().numpy()
    h = torch.compile(lambda a, b: ops.gspmm(M, "mul", "sum", a, b), fullgraph=True)(x, e)
    assert h.dtype == dtype
    np.testing.assert_allclose(h.double().detach().numpy(), expected, rtol=TOLERANCE[dtype],
                               atol=TOLERANCE[dtype])


SEGMENTS = torch.tensor([2, 0, M.shape[1] - 2])


def _products(x, e, y):
    return (ops.u_mul_e_sum(M, x, e), ops.gsddmm(M, "dot", x, y, "u", "v"),
            ops.segment_reduce(SEGMENTS, x, "max"), ops.spmm(M, x))


@pytest.mark.parametrize("dtype", HALF)
def test_compiled_products_under_autocast_give_the_autocast_dtype(dtype):
    x, e = leaf(M.shape[1], 5), leaf(M.nnz, 1, seed=2)        # float32, read as they are
    y = leaf(M.shape[0], 5, seed=3)
    compiled = torch.compile(_products, fullgraph=True, dynamic=False)
    with torch.autocast("cpu", dtype=dtype):
        eager, traced = _products(x, e, y), compiled(x, e, y)
    weighted = torch.from_numpy(scipy.sparse.csr_matrix(
        (e.detach().double().numpy().ravel(), M.indices, M.indptr), shape=M.shape).toarray())
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    plain_x = x.detach().double()
    expected = (weighted @ plain_x, (plain_x[M.indices] * y.detach().double()[rows]).sum(1, True),
                torch.stack([plain_x[:2].max(0).values, torch.zeros(5, dtype=torch.float64),
                             plain_x[2:].max(0).values]), DENSE @ plain_x)
    for ours, theirs, reference in zip(traced, eager, expected):
        assert ours.dtype == theirs.dtype == dtype
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
        torch.testing.assert_close(ours.double(), reference, rtol=TOLERANCE[dtype],
                                   atol=TOLERANCE[dtype])
    d_x = grads(traced[0].float() + traced[1].float().sum() + traced[2].float().sum(), (x,))[0]
    assert d_x.dtype == torch.float32                           # the operand's dtype
    plain = compiled(x, e, y)                                   # autocast off: recompiled
    assert [p.dtype for p in plain] == [torch.float32] * 4


def _typed(a, b):
    return (ops.gather_mm(a, b, torch.tensor([1, 0, 1, 1, 0])),
            ops.segment_mm(a, b, torch.tensor([2, 0, 3])))


@pytest.mark.parametrize("dtype", HALF)
def test_typed_products_under_autocast_opcheck_and_compiled(dtype):
    """``gather_mm``/``segment_mm`` take the autocast dtype as ``dtype``: float32 operands
    read as they are, the result in that dtype, the same numbers compiled and eager; the
    gradients in the operands' dtype."""
    a, b = leaf(5, 4), leaf(3, 4, 2, seed=2)
    name = str(dtype).replace("torch.", "")
    opcheck(torch.ops.sparsetir.gather_mm.default, (a, b, torch.tensor([1, 0, 1, 1, 0]), name))
    opcheck(torch.ops.sparsetir.segment_mm.default, (a, b, torch.tensor([2, 0, 3]), name))
    compiled = torch.compile(_typed, fullgraph=True, dynamic=False, backend="aot_eager")
    with torch.autocast("cpu", dtype=dtype):
        eager, traced = _typed(a, b), compiled(a, b)
    expected = torch.einsum("nd,nde->ne", a.detach().double(),
                            b.detach().double()[torch.tensor([1, 0, 1, 1, 0])])
    for ours, theirs in zip(traced, eager):
        assert ours.dtype == theirs.dtype == dtype
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    torch.testing.assert_close(traced[0].double(), expected, rtol=TOLERANCE[dtype],
                               atol=TOLERANCE[dtype])
    d_a, d_b = grads(traced[0].float().sum() + traced[1].float().sum(), (a, b))
    assert d_a.dtype == d_b.dtype == torch.float32


@pytest.mark.parametrize("segments", [False, True])
@pytest.mark.parametrize("operand_dtype", [torch.float32, torch.bfloat16])
def test_typed_backward_fake_gives_each_gradient_its_operand_dtype(segments, operand_dtype):
    """The fake said a float32 operand's gradient was bfloat16 (the incoming gradient's dtype
    under autocast); inductor then read the real float32 bytes as bfloat16, and gather_mm,
    segment_mm and RelGraphConv trained with gradients off by up to 1e38."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    a = torch.randn(6, 3, dtype=operand_dtype)
    b = torch.randn(4, 3, 2)
    relations = torch.tensor([2, 0, 3, 1]) if segments else torch.tensor([0, 3, 3, 1, 0, 2])
    grad = torch.randn(6, 2, dtype=torch.bfloat16)
    with torch.no_grad():                       # as autograd calls a backward
        real = torch.ops.sparsetir.typed_mm_backward(a, b, relations, segments, grad,
                                                     [True, True])
    with FakeTensorMode() as mode:
        fake = torch.ops.sparsetir.typed_mm_backward(
            mode.from_tensor(a), mode.from_tensor(b), mode.from_tensor(relations), segments,
            mode.from_tensor(grad), [True, True])
    assert [(t.shape, t.dtype) for t in fake] == [(t.shape, t.dtype) for t in real] \
        == [(a.shape, operand_dtype), (b.shape, torch.float32)]
