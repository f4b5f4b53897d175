"""bfloat16 and float16 operands of ``sparsetir.ops``: sums in float32, one rounding at the store.

Every operator in half precision is checked against its float32 result on the same rounded
inputs (float32 is checked against dense torch by ``test_graph_ops``; ``spmm``/``sddmm`` here
also against float64 dense products). Tolerance: one rounding of the float32 value to the
output dtype, ``|half - f32| <= u * |f32|`` with the unit roundoff ``u`` (2^-8 for bfloat16,
2^-11 for float16), plus 1e-6 * (1 + |f32|) for float32's own summation-order differences;
``mean`` (a rounded sum divided and rounded again) and ``edge_softmax`` (four rounded stages)
get 2u and 4u. The graph has empty rows and outputs are filled with NaN before the call.
"""

import ml_dtypes
import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparsetir.ops import numpy_calls, operators
from sparsetir.schedule.generic import WIDENED_ROW_LIMIT
from sparsetir import ArgumentError
from sparsetir.errors import SparseTIRTypeError
from sparsetir.lower import lower_sparse_iter
from sparsetir.ops.dtypes import dtype_name
from sparsetir.ops.generic_kernels import gspmm_kernel
from sparsetir.runtime import native_call
from sparsetir.runtime.kernel import BoundKernel
from sparsetir.schedule.generic import schedule_gspmm_cpu

UNIT_ROUNDOFF = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
HALVES = pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
ROWS, COLS, FEAT = 40, 30, 16


@pytest.fixture(scope="module")
def matrix():
    dense = scipy.sparse.random(ROWS, COLS, density=0.2, format="csr", dtype=np.float32,
                                random_state=3).toarray()
    dense[[0, 5, 17]] = 0                                   # rows without a nonzero
    return ops.SparseMatrix(scipy.sparse.csr_matrix(dense)), torch.from_numpy(dense)


def _rounded(shape, dtype, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def assert_one_rounding(half, reference, dtype, roundings=1):
    """``half`` is ``reference`` (float32 or float64) rounded ``roundings`` times to ``dtype``."""
    assert half.dtype == dtype
    reference = reference.double()
    bound = roundings * UNIT_ROUNDOFF[dtype] * reference.abs() + 1e-6 * (1 + reference.abs())
    error = (half.double() - reference).abs()
    assert torch.isnan(half).eq(torch.isnan(reference)).all()
    finite = torch.isfinite(reference)
    assert (half[~finite].double() == reference[~finite]).logical_or(
        torch.isnan(reference[~finite])).all()
    assert (error[finite] <= bound[finite]).all(), float((error - bound)[finite].max())


@HALVES
def test_spmm_and_sddmm_against_float64_products(matrix, dtype):
    M, dense = matrix
    x, y = _rounded((COLS, FEAT), dtype, 1), _rounded((ROWS, FEAT), dtype, 2)
    pattern = (dense != 0).double()
    assert_one_rounding(ops.spmm(M, x, weighted=False), pattern @ x.double(), dtype)
    values = ops.sddmm(M, y, x)
    rows, cols = np.repeat(np.arange(ROWS), np.diff(M.indptr)), np.array(M.indices)
    reference = (y.double()[rows] * x.double()[cols]).sum(1)
    assert_one_rounding(values, reference, dtype)
    # a float32 matrix with half features: float32 (torch's promotion), the features read as
    # they are
    weighted = ops.spmm(M, x)
    assert weighted.dtype == torch.float32
    torch.testing.assert_close(weighted.double(), dense.double() @ x.double(), rtol=1e-5,
                               atol=1e-5)


@HALVES
def test_empty_rows_give_zero_and_out_is_written(matrix, dtype):
    M, _ = matrix
    out = torch.full((ROWS, FEAT), float("nan"), dtype=dtype)
    result = ops.spmm(M, _rounded((COLS, FEAT), dtype, 4), out=out, weighted=False)
    assert result is out and not torch.isnan(out).any()
    assert (out[[0, 5, 17]] == 0).all()
    for reducer in ("sum", "max", "min", "mean"):
        y = ops.gspmm(M, "copy_lhs", reducer, _rounded((COLS, FEAT), dtype, 5), None)
        assert (y[[0, 5, 17]] == 0).all(), reducer


@HALVES
def test_out_written_in_place_is_safe(matrix, dtype):
    """``out=`` is written by the kernel itself (no copy) only where that is safe: an ``out``
    that is also the gathered operand still gets ``A @ X`` of X's old values, and a write into
    a tensor autograd saved is still caught at backward, as torch's ``copy_`` would be."""
    square = scipy.sparse.random(COLS, COLS, density=0.2, format="csr", dtype=np.float32,
                                 random_state=4)
    S = ops.SparseMatrix(square)
    x = _rounded((COLS, FEAT), dtype, 11)
    M, _ = matrix
    y = _rounded((ROWS, FEAT), dtype, 12)
    w = torch.randn(ROWS, FEAT, dtype=dtype, requires_grad=True)
    loss = (w * y).sum()                                             # saves y for backward
    with torch.autocast("cpu", dtype=dtype):                         # a half result
        expected = ops.spmm(S, x.clone())
        assert torch.equal(ops.spmm(S, x, out=x), expected)       # out is X
        ops.spmm(M, _rounded((COLS, FEAT), dtype, 13), out=y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    values = torch.full((M.nnz,), float("nan"), dtype=dtype)
    a, b = _rounded((ROWS, FEAT), dtype, 14), _rounded((COLS, FEAT), dtype, 15)
    assert ops.sddmm(M, a, b, out=values) is values
    assert torch.equal(values, ops.sddmm(M, a, b))


@pytest.fixture
def native_runs(monkeypatch):
    """``(torch_views, ran)`` of every call through a kernel's C plan
    (``BoundKernel.call_native``)."""
    if not native_call.available():
        pytest.skip("the native call module cannot be built here")
    runs = []
    real = BoundKernel.call_native

    def spy(self, args, torch_views=False):
        ran = real(self, args, torch_views)
        runs.append((torch_views, ran))
        return ran

    monkeypatch.setattr(BoundKernel, "call_native", spy)
    return runs


@HALVES
@pytest.mark.parametrize("weighted", [True, False])
def test_repeated_calls_into_out_are_prepared(matrix, dtype, weighted, native_runs):
    """A second autocast ``spmm`` of the same kind into ``out`` runs the kernel the first one
    prepared (``operators._call_prepared_half``) through its C plan (bfloat16 tensors as the
    uint16 views of their bits), with the same result; an operand that requires grad still
    gets its gradient, and a call without autocast is a call of its own."""
    M = ops.SparseMatrix(scipy.sparse.csr_matrix(matrix[1].numpy()))   # no call prepared yet
    x = _rounded((COLS, FEAT), dtype, 16)
    out = torch.full((ROWS, FEAT), float("nan"), dtype=dtype)
    with torch.autocast("cpu", dtype=dtype):
        first = ops.spmm(M, x, out=out, weighted=weighted).clone()
        calls = len(M.calls)
        out.fill_(float("nan"))
        native_runs.clear()
        assert ops.spmm(M, x, out=out, weighted=weighted) is out
    assert native_runs[-1] == (True, True)
    assert calls >= 1 and len(M.calls) == calls and torch.equal(out, first)
    w = torch.zeros(ROWS, FEAT, dtype=dtype, requires_grad=True)
    tracked_out = w * 1                                  # a tensor of a graph: the write is
    with torch.autocast("cpu", dtype=dtype):            # recorded, its old history cut
        ops.spmm(M, x, out=tracked_out, weighted=weighted)
    tracked_out.float().sum().backward()
    assert torch.equal(tracked_out.detach(), first) and not w.grad.any()
    xg = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=dtype):
        tracked = ops.spmm(M, xg, weighted=weighted)
    tracked.float().sum().backward()
    dense = matrix[1] if weighted else (matrix[1] != 0).float()
    torch.testing.assert_close(xg.grad.float(), dense.sum(0).reshape(-1, 1).expand(COLS, FEAT),
                               rtol=2 * UNIT_ROUNDOFF[dtype], atol=1e-3)
    if weighted:                    # without autocast, A's float32 values give float32
        with pytest.raises(SparseTIRTypeError):
            ops.spmm(M, x, out=out, weighted=weighted)
    else:                           # the pattern alone keeps X's dtype: the same sums
        out.fill_(float("nan"))
        assert torch.equal(ops.spmm(M, x, out=out, weighted=weighted), first)


@HALVES
def test_repeated_sddmm_into_out_is_prepared(matrix, dtype, native_runs):
    """A second autocast ``sddmm`` of the same kind into ``out`` runs the kernel the first one
    prepared through its C plan, with the same values (the float32 sums rounded once, every
    entry rewritten); one with an operand that requires grad takes the general path and gets
    its gradient."""
    M = ops.SparseMatrix(scipy.sparse.csr_matrix(matrix[1].numpy()))   # no call prepared yet
    x, y = _rounded((ROWS, FEAT), dtype, 21), _rounded((COLS, FEAT), dtype, 22)
    out = torch.full((M.nnz,), float("nan"), dtype=dtype)
    with torch.autocast("cpu", dtype=dtype):
        first = ops.sddmm(M, x, y, out=out).clone()
        calls = len(M.calls)
        out.fill_(float("nan"))
        native_runs.clear()
        assert ops.sddmm(M, x, y, out=out) is out
    assert native_runs[-1] == (True, True)
    rows, cols = np.repeat(np.arange(ROWS), np.diff(M.indptr)), np.array(M.indices)
    assert_one_rounding(out, (x.double()[rows] * y.double()[cols]).sum(1), dtype)
    assert calls >= 1 and len(M.calls) == calls and torch.equal(out, first)
    yg = y.clone().requires_grad_()
    with torch.autocast("cpu", dtype=dtype):
        tracked = ops.sddmm(M, x, yg)
    tracked.float().sum().backward()
    dense_pattern = (matrix[1] != 0).double()
    torch.testing.assert_close(yg.grad.double(), dense_pattern.T @ x.double(),
                               rtol=4 * UNIT_ROUNDOFF[dtype], atol=1e-2)


@HALVES
@pytest.mark.parametrize("op", ["spmm", "spmm_unweighted", "sddmm"])
def test_later_half_calls_take_the_short_path(matrix, dtype, op, monkeypatch):
    """From the third autocast call of the same kind into ``out`` on (the second prepares
    it), the call skips the general path (``numpy_calls.HalfCall``) with the same result; a
    call under another autocast dtype or none, one that autograd records, and a float32 call
    of the same shapes each take the general path and get its answer."""
    M = ops.SparseMatrix(scipy.sparse.csr_matrix(matrix[1].numpy()))   # no call prepared yet
    reached = []
    prepared = operators._call_prepared                 # pylint: disable=protected-access
    monkeypatch.setattr(operators, "_call_prepared",
                        lambda *args: reached.append(args[1]) or prepared(*args))
    if op == "sddmm":
        operands = (_rounded((ROWS, FEAT), dtype, 40), _rounded((COLS, FEAT), dtype, 41))
        out = torch.full((M.nnz,), float("nan"), dtype=dtype)
        call = lambda *xs, out=None: ops.sddmm(M, *xs, out=out)
    else:
        operands = (_rounded((COLS, FEAT), dtype, 40),)
        out = torch.full((ROWS, FEAT), float("nan"), dtype=dtype)
        call = lambda *xs, out=None: ops.spmm(M, *xs, out=out, weighted=op == "spmm")
    with torch.autocast("cpu", dtype=dtype):
        first = call(*operands, out=out).clone()
        for _ in range(3):
            out.fill_(float("nan"))
            assert call(*operands, out=out) is out and torch.equal(out, first)
    assert len(reached) == 2 and isinstance(
        M.numpy_calls[(op, torch.Tensor, dtype, *[x.shape for x in operands])],
        numpy_calls.HalfCall)
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
    with torch.autocast("cpu", dtype=other):
        with pytest.raises(SparseTIRTypeError):     # two halves mixed: refused, not run
            call(*operands, out=out.fill_(float("nan")))
    assert torch.isnan(out).all()
    dense = matrix[1].double() if op == "spmm" else (matrix[1] != 0).double()
    if op != "sddmm":               # the pattern alone keeps X's dtype without autocast
        with torch.autocast("cpu", dtype=dtype, enabled=False):
            if op == "spmm":        # A's float32 values and a half X: a float32 result
                with pytest.raises(SparseTIRTypeError):
                    call(*operands, out=out)
            else:
                assert torch.equal(call(*operands, out=out.fill_(float("nan"))), first)
    tracked = operands[0].clone().requires_grad_()
    grad_out = torch.full_like(out, float("nan"))
    with torch.autocast("cpu", dtype=dtype):
        result = call(tracked, *operands[1:])
        call(*operands, out=grad_out)              # the short path, beside a recorded call
    result.float().sum().backward()
    assert tracked.grad is not None and torch.equal(result.detach(), first)
    assert torch.equal(grad_out, first)
    singles = [x.float() for x in operands]
    expected = (dense @ singles[0].double()).float() if op != "sddmm" \
        else ops.sddmm(M, singles[0].numpy(), singles[1].numpy())
    single_out = torch.full(out.shape, float("nan"))
    for _ in range(3):                              # float32, the same shapes: its own calls
        torch.testing.assert_close(call(*singles, out=single_out), torch.as_tensor(expected),
                                   rtol=1e-5, atol=1e-5)


@HALVES
@pytest.mark.parametrize("feat", [32, WIDENED_ROW_LIMIT + 1])
def test_sddmm_rows_widened_once_or_where_read(matrix, dtype, feat):
    """The row's operand widened once a row (32 features) and, past WIDENED_ROW_LIMIT, where
    it is read: both the float32 sums rounded once, into an out that held NaN, empty rows
    included (they own no entry)."""
    M, _ = matrix
    x, y = _rounded((ROWS, feat), dtype, 23), _rounded((COLS, feat), dtype, 24)
    out = torch.full((M.nnz,), float("nan"), dtype=dtype)
    with torch.autocast("cpu", dtype=dtype):
        ops.sddmm(M, x, y, out=out)
    rows, cols = np.repeat(np.arange(ROWS), np.diff(M.indptr)), np.array(M.indices)
    assert_one_rounding(out, (x.double()[rows] * y.double()[cols]).sum(1), dtype)


@HALVES
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "copy_lhs", "copy_rhs"])
@pytest.mark.parametrize("reducer", ["sum", "max", "min", "mean"])
def test_gspmm_is_the_float32_result_rounded_once(matrix, dtype, op, reducer):
    M, _ = matrix
    x = _rounded((COLS, 2, 8), dtype, 6)
    e = _rounded((M.nnz, 2, 1), dtype, 7)
    if op == "div":
        e = e.abs() + 0.5
    half = ops.gspmm(M, op, reducer, x, e)
    single = ops.gspmm(M, op, reducer, x.float(), e.float())
    assert_one_rounding(half, single, dtype, roundings=2 if reducer == "mean" else 1)


@HALVES
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs"])
@pytest.mark.parametrize("targets", [("u", "v"), ("v", "e"), ("e", "u")])
def test_gsddmm_is_the_float32_result_rounded_once(matrix, dtype, op, targets):
    M, _ = matrix
    rows = {"u": COLS, "v": ROWS, "e": M.nnz}
    lhs = _rounded((rows[targets[0]], 12), dtype, 8)
    rhs = _rounded((rows[targets[1]], 12), dtype, 9)
    if op == "div":
        rhs = rhs.abs() + 0.5
    half = ops.gsddmm(M, op, lhs, rhs, *targets)
    assert_one_rounding(half, ops.gsddmm(M, op, lhs.float(), rhs.float(), *targets), dtype)


@HALVES
def test_edge_softmax_and_segment_reduce(matrix, dtype):
    M, _ = matrix
    logits = _rounded((M.nnz, 3), dtype, 10)
    half = ops.edge_softmax(M, logits)
    assert half.dtype == dtype
    torch.testing.assert_close(half.double(), ops.edge_softmax(M, logits.float()).double(),
                               rtol=0, atol=4 * UNIT_ROUNDOFF[dtype])
    seglen = np.array([3, 0, 5, 2])
    value = _rounded((10, 4), dtype, 11)
    for reducer in ("sum", "max", "min", "mean"):
        assert_one_rounding(ops.segment_reduce(seglen, value, reducer),
                            ops.segment_reduce(seglen, value.float(), reducer), dtype,
                            roundings=2 if reducer == "mean" else 1)


@HALVES
def test_gradients_in_the_input_dtype(matrix, dtype):
    M, _ = matrix
    x = _rounded((COLS, FEAT), dtype, 12).requires_grad_()
    y = _rounded((ROWS, FEAT), dtype, 13).requires_grad_()
    e = _rounded((M.nnz, 1), dtype, 14).requires_grad_()
    upstream = _rounded((ROWS, FEAT), dtype, 15)
    x32, y32, e32 = (t.detach().float().requires_grad_() for t in (x, y, e))
    (ops.gspmm(M, "mul", "sum", x, e) * upstream).sum().backward()
    (ops.gspmm(M, "mul", "sum", x32, e32) * upstream.float()).sum().backward()
    dots = _rounded((M.nnz, 1), dtype, 16)
    (ops.gsddmm(M, "dot", x.detach(), y) * dots).sum().backward()
    (ops.gsddmm(M, "dot", x32.detach(), y32) * dots.float()).sum().backward()
    assert x.grad.dtype == e.grad.dtype == y.grad.dtype == dtype
    # the product's own rounding, then the upstream product's: two roundings per gradient
    assert_one_rounding(e.grad, e32.grad, dtype, roundings=2)
    assert_one_rounding(y.grad, y32.grad, dtype, roundings=2)
    x_max = _rounded((COLS, FEAT), dtype, 17).requires_grad_()
    ops.gspmm(M, "copy_lhs", "max", x_max, None).sum().backward()
    x_max32 = x_max.detach().float().requires_grad_()
    ops.gspmm(M, "copy_lhs", "max", x_max32, None).sum().backward()
    assert torch.equal(x_max.grad.float(), x_max32.grad)


@HALVES
def test_nan_and_inf_propagate_as_in_float32(matrix, dtype):
    M, dense = matrix
    x = _rounded((COLS, FEAT), dtype, 18)
    used = int(np.flatnonzero(np.diff(M.indptr))[0])
    x[M.indices[M.indptr[used]], 0] = float("nan")
    x[M.indices[M.indptr[used]], 1] = float("inf")
    for reducer in ("sum", "max", "min"):
        half = ops.gspmm(M, "copy_lhs", reducer, x, None)
        single = ops.gspmm(M, "copy_lhs", reducer, x.float(), None)
        assert torch.equal(torch.isnan(half), torch.isnan(single)), reducer
        assert torch.equal(torch.isinf(half), torch.isinf(single)), reducer
    values = ops.sddmm(M, _rounded((ROWS, FEAT), dtype, 19), x)
    assert torch.equal(torch.isnan(values), torch.isnan(ops.sddmm(
        M, _rounded((ROWS, FEAT), dtype, 19).float(), x.float())))


@HALVES
def test_autocast_runs_products_in_its_dtype(matrix, dtype):
    M, dense = matrix
    x = torch.randn(COLS, FEAT)
    with torch.autocast("cpu", dtype=dtype):
        y = ops.spmm(M, x)
        values = ops.sddmm(M, torch.randn(ROWS, FEAT), x)
        unchanged = ops.edge_softmax(M, torch.randn(M.nnz, 1))
    assert y.dtype == values.dtype == dtype and unchanged.dtype == torch.float32
    assert_one_rounding(y, dense.double() @ x.double(), dtype)
    double = ops.SparseMatrix(M.to_scipy().astype(np.float64))
    with torch.autocast("cpu", dtype=dtype):               # float64 is left alone, as in torch
        assert ops.spmm(double, x.double()).dtype == torch.float64


@pytest.mark.parametrize("layer_name", ["GraphConv", "SAGEConv", "GATConv"])
def test_layers_train_under_bf16_autocast(layer_name):
    import sparsetir.nn                           # pylint: disable=import-outside-toplevel
    A = scipy.sparse.random(COLS, COLS, density=0.2, format="csr", dtype=np.float32,
                            random_state=4)
    M = ops.SparseMatrix(A + scipy.sparse.identity(COLS, dtype=np.float32, format="csr"))
    torch.manual_seed(0)
    layer = {"GraphConv": lambda: sparsetir.nn.GraphConv(8, 4),
             "SAGEConv": lambda: sparsetir.nn.SAGEConv(8, 4, "mean"),
             "GATConv": lambda: sparsetir.nn.GATConv(8, 4, num_heads=2)}[layer_name]()
    feat = torch.randn(COLS, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(M, feat)
    reference = layer(M, feat)
    out.float().sum().backward()
    grads = [p.grad for p in layer.parameters()]
    assert all(g is not None and g.dtype == torch.float32 for g in grads)
    torch.testing.assert_close(out.float(), reference, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("call, names", [
    (lambda M: ops.gspmm(M, "mul", "sum", torch.ones(COLS, 2, dtype=torch.bfloat16),
                         torch.ones(M.nnz, 2, dtype=torch.float16)), "lhs_data and rhs_data"),
    (lambda M: ops.gspmm(M, "mul", "sum", torch.ones(COLS, 2, dtype=torch.bfloat16),
                         torch.ones(M.nnz, 2, dtype=torch.float64)), "lhs_data and rhs_data"),
    (lambda M: ops.spmm(ops.SparseMatrix(M.to_scipy().astype(np.float64)),
                        torch.ones(COLS, 2, dtype=torch.float16)), "A and X"),
    (lambda M: ops.gsddmm(M, "dot", torch.ones(COLS, 2, dtype=torch.float8_e4m3fn),
                          torch.ones(ROWS, 2)), "lhs_data must be float32, float64, bfloat16"),
])
def test_refused_mixtures_name_the_arguments(matrix, call, names):
    with pytest.raises(SparseTIRTypeError, match=names):
        call(matrix[0])


def test_only_a_bfloat16_tensor_passes_as_its_bits(matrix, native_runs):
    """The C plan of a bfloat16 kernel takes a bfloat16 tensor as the uint16 view of its bits
    (numpy has no bfloat16), and nothing else as one: the same bits in a uint16 tensor or a
    uint16 numpy array are refused by name, and ``out`` is left as it was."""
    M = ops.SparseMatrix(scipy.sparse.csr_matrix(matrix[1].numpy()))   # no call prepared yet
    x = _rounded((COLS, FEAT), torch.bfloat16, 30)
    out = torch.full((ROWS, FEAT), float("nan"), dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ops.spmm(M, x, out=out)
    (bound, _, bound_operands), = M.calls.values()
    out.fill_(float("nan"))
    bound(x, *bound_operands, out)
    assert native_runs[-1] == (True, True)
    assert_one_rounding(out, matrix[1].double() @ x.double(), torch.bfloat16)
    out.fill_(float("nan"))
    for bits in (x.view(torch.uint16), x.view(torch.uint16).numpy()):
        native_runs.clear()
        with pytest.raises(ArgumentError, match="'x'.*bfloat16"):
            bound(bits, *bound_operands, out)
        assert not any(ran for _, ran in native_runs) and torch.isnan(out).all()
    tracked_out = torch.zeros(ROWS, FEAT, dtype=torch.bfloat16, requires_grad=True)
    for args, name in (((x.clone().requires_grad_(), *bound_operands, out), "x"),
                       ((x, *bound_operands, tracked_out), "y"),
                       ((x, *bound_operands, tracked_out * 1), "y")):
        with pytest.raises(ArgumentError, match=f"'{name}': requires grad"):
            bound(*args)                   # its bits do not require grad: never taken for them
    assert torch.isnan(out).all() and not tracked_out.detach().any()


def test_numpy_float16_and_bfloat16(matrix):
    M, dense = matrix
    pattern = (dense != 0).double().numpy()
    for dtype in (np.float16, ml_dtypes.bfloat16):
        x = np.random.default_rng(20).standard_normal((COLS, FEAT)).astype(dtype)
        y = ops.spmm(M, x, weighted=False)
        assert y.dtype == np.dtype(dtype)
        reference = pattern @ x.astype(np.float64)
        u = 2.0 ** (-11 if dtype is np.float16 else -8)
        assert (np.abs(y.astype(np.float64) - reference)
                <= u * np.abs(reference) + 1e-6 * (1 + np.abs(reference))).all()


def test_half_reduction_keeps_its_running_sum_in_float32():
    mod = schedule_gspmm_cpu(lower_sparse_iter(gspmm_kernel(
        "mul", "sum", "bfloat16", (64,), (True,), (False,))))
    text = mod.script()
    accumulator = [line for line in text.splitlines() if "Y_global = T.sblock_alloc_buffer" in line]
    assert accumulator and '"bfloat16"' not in accumulator[0]     # float32, TVMScript's default
    stores = [line.strip() for line in text.splitlines() if line.strip().startswith("Y[")]
    assert stores == [stores[0]] and 'T.Cast("bfloat16", Y_global[' in stores[0]


@HALVES
@pytest.mark.parametrize("d2", [16, 300])          # a register tile, and none (300)
def test_typed_products_and_their_gradients(dtype, d2):
    a = _rounded((50, 24), dtype, 21).requires_grad_()
    b = _rounded((3, 24, d2), dtype, 22).requires_grad_()
    idx = torch.randint(0, 3, (50,), generator=torch.Generator().manual_seed(23))
    a32, b32 = (t.detach().float().requires_grad_() for t in (a, b))
    y, y32 = ops.gather_mm(a, b, idx), ops.gather_mm(a32, b32, idx)
    assert_one_rounding(y, y32, dtype)
    upstream = _rounded((50, d2), dtype, 24)
    (y * upstream).sum().backward()
    (y32 * upstream.float()).sum().backward()
    assert_one_rounding(a.grad, a32.grad, dtype, roundings=2)
    assert_one_rounding(b.grad, b32.grad, dtype, roundings=2)
    seglen = torch.tensor([20, 0, 30])
    assert_one_rounding(ops.segment_mm(a.detach(), b.detach(), seglen),
                        ops.segment_mm(a32.detach(), b32.detach(), seglen), dtype)


@HALVES
@pytest.mark.parametrize("a_half", [False, True], ids=["a_f32", "a_half"])
def test_typed_products_under_autocast(dtype, a_half):
    """Under autocast ``gather_mm``/``segment_mm`` give the autocast dtype, their float32
    operands read as they are (not rounded first): one rounding of the float32 product; the
    gradients come back in each operand's dtype, from float32 sums."""
    a = torch.randn(50, 24, generator=torch.Generator().manual_seed(31))
    a = (a.to(dtype) if a_half else a).requires_grad_()
    b = torch.randn(3, 24, 16, generator=torch.Generator().manual_seed(32)).requires_grad_()
    idx = torch.randint(0, 3, (50,), generator=torch.Generator().manual_seed(33))
    a32, b32 = (t.detach().float().requires_grad_() for t in (a, b))
    with torch.autocast("cpu", dtype=dtype):
        y = ops.gather_mm(a, b, idx)
        segments = ops.segment_mm(a.detach(), b.detach(), torch.tensor([20, 0, 30]))
    y32 = ops.gather_mm(a32, b32, idx)
    assert_one_rounding(y, y32, dtype)
    assert_one_rounding(segments, ops.segment_mm(a32.detach(), b32.detach(),
                                                 torch.tensor([20, 0, 30])), dtype)
    upstream = _rounded((50, 16), dtype, 34)
    (y * upstream).sum().backward()
    (y32 * upstream.float()).sum().backward()
    assert a.grad.dtype == a.dtype and b.grad.dtype == torch.float32
    if a_half:
        assert_one_rounding(a.grad, a32.grad, dtype)
    else:
        torch.testing.assert_close(a.grad, a32.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(b.grad, b32.grad, rtol=1e-5, atol=1e-6)


def test_typed_products_under_autocast_keep_float64_and_refuse_other_halves():
    a, b, idx = torch.randn(6, 4, dtype=torch.float64), torch.randn(2, 4, 3,
                                                                    dtype=torch.float64), [0, 1] * 3
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert ops.gather_mm(a, b, idx).dtype == torch.float64   # as torch leaves float64
        with pytest.raises(SparseTIRTypeError, match="a is float16: a product in bfloat16"):
            ops.gather_mm(a.to(torch.float16), b.float(), idx)
        with pytest.raises(SparseTIRTypeError, match="b is float64"):
            ops.segment_mm(a.float(), b, [3, 3])


def test_dtype_names_are_remembered_per_dtype_and_never_mixed_up():
    for _ in range(2):                                   # computed, then remembered
        assert dtype_name(np.ones(1, np.float32)) == "float32"
        assert dtype_name(np.ones(1, ">f4")) == ">f4"    # byte-swapped: not float32
        assert dtype_name(torch.ones(1, dtype=torch.bfloat16)) == "bfloat16"
        assert dtype_name(torch.ones(1)) == "float32"

    class Unhashable:
        dtype = ["float32"]
    assert dtype_name(Unhashable()) == "['float32']"


@pytest.mark.parametrize("autocast, other", [(torch.bfloat16, torch.float16),
                                             (torch.float16, torch.bfloat16)])
def test_autocast_refuses_a_product_with_the_other_half_dtype_in_the_forward(matrix, autocast,
                                                                           other):
    """x float32 with e in the other half dtype: the forward gave the autocast dtype, then
    the backward failed on 'lhs_data and rhs_data have different dtypes', a mixture the
    caller never passed. A lone operand of the other half dtype still runs, as before."""
    M = matrix[0]
    x = torch.randn(M.shape[1], 3, requires_grad=True)
    with torch.autocast("cpu", dtype=autocast):
        with pytest.raises(SparseTIRTypeError, match=rf"an operand is {str(other)[6:]}: a "
                                                     rf"product in {str(autocast)[6:]}"):
            ops.u_mul_e_sum(M, x, torch.rand(M.nnz, 3, dtype=other))
        with pytest.raises(SparseTIRTypeError, match="an operand is"):
            ops.u_dot_v(M, x, torch.randn(M.shape[0], 3, dtype=other))
        alone = ops.copy_u_sum(M, torch.randn(M.shape[1], 3, dtype=other, requires_grad=True))
    assert alone.dtype == autocast
