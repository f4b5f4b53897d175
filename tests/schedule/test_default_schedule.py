"""The default schedules that ``build`` applies to kernels nobody scheduled."""

import numpy as np
import pytest
import tvm_ffi
from kernel_zoo import CASES
from sparse_inputs import skewed_csr
from tvm import s_tir, tirx

import sparsetir
from sparsetir.errors import SparseTIRValueError
from sparsetir.schedule import default_schedule
from sparsetir.script import tir as T


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


@T.prim_func
def mttkrp(a: T.handle, b: T.handle, c: T.handle, y: T.handle, indptr_j: T.handle,
           indices_j: T.handle, indptr_k: T.handle, indices_k: T.handle, m: T.int32, n: T.int32,
           p: T.int32, nnz_j: T.int32, nnz_k: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz_j), (indptr_j, indices_j), "int32")
    K = T.sparse_variable(J, (p, nnz_k), (indptr_k, indices_k), "int32")
    J_detach = T.dense_fixed(n)
    K_detach = T.dense_fixed(p)
    R = T.dense_fixed(8)
    A = T.match_sparse_buffer(a, (I, J, K), "float64")
    B = T.match_sparse_buffer(b, (J_detach, R), "float64")
    C = T.match_sparse_buffer(c, (K_detach, R), "float64")
    Y = T.match_sparse_buffer(y, (I, R), "float64")
    with T.sp_iter([I, J, K, R], "SRRS", "mttkrp") as [i, j, k, r]:
        with T.init():
            Y[i, r] = T.float64(0)
        Y[i, r] = Y[i, r] + A[i, j, k] * B[j, r] * C[k, r]


def test_a_sum_over_two_sparse_axes_builds_for_llvm_and_is_refused_for_cuda_by_name():
    """MTTKRP over a CSF tensor: its T.init runs in a nest of its own, and TVM binds no GPU
    loop over the compute nest; the CUDA build says so instead of asking for what the user
    did (schedule='auto'). On the CPU: numpy's numbers, an empty row, a NaN-filled output."""
    indptr_j, indices_j = np.int32([0, 2, 2, 4]), np.int32([0, 2, 1, 2])
    indptr_k, indices_k = np.int32([0, 2, 3, 3, 5]), np.int32([0, 3, 1, 0, 2])
    dense = np.zeros((3, 3, 4))
    rows = np.repeat(np.arange(3), np.diff(indptr_j))
    values = np.arange(1.0, 6.0)
    for fibre, (i, j) in enumerate(zip(rows, indices_j)):
        span = slice(indptr_k[fibre], indptr_k[fibre + 1])
        dense[i, j, indices_k[span]] = values[span]
    rng = np.random.default_rng(0)
    B, C = rng.standard_normal((3, 8)), rng.standard_normal((4, 8))
    Y = np.full((3, 8), np.nan)
    sparsetir.build(mttkrp, "llvm")(values, B, C, Y, indptr_j, indices_j, indptr_k, indices_k,
                                    3, 3, 4, 4, 5)
    np.testing.assert_allclose(Y, np.einsum("ijk,jr,kr->ir", dense, B, C), rtol=1e-12)
    with pytest.raises(SparseTIRValueError, match=r"cannot build top-level loop nest 1 "
                                                  r"\(block mttkrp0\) for cuda.*build it for llvm"):
        sparsetir.build(mttkrp, {"kind": "cuda", "arch": "sm_90"})
