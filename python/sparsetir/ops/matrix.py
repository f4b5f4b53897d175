"""``SparseMatrix``: a CSR matrix validated once and kept in the form the kernels take.

The arrays are private copies (int32 index arrays, float32 values, column indices sorted
within each row, duplicates summed) over immutable memory (``bytes``: numpy will not make them
writable), checked once when the matrix is made; calls on it then skip the per-call index
checks, which is sound because nobody can change the copies, and hand the kernels tvm tensors
over the same memory, made once, so that a call converts and copies nothing of the matrix.

Example
-------
>>> import scipy.sparse, sparsetir.ops
>>> M = sparsetir.ops.SparseMatrix(scipy.sparse.random(4, 3, density=0.5, format="csr"))
>>> M.shape, M.indptr.dtype, M.indices.flags.writeable
((4, 3), dtype('int32'), False)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import tvm_ffi

from ..format import check_csr
from ..runtime.arguments import writable_alias


class SparseMatrix:
    """A validated CSR matrix (see the module docstring).

    Parameters
    ----------
    matrix : scipy.sparse matrix or array, or torch sparse tensor (CSR or COO)
        Any scipy sparse format is converted to CSR.

    Attributes
    ----------
    shape : tuple of int
    indptr, indices : numpy.ndarray (int32, read-only)
    data : numpy.ndarray (float32, read-only)
    nnz : int
    """

    def __init__(self, matrix):
        if isinstance(matrix, SparseMatrix):
            matrix = matrix.to_scipy()
        csr = _as_scipy_csr(matrix)
        if max(csr.shape) >= 2**31 or csr.nnz >= 2**31:
            raise ValueError(f"a matrix of shape {csr.shape} with {csr.nnz} nonzeros needs "
                             "int64 indices, which sparsetir.ops does not offer yet")
        check_csr(csr.indptr, csr.indices, csr.shape)
        if np.iscomplexobj(csr.data):
            raise TypeError("sparsetir.ops works on real matrices, got complex values")
        # copies: sum_duplicates sorts in place, and the caller's arrays must stay as they are
        csr = scipy.sparse.csr_matrix((np.array(csr.data, np.float32, copy=True),
                                       csr.indices.copy(), csr.indptr.copy()), shape=csr.shape)
        csr.sum_duplicates()            # sorts the indices of every row too
        self.shape = tuple(int(s) for s in csr.shape)
        self.indptr, self.indices, self.data = (
            _immutable(array, dtype) for array, dtype in (
                (csr.indptr, np.int32), (csr.indices, np.int32), (csr.data, np.float32)))
        self.nnz = int(self.indices.size)
        self._tiles = {}
        self._tensors = {}
        self.prepared = {}      # what the operators prepare once per matrix (bound kernels)
        self.calls = {}         # operator and operand shapes -> (bound kernel, result shape)

    def tensor(self, array: np.ndarray):
        """The tvm tensor over one of this matrix's arrays (``indptr``, ``indices``, ``data``
        or one from ``row_tiles``), for passing to a kernel without a conversion; kept."""
        key = id(array)
        if key not in self._tensors:   # the kernels only read it: a writable alias will do
            alias = writable_alias(array) if array.size else np.empty(0, array.dtype)
            self._tensors[key] = (array, tvm_ffi.from_dlpack(alias))
        return self._tensors[key][1]

    def row_tiles(self, tiles: int) -> tuple:
        """``(tile_ptr, rows)``: ``tiles`` ranges of rows holding about ``nnz / tiles``
        nonzeros each (``tile_ptr``, length ``tiles + 1``) and the row ids ``0..m-1``; kept."""
        if tiles not in self._tiles:
            m = self.shape[0]
            bounds = np.searchsorted(self.indptr, np.linspace(0, self.nnz, tiles + 1))
            bounds = np.clip(bounds, 0, m)
            bounds[0], bounds[-1] = 0, m
            rows = next(iter(self._tiles.values()))[1] if self._tiles \
                else _immutable(np.arange(m), np.int32)
            self._tiles[tiles] = (_immutable(bounds, np.int32), rows)
        return self._tiles[tiles]

    def arrays(self) -> dict:
        """Every array of the matrix made so far, by name (``tile_ptr<tiles>`` for each
        ``row_tiles`` count)."""
        arrays = {"indptr": self.indptr, "indices": self.indices, "data": self.data}
        for tiles, (tile_ptr, rows) in self._tiles.items():
            arrays[f"tile_ptr{tiles}"], arrays["rows"] = tile_ptr, rows
        return arrays

    def __reduce__(self):
        """Copies and pickles are made again from the arrays (validated; no kernels kept)."""
        return SparseMatrix, (self.to_scipy(),)

    def to_scipy(self) -> scipy.sparse.csr_matrix:
        """A scipy CSR matrix over copies of the arrays."""
        return scipy.sparse.csr_matrix((self.data.copy(), self.indices.copy(),
                                        self.indptr.copy()), shape=self.shape)

    def __repr__(self) -> str:
        return f"SparseMatrix(shape={self.shape}, nnz={self.nnz})"


def as_sparse_matrix(matrix) -> SparseMatrix:
    """``matrix`` itself when it is a ``SparseMatrix``, else a new one made from it."""
    return matrix if isinstance(matrix, SparseMatrix) else SparseMatrix(matrix)


def _immutable(array, dtype) -> np.ndarray:
    """A copy of ``array`` as ``dtype`` over a ``bytes`` object: read-only for good (numpy
    refuses to make an array over immutable memory writable)."""
    return np.frombuffer(np.ascontiguousarray(array, dtype).tobytes(), dtype)


def _as_scipy_csr(matrix) -> scipy.sparse.csr_matrix:
    if scipy.sparse.issparse(matrix):
        if matrix.ndim != 2:
            raise TypeError(f"a sparse matrix has 2 dimensions, got {matrix.ndim}")
        return scipy.sparse.csr_matrix(matrix)
    layout = getattr(matrix, "layout", None)
    if layout is not None and "sparse" in str(layout):
        import torch  # pylint: disable=import-outside-toplevel
        if matrix.dim() != 2:
            raise TypeError(f"a sparse matrix has 2 dimensions, got {matrix.dim()}")
        if matrix.layout == torch.sparse_coo:
            matrix = matrix.coalesce().to_sparse_csr()
        if matrix.layout != torch.sparse_csr:
            raise TypeError(f"a torch sparse tensor must be CSR or COO, got {matrix.layout}")
        cpu = matrix.detach().cpu()
        return scipy.sparse.csr_matrix((cpu.values().numpy(), cpu.col_indices().numpy(),
                                        cpu.crow_indices().numpy()), shape=tuple(matrix.shape))
    raise TypeError("sparsetir.ops takes a scipy sparse matrix, a torch sparse CSR/COO tensor "
                    f"or a SparseMatrix, got {type(matrix).__name__}")
