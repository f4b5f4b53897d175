"""``spmm`` and ``sddmm``: argument handling around the compiled kernels.

Example
-------
>>> # Y = spmm(M, X); Y = spmm(M, X, weighted=False); vals = sddmm(M, X, Y)
"""

from __future__ import annotations

import os

from ..runtime.errors import ArgumentError
from ..transform import lower_sparse_iter
from .arrays import DenseOperand, check_output, writable_view
from .cache import cached_build
from .kernels import KERNELS
from .matrix import as_sparse_matrix
from .schedules import schedule_for

_KERNELS: dict = {}
# the kernels' parameter names as users know them, for error messages
_USER_NAMES = {"'x'": "'X'", "'y'": "'out'"}


def _tiles() -> int:
    """Row tiles per call: enough that equal-nonzero tiles even out over the threads TVM
    starts (``TVM_NUM_THREADS``, the usable cores when it is unset or not a positive number)."""
    value = os.environ.get("TVM_NUM_THREADS", "")
    threads = int(value) if value.isdigit() and int(value) > 0 else len(os.sched_getaffinity(0))
    return 8 * threads


def _run(kernel, *args) -> None:
    try:
        kernel(*args, validate=False)
    except ArgumentError as err:
        message = str(err)
        for internal, user in _USER_NAMES.items():
            message = message.replace(f"argument {internal}", f"argument {user}")
        raise ArgumentError(message) from None


def spmm(A, X, out=None, weighted: bool = True):
    """``A @ X`` for a sparse ``A`` of shape (m, n) and a dense ``X`` of shape (n, feat) or
    (n,); ``weighted=False`` uses A's pattern with every value 1 (DGL's ``copy_u_sum``).

    Returns ``out`` (filled) or a new array of X's kind with shape (m, feat) or (m,).
    """
    matrix = as_sparse_matrix(A)
    m, n = matrix.shape
    x = DenseOperand("X", X, n)
    result = x.new_output(x.rows_shape(m)) if out is None else out
    check_output(result, x.rows_shape(m))
    name = "spmm" if weighted else "spmm_unweighted"
    kernel = _kernel(name, x.feat_size)
    y, finish = writable_view(result, (m, x.feat_size))
    values = (matrix.data,) if weighted else ()
    tiles = _tiles()
    tile_ptr, rows = matrix.row_tiles(tiles)
    _run(kernel, *values, x.as_matrix(), y, tile_ptr, rows, matrix.indptr, matrix.indices,
         tiles, m, n, matrix.nnz)
    finish()
    return result


def sddmm(A, X, Y, out=None):
    """``out[p] = X[i] . Y[j]`` for the p-th nonzero ``(i, j)`` of ``A`` (rows in order,
    columns sorted within a row, as in ``SparseMatrix(A).indices``): DGL's ``u_dot_v``.

    ``X`` has shape (m, feat), ``Y`` (n, feat); returns ``out`` (filled) or a new array of X's
    kind with one value per nonzero.
    """
    matrix = as_sparse_matrix(A)
    m, n = matrix.shape
    x = DenseOperand("X", X, m)
    y = DenseOperand("Y", Y, n)
    if x.feat_size != y.feat_size:
        raise ValueError(f"X has {x.feat_size} features and Y {y.feat_size}")
    result = x.new_output((matrix.nnz,)) if out is None else out
    check_output(result, (matrix.nnz,))
    if x.is_torch != y.is_torch:
        raise TypeError("X and Y must both be numpy arrays or both torch tensors")
    kernel = _kernel("sddmm", x.feat_size)
    values, finish = writable_view(result, (matrix.nnz,))
    tiles = _tiles()
    tile_ptr, rows = matrix.row_tiles(tiles)
    _run(kernel, x.as_matrix(), y.as_matrix(), values, tile_ptr, rows, matrix.indptr,
         matrix.indices, tiles, m, n, matrix.nnz)
    finish()
    return result


def _kernel(name: str, feat_size: int, target: str = "llvm"):
    key = (name, feat_size, target)
    if key not in _KERNELS:
        func = KERNELS[name].specialize({"feat_size": feat_size})
        scheduled = schedule_for(name, lower_sparse_iter(func), feat_size, target)
        _KERNELS[key] = cached_build(scheduled, target)
    return _KERNELS[key]
