"""``sparsetir.warmup``: compile, before training starts, every kernel a model (or a list of
operator calls) will run, forward and backward, with a line on stderr for each compile.

It runs the model once on the inputs given (the graph and features it will be trained on:
kernels are specialised by dtype and feature sizes, so the shapes must be the real ones) and
takes the gradient of the sum of its outputs with respect to its parameters and the inputs that
require grad, through ``torch.autograd.grad``: every backward kernel compiles, and no ``.grad``
changes, no optimizer step is taken (dropout draws random numbers, batch norm in training mode
updates its statistics, as a forward pass does). Each kernel compiled is printed as it is
done (``driver.compile_log``'s records); kernels found in the disk cache are counted. Later
calls, in this process, or in another through the disk cache, compile nothing.

Where background compiles are on, a model's ``sparsetir.nn`` layers started compiling their
kernels in background workers when they were built (``driver.background``, ``nn.kernel_plans``): the model's calls here wait for
the kernel they need while the others go on compiling, and the workers' compiles are printed
and counted here as they end. Operator calls run here, one after another.

Example
-------
>>> import numpy as np, scipy.sparse, torch, sparsetir, sparsetir.nn
>>> A = scipy.sparse.random(100, 100, density=0.05, format="csr", dtype=np.float32)
>>> M = sparsetir.ops.SparseMatrix(A + scipy.sparse.identity(100, np.float32, "csr"))  # the graph
>>> X = torch.randn(100, 16)                                                         # the features
>>> conv = sparsetir.nn.GATConv(16, 5, num_heads=3)
>>> report = sparsetir.warmup(conv, M, X)      # prints its progress on stderr (below)
>>> report.compiled + report.loaded <= 10   # GAT's 10 kernels, less those already in memory
True
>>> sparsetir.warmup(conv, M, X, progress=False).compiled     # all kept: nothing to compile
0

What the first call prints on stderr, in a process whose disk cache does not have them yet::

    sparsetir warmup: [1] compiled ops gsddmm add float32 (3,) (True,) (True,) u v 0 0 for llvm in 1.1 s (not in the disk cache)
    ...
    sparsetir warmup: 10 kernels compiled, 0 loaded from the disk cache, 4.4 s
"""

from __future__ import annotations

import logging
import sys
import time
from typing import NamedTuple

from .driver.compile_log import EVENT, LOGGER
from .errors import SparseTIRTypeError


class WarmupReport(NamedTuple):
    """What ``warmup`` did: kernels compiled, kernels loaded from the disk cache, seconds."""

    compiled: int
    loaded: int
    seconds: float


def warmup(model_or_ops, *inputs, backward: bool = True, progress: bool = True,
           **kwargs) -> WarmupReport:
    """Compile the kernels ``model_or_ops`` runs: a ``torch.nn.Module`` called as
    ``model(*inputs, **kwargs)``, or a list of callables taking no argument (operator calls:
    ``lambda: sparsetir.ops.spmm(M, X)``). With ``backward`` the gradient of the sum of what
    it returns is taken too (the backward kernels); ``progress`` prints a line on stderr per
    compiled kernel and a summary."""
    calls = _calls(model_or_ops, inputs, kwargs)
    listener = _Progress(progress)
    level = LOGGER.level
    LOGGER.addHandler(listener)
    LOGGER.setLevel(logging.DEBUG)
    start = time.perf_counter()
    try:
        for call, roots in calls:
            outputs = call()
            if backward:
                _backward(outputs, roots())
    finally:
        LOGGER.setLevel(level)
        LOGGER.removeHandler(listener)
    report = WarmupReport(listener.compiled, listener.loaded, time.perf_counter() - start)
    listener.say(f"{report.compiled} kernels compiled, {report.loaded} loaded from the disk "
                 f"cache, {report.seconds:.1f} s")
    return report


def _calls(model_or_ops, inputs: tuple, kwargs: dict) -> list:
    """``[(call, roots)]``: what to run, and the tensors whose gradients the backward takes."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model_or_ops, torch.nn.Module):
        model = model_or_ops

        def roots():
            return [p for p in model.parameters() if p.requires_grad] + \
                [x for x in _tensors(inputs) if x.requires_grad]
        return [(lambda: model(*inputs, **kwargs), roots)]
    if inputs or kwargs:
        raise SparseTIRTypeError("warmup takes inputs for a torch.nn.Module only; give "
                                 "operator calls as callables taking no argument")
    ops = list(model_or_ops) if isinstance(model_or_ops, (list, tuple)) else [model_or_ops]
    for op in ops:
        if not callable(op):
            raise SparseTIRTypeError(
                "warmup takes a torch.nn.Module or a list of callables taking no argument "
                f"(lambda: sparsetir.ops.spmm(M, X)), got {type(op).__name__}")
    return [(op, list) for op in ops]


def _tensors(value) -> list:
    """The torch tensors in ``value`` (a tensor, or tuples, lists and dicts of them)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _backward(outputs, roots: list) -> None:
    """The gradient of the sum of ``outputs`` with respect to ``roots`` and the leaves they
    depend on (each kernel of the backward pass runs), stored nowhere."""
    tensors = [t for t in _tensors(outputs) if t.requires_grad]
    if not tensors:
        return
    torch = sys.modules["torch"]
    loss = sum(t.sum() for t in tensors)
    if not roots:              # operator calls: the leaves that require grad
        roots = _leaves(loss)
    if roots:
        torch.autograd.grad(loss, roots, allow_unused=True)


def _leaves(tensor) -> list:
    """The leaf tensors that require grad under ``tensor``'s graph."""
    found, seen, stack = [], set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)    # AccumulateGrad: a leaf
        if variable is not None:
            found.append(variable)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return found


class _Progress(logging.Handler):
    """Counts the compile records while ``warmup`` runs and prints a line for each compile."""

    def __init__(self, show: bool):
        super().__init__(logging.DEBUG)
        self.show = show
        self.compiled = 0
        self.loaded = 0

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, EVENT, None)
        if event == "loaded":
            self.loaded += 1
        elif event == "compiled":
            self.compiled += 1
            self.say(f"[{self.compiled}] {record.getMessage()}")

    def say(self, line: str) -> None:
        if self.show:
            print(f"sparsetir warmup: {line}", file=sys.stderr, flush=True)
