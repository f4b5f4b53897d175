"""A short path through torch's dispatcher for the custom operators of ``custom_ops``.

``torch.library.custom_op`` runs an operator's kernel behind two Python layers, each reached
from C++: its autograd kernel, which for a call that records nothing enters
``_AutoDispatchBelowAutograd``, builds a metadata object and redispatches through the
dispatcher, and its backend kernel, which wraps ours in a ``torch._dynamo`` disable and checks
the outputs for aliasing. On a 16 x 16 graph that was about 8 us of the 17 us an operator call
cost more than the eager call of the same kernel (``benchmarks/call_overhead.py``).

``custom_operator`` defines the operator with ``custom_op`` as before (its schema, fake
implementation, ``register_autograd``, ``opcheck`` and ``torch.export`` are unchanged) and
registers two more kernels for CPU tensors, which torch prefers to ``custom_op``'s:

- ``AutogradCPU``: a call that autograd records (grad enabled and an input that requires grad)
  goes to ``custom_op``'s autograd kernel, so ``register_autograd`` applies as it would; any
  other call whose next kernel is the CPU one (plain CPU tensors: no fake tensor, torch
  dispatch mode or functionalization, which redispatch as before) runs the kernel at once;
- ``CPU``: the kernel itself, for calls that reach it through the dispatcher.

Both run with ``torch.compiler.disable`` (as ``custom_op`` runs its kernels), so a kernel that
runs while dynamo's frame hook is set is never traced. The kernels' outputs must not alias
their inputs (``custom_ops._fresh``): nothing checks it at run time any more, while
``opcheck`` does. The kernels use what ``custom_op`` itself builds on
(``torch._library.autograd.make_autograd_impl``, ``_C._AutoDispatchBelowAutograd``, the
dispatch key sets), private to torch and pinned with it (2.13); ``tests/compile``'s
``test_cpu_dispatch.py`` fails where they change.

Example
-------
>>> @custom_operator("sparsetir_docs::twice")
... def twice(x: torch.Tensor) -> torch.Tensor:
...     return x * 2
>>> _ = twice.register_fake(lambda x: torch.empty_like(x))
>>> twice(torch.ones(3))                        # a CPU call: the short path
tensor([2., 2., 2.])
>>> torch.ops.sparsetir_docs.twice(torch.ones(2))
tensor([2., 2.])
"""

from __future__ import annotations

import functools

import torch
from torch import _C
from torch._library.autograd import make_autograd_impl

_BELOW_AUTOGRAD = _C._after_autograd_keyset
_BELOW_INPLACE_OR_VIEW = _C._after_ADInplaceOrView_keyset
_CPU = _C.DispatchKey.CPU

_LIBRARIES: dict = {}
"""namespace -> the ``torch.library.Library`` fragment holding the short-path kernels."""


def custom_operator(qualname: str):
    """``torch.library.custom_op(qualname, mutates_args=())`` whose CPU calls take the short
    path of the module docstring; returns the ``CustomOpDef``."""
    def define(kernel):
        op = torch.library.custom_op(qualname, mutates_args=())(kernel)
        namespace, name = qualname.split("::")
        library = _LIBRARIES.get(namespace)
        if library is None:
            library = _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
        library.impl(name, torch.compiler.disable(kernel), "CPU")
        library.impl(name, torch.compiler.disable(_autograd_kernel(op, kernel)), "AutogradCPU",
                     with_keyset=True)
        return op
    return define


@functools.lru_cache(maxsize=64)
def _cpu_is_next(raw_keyset: int) -> bool:
    """Whether the CPU kernel is the next one below autograd for the dispatch key set whose
    ``raw_repr`` is ``raw_keyset`` (the set of plain CPU tensors; not one that holds a fake
    tensor's, a torch dispatch mode's or functionalization's key). Kept by the set: reading it
    again costs more than the call it saves."""
    keyset = _C.DispatchKeySet.from_raw_repr(raw_keyset)
    return (keyset & _BELOW_INPLACE_OR_VIEW).highestPriorityTypeId() == _CPU


def _autograd_kernel(op, kernel):
    """The ``AutogradCPU`` kernel of ``op`` (see the module docstring)."""
    overload = op._opoverload                       # pylint: disable=protected-access
    recorded = make_autograd_impl(overload, op)     # reads register_autograd's functions
    is_grad_enabled, any_requires_grad = _C.is_grad_enabled, _C._any_requires_grad
    below_autograd = _C._AutoDispatchBelowAutograd

    def autograd_cpu(keyset, *args):
        if is_grad_enabled() and any_requires_grad(*args):
            return recorded(keyset, *args)
        with below_autograd():
            if _cpu_is_next(keyset.raw_repr()):
                return kernel(*args)
            return overload.redispatch(keyset & _BELOW_AUTOGRAD, *args)
    return autograd_cpu
