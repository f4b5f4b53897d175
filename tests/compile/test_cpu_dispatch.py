"""The short path of ``ops.cpu_dispatch`` for CPU calls of the custom operators: a plain call
runs the kernel from the ``AutogradCPU`` kernel, while a call autograd records still goes
through ``register_autograd`` and a call under a torch dispatch mode, fake tensors or
functionalization still reaches them. Numbers against scipy/torch references, on a graph with
an empty row and an empty column."""

import numpy as np
import pytest
import scipy.sparse
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sparsetir.ops import SparseMatrix, custom_ops
from sparsetir.ops.cpu_dispatch import custom_operator
from sparsetir.ops.graph_tensors import graph_tensors


@custom_operator("sparsetir_tests::scaled_rows")
def scaled_rows(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x * scale[:, None]``, a new tensor."""
    return x * scale[:, None]


scaled_rows.register_fake(lambda x, scale: torch.empty_like(x))
scaled_rows.register_autograd(
    lambda ctx, grad: (grad * ctx.saved_tensors[1][:, None],
                       (grad * ctx.saved_tensors[0]).sum(1)),
    setup_context=lambda ctx, inputs, output: ctx.save_for_backward(*inputs))


class Seen(TorchDispatchMode):
    """A torch dispatch mode that lists the operators it sees."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def matrix():
    rng = np.random.default_rng(0)
    dense = (rng.random((9, 7)) < 0.4) * rng.standard_normal((9, 7))
    dense[3] = 0                              # an empty row
    dense[:, 5] = 0                           # a source with no edge
    return scipy.sparse.csr_matrix(dense.astype(np.float32))


A = matrix()
M = SparseMatrix(A)
T = graph_tensors(M)
X = torch.from_numpy(np.random.default_rng(1).standard_normal((7, 4)).astype(np.float32))


def u_mul_e_sum(x):
    return torch.ops.sparsetir.gspmm(T.indptr, T.indices, "mul", "sum", x, T.data)[0]


def test_every_operator_has_the_short_path_kernels():
    names = [op._qualname for op in vars(custom_ops).values()    # pylint: disable=protected-access
             if isinstance(op, torch._library.custom_ops.CustomOpDef)]
    assert len(names) == 11
    for name in names:
        for key in ("CPU", "AutogradCPU"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(name, key), (name, key)


@pytest.mark.parametrize("context", ["plain", "no_grad", "inference_mode"])
def test_gspmm_gives_scipy_numbers_in_each_grad_mode(context):
    with {"plain": torch.enable_grad, "no_grad": torch.no_grad,
          "inference_mode": torch.inference_mode}[context]():
        out = u_mul_e_sum(X)
    np.testing.assert_allclose(out.numpy(), A @ X.numpy(), rtol=1e-5, atol=1e-5)
    assert out.grad_fn is None


def test_a_dispatch_mode_still_sees_the_operator():
    """The short path is taken only where the CPU kernel is next: a torch dispatch mode
    (``opcheck``'s schema check, fake tensors, functionalization) keeps its view of the call."""
    with Seen() as seen:
        out = u_mul_e_sum(X)
    assert seen.names == ["sparsetir.gspmm.default"]
    np.testing.assert_allclose(out.numpy(), A @ X.numpy(), rtol=1e-5, atol=1e-5)
    functional = torch.func.functionalize(u_mul_e_sum)(X)
    np.testing.assert_allclose(functional.numpy(), A @ X.numpy(), rtol=1e-5, atol=1e-5)


def test_a_recorded_call_takes_register_autograd():
    x = X.clone().requires_grad_()
    out = u_mul_e_sum(x)
    assert "GeneratedBackwardFor_sparsetir_gspmm" in type(out.grad_fn).__name__
    weights = torch.randn_like(out)
    (out * weights).sum().backward()
    dense = torch.from_numpy(A.toarray())
    torch.testing.assert_close(x.grad, dense.T @ weights, rtol=1e-5, atol=1e-5)


def test_custom_operator_defines_a_checked_operator():
    x, scale = torch.randn(5, 3), torch.randn(5)
    torch.library.opcheck(scaled_rows, (x, scale))
    with Seen() as seen:
        out = torch.ops.sparsetir_tests.scaled_rows(x, scale)
    assert seen.names == ["sparsetir_tests.scaled_rows.default"]
    torch.testing.assert_close(out, x * scale[:, None])
    x_leaf, scale_leaf = x.clone().requires_grad_(), scale.clone().requires_grad_()
    torch.library.opcheck(scaled_rows, (x_leaf, scale_leaf))
    torch.ops.sparsetir_tests.scaled_rows(x_leaf, scale_leaf).sum().backward()
    torch.testing.assert_close(x_leaf.grad, scale[:, None].expand(5, 3))
    torch.testing.assert_close(scale_leaf.grad, x.sum(1))
