"""gather_mm and segment_mm (DGL's typed products): values and gradients against a dense torch
recomputation, gradcheck in float64, relations without rows, and bad input refused by name.

DGL's tests/python/common/ops/test_ops.py is the template: random inputs, the result and the
gradients of ``a`` and ``b`` compared with ``a[i] @ b[idx[i]]`` computed by torch.
"""

import numpy as np
import pytest
import torch

from sparsetir.errors import SparseTIRError, SparseTIRTypeError, SparseTIRValueError
from sparsetir.ops.typed import gather_mm, segment_mm

N, R = 29, 4                      # 29 rows: not a multiple of the kernel's row blocks
SHAPES = [(5, 7), (3, 65)]        # (D1, D2); 65 features: no vector tile divides them
SEGLEN = [11, 0, 18, 0]           # two relations without rows
DTYPES = [torch.float32, torch.float64]


def tolerance(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)


def inputs(d1, d2, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(N, d1, generator=g, dtype=dtype)
    b = torch.randn(R, d1, d2, generator=g, dtype=dtype)
    idx = torch.randint(0, R - 1, (N,), generator=g)      # relation R - 1 gets no rows
    return a, b, idx


def dense(a, b, idx):
    """a[i] @ b[idx[i]] by torch, differentiable."""
    return torch.bmm(a.unsqueeze(1), b[idx]).squeeze(1)


def segment_ids(seglen):
    return torch.repeat_interleave(torch.arange(len(seglen)), torch.as_tensor(seglen))


OPS = {
    "gather_mm": (lambda a, b, idx: gather_mm(a, b, idx_b=idx), lambda idx: idx),
    "segment_mm": (lambda a, b, idx: segment_mm(a, b, SEGLEN),
                   lambda idx: segment_ids(SEGLEN)),
}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d1,d2", SHAPES)
def test_values_equal_dense_torch(op, dtype, d1, d2):
    call, relation = OPS[op]
    a, b, idx = inputs(d1, d2, dtype)
    expected = dense(a, b, relation(idx))
    out = call(a, b, idx)
    assert type(out) is torch.Tensor and out.dtype == dtype and out.shape == (N, d2)
    torch.testing.assert_close(out, expected, **tolerance(dtype))
    out_np = call(a.numpy(), b.numpy(), idx.numpy())
    assert type(out_np) is np.ndarray and out_np.dtype == a.numpy().dtype
    np.testing.assert_allclose(out_np, expected.numpy(), **tolerance(dtype))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d1,d2", SHAPES)
def test_gradients_equal_dense_torch(op, dtype, d1, d2):
    call, relation = OPS[op]
    a, b, idx = inputs(d1, d2, dtype)
    dout = torch.randn(N, d2, dtype=dtype)
    a1, b1 = a.clone().requires_grad_(), b.clone().requires_grad_()
    a2, b2 = a.clone().requires_grad_(), b.clone().requires_grad_()
    call(a1, b1, idx).backward(dout)
    dense(a2, b2, relation(idx)).backward(dout)
    torch.testing.assert_close(a1.grad, a2.grad, **tolerance(dtype))
    torch.testing.assert_close(b1.grad, b2.grad, **tolerance(dtype))
    assert torch.all(b1.grad[R - 1] == 0)          # a relation without rows


@pytest.mark.parametrize("op", OPS)
def test_gradcheck_float64(op):
    call, _ = OPS[op]
    a, b, idx = inputs(5, 7, torch.float64, seed=1)
    a.requires_grad_()
    b.requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: call(a, b, idx), (a, b))


def test_sorted_indices():
    """Sorted idx_b: each relation's rows are in order (the kernels walk them unscattered)."""
    a, b, idx = inputs(5, 7, torch.float32)
    idx = torch.sort(idx).values
    a1, b1 = a.clone().requires_grad_(), b.clone().requires_grad_()
    a2, b2 = a.clone().requires_grad_(), b.clone().requires_grad_()
    dout = torch.randn(N, 7)
    torch.testing.assert_close(gather_mm(a1, b1, idx), dense(a2, b2, idx))
    gather_mm(a1, b1, idx).backward(dout)
    dense(a2, b2, idx).backward(dout)
    torch.testing.assert_close(a1.grad, a2.grad)
    torch.testing.assert_close(b1.grad, b2.grad)


def test_gradient_of_one_operand_only():
    a, b, idx = inputs(5, 7, torch.float32)
    b.requires_grad_()
    out = gather_mm(a, b, idx)
    out.sum().backward()                  # a stride-0 gradient
    expected = b.detach().clone().requires_grad_()
    dense(a, expected, idx).sum().backward()
    torch.testing.assert_close(b.grad, expected.grad)
    assert a.grad is None


def test_second_derivative_raises():
    a, b, idx = inputs(5, 7, torch.float64)
    a.requires_grad_()
    loss = gather_mm(a, b, idx).square().sum()
    with pytest.raises(SparseTIRError, match="no double backward"):
        torch.autograd.grad(loss, a, create_graph=True)


def test_no_graph_without_grad():
    a, b, idx = inputs(5, 7, torch.float32)
    a.requires_grad_()
    with torch.no_grad():
        out = gather_mm(a, b, idx)
    assert not out.requires_grad
    assert gather_mm(a, b, idx).requires_grad


def test_non_contiguous_operands():
    a, b, idx = inputs(5, 7, torch.float32)
    a_t = a.t().contiguous().t()                         # column-major
    b_t = b.transpose(1, 2).contiguous().transpose(1, 2)
    assert not a_t.is_contiguous() and not b_t.is_contiguous()
    torch.testing.assert_close(gather_mm(a_t, b_t, idx), dense(a, b, idx))


def test_index_kinds():
    a, b, idx = inputs(5, 7, torch.float32)
    expected = dense(a, b, idx)
    for kind in (idx.to(torch.int32), idx.numpy().astype(np.uint8)):
        torch.testing.assert_close(gather_mm(a, b, kind), expected)
    torch.testing.assert_close(segment_mm(a, b, torch.tensor(SEGLEN, dtype=torch.int32)),
                               dense(a, b, segment_ids(SEGLEN)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_rows(dtype):
    a = torch.zeros(0, 5, dtype=dtype, requires_grad=True)
    b = torch.randn(R, 5, 7, dtype=dtype, requires_grad=True)
    out = segment_mm(a, b, torch.zeros(R, dtype=torch.int64))
    assert out.shape == (0, 7)
    out.sum().backward()
    assert a.grad.shape == (0, 5) and torch.all(b.grad == 0)
    assert gather_mm(a.detach().numpy(), b.detach().numpy(), np.zeros(0, np.int64)).shape == (0, 7)


def test_every_row_in_one_relation():
    a, b, _ = inputs(5, 7, torch.float64)
    seglen = torch.tensor([0, 0, N, 0])
    torch.testing.assert_close(segment_mm(a, b, seglen), a @ b[2])


BAD = [
    ("a 1-D", lambda a, b, i: gather_mm(a[0], b, i), SparseTIRValueError, r"a must have shape"),
    ("b 2-D", lambda a, b, i: gather_mm(a, b[0], i), SparseTIRValueError, r"b must have shape"),
    ("D1 mismatch", lambda a, b, i: gather_mm(a[:, :4], b, i), SparseTIRValueError,
     r"a has 4 columns \(D1\) and b's matrices 5 rows"),
    ("idx too large", lambda a, b, i: gather_mm(a, b, torch.full((N,), R)),
     SparseTIRValueError, r"idx_b\[0\] = 4 is out of range: b has 4 relations"),
    ("idx negative", lambda a, b, i: gather_mm(a, b, i - 1), SparseTIRValueError,
     r"idx_b\[\d+\] = -1 is out of range"),
    ("idx length", lambda a, b, i: gather_mm(a, b, i[1:]), SparseTIRValueError,
     r"idx_b must hold one relation per row of a \(29\), got 28"),
    ("idx float", lambda a, b, i: gather_mm(a, b, i.double()), SparseTIRTypeError,
     r"idx_b must hold integers, got float64"),
    ("idx 2-D", lambda a, b, i: gather_mm(a, b, i[:, None]), SparseTIRValueError,
     r"idx_b must be a 1-D array"),
    ("idx None", lambda a, b, i: gather_mm(a, b, None), SparseTIRValueError,
     r"idx_b must be a 1-D array, got shape \(\)"),
    ("seglen sum", lambda a, b, i: segment_mm(a, b, torch.tensor([10, 0, 18, 0])),
     SparseTIRValueError, r"seglen_a must sum to the 29 rows of a, got 28"),
    ("seglen negative", lambda a, b, i: segment_mm(a, b, torch.tensor([30, -1, 0, 0])),
     SparseTIRValueError, r"seglen_a\[1\] = -1 is out of range \(negative\)"),
    ("seglen too large", lambda a, b, i: segment_mm(a, b, torch.tensor([2**62, 2**62, 0, 0])),
     SparseTIRValueError, r"seglen_a\[0\] = 4611686018427387904 is more than the 29 rows"),
    ("seglen length", lambda a, b, i: segment_mm(a, b, torch.tensor([29, 0])),
     SparseTIRValueError, r"seglen_a must hold one length per relation of b \(4\), got 2"),
    ("seglen float", lambda a, b, i: segment_mm(a, b, torch.tensor([29.0, 0, 0, 0])),
     SparseTIRTypeError, r"seglen_a must hold integers, got float32"),
    ("mixed dtypes", lambda a, b, i: gather_mm(a, b.double(), i), SparseTIRTypeError,
     r"a is float32 and b is float64"),
    ("integer a", lambda a, b, i: gather_mm(a.int(), b, i), SparseTIRTypeError,
     r"a must be float32, float64, bfloat16 or float16, got int32"),
    ("mixed kinds", lambda a, b, i: gather_mm(a.numpy(), b, i), SparseTIRTypeError,
     r"a and b must both be numpy arrays or both torch tensors"),
    ("list a", lambda a, b, i: gather_mm(a.tolist(), b, i), SparseTIRTypeError,
     r"a must be a numpy array or torch tensor, got list"),
    ("sparse b", lambda a, b, i: gather_mm(a, b.to_sparse(), i), SparseTIRTypeError,
     r"b must be a dense \(strided\) tensor"),
]


@pytest.mark.parametrize("case", BAD, ids=[case[0] for case in BAD])
def test_bad_input_is_refused_by_name(case):
    _, call, error, message = case
    a, b, idx = inputs(5, 7, torch.float32)
    with pytest.raises(error, match=message):
        call(a, b, idx)


def test_torch_func_is_refused():
    a, b, idx = inputs(5, 7, torch.float32)
    with pytest.raises(SparseTIRTypeError, match="a is a tensor of a torch.func transform"):
        torch.func.grad(lambda a: gather_mm(a, b, idx).sum())(a)
