"""Sparse operators users call like torch's: ``spmm`` and ``sddmm`` over a CSR matrix.

Every kernel is produced by the compiler (``kernels`` written once in Stage I, scheduled in
``schedules``), compiled once per machine (``cache``: in memory and on disk under
``cache_dir()``; ``clear_cache()`` empties it). A matrix is validated once: wrap it in
``SparseMatrix`` and pass that; a plain scipy matrix or torch sparse tensor is wrapped (and so
validated) on every call. numpy in gives numpy out, torch in gives torch out; ``out=`` writes
into the caller's array.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir.ops
>>> A = scipy.sparse.random(50, 40, density=0.1, format="csr", dtype=np.float32)
>>> X = np.ones((40, 32), np.float32)
>>> M = sparsetir.ops.SparseMatrix(A)                  # validated once
>>> np.allclose(sparsetir.ops.spmm(M, X), A @ X, atol=1e-5)
True
>>> Y = np.ones((50, 32), np.float32)
>>> sparsetir.ops.sddmm(M, Y, X).shape                 # one value per nonzero of M
(200,)
"""

from __future__ import annotations

from .cache import cache_dir, clear_cache
from .matrix import SparseMatrix
from .operators import sddmm, spmm

__all__ = ["SparseMatrix", "cache_dir", "clear_cache", "sddmm", "spmm"]
