"""``SAGEConv(..., "lstm")`` under ``torch.compile`` (``fullgraph=True``) and ``torch.export``:
traced, the LSTM runs from the layer's ``lstm`` parameters one step at a time over the
destinations still reading (``degree_buckets.last_states``; dynamo does not trace
``nn.LSTM``), and gives the eager layer's numbers (``nn.LSTM`` per bucket of in-degree) and
gradients: of the features, the edge weights and every parameter, the LSTM's included. Before,
both compiled forms crashed inside dynamo on numpy over the matrix's sealed arrays. The graph
has in-degrees 0 to 6, parallel edges (``from_csr`` repeated columns) and a row without
edges."""

import numpy as np
import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from sparsetir.nn import SAGEConv
from sparsetir.nn.degree_buckets import last_states
from sparsetir.ops import SparseMatrix

N, WIDTH = 8, 5


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()


def graph():
    degrees = np.array([3, 0, 1, 6, 3, 2, 1, 4])
    rng = np.random.default_rng(0)
    indices = np.concatenate([np.sort(rng.integers(0, N, d)) for d in degrees])
    indices[:2] = 5                                    # row 0 holds column 5 twice
    return SparseMatrix.from_csr(np.concatenate([[0], np.cumsum(degrees)]), indices,
                                 np.ones(indices.size, np.float32), (N, N))


M = graph()


def run(forward, conv, x, weight):
    """The output and the gradients of ``x``, ``weight`` and ``conv``'s parameters."""
    leaves = [x.clone().requires_grad_(), weight.clone().requires_grad_()]
    out = forward(M, leaves[0], edge_weight=leaves[1])
    return out, torch.autograd.grad(out.square().sum(), leaves + list(conv.parameters()))


def assert_same(result, expected):
    torch.testing.assert_close(result[0], expected[0], rtol=1e-5, atol=1e-6)
    assert len(result[1]) == len(expected[1])
    for grad, grad_eager in zip(result[1], expected[1]):
        torch.testing.assert_close(grad, grad_eager, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_feats,out_feats", [(WIDTH, 3), (3, 7)])
def test_compiles_whole_and_gives_the_eager_numbers_and_gradients(in_feats, out_feats):
    torch.manual_seed(0)
    conv = SAGEConv(in_feats, out_feats, "lstm")
    x, weight = torch.randn(N, in_feats), torch.rand(M.nnz) + 0.5
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(conv, fullgraph=True, backend=counter)
    for _ in range(2):                                 # the second call compiles nothing
        assert_same(run(compiled, conv, x, weight), run(conv, conv, x, weight))
    assert counter.frame_count == 1
    explained = torch._dynamo.explain(conv)(M, x, edge_weight=weight)
    assert explained.graph_break_count == 0, explained.break_reasons


def test_exported_program_gives_the_eager_numbers():
    torch.manual_seed(1)
    conv = SAGEConv(WIDTH, 3, "lstm")

    class Bound(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x):
            return self.conv(M, x)
    x = torch.randn(N, WIDTH)
    program = torch.export.export(Bound(), (x,))
    torch.testing.assert_close(program.module()(x), conv(M, x), rtol=1e-5, atol=1e-6)


def test_a_replaced_lstm_is_the_one_compiled_and_trained():
    """The traced forward reads ``lstm``'s parameters by name: a new ``lstm`` is read, and
    gets the gradients."""
    torch.manual_seed(2)
    conv = SAGEConv(WIDTH, 3, "lstm")
    conv.lstm = torch.nn.LSTM(WIDTH, WIDTH, batch_first=True)
    x, weight = torch.randn(N, WIDTH), torch.rand(M.nnz) + 0.5
    compiled = run(torch.compile(conv, fullgraph=True, backend="aot_eager"), conv, x, weight)
    assert_same(compiled, run(conv, conv, x, weight))
    assert all(grad.abs().sum() > 0 for grad in compiled[1])


def test_an_lstm_the_traced_cell_cannot_run_is_refused_by_name():
    conv = SAGEConv(WIDTH, 3, "lstm")
    conv.lstm = torch.nn.LSTM(WIDTH, WIDTH, bias=False, batch_first=True)
    conv(M, torch.randn(N, WIDTH))                      # eagerly: nn.LSTM itself
    compiled = torch.compile(conv, fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="one-layer, one-way nn.LSTM with biases"):
        compiled(M, torch.randn(N, WIDTH))


def test_last_states_runs_each_destinations_sequence_in_csr_order():
    """A recurrence run one message at a time over every destination at once equals it run
    destination by destination, gradients too; a destination with no in-edge keeps its
    initial state."""
    generator = torch.Generator().manual_seed(3)
    inputs = torch.randn(M.nnz, 2, generator=generator, requires_grad=True)
    initial = torch.randn(N, 2, generator=generator)

    def step(x, state):
        return (torch.tanh(state[0] * 0.5 + x),)
    (stepped,) = last_states(M, inputs, step, (initial,))
    expected = []
    for v in range(N):
        h = initial[v:v + 1]
        for e in range(M.indptr[v], M.indptr[v + 1]):
            (h,) = step(inputs[e:e + 1], (h,))
        expected.append(h)
    expected = torch.cat(expected)
    torch.testing.assert_close(stepped, expected)
    torch.testing.assert_close(stepped[1], initial[1])      # row 1 has no edge
    torch.testing.assert_close(torch.autograd.grad(stepped.sum(), inputs)[0],
                               torch.autograd.grad(expected.sum(), inputs)[0])
