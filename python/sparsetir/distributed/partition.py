"""``partition``: split a square sparse matrix (a graph) into parts, one per process.

Node ``v`` -- row ``v`` of ``A`` and row ``v`` of the features -- belongs to one part. A part
keeps its owned rows and, for every part ``q`` (itself included), the *block* of its rows'
entries whose columns ``q`` owns, as CSR over ``q``'s local numbering (node ``owned_q[k]`` is
column ``k`` of block ``q``). The local edges are the blocks' entries in block order (block 0's
CSR, then block 1's, ...); ``global_edges`` maps them to ``A``'s CSR positions.

Methods:

* ``"contiguous"``: consecutive row ranges balanced by nonzeros (plus one per row, so empty
  rows are spread too);
* ``"metis"``: METIS (``pymetis``) on the symmetric pattern of ``A``, which cuts fewer edges
  and so exchanges fewer rows; owned rows stay in increasing global order within a part.

Example
-------
>>> import numpy as np, scipy.sparse
>>> A = scipy.sparse.random(8, 8, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> parts = partition(A, 2)
>>> [p.owned.tolist() for p in parts]
[[0, 1, 2, 3, 4], [5, 6, 7]]
>>> sum(p.nnz for p in parts) == A.nnz
True
"""

from __future__ import annotations

import hashlib

import numpy as np
import scipy.sparse

from ..errors import SparseTIRTypeError, SparseTIRValueError
from .part import Block, Part

METHODS = ("contiguous", "metis")


def partition(A, num_parts: int, method: str = "contiguous") -> list:
    """``num_parts`` :class:`Part` objects covering the square matrix ``A`` (scipy sparse, any
    format; float32 or float64). An entry stored twice (a parallel edge) is refused: the
    single-process operators count each parallel edge (DGL's ``copy_u_sum``, degrees), the
    parts would hold one; ``A.sum_duplicates()`` merges them first, if that is what you mean.
    The parts share a ``partition_id``, a digest of the matrix and the owner of every node,
    which ``save`` and ``DistSparseMatrix`` compare. See the module docstring."""
    matrix = _canonical(A)
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)) \
            or num_parts < 1:
        raise SparseTIRValueError(f"num_parts must be a positive integer, got {num_parts!r}")
    num_parts = int(num_parts)
    if method not in METHODS:
        raise SparseTIRValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    n = matrix.shape[0]
    if num_parts > max(n, 1):
        raise SparseTIRValueError(f"num_parts ({num_parts}) exceeds the matrix's {n} rows")
    owner = (_contiguous_owner if method == "contiguous" else _metis_owner)(matrix, num_parts)
    return parts_of(matrix, owner, num_parts, partition_digest(matrix, owner))


def partition_digest(matrix: scipy.sparse.csr_matrix, owner: np.ndarray) -> str:
    """The SHA-256 (hex) of the canonical CSR ``matrix`` (pattern and values) and of each
    node's part: parts of one partition share it, parts of two rarely do.

    Example
    -------
    >>> A = scipy.sparse.csr_matrix(np.float32([[1, 0], [2, 3]]))
    >>> partition_digest(A, np.array([0, 1])) == partition_digest(A, np.array([0, 0]))
    False
    """
    digest = hashlib.sha256(np.int64(matrix.shape).tobytes())
    for array in (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64),
                  matrix.data, np.asarray(owner, np.int64)):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _canonical(A) -> scipy.sparse.csr_matrix:
    if not scipy.sparse.issparse(A):
        raise SparseTIRTypeError(f"A must be a scipy sparse matrix, got {type(A).__name__}")
    if A.shape[0] != A.shape[1]:
        raise SparseTIRValueError(f"A must be square (a graph: row v and column v are node v), "
                                  f"got shape {A.shape}")
    if A.dtype not in (np.float32, np.float64):
        raise SparseTIRTypeError(f"A must be float32 or float64, got {A.dtype}")
    if A.format in ("csr", "csc", "bsr"):
        try:
            A.check_format(full_check=True)
        except ValueError as err:       # scipy would read out of bounds or build a wrong graph
            raise SparseTIRValueError(f"A is not a valid {A.format.upper()} matrix: {err}") \
                from None
    if A.format == "coo":               # scipy converts COO without a check: out of bounds
        _check_coordinates(A)
    coo = A.tocoo()
    keys = np.sort(coo.row.astype(np.int64) * A.shape[1] + coo.col.astype(np.int64))
    repeated = np.flatnonzero(np.diff(keys) == 0)
    if repeated.size:
        first = keys[repeated[0]]
        raise SparseTIRValueError(
            f"A stores entry ({first // A.shape[1]}, {first % A.shape[1]}) more than once (a "
            "parallel edge): the single-process operators count each parallel edge, a part "
            "would hold one entry; call A.sum_duplicates() first to merge them")
    matrix = scipy.sparse.csr_matrix(A, copy=True)
    matrix.sort_indices()
    return matrix


def _check_coordinates(A) -> None:
    """Refuse a COO matrix whose coordinate arrays are not integers within its shape."""
    for name, coords, size in (("row", A.row, A.shape[0]), ("col", A.col, A.shape[1])):
        if coords.dtype.kind not in "iu" or coords.shape != A.data.shape:
            raise SparseTIRValueError(f"A.{name} must be integers, one per value of A.data, "
                                      f"got {coords.dtype} of shape {coords.shape}")
        bad = np.flatnonzero((coords < 0) | (coords >= size))
        if bad.size:
            raise SparseTIRValueError(f"A.{name}[{bad[0]}] = {coords[bad[0]]} is outside "
                                      f"[0, {size}) (A has shape {A.shape})")


def _contiguous_owner(matrix, num_parts: int) -> np.ndarray:
    """Row ranges whose nonzeros plus rows are as equal as the rows allow."""
    n = matrix.shape[0]
    work = matrix.indptr[1:].astype(np.int64) + np.arange(1, n + 1)   # cumulative, per row end
    targets = work[-1] * np.arange(1, num_parts) / num_parts if n else np.zeros(0)
    cuts = np.searchsorted(work, targets, side="left") + 1
    for k in range(num_parts - 1):          # strictly increasing: every part gets a row
        low = cuts[k - 1] + 1 if k else 1
        cuts[k] = min(max(cuts[k], low), n - (num_parts - 1 - k))
    return np.repeat(np.arange(num_parts), np.diff(np.concatenate([[0], cuts, [n]])))


def _metis_owner(matrix, num_parts: int) -> np.ndarray:
    n = matrix.shape[0]
    if num_parts == 1:
        return np.zeros(n, np.int64)
    try:
        import pymetis  # pylint: disable=import-outside-toplevel
    except ImportError as err:
        raise SparseTIRValueError("partition(method='metis') needs pymetis "
                                  "(pip install pymetis)") from err
    pattern = matrix.copy()
    pattern.data = np.ones_like(pattern.data)
    symmetric = (pattern + pattern.T).tocsr()
    symmetric.setdiag(0)
    symmetric.eliminate_zeros()
    symmetric.sort_indices()
    _, membership = pymetis.part_graph(num_parts, adjacency=pymetis.CSRAdjacency(
        symmetric.indptr.astype(np.int64), symmetric.indices.astype(np.int64)))
    return np.asarray(membership, dtype=np.int64)


def parts_of(matrix: scipy.sparse.csr_matrix, owner: np.ndarray, num_parts: int,
             partition_id: str = "") -> list:
    """The parts of the canonical CSR ``matrix`` when node ``v`` belongs to ``owner[v]``,
    each carrying ``partition_id``."""
    n = matrix.shape[0]
    owned = [np.flatnonzero(owner == q) for q in range(num_parts)]
    local_id = np.empty(n, np.int64)
    for members in owned:
        local_id[members] = np.arange(members.size)
    out_degrees = np.bincount(matrix.indices, minlength=n).astype(np.int64)
    col_owner = owner[matrix.indices]
    parts = []
    for p, rows in enumerate(owned):
        starts, ends = matrix.indptr[rows], matrix.indptr[rows + 1]
        lengths = (ends - starts).astype(np.int64)
        positions = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + \
            np.arange(lengths.sum())                    # each row's entries, in A's CSR order
        row_of = np.repeat(np.arange(rows.size), lengths)
        blocks, edges = [], []
        for q in range(num_parts):
            keep = col_owner[positions] == q
            chosen = positions[keep]
            counts = np.bincount(row_of[keep], minlength=rows.size)
            blocks.append(Block(indptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int32),
                                indices=local_id[matrix.indices[chosen]].astype(np.int32),
                                data=matrix.data[chosen].copy(), num_cols=int(owned[q].size)))
            edges.append(chosen)
        parts.append(Part(rank=p, num_parts=num_parts, num_nodes=n, nnz_total=int(matrix.nnz),
                          owned=rows.astype(np.int64), blocks=blocks,
                          global_edges=np.concatenate(edges).astype(np.int64),
                          out_degrees=out_degrees[rows], partition_id=partition_id))
    return parts
