"""The short path of a repeated plain call: ``spmm(A, X, out=Y)`` or ``sddmm(A, X, Y, out=V)``
with ``A`` a scipy CSR matrix (exactly ``csr_matrix`` or ``csr_array``) and float32 numpy
operands, or a torch sparse CSR tensor and float32 CPU torch tensors, of sizes an earlier plain
call prepared.

The plain call (``ops.plain``) passes the caller's own index arrays to the kernel at every call
and checks them every time, so an array changed in place is checked like a new one. Through
the general path, the Python before the kernel cost about 0.8 ms a call on an arxiv-size graph
at 128 features, although each of its steps is cheap: a kernel that streams tens of megabytes
leaves the interpreter's code and data out of the caches, so each step pays misses (the
numpy-array short path of a ``SparseMatrix``, ``numpy_calls``, says more). Here a call of
prepared sizes does what it must and nothing else:

- cuts the row tiles from the caller's ``indptr`` (one binary search per tile, as
  ``tiles.balanced_row_bounds``);
- checks the ends of ``indptr`` and that the tiles start at row 0, and leaves the rest to
  the kernel, which checks each tile's or each row's pointers and indices before or where it
  reads them (``plain.checks_inline``, ``backend.inline_checks``: row pointers
  non-decreasing, column indices in range and strictly increasing within each row) and
  refuses the call after its parallel loop;
- runs the kernel through its C plan (``BoundKernel.call_native``), which checks each array's
  type, dtype, size, alignment and that the output overlaps nothing. Unweighted SpMM and SDDMM
  do not pass ``data`` to their kernel, so an output that may overlap the matrix's ``data``
  takes the general path, which refuses it as an output over any argument.

Torch tensors go as the numpy views torch gives (``numpy_calls.TorchCall``: the kernel runs on
torch's OpenMP team, the output's version counter is bumped), and a call autograd would record
(a tensor requires grad in grad mode) or made under torch's autocast takes the general path.
On the R-MAT graph of arxiv size with int64 indices (as torch keeps them) the general path's
Python cost about 0.9 ms a call, more than the checks. Operands that are not C-contiguous
float32 arrays, whatever either plan declines, and indices the checks refuse take the general
path, which sorts, copies or raises as before. Nothing of
the matrix is kept between calls: the prepared call is keyed by the shapes and dtypes of the
matrix's arrays, the operands' shapes and the row tiles, not by the matrix, and holds only the
kernel bound to those sizes. The second plain call of some sizes prepares it; the third and
later ones take it.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir.ops
>>> A = scipy.sparse.random(37, 23, density=0.1, format="csr", dtype=np.float32)
>>> X, Y = np.ones((23, 24), np.float32), np.zeros((37, 24), np.float32)
>>> run("spmm", A, (X,), Y) is None          # no call of these sizes prepared yet
True
>>> for _ in range(2):     # plain calls (general path): the second calls prepare("spmm", ...)
...     _ = sparsetir.ops.spmm(A, X, out=Y)
>>> run("spmm", A, (X,), Y) is Y             # Y, or None: take the general path
True
>>> np.allclose(Y, A @ X, atol=1e-5)
True
"""

from __future__ import annotations

import sys
from collections import OrderedDict

import numpy as np
import scipy.sparse

from ..errors import ArgumentError
from ..runtime.native_call import available as native_calls_available
from .graph_tensors import tracing
from .alignment import COPIED
from .numpy_calls import NumpyCall, TorchCall
from .plain import PlainCSR
from .tiles import row_tiles_for_threads, tile_targets

SCIPY_CSR = (scipy.sparse.csr_matrix, scipy.sparse.csr_array)
"""The matrix types the short path takes (exactly these: a subclass takes the general path)."""

KEPT = 64
"""Prepared plain calls kept, the least recently used dropped first."""
SEEN = 1024
"""Sizes of plain calls made once that are remembered (all are forgotten past that)."""

FLOAT32 = np.dtype(np.float32)

_calls: OrderedDict = OrderedDict()
_seen: set = set()


class PlainCall(NumpyCall):
    """A prepared plain call: the kernel bound to the sizes only (``validate=False``: it
    checks the indices inside at every call, ``inline_checks``), and the tiles' nonzero
    targets. Called with the matrix's arrays as a ``PlainCSR`` or a scipy matrix."""

    __slots__ = ("row_count", "targets", "weighted", "inline_checks")

    def __init__(self, kernel, tiles: int, inline_checks: str, plain, operands: tuple,
                 out_shape: tuple, gathered: int, weighted: bool, gathers: int | None):
        m, n = plain.shape
        bound = kernel.bind(validate=False, t=tiles, m=m, n=n, nnz=plain.nnz,
                            rows=plain.rows())
        super().__init__(bound, operands, out_shape, gathered, gathers)
        self.nbytes += plain.indptr.nbytes + plain.indices.nbytes \
            + (plain.data.nbytes if weighted else 0)
        self.row_count, self.weighted, self.inline_checks = m, weighted, inline_checks
        self.targets = tile_targets(plain.nnz, tiles, plain.indptr.dtype)

    def run_kernel(self, arrays: tuple, matrix) -> bool:
        """Cut the tiles from ``matrix.indptr``, check the ends of ``indptr``, run the kernel,
        which checks the rest; False when an operand is not a C-contiguous float32 array, the
        output may overlap a ``data`` the kernel does not take (its C plan would not see it),
        or a check or the C plan refuses the arrays. Nothing is written then, except when the
        kernel's own checks refuse the indices: it has written part of the output, and the
        general path then writes all of it, or raises."""
        for array in arrays:
            if array.dtype != FLOAT32 or not array.flags.c_contiguous:
                return False
        if not self.weighted and np.may_share_memory(arrays[-1], matrix.data):
            return False                 # by bounds: the general path's exact test decides
        indptr, indices = matrix.indptr, matrix.indices
        tile_ptr = np.searchsorted(indptr, self.targets).astype(np.int32)
        tile_ptr[-1] = self.row_count        # past trailing empty rows; checked with the rest
        args = (matrix.data, *arrays) if self.weighted else arrays
        args = (*args, tile_ptr, indptr, indices)
        # inside, each tile's and row's pointers are checked; here what no loop sees: the
        # ends of indptr, and that the tiles start at row 0 (they end at the last)
        if indptr[0] != 0 or indptr[-1] != indices.size or tile_ptr[0] != 0:
            return False                 # the general path names the problem
        try:
            return self.bound.call_native(args)
        except ArgumentError:            # an index the kernel's checks refused
            return False


class PlainTorchCall(PlainCall, TorchCall):
    """A prepared plain call on a torch sparse CSR tensor and float32 CPU torch tensors."""

    __slots__ = ()

    def run_tensors(self, operands: tuple, tensors: tuple, out, matrix=None):
        """As ``TorchCall``'s; when a kernel that checks its indices inside refused them, it
        wrote part of ``out``: its version counter is bumped before the general path writes
        it again or raises, so that autograd refuses a graph that saved it."""
        result = super().run_tensors(operands, tensors, out, matrix)
        if result is None:
            sys.modules["torch"].autograd.graph.increment_version(out)
        return result


def may_take(matrix, operands: tuple) -> bool:
    """Whether ``run`` may take the call: exactly a scipy CSR matrix with numpy operands, or
    a torch sparse CSR tensor with torch tensors (``numpy_calls.may_take`` decides the
    rest)."""
    if type(matrix) in SCIPY_CSR:
        return type(operands[0]) is np.ndarray
    torch = sys.modules.get("torch")
    return torch is not None and type(matrix) is torch.Tensor \
        and type(operands[0]) is torch.Tensor and matrix.layout is torch.sparse_csr


def _key(kind: str, matrix, operands: tuple, tiles: int) -> tuple:
    """The shapes and dtypes of the matrix's arrays (unweighted SpMM and SDDMM do not pass
    ``data`` to their kernel, yet a float64 or misshapen ``data`` must reach the general path,
    which refuses it), the operands' shapes (``run_kernel`` checks their dtype and layout) and
    the row tiles."""
    indptr, indices, data = matrix.indptr, matrix.indices, matrix.data
    return (kind, type(operands[0]), matrix.shape, tiles, indptr.shape, indptr.dtype,
            indices.shape, indices.dtype, data.shape, data.dtype,
            *[operand.shape for operand in operands])


def prepare(kind: str, kernel, tiles: int, inline_checks: str, plain, matrix,
            operands: tuple, out, gathered: int) -> None:
    """Note the plain call of ``kernel`` (the operator ``kind``'s, cut into ``tiles`` row
    tiles; ``inline_checks``: where it checks the indices inside its loops) just made
    through the general path on ``matrix`` (``plain``: its arrays), on ``operands`` into
    ``out``; from the second call of the same sizes, keep it for later ones.
    Only when ``matrix`` is a scipy CSR matrix and every array exactly a float32 numpy array,
    or ``matrix`` a torch sparse CSR tensor and every array exactly a float32 CPU torch tensor;
    none empty, and kernels can be called natively here. Calls whose sizes change at every
    call (sampled subgraphs) so cost a set lookup, not a prepared call each."""
    arrays = (*operands, out)
    torch = sys.modules.get("torch")
    if type(matrix) in SCIPY_CSR \
            and all(type(a) is np.ndarray and a.dtype == FLOAT32 for a in arrays):
        made = PlainCall
    elif torch is not None and type(matrix) is torch.Tensor \
            and all(type(a) is torch.Tensor and a.dtype is torch.float32
                    and a.device.type == "cpu" for a in arrays):
        made = PlainTorchCall
    else:
        return
    if not plain.nnz or not native_calls_available() \
            or not all(a.shape and all(a.shape) for a in arrays):
        return
    key = _key(kind, plain, operands, tiles)
    if key in _calls:
        return                          # kept already: its C plan declined this call's arrays
    if key not in _seen:
        if len(_seen) >= SEEN:
            _seen.clear()
        _seen.add(key)
        return
    call = made(kernel, tiles, inline_checks, plain, operands, tuple(out.shape), gathered,
                kind == "spmm", plain.nnz if kind in COPIED else None)
    if call.bound.native_call:
        _calls[key] = call
        while len(_calls) > KEPT:
            try:
                _calls.popitem(last=False)
            except KeyError:            # another thread emptied it meanwhile
                break


def run(kind: str, matrix, operands: tuple, out):
    """The result of plain call ``kind`` on ``matrix`` and ``operands`` (as ``may_take``
    takes them: the caller checks), or None (nothing written) when no call of their sizes was
    prepared, ``out`` is neither None nor of the operands' kind and the prepared shape, torch
    is tracing the caller, or a check or C plan refuses the arrays."""
    if not _calls or (out is not None and type(out) is not type(operands[0])):
        return None
    if type(matrix) not in SCIPY_CSR:
        matrix = PlainCSR.of(matrix)            # numpy views of the tensor's arrays
        if matrix is None:
            return None
    key = _key(kind, matrix, operands, row_tiles_for_threads())
    call = _calls.get(key)
    if call is None or (out is not None and tuple(out.shape) != call.out_shape) or tracing():
        return None
    try:
        _calls.move_to_end(key)
    except KeyError:                    # another thread dropped it meanwhile: still usable
        pass
    return call(operands, out, matrix)


def clear() -> None:
    """Forget every prepared plain call and the sizes seen once."""
    _calls.clear()
    _seen.clear()
