"""DGL's generalised sparse operators over a ``SparseMatrix``, with autograd.

One convention, DGL's: ``M`` of shape (num_dst, num_src) is a graph whose rows are the
destinations ``v``, whose columns are the sources ``u``, and whose stored nonzeros are the
edges ``e``, in CSR order (rows, then columns; ``SparseMatrix.source_order`` maps a caller's
order to it). Node data of sources has ``num_src`` rows, of destinations ``num_dst``, edge data
``nnz``; trailing feature shapes broadcast as numpy's do (``(n, H, F)`` with ``(nnz, H, 1)``).
``M``'s own values are not used unless passed (``M.values``). A multigraph's parallel
edges are edges of their own: repeated columns of ``SparseMatrix.from_csr``, or duplicates a
``SparseMatrix`` summed (``M.edge_matrix()`` is the graph then, its ``source_order`` maps the
caller's nonzeros to its edges).

- ``gspmm(M, op, reduce_op, lhs_data, rhs_data)``: each destination reduces
  ``op(lhs_data[u], rhs_data[e])`` over its in-edges; empty rows give 0 for every reducer;
- ``gsddmm(M, op, lhs_data, rhs_data, lhs_target="u", rhs_target="v")``: each edge computes
  ``op`` of its targets' data (``dot`` sums the last dimension, kept as size 1);
- ``edge_softmax(M, logits, eids=None, norm_by="dst")``: softmax over each destination's
  in-edges (``norm_by="src"``: each source's out-edges; ``eids``: over some edges only);
- ``segment_reduce(seglen, value, reducer="sum")``: consecutive segments of rows reduced;
- ``segment_softmax(seglen, value)``: softmax within consecutive segments of rows.

numpy arrays in give numpy out; torch tensors (CPU) give torch out and carry autograd
(``autograd``). Operands are float32, float64, bfloat16 or float16, combined as ``dtypes``
says (one dtype, or a half dtype with float32); half precision is summed in float32 and
rounded once at the store. Every kernel is compiled from ``generic_kernels``.

Example
-------
>>> import torch, scipy.sparse
>>> from sparsetir.ops import SparseMatrix, gspmm, gsddmm
>>> M = SparseMatrix(scipy.sparse.csr_matrix(torch.eye(3).numpy()))
>>> x = torch.arange(6.0).reshape(3, 2).requires_grad_()
>>> gspmm(M, "copy_lhs", "sum", x, None).sum().backward()
>>> x.grad.tolist()
[[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]
>>> gsddmm(M, "dot", x.detach(), x.detach()).flatten().tolist()
[1.0, 13.0, 41.0]
"""

from __future__ import annotations

import numpy as np

from ..errors import SparseTIRTypeError, SparseTIRValueError
from .arrays import check_tensor, is_torch
from .broadcast import broadcast_shape
from .dtypes import autocast_pair, check_dtype, dtype_name, result_dtype
from .generic import edge_softmax_values, gsddmm_values, gspmm_values
from .generic_kernels import GSDDMM_OPS, GSPMM_OPS, TARGETS
from .graph_tensors import is_distributed, tracing
from .huge_pages import note_gathered
from .matrix import SparseMatrix, as_sparse_matrix

REDUCERS = ("sum", "max", "min", "mean")


def _choice(name: str, value, choices: tuple) -> None:
    if not isinstance(value, str) or value not in choices:
        raise SparseTIRValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def _operands(named: list) -> list:
    """The operands ``[(name, value, rows)]`` (value None: unused) checked and made
    contiguous: all numpy or all torch (CPU), float dtypes ``dtypes.result_dtype`` combines,
    ``rows`` rows each."""
    given = [(name, value, rows) for name, value, rows in named if value is not None]
    kinds = {is_torch(value) for _, value, _ in given}
    if len(kinds) > 1:
        raise SparseTIRTypeError(f"{' and '.join(n for n, _, _ in given)} must all be numpy arrays or "
                                 "all torch tensors")
    dtypes = []
    result = []
    for name, value, rows in named:
        if value is None:
            result.append(None)
            continue
        if is_torch(value):
            check_tensor(name, value, tracked_ok=True)
            if value.device.type != "cpu":
                raise SparseTIRTypeError(f"{name} is on {value.device}; sparsetir.ops runs on the CPU")
            value = value.contiguous()
        else:
            if not isinstance(value, np.ndarray):
                raise SparseTIRTypeError(f"{name} must be a numpy array or torch tensor, got "
                                         f"{type(value).__name__}")
            value = np.ascontiguousarray(value)
        check_dtype(name, dtype_name(value))
        dtypes.append((name, dtype_name(value)))
        if value.ndim < 1 or value.shape[0] != rows:
            raise SparseTIRValueError(f"{name} must have {rows} rows (shape ({rows}, ...)), got "
                                      f"shape {tuple(value.shape)}")
        result.append(value)
    result_dtype(dtypes)
    return result


def _tracked(*values) -> bool:
    """Whether autograd must record the call."""
    import torch  # pylint: disable=import-outside-toplevel
    return torch.is_grad_enabled() and any(
        value is not None and value.requires_grad for value in values)


def _run(forward, function: str, matrix, *args):
    """``autograd.<function>.apply`` when autograd tracks a torch operand, else ``forward``
    alone (so numpy calls never import torch, which ``autograd`` needs)."""
    values = [arg for arg in args if arg is not None and not isinstance(arg, str)]
    if values and is_torch(values[0]):
        if _tracked(*values):
            from . import autograd  # pylint: disable=import-outside-toplevel
            return getattr(autograd, function).apply(matrix, *args)
        import torch  # pylint: disable=import-outside-toplevel
        with torch.no_grad():
            return forward(matrix, *args)
    return forward(matrix, *args)


def gspmm(M, op: str, reduce_op: str, lhs_data, rhs_data):
    """``out[v] = reduce_op over the in-edges e = (u, v) of op(lhs_data[u], rhs_data[e])``
    (DGL's ``gspmm``; see the module docstring).

    ``op``: ``add``, ``sub``, ``mul``, ``div``, ``copy_lhs`` (``rhs_data`` unused),
    ``copy_rhs`` (``lhs_data`` unused); ``reduce_op``: ``sum``, ``max``, ``min``, ``mean``.
    ``lhs_data``: (num_src, *F) node data of the sources; ``rhs_data``: (nnz, *F) edge data.
    Returns (num_dst, *F broadcast); a destination with no in-edge gets 0.

    A ``sparsetir.distributed.DistSparseMatrix`` gives its rank's rows (its own ``gspmm``).
    """
    if is_distributed(M):
        return M.gspmm(op, reduce_op, lhs_data, rhs_data)
    if tracing():
        from . import traced  # pylint: disable=import-outside-toplevel
        return traced.gspmm(M, op, reduce_op, lhs_data, rhs_data)
    note_gathered(lhs_data)                 # a reused large source operand: huge pages
    return gspmm_entries(as_graph(M), op, reduce_op, lhs_data, rhs_data)


def as_graph(M) -> SparseMatrix:
    """``M`` as a ``SparseMatrix`` whose stored entries are its edges, one each: parallel
    edges a matrix summed into one entry (``multiplicity``) are edges of their own again
    (``SparseMatrix.edge_matrix``), as DGL counts them in a ``max``, a ``mean`` or a softmax."""
    return as_sparse_matrix(M, "M").edge_matrix()


def gspmm_entries(matrix: SparseMatrix, op: str, reduce_op: str, lhs_data, rhs_data,
                  out=None, prepare: tuple | None = None, dtype: str | None = None):
    """``gspmm`` over ``matrix``'s stored entries, which may sum parallel edges (``spmm``'s
    weights then count them); without autograd, written into ``out`` where it can hold the
    result as it is (``generic.writes_into``), the call prepared under ``prepare``
    (``generic.gspmm_values``). The result has ``dtype`` where given (the operands are read
    as they are and the sum rounded once to it), else the autocast dtype, else the operands'
    promoted dtype."""
    lhs, rhs = gspmm_operands(matrix, op, reduce_op, lhs_data, rhs_data)
    return _run(lambda m, o, r, x, e, d: gspmm_values(m, o, r, x, e, dtype=d, out=out,
                                                      prepare=prepare)[0],
                "GSpMM",
                matrix, op, reduce_op, lhs, rhs, dtype or autocast_pair(lhs, rhs))


def gspmm_operands(matrix: SparseMatrix, op: str, reduce_op: str, lhs_data, rhs_data) -> tuple:
    """``(lhs, rhs)``: ``gspmm``'s operands checked against ``matrix`` and made contiguous
    (None where ``op`` does not read one)."""
    lhs_data, rhs_data = gspmm_read(op, reduce_op, lhs_data, rhs_data)
    lhs, rhs = _operands([("lhs_data", lhs_data, matrix.shape[1]),
                          ("rhs_data", rhs_data, matrix.nnz)])
    if lhs is not None and rhs is not None:
        broadcast_shape(tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    return lhs, rhs


def gspmm_read(op: str, reduce_op: str, lhs_data, rhs_data) -> tuple:
    """``(lhs, rhs)``: the operands ``op`` reads (None for the other), after the checks of
    ``gspmm``'s arguments that need neither the matrix nor any value (``op``, ``reduce_op``, an
    operand ``op`` reads given as None); the operator's fake implementation makes them too."""
    _choice("op", op, GSPMM_OPS)
    _choice("reduce_op", reduce_op, REDUCERS)
    return _read(op, lhs_data, rhs_data)


def gsddmm_read(op: str, lhs_data, rhs_data, lhs_target: str, rhs_target: str) -> tuple:
    """``gspmm_read`` for ``gsddmm``: ``op`` and the targets checked by name."""
    _choice("op", op, GSDDMM_OPS)
    _choice("lhs_target", lhs_target, TARGETS)
    _choice("rhs_target", rhs_target, TARGETS)
    return _read(op, lhs_data, rhs_data)


def _read(op: str, lhs_data, rhs_data) -> tuple:
    return (None if op == "copy_rhs" else _required("lhs_data", lhs_data, op),
            None if op == "copy_lhs" else _required("rhs_data", rhs_data, op))


def _required(name: str, value, op: str):
    if value is None:
        raise SparseTIRValueError(f"op {op!r} reads {name}, got None")
    return value


def gsddmm(M, op: str, lhs_data, rhs_data, lhs_target: str = "u", rhs_target: str = "v"):
    """``out[e] = op(lhs_data[lhs_target(e)], rhs_data[rhs_target(e)])`` for every edge
    ``e = (u, v)`` (DGL's ``gsddmm``; see the module docstring).

    ``op``: ``add``, ``sub``, ``mul``, ``div``, ``dot`` (over the last dimension, kept as size
    1), ``copy_lhs``, ``copy_rhs``; targets: ``u`` (source data, num_src rows), ``v``
    (destination data, num_dst rows), ``e`` (edge data, nnz rows). Returns (nnz, *F).
    A ``sparsetir.distributed.DistSparseMatrix`` gives its rank's local edges (its own
    ``gsddmm``).
    """
    if is_distributed(M):
        return M.gsddmm(op, lhs_data, rhs_data, lhs_target, rhs_target)
    if tracing():
        from . import traced  # pylint: disable=import-outside-toplevel
        return traced.gsddmm(M, op, lhs_data, rhs_data, lhs_target, rhs_target)
    noted = []                              # gathered by source: huge pages when reused
    for data, target in ((lhs_data, lhs_target), (rhs_data, rhs_target)):
        if target == "u" and not any(data is other for other in noted):     # once a call
            note_gathered(data)
            noted.append(data)
    return gsddmm_entries(as_graph(M), op, lhs_data, rhs_data, lhs_target, rhs_target)


def gsddmm_entries(matrix: SparseMatrix, op: str, lhs_data, rhs_data, lhs_target: str = "u",
                   rhs_target: str = "v", out=None, prepare: tuple | None = None):
    """``gsddmm`` over ``matrix``'s stored entries, which may sum parallel edges (``sddmm``
    gives each of them its entry's value); ``out`` and ``prepare`` as ``gspmm_entries`` takes
    them."""
    lhs, rhs = gsddmm_operands(matrix, op, lhs_data, rhs_data, lhs_target, rhs_target)
    return _run(lambda *args: gsddmm_values(*args, out=out, prepare=prepare), "GSDDMM", matrix,
                op, lhs, rhs, lhs_target, rhs_target,
                autocast_pair(lhs, rhs) if op == "dot" else None)


def gsddmm_operands(matrix: SparseMatrix, op: str, lhs_data, rhs_data, lhs_target: str,
                    rhs_target: str) -> tuple:
    """``(lhs, rhs)``: ``gsddmm``'s operands checked against ``matrix`` and made contiguous
    (None where ``op`` does not read one)."""
    lhs_data, rhs_data = gsddmm_read(op, lhs_data, rhs_data, lhs_target, rhs_target)
    rows = {"u": matrix.shape[1], "v": matrix.shape[0], "e": matrix.nnz}
    lhs, rhs = _operands([("lhs_data", lhs_data, rows[lhs_target]),
                          ("rhs_data", rhs_data, rows[rhs_target])])
    if op == "dot":
        if lhs.ndim < 2 or rhs.ndim < 2 or lhs.shape[-1] != rhs.shape[-1]:
            raise SparseTIRValueError(
                "op 'dot' sums the last feature dimension, which lhs_data and rhs_data must "
                f"both have with one length: got shapes {tuple(lhs.shape)} and "
                f"{tuple(rhs.shape)}")
        broadcast_shape(tuple(lhs.shape[1:-1]), tuple(rhs.shape[1:-1]))
    elif lhs is not None and rhs is not None:
        broadcast_shape(tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))
    return lhs, rhs


def edge_softmax(M, logits, eids=None, norm_by: str = "dst"):
    """The softmax of ``logits`` (nnz, *F) over each destination's in-edges (DGL's
    ``edge_softmax``): ``exp(logits[e]) / sum over the in-edges of e's destination``, computed
    stably. ``norm_by="src"`` normalises over each source's out-edges instead. ``eids`` (edge
    ids, positions in M's CSR order; None or DGL's ``"__ALL__"``: every edge) restricts the
    graph to those edges, in that order: ``logits`` then has one row per id, the result too
    (an id given twice is two parallel edges, as in DGL).

    Example
    -------
    >>> import numpy as np, scipy.sparse
    >>> from sparsetir.ops import SparseMatrix, edge_softmax
    >>> M = SparseMatrix(scipy.sparse.csr_matrix(np.float32([[1, 1], [0, 1]])))
    >>> edge_softmax(M, np.float32([[0.0], [0.0], [5.0]])).ravel().tolist()
    [0.5, 0.5, 1.0]
    >>> edge_softmax(M, np.float32([[0.0], [0.0]]), eids=[1, 0]).ravel().tolist()  # row 0 only
    [0.5, 0.5]
    """
    _choice("norm_by", norm_by, ("dst", "src"))
    if is_distributed(M):     # its rank's local edges
        return M.edge_softmax(logits, eids, norm_by)
    if tracing():
        if norm_by == "dst" and _every_edge(eids):
            from . import traced  # pylint: disable=import-outside-toplevel
            return traced.edge_softmax(M, logits)
        from . import untraceable  # pylint: disable=import-outside-toplevel
        return untraceable.eagerly(untraceable.SOFTMAX_FORM, edge_softmax, M, logits, eids,
                                   norm_by)
    graph, order = _softmax_graph(as_graph(M), eids, norm_by)
    (values,) = _operands([("logits", logits, graph.nnz)])
    if order is None:
        return _run(edge_softmax_values, "EdgeSoftmax", graph, values)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    scores = _run(edge_softmax_values, "EdgeSoftmax", graph, _rows(values, order))
    return _rows(scores, inverse)


def _softmax_graph(matrix: SparseMatrix, eids, norm_by: str) -> tuple:
    """``(graph, order)``: the graph whose destinations' in-edges ``edge_softmax`` normalises
    over (``matrix`` restricted to ``eids``, transposed for ``norm_by="src"``), and for each of
    its entries the row of ``logits`` it holds (None: the same row)."""
    order = None
    ids = edge_ids(eids, matrix.nnz, "M's edges")
    if ids is not None:
        order = np.argsort(ids, kind="stable")
        chosen = ids[order].astype(np.int64)
        rows = np.repeat(np.arange(matrix.shape[0]),
                         np.diff(matrix.storage("indptr")))[chosen]
        matrix = SparseMatrix.from_csr(
            np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=matrix.shape[0]))]),
            matrix.storage("indices")[chosen], np.ones(chosen.size, matrix.dtype),
            matrix.shape)
    if norm_by == "src":
        matrix, perm = matrix.transposed_pattern()
        order = perm if order is None else order[perm]
    return matrix, order


def edge_ids(eids, nnz: int, edges: str):
    """``eids`` as a 1-D numpy array of ids below ``nnz`` (refused by name otherwise, ``edges``
    saying whose edges they number), or None for every edge (None or DGL's ``"__ALL__"``)."""
    if _every_edge(eids):
        return None
    ids = np.asarray(eids.detach().cpu().numpy() if is_torch(eids) else eids)
    if ids.ndim != 1 or (ids.dtype.kind not in "iu" and ids.size):
        raise SparseTIRTypeError(f"eids must be a 1-D array of integer edge ids, got "
                                 f"{ids.dtype} of shape {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= nnz):
        raise SparseTIRValueError(f"eids holds ids outside [0, {nnz}) ({edges}): "
                                  f"{ids.min()}..{ids.max()}")
    return ids


def _every_edge(eids) -> bool:
    """Whether ``eids`` names every edge: None, or DGL's ``"__ALL__"``."""
    return eids is None or (isinstance(eids, str) and eids == "__ALL__")


def _rows(array, order: np.ndarray):
    """``array[order]`` along the first axis, for numpy or torch (autograd kept)."""
    if is_torch(array):
        import torch  # pylint: disable=import-outside-toplevel
        return array.index_select(0, torch.from_numpy(np.array(order, np.int64)))
    return array[order]


def segment_reduce(seglen, value, reducer: str = "sum"):
    """Reduce consecutive segments of ``value``'s rows: segment ``i`` is the next
    ``seglen[i]`` rows (DGL's ``segment_reduce``; ``seglen`` of any signed or unsigned integer
    dtype); an empty segment gives 0.

    Example
    -------
    >>> import numpy as np
    >>> segment_reduce(np.array([2, 0, 1]), np.float32([[1], [2], [7]]), "max").ravel().tolist()
    [2.0, 0.0, 7.0]
    """
    if tracing():
        from . import traced  # pylint: disable=import-outside-toplevel
        return traced.segment_reduce(seglen, value, reducer)
    return gspmm(segments_matrix(seglen, value, reducer), "copy_lhs", reducer, value, None)


def segments_matrix(seglen, value, reducer: str) -> SparseMatrix:
    """The matrix whose row ``i`` sums the ``seglen[i]`` rows of ``value`` after the earlier
    segments' (``segment_reduce``'s arguments, checked by name)."""
    _choice("reducer", reducer, REDUCERS)
    if hasattr(value, "dtype"):
        check_dtype("value", dtype_name(value))
    return _segments(seglen, value)


def segment_softmax(seglen, value):
    """The softmax of ``value``'s rows within each segment (DGL's ``segment_softmax``):
    segment ``i`` is the next ``seglen[i]`` rows; the result has ``value``'s shape.

    Example
    -------
    >>> import numpy as np
    >>> segment_softmax(np.array([2, 0, 1]), np.float32([[0], [0], [7]])).ravel().tolist()
    [0.5, 0.5, 1.0]
    """
    if tracing():           # it makes a SparseMatrix of the segments
        from . import untraceable  # pylint: disable=import-outside-toplevel
        return untraceable.eagerly(untraceable.SEGMENT_SOFTMAX, segment_softmax, seglen, value)
    return edge_softmax(_segments(seglen, value), value)


def _segments(seglen, value) -> SparseMatrix:
    """The (segments x rows of ``value``) matrix whose row ``i`` holds the rows of segment
    ``i``, one entry each, in order; ``seglen`` checked by name."""
    lengths = np.asarray(seglen.detach().cpu().numpy() if is_torch(seglen) else seglen)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise SparseTIRTypeError(f"seglen must be a 1-D integer array, got {lengths.dtype} of "
                                 f"shape {lengths.shape}")
    if (lengths < 0).any():
        raise SparseTIRValueError(f"seglen has a negative length ({lengths.min()})")
    if len(getattr(value, "shape", ())) == 0:
        raise SparseTIRTypeError(f"value must be a numpy array or torch tensor with one row per "
                                 f"segment entry, got {type(value).__name__} "
                                 f"of shape {getattr(value, 'shape', None)}")
    rows = value.shape[0]
    if lengths.size and lengths.max() > rows:
        raise SparseTIRValueError(f"seglen holds {lengths.max()}, more than value's {rows} "
                                  "rows")
    lengths = lengths.astype(np.int64)   # unsigned too: cumsum with [0] would be float64
    if int(lengths.sum()) != rows:
        raise SparseTIRValueError(f"seglen sums to {int(lengths.sum())}, but value has {rows} "
                                  "rows")
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    return SparseMatrix.from_csr(indptr, np.arange(rows), np.ones(rows, np.float32),
                                 (lengths.size, rows))
