"""The default schedules that ``build`` applies to kernels nobody scheduled."""

import numpy as np
import tvm_ffi
from kernel_zoo import CASES
from sparse_inputs import skewed_csr
from tvm import s_tir, tirx

import sparsetir
from sparsetir.schedule import default_schedule


def _loop_kinds(mod) -> dict:
    loops = []
    tvm_ffi.structural_walk(mod["main"].body, (tirx.For, loops.append), order="pre")
    return {loop.loop_var.name: loop.kind for loop in loops}


def test_rows_parallel_and_known_feature_size_vectorised():
    mod = sparsetir.lower_sparse_iter(CASES["csrmm"].func.specialize({"feat_size": 64}))
    kinds = _loop_kinds(default_schedule(mod).mod)
    assert kinds["i"] == tirx.ForKind.PARALLEL
    assert tirx.ForKind.VECTORIZED in kinds.values()


def test_symbolic_feature_size_stays_scalar():
    kinds = _loop_kinds(default_schedule(sparsetir.lower_sparse_iter(CASES["csrmm"].func)).mod)
    assert kinds["i"] == tirx.ForKind.PARALLEL
    assert tirx.ForKind.VECTORIZED not in kinds.values()


def test_vector_code_reaches_llvm():
    kernel = sparsetir.build(CASES["csrmm"].func.specialize({"feat_size": 64}), "llvm")
    assert "<16 x float>" in kernel.inspect_source("ll")


def test_scatter_whose_rows_are_not_owned_stays_serial():
    # csr2bsr writes B[i // blk, ...]: two rows of A share a block row of B
    mod = sparsetir.lower_sparse_iter(CASES["csr2bsr"].func)
    kinds = _loop_kinds(default_schedule(mod).mod)
    assert kinds["i"] == tirx.ForKind.SERIAL
    assert kinds["ib"] == tirx.ForKind.PARALLEL    # the zeroing nest owns its block rows


def test_user_schedule_is_kept_and_untouched_nests_get_the_default():
    mod = sparsetir.lower_sparse_iter(CASES["csr2bsr"].func.specialize({"blk_size": 4}))
    sch = s_tir.Schedule(mod)
    (i,) = sch.get_loops(sch.get_sblock("csr2bsr0"))
    outer, _ = sch.split(i, [None, 8])
    kinds = _loop_kinds(default_schedule(sch.mod).mod)
    assert kinds["i_0"] == tirx.ForKind.SERIAL and kinds["i_1"] == tirx.ForKind.SERIAL
    assert kinds["ib"] == tirx.ForKind.PARALLEL    # the zeroing nest nobody scheduled


def test_user_split_keeps_its_vectorisation_through_build():
    mod = sparsetir.lower_sparse_iter(CASES["csrmm"].func.specialize({"feat_size": 64}))
    sch = s_tir.Schedule(mod)
    _, k = sch.get_loops(sch.get_sblock("csrmm1"))
    _, inner = sch.split(k, [None, 8])
    sch.vectorize(inner)
    kernel = sparsetir.build(sch.mod, "llvm")
    source = kernel.inspect_source("ll")
    assert "<8 x float>" in source and "<16 x float>" not in source


def test_schedule_none_compiles_the_module_as_it_is():
    mod = sparsetir.lower_sparse_iter(CASES["csrmm"].func.specialize({"feat_size": 64}))
    # the default schedule would run rows in parallel (LLVM may still vectorise on its own)
    assert "TVMBackendParallelLaunch" in sparsetir.build(mod, "llvm").inspect_source("ll")
    assert "TVMBackendParallelLaunch" not in sparsetir.build(
        mod, "llvm", schedule="none").inspect_source("ll")


def _csrmm_numbers(kernel, feat: int):
    """``kernel`` (csrmm) gives scipy's answer on a matrix with empty rows, into NaN."""
    A = skewed_csr(40, 30, seed=6, density=0.15)
    A.indptr, A.indices = A.indptr.astype(np.int32), A.indices.astype(np.int32)
    X = np.random.default_rng(0).standard_normal((30, feat)).astype(np.float32)
    Y = np.full((40, feat), np.nan, np.float32)
    kernel(A.data, X, Y, A.indptr, A.indices, 40, 30, A.nnz)
    np.testing.assert_allclose(Y, A @ X, rtol=1e-5, atol=1e-5)


def test_a_blockized_reduction_builds_with_the_default_schedule():
    """``blockize`` of a reduction's inner loop puts a block inside the new block's ``init``,
    which TVM's schedule does not track: looking it up there crashed ``build``'s check for
    untouched nests (``stmt2ref`` InternalError)."""
    sch = s_tir.Schedule(sparsetir.lower_sparse_iter(
        CASES["csrmm"].func.specialize({"feat_size": 32})))
    sch.blockize(sch.get_loops(sch.get_sblock("csrmm1"))[-1])
    _csrmm_numbers(sparsetir.build(sch.mod, "llvm"), 32)


def test_a_feature_axis_of_length_zero_builds():
    """The default schedule vectorised a loop of 0 iterations, which TVM refuses to lower (the
    build is what this checks: a result of no elements has no numbers to compare)."""
    _csrmm_numbers(sparsetir.build(CASES["csrmm"].func.specialize({"feat_size": 0}), "llvm"), 0)
