"""scipy.sparse: ``A @ X`` on a ``csr_matrix`` (single-threaded whatever the thread count).

No SDDMM: scipy has no sampled product, so it is n/a. The unweighted product uses a copy of
``A`` with ones as values, made once outside the timed region.

Example
-------
>>> c = Scipy(A, threads=2)
>>> Y = c.spmm(X, weighted=False)()
"""

from __future__ import annotations

from contenders import Contender, ones_like


class Scipy(Contender):
    def spmm(self, X, weighted):
        A = self.A if weighted else ones_like(self.A)
        return lambda: A @ X


CONTENDER = Scipy
