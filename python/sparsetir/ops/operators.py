"""``spmm`` and ``sddmm``: argument handling around the compiled kernels.

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.ops import SparseMatrix
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> M = SparseMatrix(A)
>>> X = np.random.default_rng(0).random((5, 16), np.float32)
>>> np.allclose(spmm(M, X), A @ X)
True
>>> np.allclose(spmm(M, X, weighted=False), (A != 0).astype(np.float32) @ X)
True
>>> Z = np.ones((6, 16), np.float32)
>>> vals = sddmm(M, Z, X)                    # Z[i] . X[j] for each nonzero (i, j) of M
>>> rows = np.repeat(np.arange(6), np.diff(A.indptr))
>>> np.allclose(vals, (Z[rows] * X[A.indices]).sum(axis=1))
True
"""

from __future__ import annotations

import sys

import numpy as np
import scipy.sparse

from ..errors import ArgumentError, SparseTIRTypeError, SparseTIRValueError
from ..lower import lower_sparse_iter
from ..runtime.arguments import INFERENCE_REFUSAL, writes_inference_tensor
from .dtypes import (HALF_DTYPES, autocast_dtype, autocast_result, check_dtype, dtype_name,
                     result_dtype)
from .arrays import (DenseOperand, check_output, check_tensor, new_array, recorded,
                     recorded_or_autocast, refuse_shared_output, reordered_view,
                     writable_view)
from ..backend.inline_checks import mark_inline_index_checks
from ..driver.build_module import build
from ..driver.background import remembered
from .kernels import segment_tiled_kernels, tiled_kernels
from .graph_tensors import graph_tensors, tracing
from .matrix import SparseMatrix, as_sparse_matrix
from .alignment import gather_ready
from .huge_pages import note_gathered
from . import numpy_calls, plain_calls
from .plain import PlainCSR, checks_inline
from . import tuning
from ..schedule.operators import prefetch_distance, schedule_for
from .tiles import row_tiles_for_threads
from .generic_kernels import accumulator_dtype


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
                values: str = "data", lanes: int | None = None, tiles: int | None = None):
    """Kernel ``name`` (``kernels.KERNELS``) for ``feat_size`` with ``matrix``'s arrays bound:
    checked once and kept with the matrix, so a call converts only the dense operands.

    With no schedule parameter given, the kernel a search chose for this matrix
    (``sparsetir.tune``: ``ops.tune(M, ...)`` or ``SparseMatrix(A, tune=True)``), else the
    default CSR kernel. ``prefetch``: the distance at which the loop over nonzeros prefetches
    gathered rows (0: none); by default ``schedule.operators.prefetch_distance``'s. ``lanes``:
    SpMM's register tile (default ``spmm_lanes``'s). ``tiles``: row tiles (default
    ``row_tiles_for_threads()``). ``values``: the matrix's array an ``spmm`` multiplies by
    (``"data"``, or ``"multiplicity"``)."""
    if prefetch is lanes is tiles is None and values == "data":
        chosen = _tuned(matrix, name, feat_size)
        if chosen is not None:
            return chosen
    if prefetch is None:
        prefetch = prefetch_distance(matrix.shape[1], feat_size)
    tiles = tiles or row_tiles_for_threads()
    key = (name, feat_size, tiles, prefetch, values, lanes)
    if key not in matrix.prepared:
        tile_ptr, rows = matrix._row_tiles(tiles)       # sealed: bound without a copy
        kept = matrix._sealed
        arrays = dict(tile_ptr=tile_ptr, rows=rows, indptr=kept["indptr"],
                      indices=kept["indices"])
        if name == "spmm":
            arrays["a"] = kept[values]
        # validated when the matrix was made, and immutable: bound as they are, no copy;
        # outputs must not overlap any of its arrays
        bound = _kernel(name, feat_size, prefetch=prefetch, lanes=lanes).bind(
            validate=False, t=tiles, m=matrix.shape[0], n=matrix.shape[1], nnz=matrix.nnz,
            **arrays)
        matrix.prepared[key] = matrix._guarded(bound)
    return matrix.prepared[key]


def _call_prepared(A, key: tuple, names: tuple, operands: tuple, out):
    """The result of the call that an earlier call on the ``SparseMatrix`` ``A`` prepared
    under ``key`` (operator, operand kinds and shapes), when the arrays are the common kind
    (``BoundKernel.call_fast``, on ``operands``, the operands the preparing call kept, and
    ``out``); None, with nothing run, when the call needs the full path. A torch tensor is
    checked by name (``names``: the operands') before its memory is read."""
    if type(A) is not SparseMatrix:
        return None
    try:
        bound, out_shape, bound_operands = A.calls[key]
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
    return out if bound.call_fast((*operands, *bound_operands, out)) else None


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
        matrix.calls[key] = (bound, out_shape, ())


def spmm(A, X, out=None, weighted: bool = True):
    """``A @ X`` for a sparse ``A`` of shape (m, n) and a dense ``X`` of shape (n, feat) or
    (n,); ``weighted=False`` uses A's pattern with every value 1 (DGL's ``copy_u_sum``; a
    nonzero stored twice, a parallel edge, counts twice).

    Returns ``out`` (filled) or a new array of X's kind with shape (m, feat) or (m,).
    This is DGL's ``u_mul_e_sum(M, X, M.values)`` (``copy_u_sum`` unweighted): with a torch
    ``X``, or matrix values made by ``SparseMatrix.from_csr``, that require grad, the result
    carries autograd (``graph_ops``); float64 matrices and operands compute in float64.
    """
    name = "spmm" if weighted else "spmm_unweighted"
    result = None
    if type(A) is SparseMatrix:
        if numpy_calls.may_take((X,)) and A.values is A.data:
            result = numpy_calls.run(A.numpy_calls, name, (X,), out)
    elif plain_calls.may_take(A, (X,)) and numpy_calls.may_take((X,)):
        result = plain_calls.run(name, A, (X,), out)
    if result is not None:
        return result
    if tracing():
        from . import traced  # pylint: disable=import-outside-toplevel
        return traced.spmm(A, X, out, weighted)
    _check_operands(X=X, out=out)
    note_gathered(X)                       # a reused large X moves to huge pages
    if _needs_graph_ops(A, X, out):
        result = _call_prepared_half(A, ("spmm", weighted), ("X",), (X,), (0,), out)
        return result if result is not None else _spmm_graph(A, X, out, weighted)
    if out is not None:                    # as the kernel would, before anything is copied
        refuse_shared_output(out, {"X": X, **_matrix_arrays(A)})
    key = (name, type(X), getattr(X, "shape", None))   # X read where it is: the kernel
                                                       # realigns its rows (ops.alignment)
    result = _call_prepared(A, key, ("X",), (X,), out)
    if result is None and not isinstance(A, SparseMatrix):
        result = _spmm_plain(A, name, X, out)
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
    if matrix is A:
        numpy_calls.prepare(A.numpy_calls, name, bound, (X,), result, 0, A.nnz)
    return result


def sddmm(A, X, Y, out=None):
    """``out[p] = X[i] . Y[j]`` for the p-th nonzero ``(i, j)`` of ``A``: DGL's ``u_dot_v``.

    The nonzeros are in ``A``'s own order: for a ``SparseMatrix``, that of its ``indices``
    (rows in order, columns sorted within a row); for a scipy matrix, that of ``A.indices``
    (CSR) or ``A.tocoo()`` (another format), one value per stored entry, duplicates included;
    for a torch sparse tensor, that of ``col_indices()`` (CSR) or of its stored entries (COO,
    ``A._indices()``; the same as ``A.coalesce()`` for a coalesced tensor); for a
    ``SparseTensor`` ``t``, that of ``t.values`` (``t.to_coo()``).
    ``SparseMatrix(A).source_order`` maps that order to the matrix's.

    ``X`` has shape (m, feat), ``Y`` (n, feat); returns ``out`` (filled) or a new array of X's
    kind with one value per nonzero. This is DGL's ``u_dot_v(M, Y, X)`` (sources ``u`` are
    columns, destinations ``v`` rows), with autograd and float64 as ``spmm`` has them.

    Example
    -------
    >>> import numpy as np, scipy.sparse
    >>> A = scipy.sparse.csr_matrix((np.ones(2, np.float32), [1, 0], [0, 2]), shape=(1, 2))
    >>> sddmm(A, np.ones((1, 1), np.float32), np.float32([[10], [20]])).tolist()
    [20.0, 10.0]
    """
    result = None
    if type(A) is SparseMatrix:
        if numpy_calls.may_take((X, Y)) and A.values is A.data:
            result = numpy_calls.run(A.numpy_calls, "sddmm", (X, Y), out)
    elif plain_calls.may_take(A, (X, Y)) and numpy_calls.may_take((X, Y)):
        result = plain_calls.run("sddmm", A, (X, Y), out)
    if result is not None:
        return result
    if tracing():
        from . import traced  # pylint: disable=import-outside-toplevel
        return traced.sddmm(A, X, Y, out)
    _check_operands(X=X, Y=Y, out=out)
    if hasattr(X, "dtype") and hasattr(Y, "dtype"):       # a mixture named as X and Y
        result_dtype([("X", dtype_name(X)), ("Y", dtype_name(Y))])
    note_gathered(Y)                       # a reused large Y moves to huge pages
    if _needs_graph_ops(A, X, out, Y):
        result = _call_prepared_half(A, ("sddmm",), ("Y", "X"), (Y, X), (1, 0), out)
        return result if result is not None else _sddmm_graph(A, X, Y, out)
    if out is not None:                    # as the kernel would, before anything is copied
        refuse_shared_output(out, {"X": X, "Y": Y, **_matrix_arrays(A)})
    Y = gather_ready(Y, _nonzeros(A))      # gathered rows on cache lines (ops.alignment)
    key = ("sddmm", type(X), getattr(X, "shape", None), type(Y), getattr(Y, "shape", None))
    result = _call_prepared(A, key, ("X", "Y"), (X, Y), out)
    if result is None and not isinstance(A, SparseMatrix):
        result = _sddmm_plain(A, X, Y, out)
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
    if matrix is A:
        numpy_calls.prepare(A.numpy_calls, "sddmm", bound, (X, Y), result, 1, A.nnz)
    return result


def _spmm_plain(A, name: str, X, out):
    """``spmm`` on the caller's own CSR arrays (``PlainCSR.of(A)``), checked by the kernel;
    None, with nothing written, when ``A`` has no plain form or the checks refuse its arrays
    (the wrapped path then sorts them, or names the problem)."""
    plain = PlainCSR.of(A)
    if plain is None:
        return None
    m, n = plain.shape
    x = DenseOperand("X", X, n)
    result = x.new_output(x.rows_shape(m)) if out is None else out
    check_output(result, x.rows_shape(m))
    y, finish = writable_view(result, (m, x.feat_size))
    values = [plain.data] if name == "spmm" else []
    ran = _run_plain(plain, name, x.feat_size, *values, x.as_matrix(), y)
    if ran is None:
        return None
    finish()
    plain_calls.prepare(name, *ran, plain, A, (X,), result, 0)
    return result


def _sddmm_plain(A, X, Y, out):
    """``sddmm`` on the caller's own CSR arrays, as ``_spmm_plain``."""
    plain = PlainCSR.of(A)
    if plain is None:
        return None
    m, n = plain.shape
    x, y = DenseOperand("X", X, m), DenseOperand("Y", Y, n)
    if x.feat_size != y.feat_size or x.is_torch != y.is_torch:
        return None                      # the wrapped path names the problem
    result = x.new_output((plain.nnz,)) if out is None else out
    check_output(result, (plain.nnz,))
    values, finish = writable_view(result, (plain.nnz,))
    ran = _run_plain(plain, "sddmm", x.feat_size, x.as_matrix(), y.as_matrix(), values)
    if ran is None:
        return None
    finish()
    plain_calls.prepare("sddmm", *ran, plain, A, (X, Y), result, 1)
    return result


def _run_plain(plain, name: str, feat_size: int, *operands):
    """Run kernel ``name`` on ``operands`` and ``plain``'s arrays with every index check and
    return ``(kernel, row tiles, where it checks its indices inside: plain.checks_inline)``;
    None when a check refuses them."""
    m, n = plain.shape
    tiles = row_tiles_for_threads()
    inline = checks_inline(name, plain.indices.dtype, feat_size)
    kernel = _kernel(name, feat_size, prefetch=prefetch_distance(n, feat_size),
                     index_dtype=str(plain.indices.dtype), inline_checks=inline)
    try:
        kernel(*operands, plain.tile_ptr(tiles), plain.rows(), plain.indptr, plain.indices,
               tiles, m, n, plain.nnz)
    except ArgumentError:
        return None
    return kernel, tiles, inline


def _tuned(matrix, name: str, feat_size: int):
    """The bound kernel a search chose for ``matrix`` (searching first, or reading its record,
    when the matrix was made with ``tune=True``); None when there is none."""
    if (name, feat_size) not in matrix.tuned and matrix.auto_tune \
            and tuning.search is not None and feat_size > 0:    # 0 features: nothing to time
        tuning.search(matrix, [feat_size], kernels=[name], budget_s=tuning.BUDGET_S)
    return matrix.tuned.get((name, feat_size))


def segment_kernel(name: str, feat_size: int, prefetch: int = 0, lanes: int | None = None):
    """The compiled kernel ``name`` over row segments (``kernels.segment_tiled_kernels``), for
    the nonzero split (``ops.split``); ``prefetch`` and ``lanes`` as ``bind_kernel``'s."""
    return _kernel(name, feat_size, prefetch=prefetch, lanes=lanes, segmented=True)


def _kernel(name: str, feat_size: int, target: str = "llvm", prefetch: int = 0,
            index_dtype: str = "int32", lanes: int | None = None,
            inline_checks: str | None = None, segmented: bool = False):
    """The compiled row-tiled kernel ``name`` (over row segments when ``segmented``);
    ``inline_checks`` (``inline_checks.ROWS`` or ``TILES``): it checks its index arrays inside
    its loops too (``backend.inline_checks``), for the plain call, whose arrays are checked at
    every call."""
    def make():
        forms = segment_tiled_kernels if segmented else tiled_kernels
        func = forms(index_dtype)[name].specialize({"feat_size": feat_size})
        scheduled = schedule_for(name, lower_sparse_iter(func), feat_size, target, prefetch,
                                 lanes)
        if inline_checks:
            scheduled = mark_inline_index_checks(scheduled, per=inline_checks)
        return build(scheduled, target, schedule="none", cache=True)
    return remembered(("ops", name, feat_size, target, prefetch, index_dtype, lanes,
                       inline_checks, segmented), make)


def _matrix_arrays(A) -> dict:
    """The caller's arrays of a scipy matrix or torch sparse tensor ``A`` by name
    (``"A.data"``, ``"A.values()"``...), for ``refuse_shared_output``; none for a
    ``SparseMatrix`` (it keeps copies of its own)."""
    if scipy.sparse.issparse(A):
        return {f"A.{name}": getattr(A, name) for name in ("data", "indices", "indptr", "row",
                                                            "col")
                if type(getattr(A, name, None)) is np.ndarray}
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(A, torch.Tensor):
        return {}
    parts = {torch.sparse_csr: ("crow_indices", "col_indices", "values"),
             torch.sparse_coo: ("_indices", "_values")}.get(A.layout, ())
    return {f"A.{name}()": getattr(A, name)() for name in parts}


def _nonzeros(A) -> int | None:
    """The stored entries of a ``SparseMatrix`` or scipy matrix, None for other matrices."""
    return A.nnz if isinstance(A, SparseMatrix) or scipy.sparse.issparse(A) else None


def _needs_graph_ops(A, *operands) -> bool:
    """Whether a call must take the general path (``graph_ops``): autograd records it (a
    torch operand or ``out`` requires grad in grad mode, or the matrix's values do), or it is
    not float32 throughout, or the values are a ``from_csr`` tensor read at every call, or
    torch's autocast sets the result's dtype (``dtypes``)."""
    if isinstance(A, SparseMatrix):
        if A.values is not A.data or A.dtype != np.float32:
            return True
    elif hasattr(A, "dtype") and dtype_name(A) != "float32":
        return True
    torch = sys.modules.get("torch")
    tensors = [x for x in operands if torch is not None and isinstance(x, torch.Tensor)]
    if tensors and recorded_or_autocast(tensors):
        return True
    return any(hasattr(operand, "dtype") and dtype_name(operand) != "float32"
               for operand in operands)


def _graph_matrix(A, X, weighted: bool = False):
    """``(matrix, values)``: A as a ``SparseMatrix`` and the values to multiply by, of X's
    kind; a dtype that differs from X's is refused by name (nothing is cast), but for
    bfloat16 or float16 X with a float32 A (``dtypes``: the result is float32, or the
    autocast dtype). ``weighted``: the values are multiplied by, so values that require grad
    with a numpy X (whose result carries no gradient) are refused."""
    matrix = as_sparse_matrix(A)
    x_dtype = str(getattr(X, "dtype", "")).replace("torch.", "")
    if x_dtype in ("float32", "float64") and np.dtype(x_dtype) != matrix.dtype:
        raise SparseTIRTypeError(
            f"A is {matrix.dtype} and X {x_dtype}: sparsetir.ops computes in one dtype and "
            "casts nothing; pass both as float32 or both as float64")
    if x_dtype in HALF_DTYPES:
        result_dtype([("A", matrix.dtype.name), ("X", x_dtype)])
    values = matrix.edge_values()
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(X, torch.Tensor):
        if not isinstance(values, torch.Tensor):        # the private data: its tensor copy
            values = graph_tensors(matrix).data
    elif not isinstance(values, np.ndarray):
        if weighted and values.requires_grad and torch.is_grad_enabled():
            raise SparseTIRTypeError(
                "A's values (SparseMatrix.from_csr) require grad, but X is a numpy array: the "
                "result would be a numpy array and the values' gradient would be lost; pass X "
                "as a torch tensor (torch.from_numpy(X)), or call under torch.no_grad()")
        values = values.detach().numpy()
    return matrix, values


def _spmm_graph(A, X, out, weighted: bool):
    """``spmm`` through ``graph_ops.gspmm`` (autograd, float64)."""
    from .graph_ops import gspmm_entries  # pylint: disable=import-outside-toplevel
    matrix, values = _graph_matrix(A, X, weighted)
    prepare = _half_key(("spmm", weighted), (X,), out) if type(A) is SparseMatrix \
        and matrix.values is matrix.data else None
    if weighted:
        result = gspmm_entries(matrix, "mul", "sum", X, values, out, prepare)
    elif matrix.multiplicity is not None:     # parallel edges: each counts, as in copy_u_sum
        x_dtype = dtype_name(X)                     # the counts in its accumulator's dtype
        counts = matrix.multiplicity.astype(accumulator_dtype(x_dtype), copy=False)
        result = gspmm_entries(matrix, "mul", "sum", X, _like(X, counts), out,
                               dtype=autocast_result(X) or x_dtype)
    else:
        result = gspmm_entries(matrix, "copy_lhs", "sum", X, None, out, prepare)
    return _written(result, out)


def _half_key(kind: tuple, operands: tuple, out):
    """The key of a half-precision torch call into ``out`` that a later one may repeat
    (``_call_prepared_half``): ``kind`` (the operator, and for ``spmm`` whether weighted), the
    operands' and ``out``'s dtypes and shapes and autocast's dtype; None for any other call
    (an operand that is not a 2-D bfloat16 or float16 tensor, an ``out`` that is no tensor)."""
    torch = sys.modules.get("torch")
    if torch is None or type(out) is not torch.Tensor or not all(
            type(x) is torch.Tensor and x.dtype in (torch.bfloat16, torch.float16)
            and x.dim() == 2 for x in operands):
        return None
    return (kind + tuple((x.dtype, tuple(x.shape)) for x in operands)
            + (out.dtype, tuple(out.shape), autocast_dtype()))


def _call_prepared_half(A, kind: tuple, names: tuple, operands: tuple, order: tuple, out):
    """``_call_prepared`` for a half-precision torch call into ``out`` that an earlier one
    prepared (``_half_key``; ``generic.gspmm_values`` and ``gsddmm_values`` keep their kernel
    and the matrix's values): skips the general path's per-call checks (50-100 us), which that
    call made; from then on such calls take the short path (``numpy_calls.prepare_half``).
    ``operands`` in the kernel's order, ``names`` theirs, ``order`` the caller's position of
    each. None when autograd records the call or its write into ``out`` (the general path
    does)."""
    key = _half_key(kind, operands, out)
    if key is None or recorded(operands + (out,)):
        return None
    result = _call_prepared(A, key, names, operands, out)
    if result is not None:                 # later calls of these shapes: the short path
        bound, _, kept = A.calls[key]
        numpy_calls.prepare_half(A.numpy_calls, _kernel_name(kind), bound, operands, order,
                                 kept, out, int(kind[0] == "sddmm"), A.nnz)
    return result


def _kernel_name(kind: tuple) -> str:
    """The kernel name of a half-precision call's ``kind`` (``_half_key``)."""
    return "spmm_unweighted" if kind == ("spmm", False) else kind[0]


def _sddmm_graph(A, X, Y, out):
    """``sddmm`` through ``graph_ops.gsddmm`` (autograd, float64), in A's nonzero order."""
    from .graph_ops import gsddmm_entries  # pylint: disable=import-outside-toplevel
    matrix, _ = _graph_matrix(A, X)
    vector = getattr(X, "ndim", 2) == 1
    order = None if isinstance(A, SparseMatrix) else matrix.source_order
    into = out.reshape(-1, 1) if order is None and getattr(out, "ndim", 0) == 1 else None
    prepare = _half_key(("sddmm",), (Y, X), out) if type(A) is SparseMatrix else None
    result = gsddmm_entries(matrix, "dot", Y.reshape(-1, 1) if vector else Y,
                            X.reshape(-1, 1) if vector else X, "u", "v", out=into,
                            prepare=prepare).reshape(-1)
    if order is not None:
        result = result[_like(result, order)]
    return _written(result, out)


def _check_operands(**operands) -> None:
    """Refuse, by the names users know, torch operands no operator takes (``torch.func``,
    sparse or nested tensors), an ``out`` torch does not let anything write (an inference
    tensor outside inference mode) and operands of a dtype none takes (integers,
    big-endian)."""
    torch = sys.modules.get("torch")
    for name, value in operands.items():
        if torch is not None and isinstance(value, torch.Tensor):
            check_tensor(name, value, tracked_ok=True)
            if name == "out" and writes_inference_tensor(value):
                raise SparseTIRValueError(f"out {INFERENCE_REFUSAL}")
        if name != "out" and hasattr(value, "dtype"):
            check_dtype(name, dtype_name(value))


def _like(reference, array: np.ndarray):
    """``array`` as ``reference``'s kind (a torch tensor for torch)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(reference, torch.Tensor):
        return torch.from_numpy(np.array(array))
    return array


def _written(result, out):
    """``result``, or ``out`` holding it (torch's rules: a leaf that requires grad is
    refused; a write into a tensor of a graph is recorded, so its old history gets no
    gradient)."""
    if out is None:
        return result
    check_output(out, tuple(result.shape), dtype=str(result.dtype), tracked_ok=True)
    if type(out) is not type(result):
        raise SparseTIRTypeError(f"out must be a {type(result).__name__} like the result, got "
                                 f"{type(out).__name__}")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(out, torch.Tensor):
        if out.is_leaf and out.requires_grad and torch.is_grad_enabled():
            raise SparseTIRValueError("out is a leaf tensor that requires grad, which torch "
                                      "does not let an operation write into; pass no out=")
        if result.data_ptr() != out.data_ptr():        # not computed in place (writes_into)
            out.copy_(result)
    elif not np.shares_memory(result, out):
        out[...] = result
    return out
