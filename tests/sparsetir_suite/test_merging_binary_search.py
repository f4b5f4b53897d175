"""SparseTIR's ``tests/python/sparsetir/test_merging_binary_search.py`` (HEAD 9b3f843), ported.

| SparseTIR test | status |
|---|---|
| ``test_merging_binary_search`` | passes with documented renames and the expected function in our Stage II form |

Renames: ``from sparsetir.script import tir as T`` for the Stage I kernel; its store
``A[vi, vj] = (vi + vj) * (vi - vj)`` (an int32 value into a float32 buffer, which SparseTIR
casts silently) is written ``T.Cast("float32", ...)``; ``lower_sparse_iter`` takes the function
(``mod = func``). SparseTIR's expected ``lowered`` (its level-1 Stage II script) is replaced by
ours, kept as the golden file
``golden/test_merging_binary_search/test_merging_binary_search.txt`` (TVMScript cannot parse it
back: its buffer shapes name parameters declared after them): one row search
``test0_search0`` for the fused loop, filling ``J_indptr_pos`` (one past each nonzero's row),
where SparseTIR's script had ``binary_search_block_0_0`` and ``mid_0``. ``A`` is a scratch
buffer there, so the added check lowers the same iteration over a parameter ``A`` and compares
what it writes with numpy.
"""

import numpy as np
import scipy.sparse

import sparsetir
from sparsetir import lower_sparse_iter
from sparsetir.script import tir as T


@T.prim_func
def func(indptr: T.handle, indices: T.handle, m: T.int32, n: T.int32, nnz: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True, "sparse_tir_level": 2})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices))
    A = T.alloc_sparse_buffer([I, J], "float32")
    with T.sp_iter([T.fuse(I, J)], "SS", "test") as [vi, vj]:
        A[vi, vj] = T.Cast("float32", (vi + vj) * (vi - vj))


def test_merging_binary_search(golden):
    mod = func
    mod = lower_sparse_iter(mod)
    print(mod["main"].script())
    golden(mod["main"].script())  # for tvm.ir.assert_structural_equal(mod["main"], lowered)
    _check_numbers()  # added


@T.prim_func
def func_out(a: T.handle, indptr: T.handle, indices: T.handle, m: T.int32, n: T.int32,
             nnz: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices))
    A = T.match_sparse_buffer(a, [I, J], "float32")
    with T.sp_iter([T.fuse(I, J)], "SS", "test") as [vi, vj]:
        A[vi, vj] = T.Cast("float32", (vi + vj) * (vi - vj))


def _check_numbers():
    keep = np.ones(50, np.float32)
    keep[[0, 7, 49]] = 0                       # empty rows, first and last included
    M = (scipy.sparse.diags(keep) @ scipy.sparse.random(50, 40, density=0.1, format="csr",
                                                        random_state=0)).tocsr()
    M.eliminate_zeros()
    M.sort_indices()
    indptr, indices = M.indptr.astype(np.int32), M.indices.astype(np.int32)
    out = np.full(M.nnz, np.nan, np.float32)
    sparsetir.build(func_out, "llvm")(out, indptr, indices, 50, 40, M.nnz)
    rows = np.repeat(np.arange(50), np.diff(indptr))
    np.testing.assert_array_equal(out, ((rows + indices) * (rows - indices)).astype(np.float32))


if __name__ == "__main__":
    test_merging_binary_search()
