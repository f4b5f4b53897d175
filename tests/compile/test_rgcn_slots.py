"""``RelGraphConv`` while torch traces it: over the dense (source, relation) slots
(``nn.relation_slots``), or per edge where the slots would be many times more than the edges.
Compiled (``aot_eager``, ``fullgraph=True``) against eager: outputs and the gradients of
``feat``, ``norm`` and every weight, for both eager orders (in > out transforms first, in <= out
sums first), with parallel edges, a row without edges and a graph without edges; the operator
``relation_slots`` against numpy; bad relations refused by name when the graph runs."""

import numpy as np
import pytest
import scipy.sparse
import torch

import sparsetir.nn.relation_slots  # noqa: F401  (torch.ops.sparsetir.relation_slots)
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError
from sparsetir.nn import RelGraphConv
from sparsetir.ops import SparseMatrix
from sparsetir.ops.custom_ops import matrix_of


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles the layer's forward anew (dynamo's recompile limit is per code)."""
    torch._dynamo.reset()


def random_graph(n, seed, density=0.2):
    A = scipy.sparse.random(n, n, density=density, format="lil", dtype=np.float32,
                            random_state=seed)
    A[n // 2] = 0                                         # a row with no edge
    return SparseMatrix(A.tocsr())


def parallel_graph():
    """Rows with a source repeated (parallel edges, from_csr keeps each), and an empty row."""
    indptr = [0, 3, 3, 6, 8]
    indices = [1, 1, 2, 0, 0, 3, 2, 2]
    return SparseMatrix.from_csr(indptr, indices, np.ones(8, np.float32), (4, 4))


def traced_targets(conv, M, x, etypes, norm):
    """The names of the calls in the graph dynamo makes of ``conv``."""
    seen = []

    def backend(gm, _):
        seen.extend(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
        return gm.forward
    torch.compile(conv, fullgraph=True, backend=backend)(M, x, etypes, norm)
    return " ".join(seen)


def compiled_matches_eager(conv, M, etypes, with_norm):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(M.shape[1], conv.linear_r.in_size, generator=generator,
                    requires_grad=True)
    norm = torch.rand(M.nnz, 1, generator=generator, requires_grad=True) if with_norm \
        else None
    inputs = [x] + ([norm] if with_norm else []) + list(conv.parameters())
    compiled = torch.compile(conv, fullgraph=True, backend="aot_eager")
    results = []
    for layer in (conv, compiled):
        out = layer(M, x, etypes, norm)
        weights = torch.linspace(-1, 1, out.numel()).view_as(out)
        results.append((out, torch.autograd.grad((out * weights).sum(), inputs,
                                                 allow_unused=True)))
    (out, grads), (out_c, grads_c) = results
    torch.testing.assert_close(out_c, out, rtol=1e-5, atol=1e-6)
    for grad, grad_c in zip(grads, grads_c):
        torch.testing.assert_close(grad_c, torch.zeros_like(grad_c) if grad is None else grad,
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_feat, out_feat", [(6, 3), (3, 6)])
@pytest.mark.parametrize("with_norm", [True, False])
@pytest.mark.parametrize("regularizer", [None, "basis", "bdd"])
def test_compiled_runs_over_slots_as_eager(in_feat, out_feat, with_norm, regularizer):
    M = random_graph(30, 0)
    torch.manual_seed(0)
    conv = RelGraphConv(in_feat, out_feat, 3, regularizer, 3 if regularizer else None)
    etypes = torch.from_numpy(np.random.default_rng(2).integers(0, 3, M.nnz))
    targets = traced_targets(conv, M, torch.randn(30, in_feat), etypes, None)
    assert "relation_slots" in targets and "gather_mm" not in targets
    compiled_matches_eager(conv, M, etypes, with_norm)


def test_compiled_over_parallel_edges_as_eager():
    M = parallel_graph()
    torch.manual_seed(0)
    conv = RelGraphConv(4, 2, 3, "basis", 2)
    etypes = torch.tensor([2, 0, 1, 1, 0, 2, 2, 1])  # each repeated source: relations fall
    compiled_matches_eager(conv, M, etypes, with_norm=True)


def test_compiled_on_a_graph_without_edges():
    M = SparseMatrix(scipy.sparse.csr_matrix((5, 5), dtype=np.float32))
    torch.manual_seed(0)
    compiled_matches_eager(RelGraphConv(4, 2, 2), M, torch.zeros(0, dtype=torch.int64), True)


def test_many_relations_run_per_edge():
    """More than ``DENSE_FACTOR`` slots per edge: the traced layer keeps DGL's per-edge
    products (``gather_mm``), and they match eager."""
    M = random_graph(30, 3, density=0.05)
    relations = 40                                        # 1200 slots for about 45 edges
    torch.manual_seed(0)
    conv = RelGraphConv(5, 3, relations, "basis", 2)
    etypes = torch.from_numpy(np.random.default_rng(4).integers(0, relations, M.nnz))
    targets = traced_targets(conv, M, torch.randn(30, 5), etypes, None)
    assert "gather_mm" in targets and "relation_slots" not in targets
    compiled_matches_eager(conv, M, etypes, with_norm=True)


def test_relation_slots_against_numpy():
    M = parallel_graph()
    indptr, indices = (torch.from_numpy(np.array(M.storage(name)))
                       for name in ("indptr", "indices"))
    etypes = torch.tensor([2, 0, 1, 1, 0, 2, 2, 1])
    slots, order = torch.ops.sparsetir.relation_slots(indptr, indices, etypes, 4, 3)
    rows = np.repeat(np.arange(4), np.diff(M.indptr))
    expected = M.indices.astype(np.int64) * 3 + etypes.numpy()
    assert slots.dtype == torch.int32 and order.dtype == torch.int64
    np.testing.assert_array_equal(slots.numpy(), expected[order.numpy()])
    np.testing.assert_array_equal(rows[order.numpy()], rows)       # each entry keeps its row
    for start, stop in zip(M.indptr[:-1], M.indptr[1:]):            # sorted within each row
        assert np.all(np.diff(slots.numpy()[start:stop]) >= 0)
    assert sorted(order.tolist()) == list(range(8))


@pytest.mark.parametrize("etypes, error, match", [
    (lambda nnz: torch.full((nnz,), 3), SparseTIRValueError, "etypes holds relations outside"),
    (lambda nnz: torch.full((nnz,), -1), SparseTIRValueError, "etypes holds relations outside"),
    (lambda nnz: torch.zeros(nnz + 1, dtype=torch.int64), SparseTIRValueError,
     "one relation per edge"),
    (lambda nnz: torch.zeros(nnz), SparseTIRTypeError, "etypes must hold integers")])
def test_bad_relations_are_refused_by_name_while_compiled(etypes, error, match):
    M = random_graph(30, 0)
    compiled = torch.compile(RelGraphConv(4, 2, 3), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match=match) as raised:  # dynamo wraps what it traces
        compiled(M, torch.randn(30, 4), etypes(M.nnz))
    chain = [raised.value]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    assert any(isinstance(e, error) or error.__name__ in str(e) for e in chain)


def test_new_relations_on_the_same_graph_are_read_anew():
    """The slot matrix kept for a graph is made again when the relations change, in a new
    tensor or written in place."""
    M = random_graph(30, 6)
    torch.manual_seed(0)
    conv = RelGraphConv(5, 3, 3)
    compiled = torch.compile(conv, fullgraph=True, backend="aot_eager")
    x, norm = torch.randn(30, 5), torch.rand(M.nnz)
    etypes = torch.zeros(M.nnz, dtype=torch.int64)
    for new in (torch.ones(M.nnz, dtype=torch.int64),
                torch.from_numpy(np.random.default_rng(7).integers(0, 3, M.nnz))):
        torch.testing.assert_close(compiled(M, x, etypes, norm), conv(M, x, etypes, norm),
                                   rtol=1e-5, atol=1e-6)
        etypes.copy_(new)                                 # in place
    torch.testing.assert_close(compiled(M, x, etypes, norm), conv(M, x, etypes, norm),
                               rtol=1e-5, atol=1e-6)


def test_slot_matrix_is_made_once_per_graph_and_relations():
    M = random_graph(30, 8)
    indptr, indices = (torch.from_numpy(np.array(M.storage(name)))
                       for name in ("indptr", "indices"))
    etypes = torch.from_numpy(np.random.default_rng(9).integers(0, 3, M.nnz))
    matrices = []
    for _ in range(2):
        slots, _ = torch.ops.sparsetir.relation_slots(indptr, indices, etypes, 30, 3)
        matrices.append(matrix_of(indptr, slots, 90))
    assert matrices[0] is matrices[1] and matrices[0].shape == (30, 90)
    np.testing.assert_array_equal(matrices[0].indices, M.indices * 3 + etypes.numpy())


def test_relation_slots_passes_opcheck():
    M = parallel_graph()
    indptr, indices = (torch.from_numpy(np.array(M.storage(name)))
                       for name in ("indptr", "indices"))
    torch.library.opcheck(torch.ops.sparsetir.relation_slots.default,
                          (indptr, indices, torch.tensor([2, 0, 1, 1, 0, 2, 2, 1]), 4, 3))
