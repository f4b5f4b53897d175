"""Sparse operators users call like torch's: ``spmm`` and ``sddmm`` over a CSR matrix.

Every kernel is produced by the compiler (``kernels`` written once in Stage I, scheduled in
``schedules``), compiled once per machine (``cache``: in memory and on disk under
``cache_dir()``; ``clear_cache()`` forgets them and removes the cache's own entries, nothing
else; where the disk cache cannot be used safely a ``CacheWarning`` says why). A matrix is validated once: wrap it in
``SparseMatrix`` and pass that; a plain scipy matrix or torch sparse tensor is wrapped (and so
validated) on every call. numpy in gives numpy out, torch in gives torch out; ``out=`` writes
into the caller's array. Values are float32 (a float64 matrix is refused by name, not cast);
``sddmm`` gives its values in the caller's nonzero order (``SparseMatrix.source_order``).
There is no autograd yet: a torch tensor that requires grad is refused while grad mode is on,
as are ``torch.func`` tensors and sparse tensors given as dense operands.

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

from ..backend.cache_folder import CacheWarning
from ..driver.cache import cache_dir, clear_cache
from .aliases import *  # noqa: F401,F403  (DGL's short names: copy_u_sum, u_dot_v, ...)
from .aliases import ALIASES
from .graph_ops import edge_softmax, gsddmm, gspmm, segment_reduce
from .matrix import SparseMatrix
from .operators import sddmm, spmm

__all__ = ["CacheWarning", "SparseMatrix", "cache_dir", "clear_cache", "edge_softmax",
           "gsddmm", "gspmm", "sddmm", "segment_reduce", "spmm"] + sorted(ALIASES)
