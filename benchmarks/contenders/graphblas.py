"""SuiteSparse:GraphBLAS through python-graphblas: ``mxm`` and the masked ``mxm`` SDDMM.

``A``, ``X`` and ``Y`` are GraphBLAS matrices made once, outside the timed region (dense inputs
held in GraphBLAS's full format). SpMM is ``A.mxm(X, plus_times).new()``; unweighted it is the
``plus_second`` semiring (``A``'s values ignored). SDDMM is the GraphBLAS idiom for it, a
product masked by ``A``'s structure: ``C(mask=A.S) << X.mxm(Y.T, plus_times)``. Results are
GraphBLAS matrices; turning them into numpy is left out of the time. Threads:
``graphblas.ss.config["nthreads"]``.

Example
-------
>>> c = GraphBlas(A, threads=2)
>>> Y = c.to_numpy("spmm", c.spmm(X, weighted=True)())
"""

from __future__ import annotations

import graphblas as gb

from contenders import Contender


class GraphBlas(Contender):
    def __init__(self, A, threads: int):
        super().__init__(A, threads)
        gb.ss.config["nthreads"] = threads
        self.matrix = gb.io.from_scipy_sparse(A)

    def spmm(self, X, weighted):
        A, X = self.matrix, gb.Matrix.from_dense(X)
        semiring = gb.semiring.plus_times if weighted else gb.semiring.plus_second
        return lambda: A.mxm(X, semiring).new()

    def sddmm(self, X, Y):
        A, X, Y = self.matrix, gb.Matrix.from_dense(X), gb.Matrix.from_dense(Y)

        def run():
            C = gb.Matrix(gb.dtypes.FP32, *A.shape)
            C(mask=A.S) << X.mxm(Y.T, gb.semiring.plus_times)
            return C
        return run

    def to_numpy(self, op, result):
        if op == "sddmm":
            if result.nvals != self.A.nnz:
                raise ValueError(f"SDDMM result has {result.nvals} entries, A has {self.A.nnz}")
            return result.to_coo(rows=False, columns=False)[2]  # row-major, as A.indices
        return result.to_dense(fill_value=0)


CONTENDER = GraphBlas
