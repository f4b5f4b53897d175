"""The kernels a layer will call, compiled in the background when the layer is built.

A layer knows, once built, its dtype and feature sizes, and so the ``sparsetir.ops`` calls
its forward makes (``Call``: an operator's name and its operands, ``Nodes(shape)`` /
``Edges(shape)`` for per-node and per-edge tensors of those feature shapes, anything else
passed as it is). ``precompile(calls, dtype)`` runs each call on a small graph in the
background (``driver.background``): forward, then the gradient of its result with respect to
its operands, through the same operators and autograd functions as the layer's training step,
so exactly the kernels of that step are compiled (kernels are specialised by operator, dtype
and feature sizes, not by the graph). The layer's first forward then finds them made, or waits
for the one it needs while it is compiled. Each call is submitted once per process.

A kernel that also depends on the graph (the CPU kernels prefetch the rows they gather when
the gathered operand outgrows two L2 caches: ``schedule.operators.prefetch_distance``) is
planned for a graph below that size; on a larger graph the first forward compiles its own.

Example
-------
>>> calls = [Call("u_mul_e_sum", (Nodes((4, 16)), Edges((4, 1))))]
>>> precompile(calls, "float32")       # returns at once; the kernels compile meanwhile
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
import scipy.sparse
import torch

from .. import ops
from ..driver import background
from ..driver.compile_log import LOGGER


class Nodes(NamedTuple):
    """A per-node operand of feature shape ``shape`` (``grad``: the step needs its gradient)."""
    shape: tuple
    grad: bool = True


class Edges(NamedTuple):
    """A per-edge operand of feature shape ``shape`` (``grad``: the step needs its gradient)."""
    shape: tuple
    grad: bool = True


class Call(NamedTuple):
    """``sparsetir.ops.<op>(M, *operands)``, operands as in the module docstring."""
    op: str
    operands: tuple


_SUBMITTED: set = set()
_LOCK = threading.Lock()


def precompile(calls: list, dtype) -> None:
    """Compile, in the background, the kernels of ``calls`` (``Call``) with their gradients,
    for operands of ``dtype`` (a torch dtype or its name); nothing when background compiles
    are off or every call was submitted before."""
    if not background.enabled():
        return
    name = str(dtype).replace("torch.", "")
    with _LOCK:
        new = [call for call in calls if (call, name) not in _SUBMITTED]
        _SUBMITTED.update((call, name) for call in new)
    for call in new:
        background.submit(_planned, call, name)


def _planned(call: Call, dtype: str) -> None:
    """``run_with_gradient`` in a background worker: a kernel's failed compile is reported
    with the kernel (raised where it is needed); any other error is a wrong plan, logged."""
    try:
        run_with_gradient(call, dtype)
    except Exception as error:  # pylint: disable=broad-exception-caught
        if not background.held_by_kernel(error):
            LOGGER.warning("planning %s for %s failed: %r", call, dtype, error, exc_info=error)


def run_with_gradient(call: Call, dtype: str) -> None:
    """Run ``call`` on a small graph (``small_graph``) with zero operands, and take the
    gradient of the sum of its result with respect to those whose ``grad`` is set."""
    graph = small_graph()
    rows = {Nodes: graph.shape[1], Edges: graph.nnz}
    leaves, operands = [], []
    for operand in call.operands:
        if isinstance(operand, (Nodes, Edges)):
            tensor = torch.zeros((rows[type(operand)],) + tuple(operand.shape),
                                 dtype=getattr(torch, dtype), requires_grad=operand.grad)
            if operand.grad:
                leaves.append(tensor)
            operand = tensor
        operands.append(operand)
    result = getattr(ops, call.op)(graph, *operands)
    if leaves:
        torch.autograd.grad(result.sum(), leaves, allow_unused=True)


def small_graph() -> ops.SparseMatrix:
    """A 4-node graph with self-loops and one node of two in-edges."""
    pattern = np.eye(4, dtype=np.float32)
    pattern[0, 1] = 1.0
    return ops.SparseMatrix(scipy.sparse.csr_matrix(pattern))
