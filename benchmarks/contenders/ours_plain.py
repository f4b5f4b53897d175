"""sparsetir's operators called with the plain scipy matrix on every call (no ``SparseMatrix``).

The call users write first: ``sparsetir.ops.spmm(A, X)`` with ``A`` a scipy CSR matrix. Its
arrays are checked by the kernel at every call (``ops/plain.py``; from the third call of the
same sizes through ``ops/plain_calls.py``), so the time includes the index checks a wrapped
matrix skips. Otherwise as ``ours``.

Example
-------
>>> c = OursPlain(A, threads=2)
>>> Y = c.spmm(X, weighted=True)()
"""

from __future__ import annotations

from contenders import Contender
from contenders.ours import Ours


class OursPlain(Ours):
    def __init__(self, A, threads: int):   # pylint: disable=super-init-not-called
        Contender.__init__(self, A, threads)
        self.matrix = A                     # passed as it is to every call


CONTENDER = OursPlain
