"""The generalised operators' forward computation on checked arrays (no autograd).

``gspmm_values`` and ``gsddmm_values`` compile (once per operator, reduction, dtype and
feature blocks) the kernels ``generic_kernels`` writes, bind the matrix's arrays once per
matrix, and run them on contiguous arrays of one kind (numpy or torch) and dtypes that
``dtypes.result_dtype`` combines (float32, float64, bfloat16, float16), as ``graph_ops`` hands
them over after checking them; the result has that dtype, or ``dtype`` where given.
``autograd`` builds the backward passes from the same two functions.

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.ops import SparseMatrix
>>> M = SparseMatrix(scipy.sparse.csr_matrix(np.float32([[0, 1], [0, 0], [1, 1]])))
>>> out, arg = gspmm_values(M, "copy_lhs", "max", np.float32([[1, 5], [3, 2]]), None, True)
>>> out.tolist(), arg.tolist()           # row 1 has no in-edge: 0, and arg = nnz
([[3.0, 2.0], [0.0, 0.0], [3.0, 5.0]], [[0, 0], [3, 3], [2, 1]])
"""

from __future__ import annotations

import math

import numpy as np

from ..driver.background import remembered
from ..driver.build_module import build
from ..errors import SparseTIRValueError
from ..lower import lower_sparse_iter
from ..schedule.generic import schedule_gsddmm_cpu, schedule_gspmm_cpu
from ..schedule.operators import prefetch_distance
from .arrays import is_torch, new_array
from .broadcast import feature_blocks
from .dtypes import dtype_name, result_dtype
from .generic_kernels import gsddmm_kernel, gspmm_kernel
from .tiles import row_tiles_for_threads


def kernel_dtypes(lhs, rhs, dtype: str | None = None):
    """``(kernel dtype key, result dtype)`` for operands ``lhs`` and ``rhs`` (either None when
    unused): one name when every operand and the result share it, else the triple
    ``(lhs, rhs, out)`` of ``generic_kernels``."""
    given = [(name, dtype_name(array)) for name, array in (("lhs_data", lhs), ("rhs_data", rhs))
             if array is not None]
    out = dtype or result_dtype(given)
    names = [dtype_name(array) if array is not None else out for array in (lhs, rhs)] + [out]
    return (out if len(set(names)) == 1 else tuple(names)), out


def new_like(like, shape: tuple, dtype: str | None = None, out=None, operands: tuple = ()):
    """An uninitialised array of ``like``'s kind (numpy or torch) and dtype (or ``dtype``):
    ``out`` itself where it can take the result as it is (``writes_into``, against the
    ``operands`` the kernel reads)."""
    dtype = dtype or dtype_name(like)
    if out is not None and writes_into(out, like, shape, dtype, operands):
        return out
    return new_array(is_torch(like), shape, dtype)


def writes_into(out, like, shape: tuple, dtype: str, operands: tuple) -> bool:
    """Whether a kernel can write its result of ``shape`` and ``dtype`` straight into ``out``
    (a caller's ``out=``) instead of a fresh array copied there: same kind as ``like``, that
    dtype and shape, contiguous, not tracked by autograd (torch records a write into such a
    tensor, which ``copy_`` does), and sharing no memory with an operand the kernel reads.

    >>> import numpy as np
    >>> x, out = np.ones((4, 2), np.float32), np.empty((4, 2), np.float32)
    >>> writes_into(out, x, (4, 2), "float32", (x,)), writes_into(x, x, (4, 2), "float32", (x,))
    (True, False)
    """
    if type(out) is not type(like) or dtype_name(out) != dtype or tuple(out.shape) != shape:
        return False
    if is_torch(out):
        if out.requires_grad or not out.is_contiguous() or out.device.type != "cpu":
            return False
        start = out.untyped_storage().data_ptr()
        return all(operand is None or operand.untyped_storage().data_ptr() != start
                   for operand in operands)
    return out.flags.c_contiguous and out.flags.writeable and not any(
        operand is not None and np.may_share_memory(out, operand) for operand in operands)


def _blocked(array, rows: int, sizes: tuple, full: tuple):
    """``array`` (contiguous, ``rows`` rows) as the kernel reads it: one axis per feature block
    it has."""
    return array.reshape((rows,) + tuple(s for s, has in zip(sizes, full) if has))


def _bound(matrix, key: tuple, make_func, schedule, extra: dict | None = None):
    """The kernel of ``key`` with ``matrix``'s arrays bound (kept with the matrix)."""
    tiles = row_tiles_for_threads()
    prepared_key = ("generic",) + key + (tiles,)
    if prepared_key not in matrix.prepared:
        def make():
            return build(schedule(lower_sparse_iter(make_func())), "llvm", schedule="none",
                         cache=True)
        kernel = remembered(("ops",) + key, make)
        tile_ptr, rows = matrix._row_tiles(tiles)       # pylint: disable=protected-access
        kept = matrix._sealed                           # pylint: disable=protected-access
        bound = kernel.bind(validate=False, t=tiles, m=matrix.shape[0], n=matrix.shape[1],
                            nnz=matrix.nnz, tile_ptr=tile_ptr, rows=rows,
                            indptr=kept["indptr"], indices=kept["indices"], **(extra or {}))
        matrix.prepared[prepared_key] = matrix._guarded(bound)  # pylint: disable=protected-access
    return matrix.prepared[prepared_key]


def _feature_shape(array):
    return None if array is None else tuple(array.shape[1:])


def gspmm_values(matrix, op: str, reduce_op: str, lhs, rhs, record_arg: bool = False,
                 dtype: str | None = None, out=None, prepare: tuple | None = None,
                 rhs_order=None):
    """``(out, arg)``: ``out[v] = reduce_op over in-edges e = (u, v) of op(lhs[u], rhs[e])``
    (0 where ``v`` has no in-edge), and for ``max``/``min`` with ``record_arg`` the edge
    that gave each value (int32; ``nnz`` for no edge), else None.

    ``lhs`` (num_src, *F) and ``rhs`` (nnz, *F), either None when ``op`` does not read it:
    contiguous arrays of one kind, checked by the caller. ``out`` has ``dtype`` (by default
    the operands', ``dtypes.result_dtype``), written into ``out`` where that can hold it as
    it is (``writes_into``), else into a new array. With ``prepare`` (a key), a sum written
    into ``out`` from 2-D ``lhs`` and 1-D or no ``rhs`` leaves ``matrix.calls[prepare] = (bound
    kernel, out's shape, (rhs,) or ())``, the entries ``operators._call_prepared`` reads: a
    later call of the same kind may run that kernel on ``(lhs, rhs, out)``.

    ``rhs_order`` (a sealed int32 permutation of the edges, bound once with ``matrix``, which
    must always come with the same one): ``rhs`` is in another edge order, and ``matrix``'s
    edge ``p`` reads its row ``rhs_order[p]`` (a transpose reading its matrix's edge data,
    ``SparseMatrix.transposed_pattern``), instead of a permuted copy of ``rhs``."""
    if reduce_op == "mean" and op == "copy_lhs" and rhs_order is None:
        # a mean of the sources' rows is their sum weighted by 1 / in-degree: the weights are
        # read per edge in the kernel, not divided into the result in a pass of its own
        return gspmm_values(matrix, "mul", "sum", lhs, mean_weights(matrix, lhs),
                            dtype=dtype or dtype_name(lhs), out=out)[0], None
    sample = lhs if lhs is not None else rhs
    kernel_dtype, dtype = kernel_dtypes(lhs, rhs, dtype)
    plan = feature_blocks(_feature_shape(lhs), _feature_shape(rhs))
    m, n = matrix.shape
    given, out = out, new_like(sample, (m,) + plan.shape, dtype, out, (lhs, rhs))
    reduction = "sum" if reduce_op == "mean" else reduce_op
    if not math.prod(out.shape):        # no destination or no feature: nothing to compute
        return out, (new_like(sample, out.shape, "int32") if reduction in ("max", "min")
                     and record_arg else None)
    blocks = (plan.sizes, plan.lhs_full, plan.rhs_full)
    operands = []
    if lhs is not None:
        operands.append(_blocked(lhs, n, plan.sizes, plan.lhs_full))
    if rhs is not None:
        operands.append(_blocked(rhs, matrix.nnz, plan.sizes, plan.rhs_full))
    result = out.reshape((m,) + plan.sizes)
    key = (op, reduction, kernel_dtype) + blocks
    prefetch = 0 if lhs is None else prefetch_distance(n, lhs[:1].nbytes // 4)
    permuted = rhs_order is not None and rhs is not None
    if permuted and record_arg:
        raise SparseTIRValueError("gspmm_values: rhs_order reads the edge operand through a "
                                  "permutation, which the arg kernel (record_arg) does not")
    bound = _bound(matrix, ("gspmm",) + key + (prefetch,) + (("rhs_order",) if permuted else ()),
                   lambda: gspmm_kernel(*key, permuted_rhs=permuted),
                   lambda mod: schedule_gspmm_cpu(mod, prefetch=prefetch),
                   {"perm": rhs_order} if permuted else None)
    bound(*operands, result)
    if prepare is not None and out is given and reduce_op == "sum" and lhs is not None \
            and lhs.ndim == 2 and (rhs is None or rhs.ndim == 1):
        matrix.calls[prepare] = (bound, tuple(out.shape), () if rhs is None else (rhs,))
    arg = None
    if reduction in ("max", "min") and record_arg:
        arg = new_like(sample, out.shape, "int32")
        _bound(matrix, ("gspmm_arg",) + key, lambda: gspmm_kernel(*key, True),
               lambda mod: schedule_gspmm_cpu(mod, "gspmm_arg"),
               {"eid": matrix.storage("edge_ids")})(*operands, result, arg.reshape(result.shape))
    empty = matrix.storage("empty_rows")
    if reduction != "sum" and empty.size:
        out[_index(out, empty)] = 0
    if reduce_op == "mean":     # half precision: divided in float32, rounded a second time
        degrees = np.maximum(matrix.storage("in_degrees"), 1).astype(
            "float64" if dtype == "float64" else "float32")
        out /= _index(out, degrees).reshape((m,) + (1,) * len(plan.shape))
    return out, arg


def gsddmm_values(matrix, op: str, lhs, rhs, lhs_target: str = "u", rhs_target: str = "v",
                  dtype: str | None = None, out=None, prepare: tuple | None = None):
    """``out[e] = op(lhs[lhs_target(e)], rhs[rhs_target(e)])`` for every edge ``e = (u, v)``
    (for ``dot``, summed over the last dimension, kept as size 1), shape (nnz, *F).
    Operands, ``dtype`` and ``out`` as ``gspmm_values`` takes them, with the rows of their
    targets. With ``prepare`` (a key), a ``dot`` of 2-D operands written into ``out`` leaves
    ``matrix.calls[prepare] = (bound kernel, (nnz,), ())``: a later call may run that kernel
    on ``(lhs, rhs, out)`` with a 1-D ``out`` (``operators._call_prepared``)."""
    sample = lhs if lhs is not None else rhs
    kernel_dtype, dtype = kernel_dtypes(lhs, rhs, dtype)
    dot = op == "dot"
    lhs_shape, rhs_shape = _feature_shape(lhs), _feature_shape(rhs)
    if dot:
        lhs_shape, rhs_shape = lhs_shape[:-1], rhs_shape[:-1]
    plan = feature_blocks(lhs_shape, rhs_shape)
    rows = {"u": matrix.shape[1], "v": matrix.shape[0], "e": matrix.nnz}
    tail = ((lhs.shape[-1],) if dot else ())
    if not matrix.nnz * math.prod(plan.shape):   # no edge or no feature: nothing to compute
        return new_like(sample, (matrix.nnz,) + plan.shape + ((1,) if dot else ()), dtype,
                        out, (lhs, rhs))
    operands = []
    for array, target, full in ((lhs, lhs_target, plan.lhs_full),
                                (rhs, rhs_target, plan.rhs_full)):
        if array is not None:
            kept = tuple(s for s, has in zip(plan.sizes, full) if has)
            operands.append(array.reshape((rows[target],) + kept + tail))
    key = (op, kernel_dtype, plan.sizes, plan.lhs_full, plan.rhs_full, lhs_target, rhs_target,
           tail[0] if dot else 0)
    gathered = [array[:1].nbytes for array, target in ((lhs, lhs_target), (rhs, rhs_target))
                if array is not None and target == "u"]
    prefetch = prefetch_distance(matrix.shape[1], max(gathered) // 4) if gathered else 0
    given, out = out, new_like(sample, (matrix.nnz,) + plan.shape + ((1,) if dot else ()),
                               dtype, out, (lhs, rhs))
    bound = _bound(matrix, ("gsddmm",) + key + (prefetch,), lambda: gsddmm_kernel(*key),
                   lambda mod: schedule_gsddmm_cpu(mod, dot, prefetch))
    bound(*operands, out.reshape((matrix.nnz,) + plan.sizes))
    if prepare is not None and out is given and dot and lhs.ndim == rhs.ndim == 2:
        matrix.calls[prepare] = (bound, (matrix.nnz,), ())
    return out


def mean_weights(matrix, like):
    """Each stored edge's ``1 / in-degree`` of its destination (degrees below 1 count as 1), in
    M's edge order, float64 for a float64 ``like`` else float32, numpy or torch as ``like``: a
    mean over in-edges is the sum of the messages so weighted (rounded as a product per edge:
    the mean of equal values may differ from them in the last bit, where DGL's division of
    the sum gives them exactly). Made once per matrix and kind; never handed to users
    (kernels only read it).

    >>> import scipy.sparse
    >>> from sparsetir.ops import SparseMatrix
    >>> M = SparseMatrix(scipy.sparse.csr_matrix(np.float32([[1, 1], [0, 0], [0, 1]])))
    >>> mean_weights(M, np.ones(1, np.float32)).tolist()
    [0.5, 0.5, 1.0]
    """
    dtype = "float64" if dtype_name(like) == "float64" else "float32"
    kind = "torch" if is_torch(like) else "numpy"

    def make():
        degrees = np.maximum(matrix.storage("in_degrees"), 1)
        weights = np.repeat(1.0 / degrees, np.diff(matrix.storage("indptr"))).astype(dtype)
        return _index(like, weights) if kind == "torch" else weights
    return matrix._derive(f"mean_weights_{dtype}_{kind}", make)  # pylint: disable=protected-access


def _index(like, array: np.ndarray):
    """``array`` as an index or operand for ``like``'s kind (a torch tensor for torch)."""
    if is_torch(like):
        import torch  # pylint: disable=import-outside-toplevel
        return torch.tensor(array)      # a copy: the matrix's arrays are read-only
    return array


def edge_softmax_values(matrix, logits):
    """``exp(logits[e]) / sum of exp over the in-edges of e's destination``, computed stably
    (the destination's largest logit subtracted first); numpy or torch, no autograd."""
    largest = gspmm_values(matrix, "copy_rhs", "max", None, logits)[0]
    scores = gsddmm_values(matrix, "sub", logits, largest, "e", "v")
    if isinstance(scores, np.ndarray):
        np.exp(scores, out=scores)
    else:
        scores.exp_()
    sums = gspmm_values(matrix, "copy_rhs", "sum", None, scores)[0]
    return gsddmm_values(matrix, "div", scores, sums, "e", "v")
