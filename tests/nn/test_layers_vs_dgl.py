"""sparsetir.nn against DGL 1.1.3: each layer loads the DGL layer's ``state_dict`` unchanged
(strict: the same names and shapes) and gives the same outputs and the same gradients of its
features, edge data and parameters, in float32 and float64, on small random graphs with empty
rows (square, and a block with fewer destinations than sources). The graph is ``M``'s pattern:
its stored values are random and must not matter. Bad arguments are refused by name."""

import dgl
import dgl.nn.pytorch as dglnn
import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.nn as snn
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError
from sparsetir.nn.edge_groups import edge_groups
from sparsetir.ops import SparseMatrix

NODES = 14
EMPTY_ROWS = (2, 7)
TOLERANCE = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}


def graphs(num_dst=NODES, num_src=NODES, seed=0, parallel=False):
    """``(M, g)``: one random graph with empty rows as our matrix (rows are destinations,
    random stored values) and as DGL's graph (a block when not square), edge ids in M's CSR
    order; ``parallel``: a multigraph, each edge repeated 1 to 3 times (repeated columns)."""
    rng = np.random.default_rng(seed)
    A = scipy.sparse.random(num_dst, num_src, density=0.35, format="csr", random_state=rng,
                            data_rvs=lambda n: rng.uniform(0.5, 2.0, n))
    for row in EMPTY_ROWS:
        A.data[A.indptr[row]:A.indptr[row + 1]] = 0
    A.eliminate_zeros()
    A.sort_indices()
    if parallel:
        copies = rng.integers(1, 4, A.nnz)
        rows = np.repeat(np.arange(num_dst), np.diff(A.indptr))
        A = scipy.sparse.csr_matrix(
            (np.repeat(A.data, copies), np.repeat(A.indices, copies),
             np.concatenate([[0], np.cumsum(np.bincount(np.repeat(rows, copies),
                                                        minlength=num_dst))])), A.shape)
    M = SparseMatrix.from_csr(A.indptr, A.indices, A.data.astype(np.float32), A.shape)
    src = torch.from_numpy(A.indices.astype(np.int64))
    dst = torch.from_numpy(np.repeat(np.arange(num_dst), np.diff(A.indptr)))
    g = (dgl.graph((src, dst), num_nodes=num_src) if num_dst == num_src
         else dgl.create_block((src, dst), num_src_nodes=num_src, num_dst_nodes=num_dst))
    return M, g


SQUARE = graphs()
BLOCK = graphs(num_dst=9, num_src=NODES, seed=1)
MULTI = graphs(seed=2, parallel=True)
MULTI_BLOCK = graphs(num_dst=9, num_src=NODES, seed=3, parallel=True)


def leaves(dtype, *shapes, seed=0):
    """Random leaf tensors that require grad, one per shape (an int gives a vector)."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=gen, dtype=dtype).requires_grad_() for shape in shapes]


def copies(tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


def flat(result):
    return list(result) if isinstance(result, tuple) else [result]


def assert_same_as_dgl(ours, theirs, dtype, run, inputs, graph_pair=SQUARE):
    """Load DGL's parameters into ours, run both (``run(layer, graph, *inputs)``), and compare
    the outputs, then the gradients of the inputs and of every parameter by name."""
    ours.load_state_dict(theirs.state_dict())
    ours.to(dtype)
    theirs.to(dtype)
    M, g = graph_pair
    mine, reference = copies(inputs), copies(inputs)
    out_ours, out_dgl = flat(run(ours, M, *mine)), flat(run(theirs, g, *reference))
    assert len(out_ours) == len(out_dgl)
    gen = torch.Generator().manual_seed(5)
    upstream = [torch.randn(out.shape, generator=gen, dtype=dtype) for out in out_dgl]
    for a, b in zip(out_ours, out_dgl):
        assert a.dtype == dtype
        torch.testing.assert_close(a, b, **TOLERANCE[dtype])
    torch.autograd.backward(out_ours, upstream)
    torch.autograd.backward(out_dgl, upstream)
    for index, (a, b) in enumerate(zip(mine, reference)):
        if b.grad is None:        # an input DGL does not differentiate (GraphConv's feat_dst)
            assert a.grad is None, f"input {index} got a gradient DGL does not give"
        else:
            assert a.grad is not None, f"input {index} got no gradient"
            torch.testing.assert_close(a.grad, b.grad, **TOLERANCE[dtype])
    dgl_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        assert param.grad is not None, f"{name} got no gradient"
        torch.testing.assert_close(param.grad, dgl_params[name].grad, **TOLERANCE[dtype])
    assert set(dict(ours.named_parameters())) == set(dgl_params)


DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", ["both", "right", "left", "none"])
@pytest.mark.parametrize("in_feats,out_feats", [(6, 3), (3, 5)])
def test_graphconv(dtype, norm, in_feats, out_feats):
    torch.manual_seed(0)
    theirs = dglnn.GraphConv(in_feats, out_feats, norm=norm, allow_zero_in_degree=True,
                             activation=torch.tanh)
    theirs.bias.data.uniform_(-1, 1)
    ours = snn.GraphConv(in_feats, out_feats, norm=norm, allow_zero_in_degree=True,
                         activation=torch.tanh)
    inputs = leaves(dtype, (NODES, in_feats))
    assert_same_as_dgl(ours, theirs, dtype, lambda layer, g, x: layer(g, x), inputs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_graphconv_edge_weight_and_external_weight(dtype):
    theirs = dglnn.GraphConv(5, 4, weight=False, allow_zero_in_degree=True)
    ours = snn.GraphConv(5, 4, weight=False, allow_zero_in_degree=True)
    inputs = leaves(dtype, (NODES, 5), (SQUARE[0].nnz,), (5, 4))
    assert_same_as_dgl(ours, theirs, dtype,
                       lambda layer, g, x, w, W: layer(g, x, weight=W, edge_weight=w), inputs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_graphconv_on_a_block_with_a_feature_pair(dtype):
    torch.manual_seed(1)
    theirs = dglnn.GraphConv(4, 6, allow_zero_in_degree=True)
    ours = snn.GraphConv(4, 6, allow_zero_in_degree=True)
    inputs = leaves(dtype, (NODES, 4), (9, 4))
    assert_same_as_dgl(ours, theirs, dtype, lambda layer, g, x, y: layer(g, (x, y)), inputs,
                       graph_pair=BLOCK)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("aggregator", ["mean", "gcn", "pool", "lstm"])
@pytest.mark.parametrize("in_feats,out_feats", [(6, 3), (3, 5)])
def test_sageconv(dtype, aggregator, in_feats, out_feats):
    torch.manual_seed(2)
    theirs = dglnn.SAGEConv(in_feats, out_feats, aggregator, activation=torch.relu)
    if aggregator == "gcn":
        theirs.bias.data.uniform_(-1, 1)
    ours = snn.SAGEConv(in_feats, out_feats, aggregator, activation=torch.relu)
    inputs = leaves(dtype, (NODES, in_feats), (SQUARE[0].nnz,))
    assert_same_as_dgl(ours, theirs, dtype, lambda layer, g, x, w: layer(g, x, edge_weight=w),
                       inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("aggregator", ["mean", "gcn", "pool", "lstm"])
def test_sageconv_on_a_block(dtype, aggregator):
    """One feature tensor: the destinations are its first rows (DGL's blocks)."""
    torch.manual_seed(3)
    theirs = dglnn.SAGEConv(5, 4, aggregator)
    ours = snn.SAGEConv(5, 4, aggregator)
    inputs = leaves(dtype, (NODES, 5))
    assert_same_as_dgl(ours, theirs, dtype, lambda layer, g, x: layer(g, x), inputs,
                       graph_pair=BLOCK)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sageconv_feature_pair_of_two_widths(dtype):
    torch.manual_seed(4)
    theirs = dglnn.SAGEConv((5, 3), 4, "pool")
    ours = snn.SAGEConv((5, 3), 4, "pool")
    inputs = leaves(dtype, (NODES, 5), (9, 3))
    assert_same_as_dgl(ours, theirs, dtype, lambda layer, g, x, y: layer(g, (x, y)), inputs,
                       graph_pair=BLOCK)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("residual,in_feats", [(False, 5), (True, 5), (True, 6)])
def test_gatconv(dtype, residual, in_feats):
    """Three heads of width 2: residual through a Linear (5 inputs) or the identity (6)."""
    torch.manual_seed(5)
    theirs = dglnn.GATConv(in_feats, 2, num_heads=3, residual=residual,
                           allow_zero_in_degree=True, activation=torch.nn.functional.elu)
    if theirs.bias is not None:
        theirs.bias.data.uniform_(-1, 1)
    ours = snn.GATConv(in_feats, 2, num_heads=3, residual=residual,
                       allow_zero_in_degree=True, activation=torch.nn.functional.elu)
    inputs = leaves(dtype, (NODES, in_feats), (SQUARE[0].nnz,))
    assert_same_as_dgl(ours, theirs, dtype,
                       lambda layer, g, x, w: layer(g, x, edge_weight=w, get_attention=True),
                       inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("in_feats", [5, (5, 3)])
def test_gatconv_on_a_block(dtype, in_feats):
    """One feature tensor (its first rows are the destinations) or a pair (fc_src, fc_dst)."""
    torch.manual_seed(6)
    theirs = dglnn.GATConv(in_feats, 3, num_heads=2, residual=True, allow_zero_in_degree=True)
    ours = snn.GATConv(in_feats, 3, num_heads=2, residual=True, allow_zero_in_degree=True)
    if isinstance(in_feats, tuple):
        inputs = leaves(dtype, (NODES, 5), (9, 3))
        run = lambda layer, g, x, y: layer(g, (x, y))      # noqa: E731
    else:
        inputs = leaves(dtype, (NODES, 5))
        run = lambda layer, g, x: layer(g, x)              # noqa: E731
    assert_same_as_dgl(ours, theirs, dtype, run, inputs, graph_pair=BLOCK)


def relations(nnz, num_rels, seed):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, num_rels, nnz))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("regularizer,num_bases", [(None, None), ("basis", 2), ("bdd", 2)])
@pytest.mark.parametrize("in_feat,out_feat", [(4, 6), (6, 4)])
@pytest.mark.parametrize("num_rels,compact", [(3, False), (40, True)])
def test_relgraphconv(dtype, regularizer, num_bases, in_feat, out_feat, num_rels, compact):
    """With per-edge norm, self-loop, layer norm, aggregating first (4 -> 6) or transforming
    first (6 -> 4), over dense (3 relations) or compact slots (40: most would be empty); the
    same layer and graph under two edge typings (the grouping kept for the first must not
    serve the second)."""
    torch.manual_seed(7)
    kwargs = dict(regularizer=regularizer, num_bases=num_bases, layer_norm=True,
                  activation=torch.tanh)
    theirs = dglnn.RelGraphConv(in_feat, out_feat, num_rels, **kwargs)
    theirs.h_bias.data.uniform_(-1, 1)
    ours = snn.RelGraphConv(in_feat, out_feat, num_rels, **kwargs)
    M = SQUARE[0]
    for seed in (0, 1):
        etypes = relations(M.nnz, num_rels, seed)
        assert edge_groups(M, etypes, num_rels, by_source=in_feat > out_feat).compact == compact
        inputs = leaves(dtype, (NODES, in_feat), (M.nnz, 1), seed=seed)
        assert_same_as_dgl(ours, theirs, dtype,
                           lambda layer, g, x, norm: layer(g, x, etypes, norm), inputs)
        theirs.zero_grad()
        ours.zero_grad()


@pytest.mark.parametrize("dtype", DTYPES)
def test_relgraphconv_on_a_block_without_norm(dtype):
    torch.manual_seed(8)
    theirs = dglnn.RelGraphConv(5, 3, 4, regularizer="basis", num_bases=3)
    ours = snn.RelGraphConv(5, 3, 4, regularizer="basis", num_bases=3)
    etypes = relations(BLOCK[0].nnz, 4, 2)
    assert_same_as_dgl(ours, theirs, dtype, lambda layer, g, x: layer(g, x, etypes),
                       leaves(dtype, (NODES, 5)), graph_pair=BLOCK)


@pytest.mark.parametrize("regularizer,num_bases", [(None, None), ("basis", 2), ("bdd", 2)])
@pytest.mark.parametrize("in_feat,out_feat", [(4, 6), (6, 4)])
def test_relgraphconv_on_a_graph_without_edges(regularizer, num_bases, in_feat, out_feat):
    """No edge: the relation weights get zero gradients, as DGL gives them, not none (a
    distributed loop all-reduces every parameter's gradient)."""
    torch.manual_seed(10)
    kwargs = dict(regularizer=regularizer, num_bases=num_bases)
    theirs = dglnn.RelGraphConv(in_feat, out_feat, 3, **kwargs)
    ours = snn.RelGraphConv(in_feat, out_feat, 3, **kwargs)
    empty = (SparseMatrix.from_csr(np.zeros(NODES + 1, np.int32), np.zeros(0, np.int32),
                                   np.zeros(0, np.float32), (NODES, NODES)),
             dgl.graph(([], []), num_nodes=NODES))
    etypes = torch.zeros(0, dtype=torch.int64)
    assert_same_as_dgl(ours, theirs, torch.float32,
                       lambda layer, g, x, norm: layer(g, x, etypes, norm),
                       leaves(torch.float32, (NODES, in_feat), (0, 1)), graph_pair=empty)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("regularizer,num_bases", [(None, None), ("basis", 2), ("bdd", 2)])
@pytest.mark.parametrize("sorted_by_type", [False, True])
def test_typed_linear(dtype, regularizer, num_bases, sorted_by_type):
    torch.manual_seed(9)
    theirs = dglnn.TypedLinear(4, 6, 3, regularizer, num_bases)
    ours = snn.TypedLinear(4, 6, 3, regularizer, num_bases)
    types = torch.tensor([0, 0, 2, 2, 2, 0, 1]) if not sorted_by_type \
        else torch.tensor([0, 0, 0, 2, 2, 2, 2])   # type 1 has no row
    assert_same_as_dgl(ours, theirs, dtype,
                       lambda layer, _, x: layer(x, types, sorted_by_type=sorted_by_type),
                       leaves(dtype, (7, 4)))


def test_layers_follow_double():
    M = SQUARE[0]
    layers = [snn.GraphConv(3, 2, allow_zero_in_degree=True), snn.SAGEConv(3, 2, "pool"),
              snn.GATConv(3, 2, 2, allow_zero_in_degree=True), snn.RelGraphConv(3, 2, 2)]
    calls = [lambda f: layers[0](M, f), lambda f: layers[1](M, f), lambda f: layers[2](M, f),
             lambda f: layers[3](M, f, relations(M.nnz, 2, 0))]
    for layer, call in zip(layers, calls):
        layer.double()
        assert call(torch.randn(NODES, 3, dtype=torch.float64)).dtype == torch.float64


@pytest.mark.filterwarnings("ignore:The input graph for the user-defined edge function")
def test_layers_on_a_graph_without_edges():
    """Every destination aggregates 0 (DGL's answer); backward runs."""
    M = SparseMatrix.from_csr(np.zeros(5, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32),
                              (4, 4))
    g = dgl.graph(([], []), num_nodes=4)
    torch.manual_seed(10)
    pairs = [(cls(3, 2, *args, **kwargs), getattr(dglnn, cls.__name__)(3, 2, *args, **kwargs))
             for cls, args, kwargs in [
                 (snn.GraphConv, (), dict(allow_zero_in_degree=True)),
                 (snn.SAGEConv, ("mean",), {}), (snn.SAGEConv, ("gcn",), {}),
                 (snn.SAGEConv, ("pool",), {}), (snn.SAGEConv, ("lstm",), {}),
                 (snn.GATConv, (2,), dict(allow_zero_in_degree=True)),
                 (snn.RelGraphConv, (2,), {})]]
    x = torch.randn(4, 3)
    for ours, theirs in pairs:
        for param in theirs.parameters():
            torch.nn.init.uniform_(param, -1, 1)
        ours.load_state_dict(theirs.state_dict())
        extra = (torch.zeros(0, dtype=torch.int64),) if isinstance(ours, snn.RelGraphConv) else ()
        out = ours(M, x.clone().requires_grad_(), *extra)
        torch.testing.assert_close(out, theirs(g, x, *extra))
        out.sum().backward()


# --- multigraphs and bipartite graphs ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("graph_pair", [MULTI, MULTI_BLOCK], ids=["square", "block"])
@pytest.mark.parametrize("make", [
    lambda: (snn.GraphConv(5, 3, allow_zero_in_degree=True),
             dglnn.GraphConv(5, 3, allow_zero_in_degree=True)),
    lambda: (snn.GraphConv(5, 3, norm="left", allow_zero_in_degree=True),
             dglnn.GraphConv(5, 3, norm="left", allow_zero_in_degree=True)),
    lambda: (snn.SAGEConv(5, 3, "mean"), dglnn.SAGEConv(5, 3, "mean")),
    lambda: (snn.SAGEConv(5, 3, "gcn"), dglnn.SAGEConv(5, 3, "gcn")),
    lambda: (snn.SAGEConv(5, 3, "pool"), dglnn.SAGEConv(5, 3, "pool")),
    lambda: (snn.SAGEConv(5, 3, "lstm"), dglnn.SAGEConv(5, 3, "lstm")),
    lambda: (snn.GATConv(5, 3, 2, allow_zero_in_degree=True),
             dglnn.GATConv(5, 3, 2, allow_zero_in_degree=True)),
    lambda: (snn.RelGraphConv(5, 3, 3), dglnn.RelGraphConv(5, 3, 3)),
], ids=["graphconv", "graphconv-left", "sage-mean", "sage-gcn", "sage-pool", "sage-lstm", "gat",
     "relgraphconv"])
def test_layers_on_a_multigraph(dtype, graph_pair, make):
    """Each parallel edge is a message of its own (and counts in every degree), as in DGL."""
    torch.manual_seed(11)
    ours, theirs = make()
    for param in theirs.parameters():
        torch.nn.init.uniform_(param, -1, 1)
    M = graph_pair[0]
    assert np.any((np.diff(M.indices) == 0) & (np.diff(np.repeat(np.arange(M.shape[0]),
                                                                 np.diff(M.indptr))) == 0))
    if isinstance(ours, snn.RelGraphConv):
        etypes = relations(M.nnz, 3, 4)
        run = lambda layer, g, x, w: layer(g, x, etypes, w.unsqueeze(-1))   # noqa: E731
    else:
        run = lambda layer, g, x, w: layer(g, x, edge_weight=w)      # noqa: E731
    assert_same_as_dgl(ours, theirs, dtype, run, leaves(dtype, (NODES, 5), (M.nnz,)),
                       graph_pair=graph_pair)


def test_layers_read_the_edges_of_a_matrix_that_summed_them():
    """``SparseMatrix`` of a COO tensor with a repeated entry: each copy is an edge."""
    parallel = torch.sparse_coo_tensor(torch.tensor([[0, 0, 1], [1, 1, 0]]), torch.ones(3), (2, 2),
                                       check_invariants=True)
    g = dgl.graph((torch.tensor([1, 1, 0]), torch.tensor([0, 0, 1])), num_nodes=2)
    for ours, theirs in [(snn.GraphConv(3, 2), dglnn.GraphConv(3, 2)),
                         (snn.SAGEConv(3, 2, "mean"), dglnn.SAGEConv(3, 2, "mean")),
                         (snn.GATConv(3, 2, 2), dglnn.GATConv(3, 2, 2))]:
        ours.load_state_dict(theirs.state_dict())
        x = torch.randn(2, 3)
        torch.testing.assert_close(ours(SparseMatrix(parallel), x), theirs(g, x))


def bipartite_full():
    """DGL's ``bipartite_full`` fixture (2 sources, 4 destinations, every pair an edge), its
    edges listed in M's CSR order."""
    g = dgl.heterograph({("_U", "_E", "_V"): ([0, 1, 0, 1, 0, 1, 0, 1],
                                              [0, 0, 1, 1, 2, 2, 3, 3])}, {"_U": 2, "_V": 4})
    return SparseMatrix.from_csr(np.arange(0, 9, 2), np.tile([0, 1], 4), np.ones(8, np.float32),
                                 (4, 2)), g


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("make", [
    lambda: (snn.GraphConv(5, 3), dglnn.GraphConv(5, 3)),
    lambda: (snn.GraphConv(5, 3, norm="right"), dglnn.GraphConv(5, 3, norm="right")),
    lambda: (snn.RelGraphConv(5, 3, 2, self_loop=False),
             dglnn.RelGraphConv(5, 3, 2, self_loop=False))], ids=["both", "right", "rgcn"])
def test_one_feature_tensor_on_a_bipartite_graph(dtype, make):
    """The layers that read no destination features take one tensor of the 2 sources, as DGL
    does; those that read them (SAGEConv, GATConv, RelGraphConv's self-loop) refuse it, as DGL
    does (with a shape error)."""
    torch.manual_seed(12)
    ours, theirs = make()
    for param in theirs.parameters():
        torch.nn.init.uniform_(param, -1, 1)
    etypes = torch.tensor([0, 1, 1, 0, 0, 1, 1, 0])
    run = (lambda layer, g, x: layer(g, x, etypes)) if isinstance(ours, snn.RelGraphConv) \
        else (lambda layer, g, x: layer(g, x))
    assert_same_as_dgl(ours, theirs, dtype, run, leaves(dtype, (2, 5)), graph_pair=bipartite_full())
    M = bipartite_full()[0]
    for layer in (snn.SAGEConv(5, 3, "mean"), snn.GATConv(5, 3, 2), snn.RelGraphConv(5, 3, 2)):
        with pytest.raises(SparseTIRValueError, match="destinations"):
            layer(M, torch.randn(2, 5), *((etypes,) if isinstance(layer, snn.RelGraphConv) else ()))


# --- refusals ---------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: snn.GraphConv(3, 2), lambda: snn.GATConv(3, 2, 2)])
def test_zero_in_degree_is_refused_unless_allowed(make):
    layer = make()
    M = SQUARE[0]
    with pytest.raises(SparseTIRValueError, match=r"row 2 is empty.*allow_zero_in_degree"):
        layer(M, torch.randn(NODES, 3))
    layer.set_allow_zero_in_degree(True)
    assert layer(M, torch.randn(NODES, 3)).shape[0] == NODES


def test_bad_aggregator():
    with pytest.raises(SparseTIRValueError, match="aggregator_type must be one of"):
        snn.SAGEConv(3, 2, "max")


def test_bad_arguments_are_refused_by_name():
    M = SQUARE[0]
    x = torch.randn(NODES, 3)
    conv = snn.GraphConv(3, 2, allow_zero_in_degree=True)
    with pytest.raises(SparseTIRValueError, match="norm must be one of"):
        snn.GraphConv(3, 2, norm="sym")
    with pytest.raises(SparseTIRTypeError, match="M must be a sparsetir.ops.SparseMatrix"):
        conv(M.to_scipy(), x)
    with pytest.raises(SparseTIRValueError, match=r"feat has shape \(13, 3\)"):
        conv(M, x[:13])
    with pytest.raises(SparseTIRValueError, match="edge_weight has shape"):
        conv(M, x, edge_weight=torch.ones(M.nnz + 1))
    with pytest.raises(SparseTIRValueError, match="has its own weight"):
        conv(M, x, weight=torch.ones(3, 2))
    with pytest.raises(SparseTIRValueError, match="pair"):
        snn.SAGEConv(3, 2, "mean")(graphs(num_dst=NODES + 1)[0], x)
    with pytest.raises(SparseTIRValueError, match="pass the pair"):
        snn.GATConv(3, 2, 2, allow_zero_in_degree=True)(graphs(num_dst=NODES + 1)[0], x)
    with pytest.raises(SparseTIRValueError, match="with self_loop=True"):
        snn.RelGraphConv(3, 2, 2)(graphs(num_dst=NODES + 1)[0], x, torch.zeros(0))
    with pytest.raises(SparseTIRValueError, match="gcn aggregator adds"):
        snn.SAGEConv((3, 2), 2, "gcn")(M, (x, torch.randn(NODES, 2)))
    rgcn = snn.RelGraphConv(3, 2, num_rels=2)
    with pytest.raises(SparseTIRValueError, match=r"etypes has shape"):
        rgcn(M, x, torch.zeros(M.nnz - 1, dtype=torch.int64))
    with pytest.raises(SparseTIRValueError, match=r"etypes holds relations outside \[0, 2\)"):
        rgcn(M, x, torch.full((M.nnz,), 2))
    with pytest.raises(SparseTIRTypeError, match="etypes must hold integers"):
        rgcn(M, x, torch.zeros(M.nnz))
    with pytest.raises(SparseTIRValueError, match="norm has shape"):
        rgcn(M, x, torch.zeros(M.nnz, dtype=torch.int64), norm=torch.ones(M.nnz, 2))
    with pytest.raises(SparseTIRValueError, match="multiples of it"):
        snn.TypedLinear(6, 4, 3, "bdd", num_bases=4)
    with pytest.raises(SparseTIRValueError, match="not non-decreasing"):
        snn.TypedLinear(3, 2, 2)(torch.randn(3, 3), torch.tensor([1, 0, 1]), sorted_by_type=True)
