"""The short path of a repeated call on numpy arrays: ``spmm(M, X, out=Y)`` or
``sddmm(M, X, Y, out=V)`` on a ``SparseMatrix`` with float32 numpy operands of shapes an
earlier call of the same operator prepared.

Such a call needs none of the general path's Python checks: the kernel's C plan
(``runtime.native_call``) checks the arrays themselves (exactly ``numpy.ndarray``, float32,
C-contiguous, the prepared shapes, aligned, the output writable, nothing overlapping) and
declines anything else, which then takes the general path. What such a call still does in
Python is only what may apply to its shapes, decided once when it is prepared: counting a
large gathered operand for huge pages (``huge_pages.note_gathered``, after the kernel ran, so
that a call the C plan declines is counted once, by the general path), the cache-line copy of
a gathered operand where it may pay (``alignment.gather_ready``), and the launch's thread mode
(``threads.size_launches``); and, before any of it, whether torch is tracing the caller.

Why it matters: a call's Python runs after the previous kernel has pushed the interpreter's
code and data out of the L1 and L2 caches, so each line costs microseconds, not nanoseconds.
On the 2-core Intel VM, SpMM on pubmed at 32 features (0.25 ms of kernel) took 94 us more
through the general path than the kernel's C plan alone, and 20 us more through this one.

Example
-------
>>> prepare(M.numpy_calls, "spmm", bound, (X,), out, 0, M.nnz)
>>> run(M.numpy_calls, "spmm", (X,), out)        # out, or None: the general path
"""

from __future__ import annotations

import numpy as np

from ..runtime.threads import size_launches
from .alignment import copy_may_pay, gather_ready
from .graph_tensors import tracing
from .huge_pages import MIN_BYTES, note_gathered


class NumpyCall:
    """One prepared call: the bound kernel and what a call of these shapes must do besides.

    ``gathered``: the position among the operands of the one whose rows the kernel gathers
    (SpMM's ``X``, SDDMM's ``Y``)."""

    __slots__ = ("bound", "out_shape", "nbytes", "gathered", "gathers", "count_for_huge_pages",
                 "may_copy")

    def __init__(self, bound, operands: tuple, out_shape: tuple, gathered: int, gathers: int):
        array = operands[gathered]
        self.bound, self.out_shape, self.gathered, self.gathers = bound, out_shape, gathered, \
            gathers
        self.nbytes = bound.fixed_bytes + sum(a.nbytes for a in operands) \
            + 4 * int(np.prod(out_shape))
        self.count_for_huge_pages = array.nbytes >= MIN_BYTES
        self.may_copy = array.ndim == 2 and copy_may_pay(array.shape, gathers)

    def __call__(self, operands: tuple, out, matrix=None):
        """``out`` (a new array when None) filled by the kernel, or None with nothing written
        when its C plan declines the arrays. The call counts for huge pages once it ran (a
        declined one is counted by the general path). ``matrix``: what ``run_kernel`` needs
        besides (``plain_calls``: the caller's scipy matrix)."""
        if out is None:
            out = np.empty(self.out_shape, np.float32)
        gathered = operands[self.gathered]
        if self.may_copy:
            operands = list(operands)
            operands[self.gathered] = gather_ready(gathered, self.gathers)
        size_launches(self.nbytes)
        if not self.run_kernel((*operands, out), matrix):
            return None
        if self.count_for_huge_pages:
            note_gathered(gathered)
        return out

    def run_kernel(self, arrays: tuple, matrix) -> bool:   # pylint: disable=unused-argument
        """Run the kernel on the operands and output ``arrays``; False when its C plan
        declines them."""
        return self.bound.call_native(arrays)


def _key(kind: str, operands: tuple) -> tuple:
    return (kind, *[operand.shape for operand in operands])


def prepare(calls: dict, kind: str, bound, operands: tuple, out, gathered: int,
            gathers: int) -> None:
    """Keep in ``calls`` (a matrix's ``numpy_calls``) the call of kernel ``kind`` just made
    through the general path, ``bound`` on ``operands`` into ``out``, for later calls with
    operands of the same shapes, when every array is exactly a float32 numpy array and the
    kernel can be called natively."""
    arrays = (*operands, out)
    if bound.native_call and all(type(a) is np.ndarray and a.dtype == np.float32
                                 for a in arrays):
        calls[_key(kind, operands)] = NumpyCall(bound, operands, out.shape, gathered, gathers)


def run(calls: dict, kind: str, operands: tuple, out):
    """The result of a call of kernel ``kind`` on ``operands`` (each exactly a numpy array:
    the caller checks) that ``calls`` holds prepared, or None (nothing run) when it holds none
    for their shapes, ``out`` is neither None nor a numpy array of the prepared shape, torch
    is tracing the caller (``torch.compile``: the general path calls its operators), or the
    kernel's C plan declines the arrays."""
    if not calls or (out is not None and type(out) is not np.ndarray):
        return None
    call = calls.get(_key(kind, operands))
    if call is None or (out is not None and out.shape != call.out_shape) or tracing():
        return None
    return call(operands, out)
