"""Orders of a square matrix's rows and columns that keep neighbours close, for users who can
keep their features in that order (``SparseMatrix.reorder``).

An SpMM gathers one row of X per nonzero; when the nonzeros of nearby rows point to nearby rows
of X, those gathers hit the caches. A graph whose node ids are random (a synthetic or hashed
graph) gathers from everywhere. Renumbering the nodes, ``B = P A P^T``, changes no result (``Y =
A X`` is ``B (P X)`` read back through ``P``) but the order of the gathers:

* ``"rcm"``: reverse Cuthill-McKee on the pattern of ``A + A^T`` (scipy): a narrow band;
* ``"degree"``: nodes by decreasing degree (in + out), the hubs' rows together;
* ``"metis"``: METIS partitions (``pymetis``) of about 2048 nodes each, node ids grouped by part.

Measured (``docs/tuning.md``): RCM made SpMM 1.1x faster on an arxiv-size power-law graph and
1.3x on an R-MAT graph of the same size, 2 threads.

Example
-------
>>> import numpy as np, scipy.sparse
>>> A = scipy.sparse.random(50, 50, density=0.1, format="csr", dtype=np.float32, random_state=0)
>>> perm = reordering(A, "rcm")
>>> sorted(perm.tolist()) == list(range(50))
True
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import reverse_cuthill_mckee

from ..errors import SparseTIRValueError

METHODS = ("rcm", "degree", "metis")
METIS_PART_NODES = 2048


def reordering(matrix, method: str = "rcm") -> np.ndarray:
    """A permutation ``perm`` of the nodes of the square matrix ``matrix`` (scipy CSR or a
    ``SparseMatrix``): node ``perm[k]`` becomes node ``k``. ``method``: see the module
    docstring."""
    shape = tuple(matrix.shape)
    if shape[0] != shape[1]:
        raise SparseTIRValueError(f"reorder renumbers the nodes of a square matrix (a graph); "
                                  f"this one has shape {shape}")
    if method not in METHODS:
        raise SparseTIRValueError(f"no reordering {method!r}; methods: {', '.join(METHODS)}")
    n = shape[0]
    if n == 0:
        return np.arange(0, dtype=np.int64)
    indptr, indices = (matrix.storage("indptr"), matrix.storage("indices")) \
        if hasattr(matrix, "storage") else (matrix.indptr, matrix.indices)
    pattern = scipy.sparse.csr_matrix(
        (np.ones(len(indices), np.int8), np.array(indices), np.array(indptr)), shape=shape)
    symmetric = (pattern + pattern.T).tocsr()
    if method == "rcm":
        return reverse_cuthill_mckee(symmetric, symmetric_mode=True).astype(np.int64)
    if method == "degree":
        degree = np.diff(pattern.indptr) + np.bincount(pattern.indices, minlength=n)
        return np.argsort(-degree, kind="stable").astype(np.int64)
    return _metis_order(symmetric)


def _metis_order(symmetric) -> np.ndarray:
    try:
        import pymetis  # pylint: disable=import-outside-toplevel
    except ImportError as err:
        raise SparseTIRValueError("reorder('metis') needs pymetis (pip install pymetis)") from err
    n = symmetric.shape[0]
    parts = max(2, -(-n // METIS_PART_NODES))
    symmetric = symmetric.tolil()
    symmetric.setdiag(0)
    symmetric = symmetric.tocsr()
    symmetric.eliminate_zeros()
    if n < 2 or symmetric.nnz == 0:
        return np.arange(n, dtype=np.int64)
    _, membership = pymetis.part_graph(
        parts, adjacency=pymetis.CSRAdjacency(symmetric.indptr, symmetric.indices))
    return np.argsort(np.asarray(membership), kind="stable").astype(np.int64)


def permuted(indptr: np.ndarray, indices: np.ndarray, perm: np.ndarray) -> tuple:
    """``(indptr, indices, order)``: the pattern of ``P A P^T`` for the square CSR pattern
    ``indptr, indices`` of ``A`` (row and column ``k`` are the old ``perm[k]``), columns sorted
    within each row, and for each of its entries the position of the same entry in ``A``.
    Every entry of ``A`` stays one: entries of one position (parallel edges) are neither
    merged nor reordered among themselves.

    Example
    -------
    >>> indptr, indices, order = permuted(np.array([0, 2, 3]), np.array([1, 1, 0]),
    ...                                   np.array([1, 0]))         # row 0 holds column 1 twice
    >>> indptr.tolist(), indices.tolist(), order.tolist()
    ([0, 1, 3], [1, 0, 0], [2, 0, 1])
    """
    size = indptr.size - 1
    renumbered = np.empty(size, np.int64)
    renumbered[perm] = np.arange(size)
    rows = renumbered[np.repeat(np.arange(size), np.diff(indptr))]
    columns = renumbered[indices]
    order = np.lexsort((columns, rows))            # stable: parallel edges keep their order
    counts = np.bincount(rows, minlength=size)
    return np.concatenate([[0], np.cumsum(counts)]), columns[order], order
