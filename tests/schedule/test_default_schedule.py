"""The default schedules that ``build`` applies to kernels nobody scheduled."""

import tvm_ffi
from kernel_zoo import CASES
from tvm import tirx

import sparsetir
from sparsetir.schedule import default_schedule, is_scheduled


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


def test_is_scheduled_tells_user_schedules_apart():
    mod = sparsetir.lower_sparse_iter(CASES["csrmm"].func)
    assert not is_scheduled(mod)
    assert is_scheduled(default_schedule(mod).mod)
