"""Multigraphs: a CSR with repeated columns in a row is one edge per stored entry, in CSR order,
for every operator (forward and backward, against DGL 1.1.3 on the same multigraph), for
``spmm``/``sddmm`` (against scipy, whose ``sum_duplicates`` sums parallel entries), and for a
``SparseMatrix`` that summed duplicates (``edge_matrix`` gives the edges back). The graph has
parallel edges (up to 4 between two nodes), empty rows and a source with no out-edge."""

import pickle

import dgl
import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.ops as ops
from sparsetir.errors import SparseTIRValueError

NODES = 10
EMPTY_ROWS = (2, 7)


def multigraph_edges(seed=3):
    """``(src, dst)`` int64 arrays sorted by destination then source, with parallel edges."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, NODES, 40)
    dst = rng.integers(0, NODES, 40)
    src, dst = np.concatenate([src, [5, 5, 5, 1]]), np.concatenate([dst, [3, 3, 3, 0]])
    keep = ~np.isin(dst, EMPTY_ROWS) & (src != 4)       # empty rows, a source with no out-edge
    src, dst = src[keep], dst[keep]
    order = np.lexsort((src, dst))
    return src[order], dst[order]


@pytest.fixture(scope="module")
def pair():
    """``(M, g)``: the multigraph as ``SparseMatrix.from_csr`` and as a DGL graph, edge ids
    in M's CSR order."""
    src, dst = multigraph_edges()
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=NODES))])
    M = ops.SparseMatrix.from_csr(indptr, src, np.ones(src.size, np.float32), (NODES, NODES))
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=NODES)
    assert g.is_multigraph and M.nnz == g.num_edges()
    return M, g


def leaves(*shapes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=gen, dtype=torch.float64).requires_grad_() for s in shapes]


def assert_same(ours, theirs, inputs, seed=1):
    """Same values, then the same gradient of every input under one random upstream."""
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-10)
    upstream = torch.randn(theirs.shape, generator=torch.Generator().manual_seed(seed),
                           dtype=theirs.dtype)
    for a, b in zip(torch.autograd.grad(ours, inputs, upstream),
                    torch.autograd.grad(theirs, inputs, upstream)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "copy_lhs", "copy_rhs"])
@pytest.mark.parametrize("reduce_op", ["sum", "max", "min", "mean"])
def test_gspmm_on_a_multigraph_matches_dgl(pair, op, reduce_op):
    M, g = pair
    x, e = leaves((NODES, 3), (M.nnz, 3))
    with torch.no_grad():
        e += 2.0 * torch.sign(e)                        # no divisor near 0
    inputs = [t for t, unused in ((x, op == "copy_rhs"), (e, op == "copy_lhs")) if not unused]
    lhs, rhs = (None if op == "copy_rhs" else x), (None if op == "copy_lhs" else e)
    theirs = dgl.ops.gspmm(g, op, reduce_op, lhs, rhs)
    # dgl.ops leaves -inf at destinations without in-edges; its update_all, like us, gives 0
    assert_same(ops.gspmm(M, op, reduce_op, lhs, rhs), theirs.masked_fill(theirs.isinf(), 0),
                inputs)


@pytest.mark.parametrize("op", ["add", "mul", "div", "dot", "copy_lhs"])
@pytest.mark.parametrize("targets", ["uv", "vu", "ue", "ev"])
def test_gsddmm_on_a_multigraph_matches_dgl(pair, op, targets):
    M, g = pair
    rows = {"u": NODES, "v": NODES, "e": M.nnz}
    lhs, rhs = leaves((rows[targets[0]], 2, 4), (rows[targets[1]], 2, 4))
    with torch.no_grad():
        rhs += 2.0 * torch.sign(rhs)
    inputs = [lhs] if op == "copy_lhs" else [lhs, rhs]
    used = None if op == "copy_lhs" else rhs
    assert_same(ops.gsddmm(M, op, lhs, used, *targets), dgl.ops.gsddmm(g, op, lhs, used, *targets),
                inputs)


def test_edge_softmax_gives_each_parallel_edge_its_own_weight(pair):
    M, g = pair
    (logits,) = leaves((M.nnz, 2))
    ours = ops.edge_softmax(M, logits)
    assert_same(ours, dgl.ops.edge_softmax(g, logits), [logits])
    parallel = np.flatnonzero((np.diff(M.indices) == 0) & (np.diff(
        np.repeat(np.arange(NODES), np.diff(M.indptr))) == 0))
    assert parallel.size and not torch.allclose(ours[parallel], ours[parallel + 1])


def test_edge_values_of_a_multigraph_get_their_gradient(pair):
    """``from_csr`` values on repeated columns: ``spmm`` sums the parallel entries (scipy's
    ``sum_duplicates``), and each value gets its own gradient."""
    M, _ = pair
    (values, x) = leaves((M.nnz,), (NODES, 3))
    W = ops.SparseMatrix.from_csr(M.indptr, M.indices, values, M.shape)
    out = ops.spmm(W, x)
    A = scipy.sparse.csr_matrix((values.detach().numpy().copy(), M.indices.copy(), M.indptr.copy()),
                                shape=M.shape)
    A.sum_duplicates()
    np.testing.assert_allclose(out.detach().numpy(), A @ x.detach().numpy(), rtol=1e-12)
    d_values, d_x = torch.autograd.grad(out.sum(), [values, x])
    np.testing.assert_allclose(d_values.numpy(), x.detach().sum(1).numpy()[M.indices])
    np.testing.assert_allclose(d_x.numpy(), A.T @ np.ones((NODES, 3)), rtol=1e-12)


def test_spmm_and_sddmm_on_repeated_columns_match_scipy(pair):
    M, _ = pair
    rng = np.random.default_rng(0)
    data = rng.standard_normal(M.nnz).astype(np.float32)
    W = ops.SparseMatrix.from_csr(M.indptr, M.indices, data, M.shape)
    A = scipy.sparse.csr_matrix((data, M.indices.copy(), M.indptr.copy()), shape=M.shape)
    A.sum_duplicates()
    X, Y = (rng.standard_normal((NODES, 8)).astype(np.float32) for _ in range(2))
    out = np.full((NODES, 8), np.nan, np.float32)
    ops.spmm(W, X, out=out)
    np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-5)
    counts = scipy.sparse.csr_matrix((np.ones(M.nnz), M.indices, M.indptr), shape=M.shape)
    np.testing.assert_allclose(ops.spmm(W, X, weighted=False), counts @ X, rtol=1e-5, atol=1e-5)
    rows = np.repeat(np.arange(NODES), np.diff(M.indptr))
    np.testing.assert_allclose(ops.sddmm(W, Y, X), np.einsum("ij,ij->i", Y[rows], X[M.indices]),
                               rtol=1e-5, atol=1e-5)


def test_a_summed_matrix_gives_its_edges_back():
    """``SparseMatrix`` sums duplicates of a COO matrix; the graph operators read its
    ``edge_matrix``: one edge per caller's nonzero, ``source_order`` mapping them."""
    src, dst = multigraph_edges()
    shuffle = np.random.default_rng(1).permutation(src.size)
    A = scipy.sparse.coo_matrix((np.ones(src.size, np.float32), (dst[shuffle], src[shuffle])),
                                shape=(NODES, NODES))
    M = ops.SparseMatrix(A)
    edges = M.edge_matrix()
    assert M.multiplicity is not None and edges.nnz == src.size and edges.multiplicity is None
    assert sorted(edges.source_order.tolist()) == list(range(src.size))
    np.testing.assert_array_equal(edges.indices[edges.source_order], src[shuffle])
    np.testing.assert_allclose(edges.to_scipy().toarray(), A.toarray())
    x = np.random.default_rng(2).standard_normal((NODES, 3))
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=NODES)
    expected = dgl.ops.copy_u_mean(g, torch.from_numpy(x)).numpy()
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=NODES))])
    csr = scipy.sparse.csr_matrix((np.ones(src.size, np.float32), src, indptr), (NODES, NODES))
    for matrix in (A, M, csr):                # csr: repeated columns, as scipy holds them
        np.testing.assert_allclose(ops.copy_u_mean(matrix, x), expected, rtol=1e-12)
    e = np.random.default_rng(3).standard_normal((src.size, 1))
    logits = e[np.argsort(edges.source_order)]          # the caller's edge data, in M's order
    np.testing.assert_allclose(
        ops.edge_softmax(M, logits)[edges.source_order],
        dgl.ops.edge_softmax(dgl.graph((torch.from_numpy(src[shuffle]),
                                        torch.from_numpy(dst[shuffle])), num_nodes=NODES),
                             torch.from_numpy(e)).numpy(), rtol=1e-12)


def test_repeated_columns_survive_copies_and_pickles(pair):
    M = pair[0]
    for copy in (pickle.loads(pickle.dumps(M)), ops.SparseMatrix(M)):
        assert copy.nnz == M.nnz and copy.multiplicity is None
        np.testing.assert_array_equal(copy.indices, M.indices)


def test_from_csr_refuses_only_unsorted_columns():
    M = ops.SparseMatrix.from_csr([0, 3, 3], [1, 1, 1], np.ones(3, np.float32), (2, 2))
    assert M.nnz == 3 and ops.copy_u_sum(M, np.ones((2, 1), np.float32)).ravel().tolist() == [3, 0]
    with pytest.raises(SparseTIRValueError, match="indices of row 1 are not sorted"):
        ops.SparseMatrix.from_csr([0, 1, 3], [0, 1, 0], np.ones(3), (2, 2))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_unweighted_half_spmm_on_a_summed_multigraph_keeps_x_dtype(dtype):
    """A ``SparseMatrix`` that summed parallel edges counts them in an unweighted SpMM with
    X's dtype, as on a graph without parallel edges: the counts are read in float32 and the
    sum is rounded once (not a float32 result, nor a refused half ``out``); X's gradient
    keeps its dtype too."""
    src, dst = multigraph_edges()
    A = scipy.sparse.coo_matrix((np.ones(src.size, np.float32), (dst, src)), (NODES, NODES))
    M = ops.SparseMatrix(A)
    assert M.multiplicity is not None
    x = torch.randn(NODES, 16, generator=torch.Generator().manual_seed(4)).to(dtype)
    counts = A.toarray().astype(np.float64)              # coo's toarray sums duplicates
    expected = torch.from_numpy(counts @ x.double().numpy()).to(dtype)
    out = torch.full((NODES, 16), float("nan"), dtype=dtype)
    assert ops.spmm(M, x, out=out, weighted=False) is out
    for y in (ops.spmm(M, x, weighted=False), out):
        assert y.dtype == dtype
        torch.testing.assert_close(y, expected, rtol=0, atol=0)
        assert not y[list(EMPTY_ROWS)].any()
    if dtype == torch.float16:                          # numpy's half: the same rule
        y = ops.spmm(M, x.numpy(), weighted=False)
        assert y.dtype == np.float16 and np.array_equal(y, expected.numpy())
    with torch.autocast("cpu", dtype=torch.bfloat16):   # autocast's dtype, whatever X's is
        assert ops.spmm(M, x, weighted=False).dtype == torch.bfloat16
    leaf = x.clone().requires_grad_()
    y = ops.spmm(M, leaf, weighted=False)
    (grad,) = torch.autograd.grad(y, leaf, torch.ones_like(y))
    assert y.dtype == grad.dtype == dtype
    torch.testing.assert_close(grad, torch.from_numpy(counts.sum(0)).to(dtype)[:, None]
                               .expand(NODES, 16), rtol=0, atol=0)
