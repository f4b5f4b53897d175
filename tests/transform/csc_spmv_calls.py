"""The CSC SpMV whose column loop runs in parallel with atomic adds on the CPU, and its calls.

``csc_spmv`` is the form to write (``transform.atomic``): the output zeroed by an iteration of
its own, the columns outer as a reduction (``"RS"``), no ``T.init``, the iteration annotated
``"atomic"``. ``python csc_spmv_calls.py`` builds it, calls it on a random matrix with empty
rows and columns and on a few dense rows that every column adds into (every thread hits the
same rows), and prints ``max_error <value>`` for each; run it with ``TVM_NUM_THREADS=8`` to
have eight threads add into the same rows.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import sparsetir
from sparsetir.script import tir as T


@T.prim_func
def csc_spmv(a: T.handle, x: T.handle, y: T.handle, indptr: T.handle, indices: T.handle,
             m: T.int32, n: T.int32, nnz: T.int32) -> None:
    J = T.dense_fixed(n)
    I = T.sparse_variable(J, (m, nnz), (indptr, indices), "int32")
    I_out = T.dense_fixed(m)
    A = T.match_sparse_buffer(a, (J, I), "float32")
    X = T.match_sparse_buffer(x, (J,), "float32")
    Y = T.match_sparse_buffer(y, (I_out,), "float32")
    with T.sp_iter([I_out], "S", "zero") as [i]:
        Y[i] = T.float32(0)
    with T.sp_iter([J, I], "RS", "spmv") as [j, i]:
        T.sp_iter_attr({"atomic": True})
        Y[i] = Y[i] + A[j, i] * X[j]


def max_error(kernel, matrix: sp.csc_matrix, x: np.ndarray) -> float:
    """The largest difference between the kernel's ``A @ x`` and scipy's, from a NaN output."""
    m, n = matrix.shape
    y = np.full(m, np.nan, np.float32)
    kernel(matrix.data, x, y, matrix.indptr, matrix.indices, m, n, matrix.nnz)
    return float(np.max(np.abs(y - matrix @ x)))


def random_input(rng):
    """300 x 2000, 2% dense, with empty rows and empty columns; x in [-1, 1)."""
    dense = sp.random(300, 2000, density=0.02, dtype=np.float32, random_state=1).toarray()
    dense[np.arange(300) % 7 == 0] = 0                                   # empty rows
    dense[:, ::5] = 0                                                    # empty columns
    matrix = sp.csc_matrix(dense)
    matrix.sort_indices()
    return matrix, rng.uniform(-1, 1, 2000).astype(np.float32)


def shared_rows_input():
    """3 rows, every one of 200000 columns adding 1 into each: sums exact in float32."""
    matrix = sp.csc_matrix(np.ones((3, 200_000), np.float32))
    matrix.sort_indices()
    return matrix, np.ones(200_000, np.float32)


def main() -> None:
    kernel = sparsetir.build(csc_spmv, "llvm")
    rng = np.random.default_rng(0)
    print("max_error", max_error(kernel, *random_input(rng)))
    print("max_error", max_error(kernel, *shared_rows_input()))


if __name__ == "__main__":
    main()
