"""The co-iteration constructs of the ``T`` namespace: ``T.coiterate``, ``T.union``, ``T.intersect``.

They build the Stage I nodes of ``sparsetir.ir.coiteration`` directly (the parser reads them
where a ``T.sp_iter`` takes an axis; the printer writes them back with ``CoiteratedAxis.script``).

Example
-------
``A = B + C`` for two CSR matrices, walking only the columns of each row stored in ``B`` or
``C``:

>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.script import tir as T
>>> @T.prim_func
... def add(b: T.handle, c: T.handle, a: T.handle, b_indptr: T.handle, b_indices: T.handle,
...         c_indptr: T.handle, c_indices: T.handle, m: T.int32, n: T.int32, nnz_b: T.int32,
...         nnz_c: T.int32):
...     I = T.dense_fixed(m)
...     J = T.dense_fixed(n)
...     JB = T.sparse_variable(I, (n, nnz_b), (b_indptr, b_indices), "int32")
...     JC = T.sparse_variable(I, (n, nnz_c), (c_indptr, c_indices), "int32")
...     B = T.match_sparse_buffer(b, (I, JB), "float32")
...     C = T.match_sparse_buffer(c, (I, JC), "float32")
...     A = T.match_sparse_buffer(a, (I, J), "float32")
...     with T.sp_iter([I, T.coiterate(J, T.union(B, C))], "SS", "add") as [i, j]:
...         A[i, j] = B[i, j] + C[i, j]
>>> kernel = sparsetir.build(add, "llvm", cache=True)
>>> B = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> C = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=1)
>>> A = np.zeros((6, 5), np.float32)
>>> kernel(B.data, C.data, A, B.indptr, B.indices, C.indptr, C.indices, 6, 5, B.nnz, C.nnz)
>>> np.allclose(A, (B + C).toarray())
True
"""

from __future__ import annotations

from ..ir.coiteration import CoiteratedAxis, Merge


def coiterate(axis, merge) -> CoiteratedAxis:
    """Iterate the coordinates of the dense axis ``axis`` that ``merge`` holds."""
    return CoiteratedAxis(axis=axis, merge=merge)


def union(*operands) -> Merge:
    """The coordinates stored in any of ``operands`` (sparse buffers or merges)."""
    return Merge(op="union", operands=list(operands))


def intersect(*operands) -> Merge:
    """The coordinates stored in every one of ``operands`` (sparse buffers or merges)."""
    return Merge(op="intersect", operands=list(operands))
