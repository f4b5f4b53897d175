"""``spmm`` and ``sddmm``: argument handling around the compiled kernels.

Example
-------
>>> # Y = spmm(M, X); Y = spmm(M, X, weighted=False); vals = sddmm(M, X, Y)
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

import numpy as np

from ..errors import ArgumentError, SparseTIRTypeError, SparseTIRValueError
from ..lower import lower_sparse_iter
from .arrays import (DenseOperand, check_output, check_tensor, new_array, reordered_view,
                     writable_view)
from ..driver.build_module import build
from ..driver.cache import remembered
from .kernels import KERNELS
from .matrix import SparseMatrix, as_sparse_matrix
from ..schedule.operators import prefetch_distance, schedule_for

def _tiles() -> int:
    """Row tiles per call: enough that equal-nonzero tiles even out over the threads TVM
    starts (``TVM_NUM_THREADS``, the usable cores when it is unset or not a positive number)."""
    return _tiles_for(os.environ.get("TVM_NUM_THREADS", ""))


@lru_cache(maxsize=None)
def _tiles_for(num_threads: str) -> int:
    threads = int(num_threads) if num_threads.isascii() and num_threads.isdigit() \
        and int(num_threads) > 0 else len(os.sched_getaffinity(0))
    return 8 * threads


def _run(bound, user_names: dict, *args) -> None:
    """Call a bound kernel; argument errors name the operator's parameters (``user_names``:
    kernel parameter -> the name users know)."""
    try:
        bound(*args)
    except ArgumentError as err:
        message = str(err)
        for internal, user in user_names.items():
            message = message.replace(f"'{internal}'", f"'{user}'")
        raise ArgumentError(message) from None


def bind_kernel(matrix, name: str, feat_size: int, prefetch: int | None = None,
                values: str = "data"):
    """Kernel ``name`` (``kernels.KERNELS``) for ``feat_size`` with ``matrix``'s arrays bound:
    checked once and kept with the matrix, so a call converts only the dense operands.
    ``prefetch``: the distance at which the loop over nonzeros prefetches gathered rows (0:
    none); by default the cost model's (``schedules.prefetch_distance``). ``values``: the
    matrix's array an ``spmm`` multiplies by (``"data"``, or ``"multiplicity"``)."""
    if prefetch is None:
        prefetch = prefetch_distance(matrix.shape[1], feat_size)
    tiles = _tiles()
    key = (name, feat_size, tiles, prefetch, values)
    if key not in matrix.prepared:
        tile_ptr, rows = matrix._row_tiles(tiles)       # sealed: bound without a copy
        kept = matrix._sealed
        arrays = dict(tile_ptr=tile_ptr, rows=rows, indptr=kept["indptr"],
                      indices=kept["indices"])
        if name == "spmm":
            arrays["a"] = kept[values]
        # validated when the matrix was made, and immutable: bound as they are, no copy;
        # outputs must not overlap any of its arrays
        bound = _kernel(name, feat_size, prefetch=prefetch).bind(
            validate=False, t=tiles, m=matrix.shape[0], n=matrix.shape[1], nnz=matrix.nnz,
            **arrays)
        matrix.prepared[key] = bound.protect(**{f"M.{part}": array for part, array
                                                in matrix._kernel_arrays().items()})
    return matrix.prepared[key]


def _call_prepared(A, key: tuple, names: tuple, operands: tuple, out):
    """The result of the call that an earlier call on the ``SparseMatrix`` ``A`` prepared
    under ``key`` (operator, operand kinds and shapes), when the arrays are the common kind
    (``BoundKernel.call_fast``); None, with nothing run, when the call needs the full path.
    A torch tensor is checked by name (``names``: the operands') before its memory is read."""
    if type(A) is not SparseMatrix:
        return None
    try:
        bound, out_shape = A.calls[key]
    except (KeyError, TypeError):           # not prepared, or a shape that is no tuple
        return None
    torch = sys.modules.get("torch")
    if torch is not None:
        for name, value in zip(names + ("out",), operands + (out,)):
            if type(value) is torch.Tensor:
                check_tensor(name, value)
    if out is None:
        out = new_array(type(operands[0]) is not np.ndarray, out_shape)
    elif _kind(out) is None or out.shape != out_shape:
        return None
    return out if bound.call_fast((*operands, out)) else None


def _kind(value):
    """numpy.ndarray or torch.Tensor when ``value`` is exactly one, else None."""
    kind = type(value)
    if kind is np.ndarray:
        return kind
    torch = sys.modules.get("torch")
    return kind if torch is not None and kind is torch.Tensor else None


def _prepare_call(matrix, key: tuple, operands: tuple, bound, out_shape: tuple) -> None:
    """Remember ``bound`` for later calls with operands of the kinds and shapes in ``key``
    (``(name, kind, shape, kind, shape...)``), when every operand is exactly a numpy array or
    a torch tensor."""
    if all(_kind(operand) is not None for operand in operands):
        matrix.calls[key] = (bound, out_shape)


def spmm(A, X, out=None, weighted: bool = True):
    """``A @ X`` for a sparse ``A`` of shape (m, n) and a dense ``X`` of shape (n, feat) or
    (n,); ``weighted=False`` uses A's pattern with every value 1 (DGL's ``copy_u_sum``; a
    nonzero stored twice, a parallel edge, counts twice).

    Returns ``out`` (filled) or a new array of X's kind with shape (m, feat) or (m,).
    """
    name = "spmm" if weighted else "spmm_unweighted"
    key = (name, type(X), getattr(X, "shape", None))
    result = _call_prepared(A, key, ("X",), (X,), out)
    if result is not None:
        return result
    matrix = as_sparse_matrix(A)
    m, n = matrix.shape
    x = DenseOperand("X", X, n)
    result = x.new_output(x.rows_shape(m)) if out is None else out
    check_output(result, x.rows_shape(m))
    if weighted or matrix.multiplicity is None:
        bound = bind_kernel(matrix, name, x.feat_size)
    else:               # parallel edges: each counts, as in DGL's copy_u_sum
        bound = bind_kernel(matrix, "spmm", x.feat_size, values="multiplicity")
    y, finish = writable_view(result, (m, x.feat_size))
    _run(bound, {"x": "X", "y": "out"}, x.as_matrix(), y)
    finish()
    _prepare_call(matrix, key, (X,), bound, x.rows_shape(m))
    return result


def sddmm(A, X, Y, out=None):
    """``out[p] = X[i] . Y[j]`` for the p-th nonzero ``(i, j)`` of ``A``: DGL's ``u_dot_v``.

    The nonzeros are in ``A``'s own order: for a ``SparseMatrix``, that of its ``indices``
    (rows in order, columns sorted within a row); for a scipy matrix, that of ``A.indices``
    (CSR) or ``A.tocoo()`` (another format), one value per stored entry, duplicates included;
    for a torch sparse tensor, that of ``col_indices()`` (CSR) or of its stored entries (COO,
    ``A._indices()``; the same as ``A.coalesce()`` for a coalesced tensor).
    ``SparseMatrix(A).source_order`` maps that order to the matrix's.

    ``X`` has shape (m, feat), ``Y`` (n, feat); returns ``out`` (filled) or a new array of X's
    kind with one value per nonzero.

    Example
    -------
    >>> import numpy as np, scipy.sparse
    >>> A = scipy.sparse.csr_matrix((np.ones(2, np.float32), [1, 0], [0, 2]), shape=(1, 2))
    >>> sddmm(A, np.ones((1, 1), np.float32), np.float32([[10], [20]])).tolist()
    [20.0, 10.0]
    """
    key = ("sddmm", type(X), getattr(X, "shape", None), type(Y), getattr(Y, "shape", None))
    result = _call_prepared(A, key, ("X", "Y"), (X, Y), out)
    if result is not None:
        return result
    matrix = as_sparse_matrix(A)
    m, n = matrix.shape
    x = DenseOperand("X", X, m)
    y = DenseOperand("Y", Y, n)
    if x.feat_size != y.feat_size:
        raise SparseTIRValueError(f"X has {x.feat_size} features and Y {y.feat_size}")
    order = None if isinstance(A, SparseMatrix) else matrix.source_order
    count = matrix.nnz if order is None else order.size
    result = x.new_output((count,)) if out is None else out
    check_output(result, (count,))
    if x.is_torch != y.is_torch:
        raise SparseTIRTypeError("X and Y must both be numpy arrays or both torch tensors")
    bound = bind_kernel(matrix, "sddmm", x.feat_size)
    values, finish = writable_view(result, (count,)) if order is None \
        else reordered_view(result, matrix.nnz, order)
    _run(bound, {"x": "X", "y": "Y"}, x.as_matrix(), y.as_matrix(), values)
    finish()
    _prepare_call(matrix, key, (X, Y), bound, (matrix.nnz,))
    return result


def _kernel(name: str, feat_size: int, target: str = "llvm", prefetch: int = 0):
    def make():
        func = KERNELS[name].specialize({"feat_size": feat_size})
        scheduled = schedule_for(name, lower_sparse_iter(func), feat_size, target, prefetch)
        return build(scheduled, target, schedule="none", cache=True)
    return remembered(("ops", name, feat_size, target, prefetch), make)
