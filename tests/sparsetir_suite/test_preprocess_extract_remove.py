"""SparseTIR's ``tests/python/sparsetir/test_preprocess_extract_remove.py`` (HEAD 9b3f843), ported.

| SparseTIR test | status |
|---|---|
| ``test_preprocess_bsr_rewrite`` | passes with documented renames: ``tvm.tir.transform.ExtractPreprocess()(mod)`` / ``RemovePreprocess()`` on the Stage I function -> ``sparsetir.extract_preprocess(func)`` / ``sparsetir.remove_preprocess(func)`` (``mod = func``, ``mod["main"]`` -> ``mod``) |
| ``test_preprocess_fused_sddmm`` | passes with documented renames: SparseTIR's input is its lowered script ``fused_sddmm`` (``sparse_tir_lowered_iter_scripts.py``, SparseTIR's Stage II form, which TVM 0.27 cannot hold); here it is ``sparsetir.lower_sparse_iter`` of the Stage I ``fused_sddmm`` it came from, and the passes are ``sparsetir.transform.preprocess.ExtractPreprocess()`` / ``RemovePreprocess()`` |

SparseTIR only printed the results; each test here also runs both halves: the extracted
preprocess fills what the conversion routines (BSR) or the fused kernel (SDDMM's row table)
give, and the compute without its preprocess, fed those, equals scipy.
"""

import numpy as np
import pytest
import scipy.sparse
import tvm
from scripts_formats import bsr_rewrite_with_preprocess
from scripts_stage1 import fused_sddmm
from test_composable_format import BSR_SIZES, bsr_arrays, check_numbers, run, sample_matrix

import sparsetir
from sparsetir.transform.preprocess import ExtractPreprocess, RemovePreprocess


def test_preprocess_bsr_rewrite():
    mod = bsr_rewrite_with_preprocess
    mod_extract_preprocess = sparsetir.extract_preprocess(mod)
    mod_remove_preprocess = sparsetir.remove_preprocess(mod)
    print(mod_extract_preprocess.script())
    print(mod_remove_preprocess.script())
    # added: the extracted preprocess writes csr_to_bsr's values, the rest computes A @ B
    A = sample_matrix()
    arrays, expected = bsr_arrays(A), bsr_arrays(A, filled=True)
    run(mod_extract_preprocess, arrays)
    for bs in BSR_SIZES:
        np.testing.assert_array_equal(arrays[f"a_{bs}"], expected[f"a_{bs}"])
    check_numbers(mod_remove_preprocess, lambda A: bsr_arrays(A, filled=True))


def test_preprocess_fused_sddmm():
    mod = sparsetir.lower_sparse_iter(fused_sddmm)
    mod_extract_preprocess = ExtractPreprocess()(mod)
    mod_remove_preprocess = RemovePreprocess()(mod)
    print(mod_extract_preprocess["main"].script())
    print(mod_remove_preprocess["main"].script())
    # added: run the two halves as SparseTIR's SDDMM benchmark did (mid_nd: the row table)
    _check_sddmm(mod_extract_preprocess, mod_remove_preprocess)


def _check_sddmm(extracted, removed):
    keep = np.ones(40, np.float32)
    keep[[0, 5, 39]] = 0                       # empty rows, first and last included
    A = scipy.sparse.diags(keep) @ scipy.sparse.random(40, 30, density=0.1, format="csr",
                                                       dtype=np.float32, random_state=0)
    A.eliminate_zeros()
    A.sort_indices()
    indptr, indices = A.indptr.astype(np.int32), A.indices.astype(np.int32)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 16)).astype(np.float32)
    Y = rng.standard_normal((30, 16)).astype(np.float32)
    out = np.full(A.nnz, np.nan, np.float32)
    table = np.full(A.nnz, -1, np.int32)
    for mod in (extracted, removed):
        tvm.s_tir.Schedule(mod)                # TVM's checks hold on both halves
    pre = sparsetir.build(extracted, "llvm")
    compute = sparsetir.build(removed, "llvm")
    pre(X, Y, out, indptr, indices, 40, 30, 16, A.nnz, table)
    rows = np.repeat(np.arange(40), np.diff(indptr))
    np.testing.assert_array_equal(table, rows + 1)        # one past each nonzero's row
    assert np.isnan(out).all()                            # the preprocess computes nothing
    compute(X, Y, out, indptr, indices, 40, 30, 16, A.nnz, table)
    np.testing.assert_allclose(out, np.einsum("ef,ef->e", X[rows], Y[indices]), rtol=1e-5,
                               atol=1e-5)
    table[3] = 41                                          # a wrong table is refused
    with pytest.raises(sparsetir.ArgumentError, match="the table J_indptr_pos"):
        compute(X, Y, out, indptr, indices, 40, 30, 16, A.nnz, table)


if __name__ == "__main__":
    test_preprocess_bsr_rewrite()
    test_preprocess_fused_sddmm()
