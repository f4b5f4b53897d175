"""The graph operators at their edges (issue 34), against torch recomputations.

- max and min propagate NaN as ``torch.max(dim)`` does (the result is NaN, the gradient goes
  to the first NaN edge), in ``gspmm``, the ``copy_*`` aliases and ``segment_reduce``;
- ``segment_reduce`` takes ``seglen`` of any signed or unsigned integer dtype;
- every reducer's backward on a graph with no feature, no source, no destination or no edge
  gives zero gradients of the operands' shapes (``gspmm``, ``gsddmm``, ``edge_softmax``,
  ``segment_reduce``);
- a gradient taken with ``create_graph=True`` (a second derivative) raises ``SparseTIRError``.
"""

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparsetir.errors import SparseTIRError, SparseTIRValueError

NAN = float("nan")


def _graph(m, n, edges):
    """``(SparseMatrix, rows, cols)`` of the (row, column) pairs ``edges`` (CSR order)."""
    rows = np.array([r for r, _ in edges], np.int64)
    cols = np.array([c for _, c in edges], np.int64)
    matrix = ops.SparseMatrix(scipy.sparse.csr_matrix(
        (np.ones(len(edges), np.float32), (rows, cols)), shape=(m, n)))
    return matrix, torch.from_numpy(rows), torch.from_numpy(cols)


def _reduce(messages, rows, m, reducer):
    """Each destination's reduction of its messages (0 where it has none), as torch gives it
    (``max(0)``/``min(0)``: NaN propagates, the gradient goes to the index torch picks)."""
    out = []
    for v in range(m):
        mine = messages[rows == v]
        if not len(mine):
            out.append(mine.sum(0))                 # 0, in the graph
        elif reducer in ("max", "min"):
            out.append(getattr(mine, reducer)(0).values)
        else:
            out.append(getattr(mine, reducer)(0))
    return torch.stack(out) if out else messages[:0]     # no destination: (0, *F), in the graph


def _message(op, lhs, rhs):
    return {"copy_lhs": lambda: lhs, "copy_rhs": lambda: rhs, "mul": lambda: lhs * rhs,
            "add": lambda: lhs + rhs, "div": lambda: lhs / rhs,
            "dot": lambda: (lhs * rhs).sum(-1, keepdim=True)}[op]()


def _reference_gspmm(graph, op, reducer, x, e):
    matrix, rows, cols = graph
    return _reduce(_message(op, None if x is None else x[cols], e), rows, matrix.shape[0],
                   reducer)


def _gradients(out, inputs):
    """The gradients of ``(out * fixed weights).sum()`` for the inputs that require grad."""
    weights = torch.linspace(-1, 2, out.numel(), dtype=out.dtype).reshape(out.shape)
    wanted = [x for x in inputs if x is not None]
    grads = torch.autograd.grad((out * weights).sum(), wanted, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for x, g in zip(wanted, grads)]


def _leaf(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype).requires_grad_()


# ---- NaN in max and min --------------------------------------------------------------------

# destination 0: [5, nan, -3]; 1: none; 2: [nan, 2]; 3: [1, 4]; 4: [nan, nan]
NAN_EDGES = [(0, 0), (0, 1), (0, 2), (2, 3), (2, 4), (3, 5), (3, 6), (4, 7), (4, 8)]
NAN_VALUES = [5, NAN, -3, NAN, 2, 1, 4, NAN, NAN]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16,
                                   torch.float16])
@pytest.mark.parametrize("feat", [1, 8])       # 8: the register-tiled (vectorised) schedule
@pytest.mark.parametrize("reducer", ["max", "min"])
@pytest.mark.parametrize("op", ["copy_lhs", "copy_rhs", "mul"])
def test_max_and_min_propagate_nan_with_torch_gradients(dtype, feat, reducer, op):
    graph = _graph(5, 9, NAN_EDGES)
    column = torch.tensor(NAN_VALUES, dtype=dtype)
    x = column[:, None].repeat(1, feat) * torch.linspace(1, 2, feat, dtype=dtype)
    x = x.requires_grad_()
    e = (torch.linspace(0.5, 1.5, 9, dtype=dtype)[:, None].repeat(1, feat)).requires_grad_()
    lhs, rhs = (None, x) if op == "copy_rhs" else (x, None if op == "copy_lhs" else e)
    got = ops.gspmm(graph[0], op, reducer, lhs, rhs)
    want = _reference_gspmm(graph, op, reducer, lhs, rhs)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.isnan(got[[0, 2, 4]]).all() and (got[1] == 0).all()
    for g, w in zip(_gradients(got, [lhs, rhs]), _gradients(want, [lhs, rhs])):
        torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.parametrize("reducer", ["max", "min"])
def test_copy_u_max_over_5_nan_minus_3_is_nan_and_the_nan_edge_gets_the_gradient(reducer):
    matrix = ops.SparseMatrix.from_csr([0, 3], [0, 1, 2], np.ones(3, np.float32), (1, 3))
    x = _leaf([[5.0], [NAN], [-3.0]], torch.float32)
    out = getattr(ops, f"copy_u_{reducer}")(matrix, x)
    out.sum().backward()
    assert torch.isnan(out).all()
    assert x.grad.ravel().tolist() == [0.0, 1.0, 0.0]
    numpy_out = getattr(ops, f"copy_u_{reducer}")(matrix, np.float32([[5], [NAN], [-3]]))
    assert np.isnan(numpy_out).all()


def test_segment_reduce_max_and_min_propagate_nan_like_torch():
    value = _leaf([[1.0, NAN], [NAN, 2.0], [3.0, 4.0], [7.0, -1.0]])
    seglen = np.array([2, 0, 2])
    for reducer in ("max", "min"):
        got = ops.segment_reduce(seglen, value, reducer)
        want = torch.stack([getattr(value[:2], reducer)(0).values,
                            torch.zeros(2, dtype=value.dtype),
                            getattr(value[2:], reducer)(0).values])
        torch.testing.assert_close(got, want, equal_nan=True)
        for g, w in zip(_gradients(got, [value]), _gradients(want, [value])):
            torch.testing.assert_close(g, w)


def test_edge_softmax_of_a_nan_logit_is_nan_for_its_destination_only():
    graph = _graph(3, 4, [(0, 0), (0, 1), (2, 2), (2, 3)])
    logits = torch.tensor([[NAN], [1.0], [0.0], [0.0]])
    out = ops.edge_softmax(graph[0], logits)
    assert torch.isnan(out[:2]).all()
    torch.testing.assert_close(out[2:], torch.full((2, 1), 0.5))


def test_infinities_still_reduce_as_before():
    graph = _graph(2, 3, [(0, 0), (0, 1), (1, 2)])
    x = np.float32([[-np.inf], [-np.inf], [np.inf]])
    assert ops.copy_u_max(graph[0], x).ravel().tolist() == [-np.inf, np.inf]
    assert ops.copy_u_min(graph[0], x).ravel().tolist() == [-np.inf, np.inf]


# ---- unsigned seglen ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64, np.int8,
                                   np.int32, np.int64])
@pytest.mark.parametrize("reducer", ["sum", "max", "min", "mean"])
def test_segment_reduce_takes_any_integer_seglen(dtype, reducer):
    value = np.float32([[1, -2], [3, 5], [0, 0], [-7, 9], [2, 2]])
    lengths = np.array([2, 0, 3], dtype)
    got = ops.segment_reduce(lengths, value, reducer)
    want = np.zeros((3, 2), np.float32)
    want[0] = getattr(np, reducer)(value[:2], axis=0)
    want[2] = getattr(np, reducer)(value[2:], axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    torch_lengths = torch.from_numpy(lengths.astype(np.int64)).to(
        getattr(torch, np.dtype(dtype).name))
    np.testing.assert_allclose(ops.segment_reduce(torch_lengths, torch.from_numpy(value),
                                                  reducer).numpy(), want, rtol=1e-6)


def test_seglen_past_the_rows_is_refused_by_name():
    with pytest.raises(SparseTIRValueError, match="seglen holds 18446744073709551615, more "
                                                  "than value's 3 rows"):
        ops.segment_reduce(np.array([2**64 - 1, 0], np.uint64), np.ones((3, 1), np.float32))
    with pytest.raises(SparseTIRValueError, match="seglen sums to 4, but value has 3 rows"):
        ops.segment_reduce(np.array([2, 2], np.uint8), np.ones((3, 1), np.float32))


# ---- degenerate backward passes ------------------------------------------------------------

# (destinations, sources, edges, features)
DEGENERATE = {
    "no feature": (4, 3, [(0, 0), (0, 2), (1, 1), (3, 0), (3, 1), (3, 2)], 0),
    "no source": (4, 0, [], 2),
    "no destination": (0, 3, [], 2),
    "no edge": (4, 3, [], 2),
}


def _operands(case, dtype=torch.float64):
    m, n, edges, feat = DEGENERATE[case]
    graph = _graph(m, n, edges)
    generator = torch.Generator().manual_seed(3)
    x = torch.randn((n, feat), dtype=dtype, generator=generator).requires_grad_()
    y = (torch.rand((m, feat), dtype=dtype, generator=generator) + 1).requires_grad_()
    e = (torch.rand((len(edges), feat), dtype=dtype, generator=generator) + 1).requires_grad_()
    return graph, x, y, e


def _same(got, want, inputs):
    """Values and every gradient equal, shapes included."""
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)
    for g, w, x in zip(_gradients(got, inputs), _gradients(want, inputs), inputs):
        assert g.shape == x.shape
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("case", sorted(DEGENERATE))
@pytest.mark.parametrize("reducer", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("op", ["copy_lhs", "copy_rhs", "mul", "div"])
def test_degenerate_gspmm_backward(case, reducer, op):
    graph, x, _, e = _operands(case)
    lhs, rhs = (None, e) if op == "copy_rhs" else (x, None if op == "copy_lhs" else e)
    _same(ops.gspmm(graph[0], op, reducer, lhs, rhs),
          _reference_gspmm(graph, op, reducer, lhs, rhs), [t for t in (lhs, rhs) if t is not None])


@pytest.mark.parametrize("case", sorted(DEGENERATE))
@pytest.mark.parametrize("reducer", ["sum", "max", "min", "mean"])
def test_degenerate_copy_aliases_backward(case, reducer):
    graph, x, _, e = _operands(case)
    _same(getattr(ops, f"copy_u_{reducer}")(graph[0], x),
          _reference_gspmm(graph, "copy_lhs", reducer, x, None), [x])
    _same(getattr(ops, f"copy_e_{reducer}")(graph[0], e),
          _reference_gspmm(graph, "copy_rhs", reducer, None, e), [e])


@pytest.mark.parametrize("case", sorted(DEGENERATE))
@pytest.mark.parametrize("op", ["add", "mul", "div", "dot", "copy_lhs"])
def test_degenerate_gsddmm_backward(case, op):
    graph, x, y, _ = _operands(case)
    _, rows, cols = graph
    lhs, rhs = x, (None if op == "copy_lhs" else y)
    want = _message(op, x[cols], None if rhs is None else y[rows])
    _same(ops.gsddmm(graph[0], op, lhs, rhs, "u", "v"), want,
          [t for t in (lhs, rhs) if t is not None])


@pytest.mark.parametrize("case", sorted(DEGENERATE))
def test_degenerate_edge_softmax_backward(case):
    graph, _, _, e = _operands(case)
    matrix, rows, _ = graph
    want = e * 0
    for v in range(matrix.shape[0]):
        mine = rows == v
        if mine.any():
            want = want.index_put((mine,), torch.softmax(e[mine], 0))
    _same(ops.edge_softmax(matrix, e), want, [e])


@pytest.mark.parametrize("reducer", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("seglen, feat", [([], 2), ([0, 0], 2), ([2, 0, 1], 0)])
def test_degenerate_segment_reduce_backward(reducer, seglen, feat):
    value = torch.randn((sum(seglen), feat), dtype=torch.float64).requires_grad_()
    starts = np.concatenate([[0], np.cumsum(seglen)]).astype(int)
    want = [value[a:b].sum(0) if a == b else
            (getattr(value[a:b], reducer)(0).values if reducer in ("max", "min")
             else getattr(value[a:b], reducer)(0)) for a, b in zip(starts[:-1], starts[1:])]
    want = torch.stack(want) if want else value[:0]
    _same(ops.segment_reduce(np.array(seglen, np.int64), value, reducer), want, [value])


# ---- no second derivative -------------------------------------------------------------------

def _second_order_calls():
    graph = _graph(3, 4, [(0, 0), (0, 3), (2, 1), (2, 2)])
    matrix = graph[0]
    x = torch.rand((4, 2), dtype=torch.float64, requires_grad=True)
    y = torch.rand((3, 2), dtype=torch.float64, requires_grad=True)
    w = torch.rand((4, 1), dtype=torch.float64, requires_grad=True)
    return {
        "gspmm mul sum": (lambda: ops.u_mul_e_sum(matrix, x, w), (x, w)),
        "copy_u_max": (lambda: ops.copy_u_max(matrix, x), (x,)),
        "copy_u_mean": (lambda: ops.copy_u_mean(matrix, x), (x,)),
        "gsddmm dot": (lambda: ops.u_dot_v(matrix, x, y), (x, y)),
        "edge_softmax": (lambda: ops.edge_softmax(matrix, w), (w,)),
        "segment_reduce": (lambda: ops.segment_reduce(np.array([3, 1]), x, "sum"), (x,)),
        "spmm": (lambda: ops.spmm(ops.SparseMatrix.from_csr(
            matrix.indptr, matrix.indices, w.ravel(), matrix.shape), x), (x, w)),
        "gather_mm": (lambda: ops.gather_mm(y, x.reshape(2, 2, 2), idx_b=torch.tensor([0, 1, 1])),
                      (y, x)),
    }


@pytest.mark.parametrize("name", sorted(_second_order_calls()))
def test_a_second_derivative_is_refused_by_name(name):
    call, inputs = _second_order_calls()[name]
    loss = call().pow(2).sum()
    with pytest.raises(SparseTIRError, match="no double backward .*create_graph=True"):
        torch.autograd.grad(loss, inputs, create_graph=True, allow_unused=True)
    first = torch.autograd.grad(call().pow(2).sum(), inputs, allow_unused=True)  # still works
    assert all(g is None or g.shape == x.shape for g, x in zip(first, inputs))


@pytest.mark.parametrize("value", [[[1.0], [2.0], [3.0]], 3.0, np.float32(3.0)])
def test_segment_ops_refuse_a_value_without_rows_by_name(value):
    """A list or a scalar has no rows to segment: refused naming ``value`` (was "value has
    None rows" or an IndexError)."""
    for call in (lambda: ops.segment_softmax(np.array([1, 2]), value),
                 lambda: ops.segment_reduce(np.array([1, 2]), value, "sum")):
        with pytest.raises(SparseTIRError, match="value must be a numpy array or torch tensor"):
            call()
