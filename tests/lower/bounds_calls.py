"""Calls whose scalars disagree with what the arrays pin, one scenario per process (a crash is
possible before the fix); prints the outcome: ``refused <message>`` or ``ran``.

``python bounds_calls.py SCENARIO`` with SCENARIO one of ``SCENARIOS``; run it with
``TVM_NUM_THREADS=1`` to see checks inside parallel loops on one thread.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel_zoo import CASES  # noqa: E402

import sparsetir  # noqa: E402
from sparsetir.runtime import ArgumentError  # noqa: E402
from sparsetir.script import tir as T  # noqa: E402

ROWS = 200_000     # far past the small arrays, so an unchecked index leaves the heap


@T.prim_func
def init_at_coordinate(a: T.handle, c: T.handle, indptr: T.handle, indices: T.handle,
                       m: T.int32, n: T.int32, nnz: T.int32, mc: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    IC = T.dense_fixed(mc)
    A = T.match_sparse_buffer(a, (I, J), "float32")
    C = T.match_sparse_buffer(c, (IC,), "float32")
    with T.sp_iter([I, J], "SR", "pairs") as [i, j]:
        with T.init():
            C[i // 2] = T.float32(0)
        C[i // 2] = C[i // 2] + A[i, j]


@T.prim_func
def attached_rows(x: T.handle, y: T.handle, indptr: T.handle, indices: T.handle,
                  indptr_t: T.handle, indices_t: T.handle, n: T.int32, m: T.int32,
                  m_t: T.int32, nnz: T.int32, nnz_t: T.int32) -> None:
    I = T.dense_fixed(n)
    J = T.sparse_variable(I, (m, nnz), (indptr, indices), "int32")
    J_rows = T.dense_fixed(m_t)
    I_T = T.sparse_variable(J_rows, (n, nnz_t), (indptr_t, indices_t), "int32")
    X = T.match_sparse_buffer(x, (I,), "float32")
    Y = T.match_sparse_buffer(y, (I,), "float32")
    with T.sp_iter([I, J, T.attach(I_T, J)], "SRR", "gather") as [i, j, i_t]:
        with T.init():
            Y[i] = T.float32(0)
        Y[i] = Y[i] + X[i_t]


@T.prim_func
def halves(x: T.handle, y: T.handle, m: T.int32, mx: T.int32) -> None:
    I = T.dense_fixed(m)
    IX = T.dense_fixed(mx)
    X = T.match_sparse_buffer(x, (IX,), "float32")
    Y = T.match_sparse_buffer(y, (I,), "float32")
    with T.sp_iter([I], "S", "halves") as [i]:
        Y[i] = X[i // 2]


def _csr2bsr():
    """The zoo kernel with m_out = 1 for ROWS rows in blocks of 1."""
    kernel = sparsetir.build(CASES["csr2bsr"].func, "llvm")
    indptr = np.arange(ROWS + 1, dtype=np.int32)
    indices = (np.arange(ROWS) % 64).astype(np.int32)
    return kernel, (np.ones(ROWS, np.float32), np.full(1, np.nan, np.float32), indptr, indices,
                    np.array([0, 1], np.int32), np.array([0], np.int32), ROWS, 64, 1, 64,
                    ROWS, 1, 1)


def _init_at_coordinate():
    """Every row empty: only the init writes C[i // 2], past mc = 1."""
    kernel = sparsetir.build(init_at_coordinate, "llvm")
    return kernel, (np.zeros(0, np.float32), np.full(1, np.nan, np.float32),
                    np.zeros(ROWS + 1, np.int32), np.zeros(0, np.int32), ROWS, 1, 0, 1)


def _attached_rows():
    """Column ROWS - 1 of J names a row of I_T, which has m_t = 1 rows."""
    kernel = sparsetir.build(attached_rows, "llvm")
    return kernel, (np.ones(4, np.float32), np.full(4, np.nan, np.float32),
                    np.array([0, 1, 1, 1, 1], np.int32), np.array([ROWS - 1], np.int32),
                    np.array([0, 1], np.int32), np.array([0], np.int32), 4, ROWS, 1, 1, 1)


def _halves():
    """A check inside the default schedule's parallel loop: X has mx = 1 element."""
    kernel = sparsetir.build(halves, "llvm")
    return kernel, (np.ones(1, np.float32), np.full(ROWS, np.nan, np.float32), ROWS, 1)


SCENARIOS = {"csr2bsr": _csr2bsr, "init_at_coordinate": _init_at_coordinate,
             "attached_rows": _attached_rows, "halves": _halves}


def main(name: str) -> None:
    kernel, args = SCENARIOS[name]()
    try:
        kernel(*args)
    except ArgumentError as err:
        print(f"refused {err}")
        return
    print("ran")


if __name__ == "__main__":
    main(sys.argv[1])
