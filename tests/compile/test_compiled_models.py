"""``torch.compile`` and ``torch.export`` over ``sparsetir.nn`` models and a user's module calling
``sparsetir.ops``: no graph break (``torch._dynamo.explain`` of the loss: the backward graph is AOT autograd's, made
from the operators' registered backward), ``fullgraph=True`` compiles,
and compiled training follows eager training on Cora (losses and gradients within rtol 1e-5
over 5 steps); ``dynamic=True`` takes a graph of another size without compiling the model
again; ``torch.export`` captures each layer's forward and the exported program gives the eager
result. Most tests compile with the ``aot_eager`` backend (torch's AOT autograd with fake
tensors, what every backend runs first) to keep their time small; one trains with inductor."""

import copy

import numpy as np
import pytest
import scipy.sparse
import torch
from torch._dynamo.testing import CompileCounterWithBackend

import sparsetir.ops as ops
from sparsetir.data import load_graph
from sparsetir.nn import GATConv, GraphConv, RelGraphConv, SAGEConv
from sparsetir.ops import SparseMatrix

WIDTH, HIDDEN, CLASSES, RELATIONS = 24, 16, 7, 3


def cora():
    A = load_graph("cora")
    return SparseMatrix(A + scipy.sparse.identity(A.shape[0], np.float32, format="csr"))


def random_graph(n, seed):
    A = scipy.sparse.random(n, n, density=0.1, format="lil", dtype=np.float32,
                            random_state=seed)
    A[n // 2] = 0                                          # a row with no edge
    return SparseMatrix(A.tocsr())


class Model(torch.nn.Module):
    """Two layers of one kind (RelGraphConv: with random edge types)."""

    def __init__(self, kind, nnz):
        super().__init__()
        make = {"gcn": lambda i, o: GraphConv(i, o),
                "sage": lambda i, o: SAGEConv(i, o, "mean"),
                "gat": lambda i, o: GATConv(i, o, num_heads=2),
                "rgcn": lambda i, o: RelGraphConv(i, o, RELATIONS, "basis", 2)}[kind]
        self.kind = kind
        self.conv1, self.conv2 = make(WIDTH, HIDDEN), make(HIDDEN * (kind == "gat" and 2 or 1),
                                                           CLASSES)
        self.etypes = torch.from_numpy(np.random.default_rng(3).integers(0, RELATIONS, nnz))

    def forward(self, M, x):
        extra = (self.etypes,) if self.kind == "rgcn" else ()
        h = torch.relu(self.conv1(M, x, *extra)).flatten(1)
        return self.conv2(M, h, *extra).flatten(1)


def train(model, M, x, labels, steps=5):
    """Losses and every parameter's gradient at each of ``steps`` SGD steps."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    history = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(M, x), labels)
        loss.backward()
        history.append((loss.detach().clone(),
                        [p.grad.clone() for p in model.parameters()]))
        optimizer.step()
    return history


def assert_same_training(eager, compiled):
    for (loss, grads), (loss_c, grads_c) in zip(eager, compiled):
        torch.testing.assert_close(loss_c, loss, rtol=1e-5, atol=1e-7)
        for grad, grad_c in zip(grads, grads_c):
            torch.testing.assert_close(grad_c, grad, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def cora_inputs():
    M = cora()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(M.shape[0], WIDTH, generator=generator)
    labels = torch.randint(0, CLASSES, (M.shape[0],), generator=generator)
    return M, x, labels


@pytest.mark.parametrize("kind", ["gcn", "sage", "gat", "rgcn"])
def test_model_compiles_whole_and_trains_as_eager_on_cora(kind, cora_inputs):
    M, x, labels = cora_inputs
    torch.manual_seed(0)
    model = Model(kind, M.nnz)
    twin = copy.deepcopy(model)

    def loss(x):          # dynamo traces forward; AOT autograd makes the backward graph
        return torch.nn.functional.cross_entropy(twin(M, x), labels)
    explained = torch._dynamo.explain(loss)(x)
    assert explained.graph_break_count == 0, explained.break_reasons

    counter = CompileCounterWithBackend("aot_eager")
    twin.compile(fullgraph=True, backend=counter)
    assert_same_training(train(model, M, x, labels), train(twin, M, x, labels))
    assert counter.frame_count == 1


def test_gcn_trains_as_eager_under_inductor(cora_inputs):
    M, x, labels = cora_inputs
    torch.manual_seed(0)
    model = Model("gcn", M.nnz)
    twin = copy.deepcopy(model)
    twin.compile(fullgraph=True)
    assert_same_training(train(model, M, x, labels), train(twin, M, x, labels))


def test_dynamic_graph_of_another_size_compiles_the_model_once():
    torch.manual_seed(0)
    model = Model("gat", 0)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=counter)
    frames = []
    for n, seed in ((40, 0), (57, 1), (33, 2)):
        M = random_graph(n, seed)
        for layer in (model.conv1, model.conv2):
            layer.set_allow_zero_in_degree(True)
        x = torch.randn(n, WIDTH, requires_grad=True)
        out = compiled(M, x)
        expected = model(M, x)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
        (grad,) = torch.autograd.grad(out.square().sum(), x)
        (grad_eager,) = torch.autograd.grad(expected.square().sum(), x)
        torch.testing.assert_close(grad, grad_eager, rtol=1e-5, atol=1e-6)
        frames.append(counter.frame_count)
    assert frames[0] > 0 and frames == frames[:1] * 3      # compiled at the first graph only


class UserModule(torch.nn.Module):
    """A user's own module calling ``sparsetir.ops`` directly."""

    def __init__(self, M):
        super().__init__()
        self.M = M
        self.weight = torch.nn.Parameter(torch.randn(2, 4, 3))

    def forward(self, x, y):
        h = ops.spmm(self.M, x)                                    # (m, 4)
        scores = ops.edge_softmax(self.M, ops.sddmm(self.M, h, y).unsqueeze(1))
        h = ops.u_mul_e_max(self.M, y, scores) + ops.copy_u_mean(self.M, y)
        typed = ops.gather_mm(h, self.weight, torch.arange(h.shape[0]) % 2)
        pooled = ops.segment_reduce(torch.tensor([3, 0, h.shape[0] - 3]), typed, "min")
        return typed.sum() + pooled.square().sum()


def test_user_module_compiles_whole_forward_and_backward():
    M = random_graph(30, 4)
    torch.manual_seed(0)
    module = UserModule(M)
    x, y = torch.randn(30, 4, requires_grad=True), torch.randn(30, 4, requires_grad=True)
    expected = module(x, y)
    expected_grads = torch.autograd.grad(expected, (x, y, module.weight))
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    out = compiled(x, y)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    for grad, grad_eager in zip(torch.autograd.grad(out, (x, y, module.weight)),
                                expected_grads):
        torch.testing.assert_close(grad, grad_eager, rtol=1e-5, atol=1e-6)


class Bound(torch.nn.Module):
    """A layer with its graph kept on the module, as ``torch.export`` takes it."""

    def __init__(self, layer, M):
        super().__init__()
        self.layer, self.M = layer, M

    def forward(self, x, *extra):
        return self.layer(self.M, x, *extra)


@pytest.mark.parametrize("kind", ["gcn", "sage", "gat", "rgcn"])
def test_export_round_trips_each_layer(kind):
    M = random_graph(30, 5)
    M = SparseMatrix(M.to_scipy() + scipy.sparse.identity(30, np.float32, format="csr"))
    torch.manual_seed(0)
    layer = Model(kind, M.nnz).conv1
    extra = (Model(kind, M.nnz).etypes,) if kind == "rgcn" else ()
    module = Bound(layer, M)
    x = torch.randn(30, WIDTH)
    program = torch.export.export(module, (x,) + extra)
    assert any("sparsetir" in str(node.target) for node in program.graph.nodes)
    torch.testing.assert_close(program.module()(x, *extra), module(x, *extra),
                               rtol=1e-5, atol=1e-6)


def test_matrix_made_inside_the_compiled_function_is_refused_by_name():
    A = scipy.sparse.random(5, 5, density=0.5, format="csr", dtype=np.float32, random_state=0)
    compiled = torch.compile(lambda x: ops.spmm(SparseMatrix(A), x), fullgraph=True,
                             backend="eager")
    with pytest.raises(Exception, match="cannot be made inside torch.compile"):
        compiled(torch.randn(5, 2))


FIVE_NODES = SparseMatrix(scipy.sparse.random(5, 5, density=0.5, format="csr", dtype=np.float32,
                                              random_state=1))


@pytest.mark.parametrize("call", [
    lambda x: ops.segment_softmax(np.array([2, 0, 3]), x),
    lambda x: ops.edge_softmax(FIVE_NODES, x, norm_by="src"),
], ids=["segment_softmax", "edge_softmax_by_src"])
def test_untraceable_softmax_forms_are_refused_by_name(call):
    compiled = torch.compile(call, fullgraph=True, backend="eager")
    with pytest.raises(Exception, match="cannot be traced"):
        compiled(torch.randn(5, 2))
