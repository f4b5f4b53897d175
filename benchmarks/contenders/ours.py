"""sparsetir's operator API: ``sparsetir.ops.spmm`` / ``sddmm`` on a prepared ``SparseMatrix``.

``SparseMatrix(A)`` is made once per graph, outside the timed region (like a DGL graph); each
call writes into a preallocated output (``out=``). The first call of each operator and feature
size compiles (or fetches) its kernel: the worker reports that first call apart from the timed
calls. In bfloat16 the inputs are bfloat16 torch tensors and every call runs under
``torch.autocast("cpu", dtype=torch.bfloat16)``, as a mixed-precision model calls it: SpMM
reads the matrix's float32 values as they are, every kernel sums in float32 and rounds once
to a bfloat16 output (docs/half-precision.md). Threads: ``TVM_NUM_THREADS``, set by the
harness.

Example
-------
>>> c = Ours(A, threads=2)
>>> Y = c.spmm(X, weighted=True)()
"""

from __future__ import annotations

import numpy as np
import sparsetir.ops

from contenders import Contender


def _autocast(call, dtype: str):
    """``call`` under torch's CPU autocast to ``dtype`` (torch imported only for bfloat16)."""
    import torch  # pylint: disable=import-outside-toplevel
    dtype = getattr(torch, dtype)

    def run():
        with torch.autocast("cpu", dtype=dtype):
            return call()
    return run


def _inputs(dtype: str, *arrays) -> tuple:
    """``arrays`` as they are in float32; as bfloat16 torch tensors otherwise."""
    if dtype == "float32":
        return arrays
    import torch  # pylint: disable=import-outside-toplevel
    return tuple(torch.from_numpy(a).to(getattr(torch, dtype)) for a in arrays)


class Ours(Contender):
    def __init__(self, A, threads: int):
        super().__init__(A, threads)
        self.matrix = sparsetir.ops.SparseMatrix(A)

    def _timed_call(self, call, out, dtype: str):
        """The run callable: ``call()`` writes ``out``, under autocast unless float32."""
        def run():
            call()
            return out
        return run if dtype == "float32" else _autocast(run, dtype)

    def spmm(self, X, weighted, dtype="float32"):
        (X,) = _inputs(dtype, X)
        (out,) = _inputs(dtype, np.full((self.A.shape[0], X.shape[1]), np.nan, np.float32))
        return self._timed_call(
            lambda: sparsetir.ops.spmm(self.matrix, X, out=out, weighted=weighted), out, dtype)

    def sddmm(self, X, Y, dtype="float32"):
        X, Y, out = _inputs(dtype, X, Y, np.full(self.A.nnz, np.nan, np.float32))
        return self._timed_call(lambda: sparsetir.ops.sddmm(self.matrix, X, Y, out=out), out,
                                dtype)


CONTENDER = Ours
