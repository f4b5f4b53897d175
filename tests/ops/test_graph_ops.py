"""DGL's operator set (``gspmm``, ``gsddmm``, ``edge_softmax``, ``segment_reduce``, the short
aliases) against a dense torch recomputation: values and every gradient (source, destination
and edge data), in the style of DGL's ``tests/python/common/ops/test_ops.py``. The graph has
empty rows (destinations without in-edges) and an empty column; operands broadcast as DGL's
do; ``gradcheck`` runs in float64 on each backward pass."""

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError

M_ROWS, N_COLS = 12, 9


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(7)
    dense = (rng.random((M_ROWS, N_COLS)) < 0.3).astype(np.float64)
    dense[[2, 7]] = 0                       # destinations with no in-edge
    dense[:, 4] = 0                         # a source with no out-edge
    matrix = ops.SparseMatrix(scipy.sparse.csr_matrix(dense))
    rows = np.repeat(np.arange(M_ROWS), np.diff(matrix.indptr))
    return matrix, torch.from_numpy(rows), torch.from_numpy(matrix.indices.astype(np.int64))


def _message(op, lhs, rhs):
    return {"add": lambda: lhs + rhs, "sub": lambda: lhs - rhs, "mul": lambda: lhs * rhs,
            "div": lambda: lhs / rhs, "dot": lambda: (lhs * rhs).sum(-1, keepdim=True),
            "copy_lhs": lambda: lhs, "copy_rhs": lambda: rhs}[op]()


def _aligned(edge, ndim):
    """Feature dimensions broadcast from the left (the operators' rule)."""
    return edge.reshape((edge.shape[0],) + (1,) * (ndim - edge.dim()) + tuple(edge.shape[1:]))


def dense_gspmm(graph, op, reduce_op, x, e):
    matrix, rows, cols = graph
    width = max(x.dim() if x is not None else 0, e.dim() if e is not None else 0)
    lhs = None if x is None else _aligned(x, width)[cols]
    rhs = None if e is None else _aligned(e, width)
    msg = _message(op, lhs, rhs)
    out = []
    for v in range(M_ROWS):
        mine = msg[rows == v]
        if not len(mine):
            out.append(torch.zeros(msg.shape[1:], dtype=msg.dtype))
            continue
        out.append({"sum": lambda: mine.sum(0), "mean": lambda: mine.mean(0),
                    "max": lambda: mine.max(0).values, "min": lambda: mine.min(0).values}
                   [reduce_op]())
    return torch.stack(out)


def _grads(out, inputs, seed):
    upstream = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(seed))
    wanted = [x for x in inputs if x is not None and x.requires_grad]
    return torch.autograd.grad(out, wanted, upstream)


SHAPES = {"same": ((4,), (4,)), "multi-head": ((2, 3), (2, 1)), "scalar edge": ((5,), ())}


@pytest.mark.parametrize("op, shapes", [
    (op, shapes) for op in ["add", "sub", "mul", "div", "copy_lhs", "copy_rhs"]
    for shapes in SHAPES if shapes != "scalar edge" or op in ("mul", "copy_rhs")])
@pytest.mark.parametrize("reduce_op", ["sum", "max", "min", "mean"])
def test_gspmm_values_and_gradients(graph, op, reduce_op, shapes):
    matrix = graph[0]
    x_shape, e_shape = SHAPES[shapes]
    generator = torch.Generator().manual_seed(1)
    x = torch.rand((N_COLS,) + x_shape, generator=generator, dtype=torch.float64) \
        .requires_grad_()
    e = (torch.rand((matrix.nnz,) + e_shape, generator=generator, dtype=torch.float64) + 0.5) \
        .requires_grad_()
    x_used = None if op == "copy_rhs" else x
    e_used = None if op == "copy_lhs" else e
    out = ops.gspmm(matrix, op, reduce_op, x_used, e_used)
    expected = dense_gspmm(graph, op, reduce_op, x_used, e_used)
    torch.testing.assert_close(out, expected)
    for got, want in zip(_grads(out, [x_used, e_used], 3), _grads(expected, [x_used, e_used], 3)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs"])
@pytest.mark.parametrize("targets", ["uv", "vu", "ue", "ev", "uu"])
def test_gsddmm_values_and_gradients(graph, op, targets):
    matrix, rows, cols = graph
    generator = torch.Generator().manual_seed(2)
    count = {"u": N_COLS, "v": M_ROWS, "e": matrix.nnz}
    index = {"u": cols, "v": rows, "e": torch.arange(matrix.nnz)}
    lhs = (torch.rand((count[targets[0]], 2, 3), generator=generator, dtype=torch.float64)
           + 0.5).requires_grad_()
    rhs_shape = (2, 3) if op == "dot" else (2, 1)     # broadcast where dot allows it
    rhs = (torch.rand((count[targets[1]],) + rhs_shape, generator=generator,
                      dtype=torch.float64) + 0.5).requires_grad_()
    out = ops.gsddmm(matrix, op, lhs, rhs, targets[0], targets[1])
    expected = _message(op, lhs[index[targets[0]]], rhs[index[targets[1]]])
    torch.testing.assert_close(out, expected)
    used = [None if op == "copy_rhs" else lhs, None if op == "copy_lhs" else rhs]
    for got, want in zip(_grads(out, used, 4), _grads(expected, used, 4)):
        torch.testing.assert_close(got, want)


def test_edge_softmax_values_and_gradient(graph):
    matrix, rows, _ = graph
    logits = torch.randn((matrix.nnz, 3), dtype=torch.float64).mul(30).requires_grad_()
    scores = ops.edge_softmax(matrix, logits)
    expected = torch.zeros_like(logits)
    for v in range(M_ROWS):
        mine = (rows == v).nonzero()[:, 0]
        expected = expected.index_put((mine,), torch.softmax(logits[mine], 0))
    torch.testing.assert_close(scores, expected)
    torch.testing.assert_close(_grads(scores, [logits], 5), _grads(expected, [logits], 5))


@pytest.mark.parametrize("check", [
    lambda M, x, e: ops.gspmm(M, "mul", "sum", x, e),
    lambda M, x, e: ops.gspmm(M, "div", "max", x, e),
    lambda M, x, e: ops.gspmm(M, "sub", "mean", x, e),
    lambda M, x, e: ops.copy_u_mean(M, x),
    lambda M, x, e: ops.gsddmm(M, "mul", x, e, "u", "e"),
    lambda M, x, e: ops.edge_softmax(M, e),
], ids=["u_mul_e_sum", "u_div_e_max", "u_sub_e_mean", "copy_u_mean", "u_mul_e", "edge_softmax"])
def test_gradcheck_float64(graph, check):
    matrix = graph[0]
    generator = torch.Generator().manual_seed(6)
    x = torch.rand((N_COLS, 3), generator=generator, dtype=torch.float64).requires_grad_()
    e = (torch.rand((matrix.nnz, 1), generator=generator, dtype=torch.float64) + 0.5) \
        .requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: check(matrix, a, b), (x, e))


def test_gsddmm_dot_gradcheck_float64(graph):
    matrix = graph[0]
    x = torch.rand((N_COLS, 4), dtype=torch.float64, requires_grad=True)
    y = torch.rand((M_ROWS, 4), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: ops.u_dot_v(matrix, a, b), (x, y))


@pytest.mark.parametrize("reduce_op", ["sum", "max", "min", "mean"])
def test_empty_rows_give_zero_for_every_reducer(graph, reduce_op):
    matrix = graph[0]
    out = ops.gspmm(matrix, "copy_lhs", reduce_op, -np.ones((N_COLS, 2)), None)
    np.testing.assert_array_equal(out[[2, 7]], 0)
    degrees = matrix.in_degrees()[:, None]
    expected = -degrees if reduce_op == "sum" else -np.ones_like(degrees)
    np.testing.assert_array_equal(out[degrees[:, 0] > 0], np.broadcast_to(
        expected, out.shape)[degrees[:, 0] > 0])


def test_float32_and_numpy_in_numpy_out(graph):
    matrix = ops.SparseMatrix(graph[0].to_scipy().astype(np.float32))
    x = np.random.default_rng(0).random((N_COLS, 8), dtype=np.float32)
    out = ops.u_mul_e_sum(matrix, x, matrix.data)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_allclose(out, matrix.to_scipy() @ x, rtol=1e-5)


def test_aliases_are_dgl_names(graph):
    matrix, rows, cols = graph
    x = torch.rand((N_COLS, 3), dtype=torch.float64)
    y = torch.rand((M_ROWS, 3), dtype=torch.float64)
    torch.testing.assert_close(ops.u_add_v(matrix, x, y), x[cols] + y[rows])
    torch.testing.assert_close(ops.copy_u_max(matrix, x), dense_gspmm(graph, "copy_lhs", "max",
                                                                      x, None))
    torch.testing.assert_close(ops.e_div_v(matrix, x[cols], y), x[cols] / y[rows])


def test_matches_dgl(graph):
    dgl = pytest.importorskip("dgl")
    matrix, rows, cols = graph
    g = dgl.graph((cols, rows), num_nodes=max(M_ROWS, N_COLS))
    x = torch.rand((max(M_ROWS, N_COLS), 2, 4), dtype=torch.float64)
    e = torch.rand((matrix.nnz, 2, 1), dtype=torch.float64)
    ours = ops.u_mul_e_max(matrix, x[:N_COLS], e)
    theirs = dgl.ops.u_mul_e_max(g, x, e)[:M_ROWS]
    # dgl.ops leaves -inf at destinations without in-edges; its update_all, like us, gives 0
    torch.testing.assert_close(ours, theirs.masked_fill(theirs.isinf(), 0))
    torch.testing.assert_close(ops.edge_softmax(matrix, e), dgl.ops.edge_softmax(g, e))


def test_segment_reduce_matches_a_loop():
    value = torch.rand((7, 3), dtype=torch.float64, requires_grad=True)
    seglen = torch.tensor([3, 0, 4])
    out = ops.segment_reduce(seglen, value, "max")
    expected = torch.stack([value[:3].max(0).values, torch.zeros(3, dtype=torch.float64),
                            value[3:].max(0).values])
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(_grads(out, [value], 8), _grads(expected, [value], 8))


def test_edge_values_of_from_csr_get_their_gradient(graph):
    base = graph[0]
    values = torch.rand(base.nnz, dtype=torch.float64, requires_grad=True)
    matrix = ops.SparseMatrix.from_csr(base.indptr, base.indices, values, base.shape)
    x = torch.rand((N_COLS, 3), dtype=torch.float64)
    ops.spmm(matrix, x).sum().backward()
    rows = graph[1]
    torch.testing.assert_close(values.grad, x[graph[2]].sum(1))
    with torch.no_grad():
        values.mul_(2)                      # an optimizer step: seen by the next call
    dense = torch.zeros(base.shape, dtype=torch.float64).index_put((rows, graph[2]), values)
    torch.testing.assert_close(ops.spmm(matrix, x), dense.detach() @ x)


def test_from_csr_refuses_unsorted_columns():
    with pytest.raises(SparseTIRValueError, match="indices of row 0 are not sorted"):
        ops.SparseMatrix.from_csr([0, 2], [1, 0], np.ones(2), (1, 2))


@pytest.mark.parametrize("call, error, message", [
    (lambda M, x: ops.gspmm(M, "pow", "sum", x, None), SparseTIRValueError, "op must be one of"),
    (lambda M, x: ops.gspmm(M, "copy_lhs", "prod", x, None), SparseTIRValueError,
     "reduce_op must be one of"),
    (lambda M, x: ops.gsddmm(M, "add", x, x, "u", "w"), SparseTIRValueError,
     "rhs_target must be one of"),
    (lambda M, x: ops.gspmm(M, "copy_lhs", "sum", x[:3], None), SparseTIRValueError,
     r"lhs_data must have 9 rows"),
    (lambda M, x: ops.gspmm(M, "mul", "sum", x, torch.ones(M.nnz, 3, dtype=torch.float64)),
     SparseTIRValueError,
     "do not broadcast"),
    (lambda M, x: ops.gspmm(M, "mul", "sum", x, torch.ones(M.nnz, 2)), SparseTIRTypeError,
     "different dtypes"),
    (lambda M, x: ops.gspmm(M, "mul", "sum", x, None), SparseTIRValueError, "reads rhs_data"),
    (lambda M, x: ops.gsddmm(M, "dot", x, torch.ones(M_ROWS, 3, dtype=torch.float64)),
     SparseTIRValueError, "sums the last feature dimension"),
    (lambda M, x: ops.gspmm(M, "copy_lhs", "sum", x.numpy(), torch.ones(1)), None, None),
    (lambda M, x: ops.gsddmm(M, "add", x.numpy(), torch.ones(M_ROWS, 2, dtype=torch.float64)),
     SparseTIRTypeError, "must all be numpy arrays or all torch tensors"),
    (lambda M, x: ops.gspmm(M, "copy_lhs", "sum", x.int(), None), SparseTIRTypeError,
     "float32, float64, bfloat16 or float16, got int32"),
])
def test_bad_input_names_the_argument(graph, call, error, message):
    x = torch.rand((N_COLS, 2), dtype=torch.float64)
    if error is None:                     # an operand op does not read is not checked
        call(graph[0], x)
        return
    with pytest.raises(error, match=message):
        call(graph[0], x)


def test_out_into_a_tensor_of_a_graph_is_recorded(graph):
    matrix = ops.SparseMatrix(graph[0].to_scipy().astype(np.float32))
    base = torch.rand(M_ROWS, 3, requires_grad=True)
    out = base * 2                             # part of a graph: its old history is replaced
    x = torch.rand(N_COLS, 3, requires_grad=True)
    assert ops.spmm(matrix, x, out=out) is out
    out.sum().backward()
    torch.testing.assert_close(base.grad, torch.zeros_like(base))
    dense = torch.from_numpy(matrix.to_scipy().toarray())
    torch.testing.assert_close(x.grad, dense.T @ torch.ones(M_ROWS, 3))


def test_torch_func_transforms_are_refused_by_name(graph):
    x = torch.rand(N_COLS, 3, dtype=torch.float64)
    with pytest.raises(SparseTIRTypeError, match="lhs_data is a tensor of a torch.func"):
        torch.func.grad(lambda t: ops.copy_u_sum(graph[0], t).sum())(x)
    with pytest.raises(SparseTIRTypeError, match="lhs_data is a tensor of a torch.func"):
        torch.vmap(lambda t: ops.copy_u_sum(graph[0], t))(x[None].expand(2, -1, -1))


@pytest.mark.parametrize("requires_grad", [False, True])
def test_forward_mode_tangents_are_refused_by_name_never_dropped(graph, requires_grad):
    """A dual tensor's kernel would read its primal only: the tangent would be lost."""
    import torch.autograd.forward_ad as fwAD
    matrix = ops.SparseMatrix(graph[0].to_scipy().astype(np.float32))
    x = torch.rand(N_COLS, 3)
    rows = torch.rand(M_ROWS, 3)
    ops.spmm(matrix, x)                        # the short path is prepared for these shapes
    ops.sddmm(matrix, rows, x)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x.clone().requires_grad_(requires_grad), torch.ones_like(x))
        for call, name in ((lambda: ops.spmm(matrix, dual), "X"),
                           (lambda: ops.sddmm(matrix, rows, dual), "Y"),
                           (lambda: ops.copy_u_sum(graph[0], dual.double()), "lhs_data")):
            with pytest.raises(SparseTIRTypeError, match=f"{name} carries a forward-mode tangent"):
                call()
        primal = fwAD.unpack_dual(dual).primal     # the remedy the message names works
        torch.testing.assert_close(ops.spmm(matrix, primal.detach()), ops.spmm(matrix, x))


def test_parallel_edges_summed_by_a_matrix_are_edges_of_the_graph_operators():
    rows, cols = np.array([0, 0, 1]), np.array([1, 1, 0])
    A = scipy.sparse.coo_matrix((np.ones(3), (rows, cols)), shape=(2, 2))
    M = ops.SparseMatrix(A)
    x = torch.tensor([[1.0], [10.0]], dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(ops.copy_u_mean(M, x), torch.tensor([[10.0], [1.0]],
                                                                   dtype=torch.float64))
    torch.testing.assert_close(ops.edge_softmax(M, torch.ones(3, 1, dtype=torch.float64)),
                               torch.tensor([[0.5], [0.5], [1.0]], dtype=torch.float64))
    with pytest.raises(SparseTIRValueError, match="rhs_data must have 3 rows"):
        ops.u_mul_e_sum(M, x, torch.ones(M.nnz, 1, dtype=torch.float64))   # 2 entries, 3 edges
    out = ops.spmm(M, x, weighted=False)
    torch.testing.assert_close(out, torch.tensor([[20.0], [1.0]], dtype=torch.float64))
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([[1.0], [2.0]], dtype=torch.float64))


@pytest.mark.parametrize("feat", [12, 24, 40])
@pytest.mark.parametrize("edge_broadcast", [True, False])
def test_per_head_broadcast_where_a_register_tile_would_cross_heads(graph, feat, edge_broadcast):
    """(n, H, F) against (nnz, H, 1) and the reverse, with F that 8 divides and H * F that a
    wider tile divides: a tile across two heads once read one head's value for both."""
    matrix = graph[0]
    generator = torch.Generator().manual_seed(feat)
    x_shape, e_shape = ((2, feat), (2, 1)) if edge_broadcast else ((2, 1), (2, feat))
    x = torch.rand((N_COLS,) + x_shape, generator=generator, dtype=torch.float64)
    e = torch.rand((matrix.nnz,) + e_shape, generator=generator, dtype=torch.float64)
    for reduce_op in ("sum", "max"):
        torch.testing.assert_close(ops.gspmm(matrix, "mul", reduce_op, x, e),
                                   dense_gspmm(graph, "mul", reduce_op, x, e))
    torch.testing.assert_close(ops.gsddmm(matrix, "mul", x, e, "u", "e"),
                               x[graph[2]] * e)


@pytest.mark.parametrize("call, needs, saved", [
    # (what the backward reads decides what stays alive until it runs, as in DGL)
    (lambda M, x, y, e: ops.copy_u_sum(M, x), ("x",), (False, False)),
    (lambda M, x, y, e: ops.copy_u_mean(M, x), ("x",), (False, False)),
    (lambda M, x, y, e: ops.u_mul_e_sum(M, x, e), ("x",), (False, True)),
    (lambda M, x, y, e: ops.u_mul_e_sum(M, x, e), ("e",), (True, False)),
    (lambda M, x, y, e: ops.u_mul_e_sum(M, x, e), ("x", "e"), (True, True)),
    (lambda M, x, y, e: ops.u_add_v(M, x, y), ("x", "y"), (False, False)),
    (lambda M, x, y, e: ops.u_mul_v(M, x, y), ("x",), (False, True)),
    (lambda M, x, y, e: ops.u_mul_v(M, x, y), ("x", "y"), (True, True)),
])
def test_the_forward_keeps_only_what_the_backward_reads(graph, call, needs, saved):
    M = graph[0]
    x = torch.rand(M.shape[1], 4, requires_grad="x" in needs)
    y = torch.rand(M.shape[0], 4, requires_grad="y" in needs)
    e = torch.rand(M.nnz, 4, requires_grad="e" in needs)
    out = call(M, x, y, e)
    assert tuple(t is not None for t in out.grad_fn.saved_tensors[:2]) == saved
    out.sum().backward()                       # and the backward still runs
    assert all(t.grad is not None for name, t in zip("xye", (x, y, e)) if name in needs)


def test_copy_u_mean_gradient_in_both_dtypes_on_one_matrix(graph):
    """The mean's backward weights each edge by 1 / in-degree (kept per matrix and dtype)."""
    matrix, rows, cols = graph
    degrees = torch.bincount(rows, minlength=M_ROWS).clamp(min=1)
    for dtype in (torch.float32, torch.float64, torch.float32):
        x = torch.rand((N_COLS, 2, 3), dtype=dtype, requires_grad=True)
        upstream = torch.rand((M_ROWS, 2, 3), dtype=dtype)
        ops.copy_u_mean(matrix, x).backward(upstream)
        expected = torch.zeros_like(x).index_add(0, cols, (upstream / degrees[:, None, None]
                                                           .to(dtype))[rows])
        torch.testing.assert_close(x.grad, expected)


def test_torch_sparse_tensors_reach_the_graph_operators():
    """A torch tensor has an is_distributed method, so every torch tensor was taken for a
    DistSparseMatrix: AttributeError 'Tensor' object has no attribute 'gspmm'."""
    import torch
    A = torch.sparse_coo_tensor(torch.tensor([[0, 1, 2, 2], [1, 0, 2, 0]]),
                                torch.tensor([1.0, 2.0, 3.0, 4.0]), (4, 3)).coalesce()
    X = torch.randn(3, 2)
    pattern = (A.to_dense() != 0).float()
    torch.testing.assert_close(ops.copy_u_sum(A, X), pattern @ X)
    torch.testing.assert_close(ops.gspmm(A.to_sparse_csr(), "copy_lhs", "sum", X, None),
                               pattern @ X)
    rows, cols = A.indices()                  # edge (row, col): source col, destination row
    Y = torch.randn(4, 2)
    torch.testing.assert_close(ops.u_dot_v(A, X, Y), (X[cols] * Y[rows]).sum(1, keepdim=True))
    with pytest.raises(SparseTIRTypeError, match="got Tensor"):
        ops.copy_u_sum(torch.eye(3), X)


def test_a_matrix_made_in_inference_mode_gives_gradients_outside_it():
    """Its torch arrays are normal tensors: a later call that autograd records may save them
    (they were inference tensors, and torch refused: "Inference tensors cannot be saved")."""
    A = scipy.sparse.random(30, 20, density=0.2, format="csr", dtype=np.float32,
                            random_state=0)
    with torch.inference_mode():
        M = ops.SparseMatrix(A)
        ops.spmm(M, torch.rand(20, 4))                   # its arrays made here
    X = torch.rand(20, 4, requires_grad=True)
    ops.spmm(M, X).sum().backward()
    np.testing.assert_allclose(X.grad.numpy(), A.T @ np.ones((30, 4), np.float32),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("edge_shape", [(), (3, 1), (3, 4)], ids=["scalar", "per-head", "full"])
def test_a_transpose_reads_its_matrixs_edge_data_through_the_permutation(graph, edge_shape):
    """The backward passes' ``gspmm`` over M's transpose with edge data in M's order
    (``rhs_order``): each source sums ``x[v] * e[edge]`` over its out-edges, no permuted copy
    of ``e``; the output holds garbage before the call, the source without out-edge gets 0."""
    from sparsetir.ops.generic import gspmm_values
    from sparsetir.ops.generic_kernels import gspmm_source
    matrix = graph[0]
    rows, cols = graph[1].numpy(), graph[2].numpy()
    rng = np.random.default_rng(11)
    x = rng.standard_normal((M_ROWS, 3, 4)).astype(np.float32)
    e = rng.standard_normal((matrix.nnz,) + edge_shape).astype(np.float32)
    transpose, order = matrix._transposed()     # pylint: disable=protected-access
    out = np.full((N_COLS, 3, 4), np.nan, np.float32)
    edge = e.reshape((matrix.nnz,) + (1,) * (3 - e.ndim) + edge_shape) if e.ndim < 3 else e
    expected = np.zeros((N_COLS, 3, 4), np.float32)
    np.add.at(expected, cols, x[rows] * edge)
    result = gspmm_values(transpose, "mul", "sum", x, e, out=out, rhs_order=order)[0]
    assert result is out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert not out[4].any()                                      # no out-edge
    text = gspmm_source("mul", "sum", "float32", (3, 4), (True, True), (True, False),
                        permuted_rhs=True)
    assert "E[P[o, i, j], k0]" in text and "T.assume_buffer_domain(P, (0, nnz))" in text


def test_rhs_order_is_refused_where_the_arg_kernel_would_read_it_unpermuted(graph):
    from sparsetir.ops.generic import gspmm_values
    matrix = graph[0]
    transpose, order = matrix._transposed()     # pylint: disable=protected-access
    x = np.ones((M_ROWS, 2), np.float32)
    e = np.ones(matrix.nnz, np.float32)
    with pytest.raises(SparseTIRValueError, match="rhs_order"):
        gspmm_values(transpose, "mul", "max", x, e, record_arg=True, rhs_order=order)
