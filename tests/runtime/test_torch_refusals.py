"""Torch tensors a kernel cannot take, or could take only by losing a gradient, are refused by
name on every call path (a full call, a bound call on the native and on the Python fast path):
functorch-wrapped tensors (``torch.func.grad``, ``vmap``, ``functionalize``), sparse tensors,
tensors that require grad while autograd records (under ``torch.no_grad`` they run),
tensors carrying a forward-mode tangent, and an inference tensor to write outside inference
mode (read, or inside inference mode, it runs).
"""

import numpy as np
import pytest
import torch
from csrmm_calls import FEAT, NAMES

from sparsetir.runtime import ArgumentError

FUNCTORCH = "is a torch functorch-wrapped tensor"
SPARSE = "got layout torch.sparse_(csr|coo) \\(a sparse torch tensor\\); pass its dense form"
GRAD = "requires grad, and sparsetir kernels do not support autograd"


def _full(kernel, args):
    return lambda b, c: kernel(*[{**args, "b": b, "c": c}[k] for k in NAMES])


def _bound(kernel, args, native: bool):
    bound = kernel.bind(**{k: args[k] for k in NAMES if k not in ("b", "c")})
    if not native:
        bound.native_call = False
    return bound


@pytest.fixture(params=["full", "bound native", "bound python"])
def call(request, kernel, args):
    if request.param == "full":
        return _full(kernel, args)
    return _bound(kernel, args, native=request.param == "bound native")


def _out():
    return torch.full((12, FEAT), float("nan"))


def _inside(transform, call, b, c, batched: str = ""):
    """Call the kernel inside ``transform``, on ``b`` and ``c`` as the transform sees them
    (``batched``: which of them vmap batches)."""
    if transform == "vmap":
        def body(batched_one):
            call(*((batched_one, c) if batched == "b" else (b, batched_one)))
            return batched_one.sum()
        return torch.vmap(body)((b if batched == "b" else c)[None])

    def body(b_seen):
        call(b_seen, c)
        return b_seen.sum()
    return {"grad": torch.func.grad, "functionalize": torch.func.functionalize}[transform](body)(b)


@pytest.mark.parametrize("transform, batched, name", [
    ("grad", "", "b"), ("vmap", "b", "b"), ("vmap", "c", "c"), ("functionalize", "", "b")])
def test_functorch_tensors_are_refused_by_name(call, args, transform, batched, name):
    b = torch.from_numpy(args["b"].copy())
    with pytest.raises(ArgumentError, match=f"argument '{name}': {FUNCTORCH}"):
        _inside(transform, call, b, _out(), batched)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("layout", ["csr", "coo"])
@pytest.mark.parametrize("name", ["b", "c"])
def test_sparse_tensors_are_refused_by_name(call, args, layout, name):
    b, c = torch.from_numpy(args["b"].copy()), torch.zeros(12, FEAT)
    dense = {"b": b, "c": c}[name]
    sparse = dense.to_sparse_csr() if layout == "csr" else dense.to_sparse()
    with pytest.raises(ArgumentError,
                       match=f"argument '{name}': expected a dense tensor, {SPARSE}"):
        call(*((sparse, c) if name == "b" else (b, sparse)))


@pytest.mark.parametrize("name", ["b", "c"])
def test_tensors_requiring_grad_are_refused_unless_under_no_grad(call, args, name):
    b, c = torch.from_numpy(args["b"].copy()), _out()
    {"b": b, "c": c}[name].requires_grad_()
    effect = "the result would carry no gradient" if name == "b" else "writing it would hide"
    with pytest.raises(ArgumentError, match=f"argument '{name}': {GRAD} \\({effect}"):
        call(b, c)
    assert torch.isnan(c).all()                            # nothing ran
    with torch.no_grad():
        call(b, c)
    np.testing.assert_allclose(c.detach().numpy(), args["expected"], rtol=1e-5, atol=1e-6)


def test_a_non_leaf_output_requiring_grad_is_refused(call, args):
    c = torch.zeros(12, FEAT, requires_grad=True) * 1.0
    with pytest.raises(ArgumentError, match=f"argument 'c': {GRAD}"):
        call(torch.from_numpy(args["b"]), c)


@pytest.mark.parametrize("name", ["b", "c"])
def test_tensors_carrying_a_forward_mode_tangent_are_refused(call, args, name):
    import torch.autograd.forward_ad as fwad
    b, c = torch.from_numpy(args["b"].copy()), _out()
    with fwad.dual_level():
        dual = {"b": b, "c": c}
        dual[name] = fwad.make_dual(dual[name], torch.ones_like(dual[name]))
        with pytest.raises(ArgumentError, match=f"argument '{name}': carries a forward-mode"):
            call(dual["b"], dual["c"])
        assert torch.isnan(c).all()                        # nothing ran
        call(b, c)                                         # plain tensors still run
    np.testing.assert_allclose(c.numpy(), args["expected"], rtol=1e-5, atol=1e-6)


def test_an_inference_output_is_refused_outside_inference_mode(call, args):
    """torch refuses to write an inference tensor outside inference mode; so does the kernel,
    on every path (it used to write it)."""
    with torch.inference_mode():
        c = _out()
        b = torch.from_numpy(args["b"].copy()) + 0          # an inference tensor, only read
    with pytest.raises(ArgumentError, match="argument 'c': is an inference tensor"):
        call(torch.from_numpy(args["b"].copy()), c)
    assert torch.isnan(c).all()                            # nothing ran
    plain = _out()
    call(b, plain)                                         # read: runs
    np.testing.assert_allclose(plain.numpy(), args["expected"], rtol=1e-5, atol=1e-6)
    with torch.inference_mode():
        call(b, c)                                         # inside inference mode: runs
    np.testing.assert_allclose(c.numpy(), args["expected"], rtol=1e-5, atol=1e-6)
