"""Calls that torch cannot trace, because they read the values of arrays: they run eagerly
under ``torch.compile`` (a graph break) and are refused by name under ``torch.export``.

Making a ``SparseMatrix`` (its checks read the arrays' values), a scipy matrix passed where a
``SparseMatrix`` goes (made into one at each call), a matrix's numpy arrays (``in_degrees()``,
``transposed()``, ...: ``watched``), ``segment_softmax`` (it makes a matrix of its segments)
and ``edge_softmax`` with ``eids`` or ``norm_by="src"`` go through ``eagerly``.
Each kind is an ``Untraceable``: its ``run`` is a ``torch.compiler.disable`` whose reason is
the kind's message, made when this module is imported (dynamo cannot make one while it
traces). Called while dynamo traces, it breaks the graph (``fullgraph=True``: torch's
``Unsupported`` error, carrying the message) and runs with dynamo off, nothing it calls traced;
``torch.export``'s non-strict tracing, which runs no call eagerly, gets ``error(message)``.

Example
-------
>>> import numpy as np
>>> from sparsetir import ops
>>> f = torch.compile(lambda x: ops.segment_softmax(np.array([2, 1]), x), backend="eager")
>>> f(torch.zeros(3, 1)).ravel().tolist()        # segment_softmax ran eagerly
[0.5, 0.5, 1.0]
>>> torch._dynamo.reset()
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from ..errors import SparseTIRError, SparseTIRTypeError
from .graph_tensors import tracing


def _call(function: Callable, *args, **kwargs):
    """``function(*args, **kwargs)``: what each ``Untraceable.run`` wraps."""
    return function(*args, **kwargs)


class Untraceable(NamedTuple):
    """A kind of call that torch cannot trace (it reads the values of arrays): ``torch.export``
    refuses it with ``error(message)``; ``torch.compile`` calls it through ``run``, a
    ``torch.compiler.disable`` whose reason is ``message``, so dynamo breaks the graph there and
    runs it eagerly, nothing it calls traced (``fullgraph=True``: torch's ``Unsupported``
    error, carrying ``message``)."""
    error: type
    message: str
    run: Callable


def _untraceable(error: type, message: str) -> Untraceable:
    """The ``Untraceable`` refused with ``error(message)``, its ``run`` made now (dynamo
    cannot make it while it traces)."""
    return Untraceable(error, message, torch.compiler.disable(_call, reason=message))


MADE_INSIDE = _untraceable(
    SparseTIRTypeError,
    "a SparseMatrix cannot be made inside torch.compile / torch.export (its checks read the "
    "arrays' values; torch.compile makes it eagerly, a graph break): make it once outside the "
    "compiled function and pass it in, or keep it on the module")
NOT_A_MATRIX = _untraceable(
    SparseTIRTypeError,
    "under torch.compile / torch.export the matrix must be a SparseMatrix made outside the "
    "compiled function (a scipy matrix is converted eagerly, at each call, a graph break; "
    "dynamo cannot take a torch sparse tensor at all): wrap it once with "
    "sparsetir.ops.SparseMatrix(A) before the call and pass that")
SOFTMAX_FORM = _untraceable(
    SparseTIRError,
    "edge_softmax with eids or norm_by='src' cannot be traced (torch.compile runs it eagerly, "
    "a graph break; torch.export refuses it): call it outside the compiled region")
MATRIX_ARRAYS = _untraceable(
    SparseTIRTypeError,
    "a SparseMatrix's numpy arrays (in_degrees(), out_degrees(), empty_rows(), edge_ids(), "
    "transposed(), transposed_pattern(), reorder(), to_scipy()) cannot be traced by dynamo "
    "(torch.compile reads them eagerly, a graph break, as writable copies): read them once "
    "outside the compiled function and pass tensors in")
SEGMENT_SOFTMAX = _untraceable(
    SparseTIRError,
    "segment_softmax cannot be traced (torch.compile runs it eagerly, a graph break; "
    "torch.export refuses it): it makes a SparseMatrix of the segments; call it outside the "
    "compiled region, or edge_softmax on a matrix made outside it")


def watched() -> bool:
    """Whether dynamo traces this call or watches the frames it makes: inside
    ``torch.compile``'s trace, or in the eager part of a compiled function (a graph break,
    a frame it skipped), where dynamo still compiles each frame a call makes and any value it
    returns goes back to traced code. Outside ``torch.compile`` (its frame hook unset) and
    under ``torch.export``'s non-strict tracing (which runs Python as it is) False, at the
    cost of one C call.

    Example
    -------
    >>> watched()
    False
    """
    if torch.compiler.is_dynamo_compiling():
        return True
    hook = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    return hook is not None and hook.get_eval_frame_callback() is not None


def eagerly(untraceable: Untraceable, function: Callable, *args, **kwargs):
    """``function(*args, **kwargs)``, a call of the kind ``untraceable``, run with dynamo off:
    inside ``torch.compile``'s trace that is a graph break (``fullgraph=True`` refuses it,
    torch's error carrying ``untraceable.message``); under ``torch.export``'s non-strict
    tracing (which runs no call eagerly) it is refused with ``untraceable.error``. Outside a
    trace it runs as it is, dynamo off: a compiled function may run it between two graphs,
    where dynamo would otherwise trace what it calls one function at a time.

    Example
    -------
    >>> eagerly(SEGMENT_SOFTMAX, sorted, [3, 1, 2])    # not traced: run as it is, dynamo off
    [1, 2, 3]
    """
    if tracing() and not torch.compiler.is_dynamo_compiling():
        raise untraceable.error(untraceable.message)
    return untraceable.run(function, *args, **kwargs)
