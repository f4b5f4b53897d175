"""SparseTIR's ``tests/python/sparsetir/test_binary_search.py`` (HEAD 9b3f843), ported.

| SparseTIR test | status |
|---|---|
| ``test_binary_search`` | cannot as written: its input, ``csrmm_dense_iter`` of ``sparse_tir_lowered_iter_scripts.py``, is SparseTIR's Stage II form, and our lowering of that kernel (CSR SpMM iterated over dense columns) searches each row inline, in the loop nest that uses the result, so there is no preprocess table to extract; replaced by the search that is one, the row table of the fused SDDMM, extracted, bound to ``blockIdx.x`` / ``threadIdx.x`` and built for CUDA as SparseTIR's test does, plus the dense-iteration kernel's numbers on the CPU |

Renames: ``tvm.tir.transform.ExtractPreprocess()`` -> ``sparsetir.transform.preprocess.
ExtractPreprocess()``; ``tvm.tir.Schedule`` -> ``tvm.s_tir.Schedule``; ``get_block`` ->
``get_sblock``; ``LowerSparseBuffer`` + ``tvm.build(..., target="cuda")`` ->
``sparsetir.build(mod, {"kind": "cuda", "arch": "sm_90"})``;
``f.imported_modules[0].get_source()`` -> ``cuda_source(f.executable)``. The extracted search is
run on the CPU too and its table compared with numpy.
"""

import re

import numpy as np
import scipy.sparse
import tvm
from scripts_stage1 import csrmm_dense_iter, fused_sddmm

import sparsetir
from sparsetir.backend.target import cuda_source
from sparsetir.transform.preprocess import ExtractPreprocess


def test_binary_search():
    M, N, K, NNZ = fused_sddmm.params[-4:]
    mod = sparsetir.lower_sparse_iter(fused_sddmm.specialize({M: 128, N: 128, K: 128, NNZ: 1024}))
    mod = ExtractPreprocess()(mod)
    sch = tvm.s_tir.Schedule(mod)
    blk = sch.get_sblock("sddmm0_search0")
    (j,) = sch.get_loops(blk)
    i, j = sch.split(j, [None, 32])
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    f = sparsetir.build(sch.mod, {"kind": "cuda", "arch": "sm_90"}, schedule="none")
    print(cuda_source(f.executable))
    # added: one kernel, 32 threads a block; the same search on the CPU gives each row
    assert set(re.findall(r"__global__ void __launch_bounds__\((\d+)\) (\w+)\(",
                          cuda_source(f.executable))) == {("32", "main_kernel")}
    A = _matrix(128, 128, 1024)
    table = np.full(1024, -1, np.int32)
    cpu = sparsetir.build(mod, "llvm")
    cpu(np.zeros((128, 128), np.float32), np.zeros((128, 128), np.float32),
        np.full(1024, np.nan, np.float32), A.indptr, A.indices, table)
    np.testing.assert_array_equal(table, np.repeat(np.arange(128), np.diff(A.indptr)) + 1)


def test_dense_iteration_searches_each_row():
    """Added: ``csrmm_dense_iter`` (the kernel SparseTIR's script was lowered from) right."""
    A = _matrix(40, 30, 150)
    B = np.random.default_rng(1).standard_normal((30, 8)).astype(np.float32)
    C = np.full((40, 8), np.nan, np.float32)
    kernel = sparsetir.build(csrmm_dense_iter.specialize({"feat_size": 8}), "llvm")
    kernel(A.data, B, C, A.indptr, A.indices, 40, 30, A.nnz)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)


def _matrix(m, n, nnz, seed=0):
    """A CSR matrix with exactly ``nnz`` nonzeros, its first and last rows empty."""
    rng = np.random.default_rng(seed)
    cells = rng.choice((m - 2) * n, nnz, replace=False)
    A = scipy.sparse.csr_matrix((rng.standard_normal(nnz).astype(np.float32),
                                 (cells // n + 1, cells % n)), shape=(m, n))
    A.sort_indices()
    A.indptr, A.indices = A.indptr.astype(np.int32), A.indices.astype(np.int32)
    return A


if __name__ == "__main__":
    test_binary_search()
