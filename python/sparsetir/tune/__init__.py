"""Per-matrix search: the layout and schedule that run an operator fastest on one matrix,
machine, thread count and feature size (``sparsetir.ops.tune``; ``SparseMatrix(A, tune=True)``
searches at each kernel's first call).

The pieces, each replaceable alone: ``candidates`` (what may be chosen, as data), ``cost_model``
(which few are worth measuring), ``measure`` (bound to the matrix, checked against scipy on
NaN-filled outputs, timed as whole calls), ``records`` (choices kept on disk, keyed by the
matrix's pattern and the machine; a corrupt or foreign record is ignored), ``search`` (the
loop that ties them together).

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir.ops as ops
>>> A = scipy.sparse.random(2000, 2000, density=0.005, format="csr", dtype=np.float32)
>>> M = ops.SparseMatrix(A)
>>> report = ops.tune(M, [32], ops=("spmm",), budget_s=2)      # print(report): a table
>>> [(o.kernel, o.feat_size) for o in report.outcomes]
[('spmm', 32), ('spmm_unweighted', 32)]
>>> Y = ops.spmm(M, np.ones((2000, 32), np.float32))          # runs the chosen kernel
>>> np.allclose(Y, A @ np.ones((2000, 32), np.float32), atol=1e-4)
True
"""

from ..ops import tuning as _tuning
from .search import TuneReport, tune  # noqa: F401

_tuning.search = tune          # SparseMatrix(A, tune=True) searches through it

__all__ = ["tune", "TuneReport"]
