"""The short path of a repeated call whose arrays reach the kernel's C plan as numpy arrays:
``spmm(M, X, out=Y)`` or ``sddmm(M, X, Y, out=V)`` on a ``SparseMatrix`` with float32 numpy
operands, or float32 CPU torch tensors (their numpy views), of shapes an earlier call of the
same operator, kind and first dtype prepared; and bfloat16 or float16 CPU torch tensors into a
given ``out`` under the autocast dtype of the call that prepared it (``HalfCall``, prepared by
the second such call, ``operators._call_prepared_half``).

Such a call needs none of the general path's Python checks: the kernel's C plan
(``runtime.native_call``) checks the arrays themselves (exactly ``numpy.ndarray``, the kernel's
dtypes, C-contiguous, the prepared shapes, aligned, the output writable, nothing overlapping)
and declines anything else, which then takes the general path. What such a call still does in
Python is only what may apply to its shapes, decided once when it is prepared: counting a large
gathered operand for huge pages (``huge_pages.note_gathered``, after the kernel ran, so that a
call the C plan declines is counted once, by the general path), the cache-line copy of SDDMM's
gathered ``Y`` where it may pay (``alignment.gather_ready``, numpy only, as on the general
path; SpMM's kernels realign ``X``'s rows themselves), and the launch's thread mode
(``threads.size_launches``: torch's OpenMP team for torch tensors); and, before any of it,
whether torch is tracing the caller. Torch tensors pass as the numpy views torch gives
(``runtime.kernel.torch_as_numpy``, which declines a tensor torch gives no view of: not on the
CPU, with a negative or conjugate bit, outgrowing its storage, requiring grad); a call autograd
records (a tensor requires grad in grad mode) takes the general path, and so does a float32
call under torch's autocast (which sets the result's dtype) and every call while torch traces
the caller; autograd learns that the output changed.

Why it matters: a call's Python runs after the previous kernel has pushed the interpreter's
code and data out of the L1 and L2 caches, so each line costs microseconds, not nanoseconds.
On the 2-core Intel VM, SpMM on pubmed at 32 features (0.25 ms of kernel) took 94 us more
through the general path than the kernel's C plan alone, and 20 us more through this one.
On float32 torch tensors at 32 features (medians of back-to-back calls, one process per run,
the two builds alternating, 3 runs, twice on 2026-11-29), whole calls took 0.211-0.222 and
0.214-0.238 ms through the general path against 0.196-0.203 and 0.207-0.216 through this one
on pubmed, 0.147-0.149 and 0.151-0.160 against 0.098-0.143 and 0.144-0.147 on facebook (the
kernel runs on torch's OpenMP team, whose wake-up varies more than the path). Half-precision
calls under autocast at 32 features (the same way, 3 runs, 2026-11-29), before the C plan took
bfloat16, with it, and with ``HalfCall``: pubmed 0.179-0.186, 0.172-0.182, 0.158-0.168 ms;
facebook 0.142-0.146, 0.135-0.144, 0.126-0.129; email-Enron 0.525-0.528, 0.510-0.516,
0.489-0.495.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir.ops
>>> from sparsetir.ops.operators import bind_kernel
>>> A = scipy.sparse.random(50, 40, density=0.1, format="csr", dtype=np.float32)
>>> M = sparsetir.ops.SparseMatrix(A)
>>> X, out = np.ones((40, 32), np.float32), np.zeros((50, 32), np.float32)
>>> bound = bind_kernel(M, "spmm", 32)            # M's arrays bound: it takes x, y
>>> bound(X, out)                                 # a first call, as the general path makes it
>>> prepare(M.numpy_calls, "spmm", bound, (X,), out, 0, M.nnz)
>>> Y = run(M.numpy_calls, "spmm", (X,), None)    # out, or None: the general path
>>> np.allclose(Y, A @ X, atol=1e-5)
True
"""

from __future__ import annotations

import sys

import numpy as np

from ..runtime.arguments import writes_inference_tensor
from ..runtime.kernel import torch_as_numpy
from ..runtime.threads import size_launches
from .alignment import COPIED, copy_may_pay, gather_ready
from .arrays import empty_on_line, in_dual_level, new_array, recorded, recorded_or_autocast
from .dtypes import autocast_dtype
from .graph_tensors import tracing
from .huge_pages import MIN_BYTES, note_gathered


class NumpyCall:
    """One prepared call: the bound kernel and what a call of these shapes must do besides.

    ``gathered``: the position among the operands of the one whose rows the kernel gathers
    (SpMM's ``X``, SDDMM's ``Y``)."""

    __slots__ = ("bound", "out_shape", "nbytes", "gathered", "gathers", "count_for_huge_pages",
                 "may_copy")

    def __init__(self, bound, operands: tuple, out_shape: tuple, gathered: int,
                 gathers: int | None, out_itemsize: int = 4):
        array = operands[gathered]
        self.bound, self.out_shape, self.gathered, self.gathers = bound, out_shape, gathered, \
            gathers
        self.nbytes = bound.fixed_bytes + sum(a.nbytes for a in operands) \
            + out_itemsize * int(np.prod(out_shape))
        self.count_for_huge_pages = array.nbytes >= MIN_BYTES
        self.may_copy = array.ndim == 2 and copy_may_pay(array.shape, gathers)

    torch_call = False

    def __call__(self, operands: tuple, out, matrix=None):
        """``out`` (a new array when None) filled by the kernel, or None with nothing written
        when its C plan declines the arrays. The call counts for huge pages once it ran (a
        declined one is counted by the general path). ``matrix``: what ``run_kernel`` needs
        besides (``plain_calls``: the caller's scipy matrix)."""
        if out is None:
            out = empty_on_line(self.out_shape)
        return out if self.run(operands, operands, out, matrix) else None

    def run(self, operands: tuple, arrays: tuple, out_array, matrix) -> bool:
        """Run the kernel on ``arrays`` (``operands``' numpy arrays) into ``out_array``;
        False, with nothing written, when its C plan declines them."""
        if self.may_copy:
            arrays = list(arrays)
            gathered = arrays[self.gathered]
            arrays[self.gathered] = gather_ready(gathered, self.gathers)
            if arrays[self.gathered] is not gathered \
                    and np.may_share_memory(out_array, gathered):
                return False           # the C plan would see the copy: the general path refuses
        size_launches(self.nbytes, self.torch_call)
        if not self.run_kernel((*arrays, out_array), matrix):
            return False
        if self.count_for_huge_pages:
            note_gathered(operands[self.gathered])
        return True

    def run_kernel(self, arrays: tuple, matrix) -> bool:   # pylint: disable=unused-argument
        """Run the kernel on the operands and output ``arrays``; False when its C plan
        declines them."""
        return self.bound.call_native(arrays, torch_views=self.torch_call)


class TorchCall(NumpyCall):
    """The same call on float32 CPU torch tensors: their numpy views go to the C plan, the
    launch runs on torch's OpenMP team, and the output's version counter is bumped."""

    __slots__ = ()
    torch_call = True

    def __init__(self, bound, operands: tuple, out_shape: tuple, gathered: int, gathers: int,
                 out_itemsize: int = 4):
        super().__init__(bound, operands, out_shape, gathered, gathers, out_itemsize)
        self.may_copy = False            # torch tensors are read where they are (general path)

    def __call__(self, operands: tuple, out, matrix=None):
        """As ``NumpyCall``'s, for torch tensors; None also under torch's autocast, when
        autograd would record the call (a tensor requires grad in grad mode), or when torch
        gives no numpy view of a tensor."""
        if recorded_or_autocast((*operands, out)):
            return None                  # the general path's graph_ops make it
        if out is None:
            out = new_array(True, self.out_shape)
        return self.run_tensors(operands, operands, out, matrix)

    def run_tensors(self, operands: tuple, tensors: tuple, out, matrix=None):
        """``out`` filled by the kernel run on ``tensors`` (the tensors it takes before
        ``out``; ``operands``, the caller's, as ``run`` counts them), or None with nothing
        written when torch gives no numpy view of one or the C plan declines them, or ``out``
        is an inference tensor outside inference mode (the general path refuses it)."""
        if writes_inference_tensor(out):
            return None
        arrays = torch_as_numpy((*tensors, out))
        if arrays is None or not self.run(operands, arrays[:-1], arrays[-1], matrix):
            return None
        sys.modules["torch"].autograd.graph.increment_version(out)
        return out


class HalfCall(TorchCall):
    """A call on bfloat16 or float16 CPU torch tensors into a given ``out``, as a first one
    made it through the general path (``operators._call_prepared_half``): under the autocast
    dtype it had (or none), with the operands in the kernel's order (``order``: the caller's
    position of each) followed by the tensors that call kept (``kept``: the matrix's values
    for weighted SpMM). Its C plan takes a bfloat16 tensor as its bits
    (``runtime.kernel.torch_as_numpy``) and checks the dtypes."""

    __slots__ = ("kept", "order", "autocast")

    def __init__(self, bound, operands: tuple, kept: tuple, out, gathered: int, gathers: int,
                 order: tuple):
        super().__init__(bound, operands + kept, tuple(out.shape), gathered, gathers,
                         out.element_size())
        self.kept, self.order, self.autocast = kept, order, autocast_dtype()

    def __call__(self, operands: tuple, out, matrix=None):
        """As ``TorchCall``'s; None also without ``out``, or under another autocast dtype
        than the preparing call's (autocast sets the result's dtype)."""
        if out is None or recorded((*operands, out)) or autocast_dtype() != self.autocast:
            return None
        return self.run_tensors(operands, tuple(operands[k] for k in self.order) + self.kept,
                                out, matrix)


def _key(kind: str, operands: tuple) -> tuple:
    return (kind, type(operands[0]), operands[0].dtype, *[operand.shape for operand in operands])


def prepare(calls: dict, kind: str, bound, operands: tuple, out, gathered: int,
            gathers: int) -> None:
    """Keep in ``calls`` (a matrix's ``numpy_calls``) the call of kernel ``kind`` just made
    through the general path, ``bound`` on ``operands`` into ``out``, for later calls with
    operands of the same kind and shapes, when every array is exactly a float32 numpy array
    (or every one exactly a float32 CPU torch tensor) and the kernel can be called natively."""
    if not bound.native_call:
        return
    arrays = (*operands, out)
    torch = sys.modules.get("torch")
    if all(type(a) is np.ndarray and a.dtype == np.float32 for a in arrays):
        made = NumpyCall
    elif torch is not None and all(type(a) is torch.Tensor and a.dtype is torch.float32
                                   and a.device.type == "cpu" for a in arrays):
        made = TorchCall
    else:
        return
    calls[_key(kind, operands)] = made(bound, operands, tuple(out.shape), gathered,
                                       gathers if kind in COPIED else None)


def prepare_half(calls: dict, kind: str, bound, operands: tuple, order: tuple, kept: tuple,
                 out, gathered: int, gathers: int) -> None:
    """Keep in ``calls`` the half-precision torch call of kernel ``kind`` that just ran
    ``bound`` on ``operands`` (in the kernel's order; ``order``: the caller's position of
    each), ``kept`` and ``out``, for later calls of the same kind, shapes and first dtype
    under the same autocast dtype; ``gathered`` as for ``prepare``, in the caller's order.
    Nothing when the kernel has no C plan or the same call is kept already; a call kept for
    another kernel or autocast dtype is replaced."""
    callers = [None] * len(operands)
    for operand, position in zip(operands, order):
        callers[position] = operand
    key = _key(kind, callers)
    kept_call = calls.get(key)
    if bound.native_call and not (isinstance(kept_call, HalfCall) and kept_call.bound is bound
                                  and kept_call.autocast == autocast_dtype()):
        calls[key] = HalfCall(bound, tuple(callers), tuple(kept), out, gathered, gathers, order)


def may_take(operands: tuple) -> bool:
    """Whether the short path may take ``operands``: all exactly numpy arrays, or all exactly
    torch tensors, none nested, while torch is not tracing the caller and no forward-mode AD
    level is open (the general path refuses nested tensors and tangents by name). Decided
    before the matrix's attributes are read (``torch.compile`` cannot trace a read of its
    numpy arrays)."""
    kind_of = type(operands[0])
    if any(type(operand) is not kind_of for operand in operands):
        return False
    if kind_of is np.ndarray:
        return True
    torch = sys.modules.get("torch")
    return torch is not None and kind_of is torch.Tensor and not tracing() \
        and not in_dual_level() and not any(operand.is_nested for operand in operands)


def run(calls: dict, kind: str, operands: tuple, out):
    """The result of a call of kernel ``kind`` on ``operands`` (which ``may_take``: the caller
    checks) that ``calls`` holds prepared for their kind and shapes, or None (nothing run) when
    it holds none, ``out`` is not None and of another type than the operands or another shape
    than the prepared one, torch is tracing the caller (``torch.compile``: the general path
    calls its operators), or the call declines the arrays."""
    if not calls:
        return None
    call = calls.get(_key(kind, operands))
    if call is None or (out is not None and (type(out) is not type(operands[0])
                                             or out.shape != call.out_shape)) or tracing():
        return None
    return call(operands, out)
