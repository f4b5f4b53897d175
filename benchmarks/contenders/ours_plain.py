"""sparsetir's operators called with the plain scipy matrix on every call (no ``SparseMatrix``).

The call users write first: ``sparsetir.ops.spmm(A, X)`` with ``A`` a scipy CSR matrix. Its
arrays are checked by the kernel at every call (``ops/plain.py``), so the time includes the
index checks a wrapped matrix skips.

Example
-------
>>> c = OursPlain(A, threads=2)
>>> Y = c.spmm(X, weighted=True)()
"""

from __future__ import annotations

import numpy as np
import sparsetir.ops

from contenders import Contender, ones_like


class OursPlain(Contender):
    def __init__(self, A, threads: int):
        super().__init__(A, threads)
        self.unweighted = ones_like(A)

    def spmm(self, X, weighted):
        A = self.A if weighted else self.unweighted
        out = np.full((A.shape[0], X.shape[1]), np.nan, np.float32)

        def run():
            sparsetir.ops.spmm(A, X, out=out)
            return out
        return run

    def sddmm(self, X, Y):
        out = np.full(self.A.nnz, np.nan, np.float32)

        def run():
            sparsetir.ops.sddmm(self.A, X, Y, out=out)
            return out
        return run


CONTENDER = OursPlain
