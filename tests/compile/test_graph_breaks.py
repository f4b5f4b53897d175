"""What torch cannot trace, under ``torch.compile`` without ``fullgraph``: a ``SparseMatrix``
made inside the compiled function (``SparseMatrix(A)``, ``from_csr``), a scipy matrix passed as
the graph, ``edge_softmax`` with ``eids`` or ``norm_by="src"`` and ``segment_softmax`` run
eagerly (a graph break, ``untraceable.eagerly``) and give the eager numbers and gradients, a
``from_csr`` values tensor's included, without compiling again at later calls; so does reading a
matrix's numpy arrays (``in_degrees()``, ``out_degrees()``, ``transposed()``), which dynamo gets as
writable copies (it cannot read a read-only array). Before, dynamo
crashed ("Expected np.nditer base": it traced the eager code's functions one by one after the
break). With ``fullgraph=True`` torch refuses them, its error carrying sparsetir's message;
``torch.export`` refuses them by name."""

import numpy as np
import pytest
import scipy.sparse
import torch
from torch._dynamo.testing import CompileCounter

import sparsetir.ops as ops
from sparsetir.errors import SparseTIRError, SparseTIRTypeError
from sparsetir.ops import SparseMatrix

A = scipy.sparse.random(6, 6, density=0.5, format="csr", dtype=np.float32, random_state=0)
M = SparseMatrix(A)
EIDS = torch.from_numpy(np.random.default_rng(0).permutation(M.nnz)[: M.nnz - 3])


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()


def logits(x):
    return ops.u_dot_v(M, x, x)


CALLS = {
    "matrix_made_inside": lambda x: ops.spmm(SparseMatrix(A), x) * 2,
    "from_csr_inside": lambda x: ops.copy_u_sum(
        SparseMatrix.from_csr(A.indptr, A.indices, A.data, A.shape), x) + 1,
    "scipy_matrix": lambda x: ops.spmm(A, x).relu(),
    "edge_softmax_eids": lambda x: ops.edge_softmax(M, logits(x)[EIDS], eids=EIDS) * 3,
    "edge_softmax_by_src": lambda x: ops.edge_softmax(M, logits(x), norm_by="src"),
    "segment_softmax": lambda x: ops.segment_softmax(torch.tensor([2, 0, 4]), x.sin()),
    "in_degrees": lambda x: ops.copy_u_sum(M, x) / torch.as_tensor(
        M.in_degrees()).clamp(min=1).to(x.dtype).unsqueeze(1),
    "out_degrees": lambda x: x * torch.as_tensor(M.out_degrees()).to(x.dtype).unsqueeze(1),
    "transposed": lambda x: ops.spmm(M.transposed()[0], x) - 1,
}

REFERENCES = {           # the same numbers from torch alone
    "matrix_made_inside": lambda x: torch.from_numpy(A.toarray()) @ x * 2,
    "from_csr_inside": lambda x: torch.from_numpy((A != 0).toarray().astype(np.float32)) @ x
    + 1,
    "scipy_matrix": lambda x: (torch.from_numpy(A.toarray()) @ x).relu(),
    "in_degrees": lambda x: torch.from_numpy((A != 0).toarray().astype(np.float32)) @ x
    / torch.from_numpy(np.diff(A.indptr)).clamp(min=1).float().unsqueeze(1),
    "transposed": lambda x: torch.from_numpy(A.T.toarray()) @ x - 1,
}


@pytest.mark.parametrize("name", CALLS)
def test_runs_eagerly_between_graphs_with_eager_numbers_and_gradients(name):
    call = CALLS[name]
    counter = CompileCounter()
    compiled = torch.compile(call, backend=counter)
    for seed in range(3):                          # no compile after the first call
        x = torch.randn(6, 4, generator=torch.Generator().manual_seed(seed))
        leaf, leaf_eager = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, expected = compiled(leaf), call(leaf_eager)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
        if name in REFERENCES:
            torch.testing.assert_close(out, REFERENCES[name](x), rtol=1e-5, atol=1e-5)
        out.square().sum().backward()
        expected.square().sum().backward()
        torch.testing.assert_close(leaf.grad, leaf_eager.grad, rtol=1e-5, atol=1e-6)
        if seed == 0:
            frames = counter.frame_count
    assert counter.frame_count == frames


def test_from_csr_values_made_inside_get_their_gradient():
    w = torch.from_numpy(A.data).requires_grad_()
    w_eager = w.detach().clone().requires_grad_()

    def call(w, x):
        return ops.spmm(SparseMatrix.from_csr(A.indptr, A.indices, w, A.shape), x)
    x = torch.randn(6, 4)
    out = torch.compile(call, backend="aot_eager")(w, x)
    expected = call(w_eager, x)
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(w.grad, w_eager.grad)
    assert w.grad.abs().sum() > 0


def test_a_transpose_of_from_csr_values_read_inside_keeps_their_gradient():
    w = torch.from_numpy(A.data).requires_grad_()
    w_eager = w.detach().clone().requires_grad_()
    matrices = [SparseMatrix.from_csr(A.indptr, A.indices, v, A.shape) for v in (w, w_eager)]

    def call(matrix, x):
        return ops.spmm(matrix.transposed()[0], x)
    x = torch.randn(6, 4)
    out = torch.compile(call, backend="aot_eager")(matrices[0], x)
    expected = call(matrices[1], x)
    torch.testing.assert_close(out, torch.from_numpy(A.T.toarray()) @ x, rtol=1e-5, atol=1e-5)
    out.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(w.grad, w_eager.grad)
    assert w.grad.abs().sum() > 0


def test_export_reads_a_matrix_array_as_a_constant():
    class Call(torch.nn.Module):
        def forward(self, x):
            return CALLS["in_degrees"](x)
    x = torch.randn(6, 4)
    exported = torch.export.export(Call(), (x,), strict=False)
    torch.testing.assert_close(exported.module()(x), REFERENCES["in_degrees"](x), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("name,message", [
    ("in_degrees", "numpy arrays"),
    ("transposed", "numpy arrays"),
    ("matrix_made_inside", "cannot be made inside torch.compile"),
    ("from_csr_inside", "cannot be made inside torch.compile"),
    ("scipy_matrix", "must be a SparseMatrix made outside"),
    ("edge_softmax_eids", "cannot be traced"),
    ("segment_softmax", "cannot be traced"),
])
def test_fullgraph_refuses_them_with_sparsetirs_message(name, message):
    compiled = torch.compile(CALLS[name], fullgraph=True, backend="eager")
    with pytest.raises(torch._dynamo.exc.Unsupported, match=message):
        compiled(torch.randn(6, 4))


@pytest.mark.parametrize("name,error", [
    ("matrix_made_inside", SparseTIRTypeError), ("scipy_matrix", SparseTIRTypeError),
    ("edge_softmax_eids", SparseTIRError), ("segment_softmax", SparseTIRError),
])
def test_export_refuses_them_by_name(name, error):
    class Call(torch.nn.Module):
        def forward(self, x):
            return CALLS[name](x)
    with pytest.raises(error):
        torch.export.export(Call(), (torch.randn(6, 4),))
