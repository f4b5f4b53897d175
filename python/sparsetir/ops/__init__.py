"""Sparse operators users call like torch's and DGL's, over a CSR matrix.

``spmm`` and ``sddmm``, and DGL's generalised operator set (``graph_ops``): ``gspmm``,
``gsddmm``, ``edge_softmax``, ``segment_reduce``, ``segment_softmax``, the typed products
``gather_mm`` and ``segment_mm``, and DGL's short names (``copy_u_sum``, ``u_mul_e_sum``, ``u_dot_v``,
``u_add_v``, ``copy_u_mean``, ``copy_u_max``, ...). One convention, DGL's: a matrix's rows are
destinations ``v``, its columns sources ``u``, its stored nonzeros the edges, in CSR order. So
``spmm(M, X)`` is ``u_mul_e_sum(M, X, M.values)`` and ``sddmm(M, X, Y)`` (``X[row] .
Y[col]``) is ``u_dot_v(M, Y, X)``.

Every kernel is produced by the compiler (``kernels`` and ``generic_kernels`` written once in
Stage I, scheduled in ``schedule``), compiled once per machine (``cache``: in memory and on
disk under ``cache_dir()``; ``clear_cache()`` forgets them and removes the cache's own entries,
nothing else; where the disk cache cannot be used safely a ``CacheWarning`` says why). A
matrix is validated once: wrap it in ``SparseMatrix`` and pass that; a plain scipy matrix or
torch sparse tensor is wrapped (and so validated) on every call. numpy in gives numpy out,
torch in gives torch out; ``out=`` writes into the caller's array. Values are float32 or
float64 (one dtype per call: nothing is cast). ``sddmm`` gives its values in the caller's
nonzero order (``SparseMatrix.source_order``).

Importing ``sparsetir.ops`` makes the kernels loaded from then on run their parallel loops on
sparsetir's task pool (calls on numpy arrays: threads take a loop's shares one at a time, so a
call never waits for a thread the OS has parked) or on torch's OpenMP team (calls on torch
tensors, between torch's operators), not on TVM's pool (``runtime.threads.cooperate_with_torch``);
setting one of TVM's pool variables keeps TVM's.

Torch tensors carry autograd: every backward pass is made of compiled kernels too
(``autograd``), and edge values that require grad come in through
``SparseMatrix.from_csr(indptr, indices, values, shape)``. A second derivative raises, as do
``torch.func`` transforms (``grad``, ``vmap``), forward-mode tangents
(``torch.autograd.forward_ad``: a kernel would drop them) and sparse tensors given as dense
operands.

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
from ..runtime.threads import cooperate_with_torch
from ..driver.cache import cache_dir, clear_cache
from .aliases import *  # noqa: F401,F403  (DGL's short names: copy_u_sum, u_dot_v, ...)
from .aliases import ALIASES
from .graph_ops import edge_softmax, gsddmm, gspmm, segment_reduce, segment_softmax
from .matrix import SparseMatrix
from .operators import sddmm, spmm
from .typed import gather_mm, segment_mm
try:                        # torch is optional: without it the operators take numpy arrays
    import torch  # noqa: F401  pylint: disable=unused-import
except ImportError:
    pass
else:
    from . import custom_ops    # noqa: F401  (torch.ops.sparsetir.*, for torch.compile / export)
from ..tune import TuneReport, tune

cooperate_with_torch()      # kernels run on sparsetir's task pool (runtime/threads.py)

__all__ = ["CacheWarning", "SparseMatrix", "TuneReport", "cache_dir", "clear_cache",
           "edge_softmax", "gather_mm", "gsddmm", "gspmm", "sddmm", "segment_mm",
           "segment_reduce", "segment_softmax", "spmm", "tune"] + sorted(ALIASES)
