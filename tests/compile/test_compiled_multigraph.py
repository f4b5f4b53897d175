"""``torch.compile`` over a ``SparseMatrix`` that summed parallel edges into one entry
(``multiplicity``: a scipy COO multigraph): every graph operator and ``sparsetir.nn`` layer
compiles with ``fullgraph=True`` and gives the eager numbers and gradients (the edges are read
through ``M.edge_matrix()``, made with the matrix: ``graph_tensors.edges_of``). Before, each
crashed inside dynamo ("Expected np.nditer base") on the read of ``M.multiplicity``, and
``spmm(M, X, weighted=False)`` was refused. ``spmm`` and ``sddmm`` are checked against scipy
too: the weighted product sums the parallel edges' values, the unweighted one counts them."""

import numpy as np
import pytest
import scipy.sparse
import torch
from torch._dynamo.testing import CompileCounterWithBackend

import sparsetir.ops as ops
from sparsetir.nn import GATConv, GraphConv, RelGraphConv, SAGEConv
from sparsetir.ops import SparseMatrix

N, WIDTH = 9, 4


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()


def multigraph():
    """Random edges, a self-loop on every node (no node without an in-edge), and the first six
    edges given twice: scipy's COO keeps them apart, ``SparseMatrix`` sums them."""
    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.integers(0, N, 30), np.arange(N)])
    cols = np.concatenate([rng.integers(0, N, 30), np.arange(N)])
    rows, cols = np.concatenate([rows, rows[:6]]), np.concatenate([cols, cols[:6]])
    A = scipy.sparse.coo_matrix((rng.uniform(0.5, 1.5, rows.size).astype(np.float32),
                                 (rows, cols)), shape=(N, N))
    return A, SparseMatrix(A)


A, M = multigraph()


def test_the_graph_sums_parallel_edges():
    assert M.multiplicity is not None and M.multiplicity.max() > 1
    assert M.edge_matrix().nnz == A.nnz > M.nnz


def compiled_and_eager(f, *inputs):
    """``(compiled, eager)``: ``f``'s result and the gradients of its inputs, compiled with
    ``fullgraph=True`` (one frame) and eagerly."""
    def run(g):
        leaves = [x.detach().clone().requires_grad_() for x in inputs]
        out = g(*leaves)
        return out, torch.autograd.grad(out.square().sum(), leaves, allow_unused=True)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = run(torch.compile(f, fullgraph=True, backend=counter))
    assert counter.frame_count == 1
    return compiled, run(f)


def assert_same(compiled, eager):
    (out, grads), (out_eager, grads_eager) = compiled, eager
    torch.testing.assert_close(out, out_eager, rtol=1e-5, atol=1e-6)
    assert [grad is None for grad in grads] == [grad is None for grad in grads_eager]
    for grad, grad_eager in zip(grads, grads_eager):
        if grad is not None:
            torch.testing.assert_close(grad, grad_eager, rtol=1e-5, atol=1e-6)


OPERATORS = {
    "spmm": lambda x, y: ops.spmm(M, x),
    "spmm_unweighted": lambda x, y: ops.spmm(M, x, weighted=False),
    "sddmm": lambda x, y: ops.sddmm(M, x, y),
    "copy_u_sum": lambda x, y: ops.copy_u_sum(M, x),
    "copy_u_max": lambda x, y: ops.copy_u_max(M, x),
    "copy_u_mean": lambda x, y: ops.copy_u_mean(M, x),
    "u_dot_v": lambda x, y: ops.u_dot_v(M, x, y),
    "u_mul_e_sum": lambda x, y: ops.u_mul_e_sum(M, x, ops.u_dot_v(M, x, y)),
    "edge_softmax": lambda x, y: ops.edge_softmax(M, ops.u_dot_v(M, x, y)),
}


@pytest.mark.parametrize("name", OPERATORS)
def test_each_operator_compiles_whole_and_gives_the_eager_numbers(name):
    generator = torch.Generator().manual_seed(1)
    x, y = (torch.randn(N, WIDTH, generator=generator) for _ in range(2))
    assert_same(*compiled_and_eager(OPERATORS[name], x, y))


def test_compiled_spmm_sums_and_counts_parallel_edges_as_scipy():
    x = torch.randn(N, WIDTH)
    weighted = torch.compile(lambda x: ops.spmm(M, x), fullgraph=True, backend="aot_eager")
    counted = torch.compile(lambda x: ops.spmm(M, x, weighted=False), fullgraph=True,
                            backend="aot_eager")
    ones = scipy.sparse.coo_matrix((np.ones(A.nnz), (A.row, A.col)), shape=A.shape)
    np.testing.assert_allclose(weighted(x).numpy(), A @ x.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(counted(x).numpy(), ones @ x.numpy(), rtol=1e-5, atol=1e-6)
    values = torch.compile(lambda x: ops.sddmm(M, x, x), fullgraph=True, backend="aot_eager")
    assert values(x).shape == (M.nnz,)         # one per stored entry, as eagerly


LAYERS = {
    "graphconv": lambda: GraphConv(WIDTH, 3),
    "graphconv-left": lambda: GraphConv(WIDTH, 3, norm="left"),
    "sage-mean": lambda: SAGEConv(WIDTH, 3, "mean"),
    "sage-gcn": lambda: SAGEConv(WIDTH, 3, "gcn"),
    "sage-pool": lambda: SAGEConv(WIDTH, 3, "pool"),
    "sage-lstm": lambda: SAGEConv(WIDTH, 3, "lstm"),
    "gat": lambda: GATConv(WIDTH, 3, num_heads=2),
    "relgraphconv": lambda: RelGraphConv(WIDTH, 3, 3),
}


@pytest.mark.parametrize("name", LAYERS)
def test_each_layer_compiles_whole_and_trains_as_eager(name):
    torch.manual_seed(0)
    layer = LAYERS[name]()
    extra = ((torch.from_numpy(np.random.default_rng(2).integers(0, 3, A.nnz)),)
             if name == "relgraphconv" else ())
    x = torch.randn(N, WIDTH)
    params = list(layer.parameters())

    def run(forward):
        leaf = x.clone().requires_grad_()
        out = forward(M, leaf, *extra)
        return out, torch.autograd.grad(out.square().sum(), [leaf] + params)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = run(torch.compile(layer, fullgraph=True, backend=counter))
    assert counter.frame_count == 1
    assert_same(compiled, run(layer))


def test_operators_over_a_multigraph_with_empty_rows_write_every_output_row():
    """Rows 2 and 5 have no edge; the outputs start as NaN, so a row the compiled call leaves
    unwritten shows."""
    rows, cols = np.array([0, 0, 1, 3, 3, 4, 6, 6]), np.array([1, 1, 0, 2, 2, 6, 3, 0])
    values = np.float32([1.0, 2.0, 0.5, -1.0, 3.0, 1.5, 2.0, -0.5])
    B = scipy.sparse.coo_matrix((values, (rows, cols)), shape=(7, 7))
    matrix = SparseMatrix(B)
    assert matrix.multiplicity is not None and matrix.empty_rows().tolist() == [2, 5]
    x = torch.randn(7, WIDTH, generator=torch.Generator().manual_seed(1))

    def call(x, weighted_out, counted_out):
        ops.spmm(matrix, x, out=weighted_out)
        ops.spmm(matrix, x, out=counted_out, weighted=False)
        return weighted_out + counted_out
    compiled = torch.compile(call, fullgraph=True, backend="eager")
    outs = [torch.full((7, WIDTH), float("nan")) for _ in range(2)]
    total = compiled(x, *outs)
    dense = B.toarray()
    counts = scipy.sparse.coo_matrix((np.ones_like(values), (rows, cols)), shape=(7, 7))
    torch.testing.assert_close(outs[0], torch.from_numpy(dense @ x.numpy()), rtol=1e-5,
                               atol=1e-5)
    torch.testing.assert_close(outs[1], torch.from_numpy(counts.toarray() @ x.numpy()),
                               rtol=1e-5, atol=1e-5)
    assert not total[[2, 5]].any()
