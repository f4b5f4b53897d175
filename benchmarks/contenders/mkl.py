"""Intel MKL sparse BLAS through ``sparse_dot_mkl.dot_product_mkl(A, X, out=Y, out_scalar=0)``
(scipy CSR times numpy, into a preallocated output: ``Y = A @ X + 0 * Y``, which MKL writes
without reading ``Y``, as BLAS does for a zero beta; ``Y`` starts as NaN).

``sparse_dot_mkl`` finds ``libmkl_rt`` through ``MKL_RT`` or ``LD_LIBRARY_PATH``; when neither is
set, this module points ``MKL_RT`` at the one the ``mkl`` pip package put in ``<venv>/lib``.
No SDDMM in MKL's C sparse BLAS: n/a. The unweighted product uses a ones-valued copy of ``A``
made outside the timed region. Threads: ``MKL_NUM_THREADS`` (set by the harness).

Example
-------
>>> c = Mkl(A, threads=2)
>>> Y = c.spmm(X, weighted=True)()
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np


def find_mkl_rt() -> str | None:
    """The newest ``libmkl_rt.so*`` in this environment's ``lib`` folder, if any."""
    found = sorted(Path(sys.prefix, "lib").glob("libmkl_rt.so*"))
    return str(found[-1]) if found else None


if "MKL_RT" not in os.environ and (found := find_mkl_rt()):
    os.environ["MKL_RT"] = found

from sparse_dot_mkl import dot_product_mkl  # noqa: E402  (reads MKL_RT when imported)

from contenders import Contender, ones_like  # noqa: E402


class Mkl(Contender):
    def spmm(self, X, weighted):
        A = self.A if weighted else ones_like(self.A)
        out = np.full((A.shape[0], X.shape[1]), np.nan, np.float32)
        return lambda: dot_product_mkl(A, X, out=out, out_scalar=0.0)


CONTENDER = Mkl
