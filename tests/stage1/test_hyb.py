"""hyb: the CSR SpMM decomposed into column partitions x ELL buckets (format_decompose with
ell_bucket_rule), data from column_part_hyb, sub-kernels horizontally fused; equal to scipy.
The fused CUDA kernel's source is the golden file ``golden/test_hyb/...txt`` (``pytest
--update-golden`` rewrites it after a deliberate change)."""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx

import sparsetir
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.ops import SparseMatrix
from sparsetir.ops.hyb import HybConfig, HybLayout, hyb_function, schedule_hyb_cpu, \
    schedule_hyb_cuda
from sparsetir.ops.kernels import spmm
from sparsetir.transform.horizontal_fusion import HorizontalFusionError, horizontal_fuse
from sparsetir.stage1.hyb import ell_bucket_rule, padded_rows_rule
from sparsetir.schedule.accumulator import start_from_output
from sparsetir.lower.loop_signature import top_level_nests
from sparse_inputs import skewed_csr
from cuda_device import device_kernels


def skewed_matrix(rows=90, cols=70, seed=0):
    return skewed_csr(rows, cols, seed)


def run_hyb(A, config, feat, fuse=True, target="llvm", prefetch=0):
    func = hyb_function(config, feat)
    mod = schedule_hyb_cpu(sparsetir.lower_sparse_iter(func), config, prefetch)
    kernel = sparsetir.build(mod, target, schedule="none", horizontal_fuse=fuse)
    M = SparseMatrix(A)
    layout = HybLayout.of(M, config.parts, config.widths, config.tiles)
    X = np.random.default_rng(1).standard_normal((A.shape[1], feat)).astype(np.float32)
    Y = np.full((A.shape[0], feat), np.nan, np.float32)
    kernel(*layout.arguments(func.params, M, X, Y))
    return Y, A @ X


@pytest.mark.parametrize("parts, widths, tiles", [
    (1, (1, 2, 4), 4), (2, (1, 2, 4, 8), 8), (3, (2, 16), 1), (4, (1, 2, 4, 8, 16, 32), 16)])
@pytest.mark.parametrize("feat", [1, 16, 20])
def test_hyb_spmm_equals_scipy(parts, widths, tiles, feat):
    Y, expected = run_hyb(skewed_matrix(), HybConfig(parts, widths, tiles), feat)
    np.testing.assert_allclose(Y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("prefetch", [0, 8])
def test_register_tiles_start_from_what_earlier_buckets_added(prefetch):
    """Feature size 64: every bucket sums a 64-lane register tile that it loads from Y (rows
    split over partitions and ELL rows), with and without prefetching."""
    config = HybConfig(2, (1, 2, 4), 4)
    Y, expected = run_hyb(skewed_matrix(seed=7), config, 64, prefetch=prefetch)
    np.testing.assert_allclose(Y, expected, rtol=1e-5, atol=1e-5)
    mod = schedule_hyb_cpu(sparsetir.lower_sparse_iter(hyb_function(config, 64)), config)
    sch = tvm.s_tir.Schedule(mod)                  # TVM's checks accept the result
    for name in config.rule_names():
        init = sch.get(sch.get_sblock(f"spmm_{name}1_init"))
        assert [r.source.name for r in init.reads] == ["Y"]
        assert init.body.buffer.name == "Y_global" and init.body.value.source.name == "Y"


def test_start_from_output_refuses_other_blocks():
    config = HybConfig(1, (2,), 1)
    mod = sparsetir.lower_sparse_iter(hyb_function(config, 16))
    with pytest.raises(ValueError, match="spmm_init0 is not an init that keeps"):
        start_from_output(mod, ["spmm_init0"])
    with pytest.raises(ValueError, match="no init block named nothing"):
        start_from_output(mod, ["nothing"])


def test_unfused_sub_kernels_give_the_same_result():
    Y, expected = run_hyb(skewed_matrix(seed=3), HybConfig(2, (1, 4), 4), 16, fuse=False)
    np.testing.assert_allclose(Y, expected, rtol=1e-5, atol=1e-5)


def test_padding_never_contributes_even_against_inf():
    A = skewed_matrix(seed=5)
    config = HybConfig(1, (4,), 2)          # every row padded to 4, pads repeat a column
    func = hyb_function(config, 8)
    kernel = sparsetir.build(schedule_hyb_cpu(sparsetir.lower_sparse_iter(func), config),
                             "llvm", schedule="none", horizontal_fuse=True)
    M = SparseMatrix(A)
    layout = HybLayout.of(M, 1, (4,), 2)
    layout.arrays["a_p0b0"] = np.where(layout.arrays["mask_p0b0"] == 1,
                                       layout.arrays["a_p0b0"], np.float32(np.inf))
    X = np.ones((A.shape[1], 8), np.float32)
    Y = np.empty((A.shape[0], 8), np.float32)
    kernel(*layout.arguments(func.params, M, X, Y))
    np.testing.assert_allclose(Y, A @ X, rtol=1e-5)


def _loop_kinds(func):
    return [nest.kind for nest in top_level_nests(func)]


def test_cpu_fusion_leaves_one_parallel_loop_for_all_buckets():
    config = HybConfig(2, (1, 2, 4, 8), 8)
    mod = schedule_hyb_cpu(sparsetir.lower_sparse_iter(hyb_function(config, 16)), config)
    unfused = lower_to_stage3(mod, "llvm", "none", False)
    fused = lower_to_stage3(mod, "llvm", "none", True)
    assert _loop_kinds(unfused["main"]) == [tirx.ForKind.PARALLEL] * 9   # zeroing + 8 buckets
    assert _loop_kinds(fused["main"]) == [tirx.ForKind.PARALLEL] * 2
    fused_loop = top_level_nests(fused["main"])[1]
    assert len(fused_loop.body.seq) == 8 and int(fused_loop.extent) == 8


@pytest.mark.cuda
def test_cuda_fusion_gives_one_kernel_with_block_ranges_and_atomics(golden):
    config = HybConfig(2, (1, 4), 4)
    func = hyb_function(config, 32)
    mod = schedule_hyb_cuda(sparsetir.lower_sparse_iter(func), config)
    target = {"kind": "cuda", "arch": "sm_90"}
    fused = lower_to_stage3(mod, target, "none", True)
    nests = top_level_nests(fused["main"])
    bucket_launch = nests[-1]
    assert bucket_launch.thread_binding.thread_tag == "blockIdx.x"
    assert int(bucket_launch.extent) == 16              # 4 buckets x 4 tiles
    ranges = []
    tvm_ffi.structural_walk(bucket_launch.body, (tirx.IfThenElse, ranges.append), order="pre")
    assert len([r for r in ranges if "fused_bx" in str(r.condition)]) >= 4
    kernel = sparsetir.build(mod, target, schedule="none", horizontal_fuse=True)
    assert len(device_kernels(kernel.executable)) == 2    # zeroing + one fused bucket kernel
    source = kernel.inspect_source("cuda")
    assert source.count("cuda_atomic_add((&") == len(config.rule_names())   # one per bucket
    golden(source)


def test_cuda_fusion_refuses_mismatched_thread_extents():
    config = HybConfig(1, (1, 2), 2)
    mod = schedule_hyb_cuda(sparsetir.lower_sparse_iter(hyb_function(config, 32)), config)
    stage3 = lower_to_stage3(mod, {"kind": "cuda", "arch": "sm_90"}, "none", False)
    last = top_level_nests(stage3["main"])[-1]
    widened = tirx.For(last.loop_var, last.min, last.extent, last.kind,
                       _rebind_threads(last.body, 64), last.thread_binding, last.annotations)
    with pytest.raises(HorizontalFusionError, match="threadIdx"):
        horizontal_fuse(_replace_last_nest(stage3, widened), "cuda")


def _rebind_threads(body, extent):
    def on_for(loop):
        if loop.thread_binding is not None and loop.thread_binding.thread_tag == "threadIdx.x":
            return tirx.For(loop.loop_var, loop.min, extent, loop.kind, loop.body,
                            loop.thread_binding, loop.annotations)
        return loop
    return tvm_ffi.structural_map(body, (tirx.For, on_for), order="post")


def _replace_last_nest(mod, nest):
    func = mod["main"]
    root = func.body.block
    nests = top_level_nests(func)[:-1] + [nest]
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint,
                            tirx.SeqStmt(nests), root.init, root.alloc_buffers,
                            root.match_buffers, root.annotations)
    return tvm.IRModule({"main": func.with_body(s_tir.SBlockRealize(
        func.body.iter_values, func.body.predicate, new_root))})


def test_preprocess_iterations_fill_the_ell_values_through_the_pipeline():
    """extract_preprocess gives the value conversion as a kernel of its own: from the CSR
    values and the ELL structure (column_part_hyb), it fills every bucket's values, padding
    (mask 0, whose column repeats a real one) with 0 as column_part_hyb does."""
    config = HybConfig(2, (1, 4), 4)
    rules = [ell_bucket_rule(name, config.widths[i % 2], config.tiles)
             for i, name in enumerate(config.rule_names())]
    convert = sparsetir.extract_preprocess(sparsetir.format_decompose(spmm, rules))
    kernel = sparsetir.build(convert.specialize({"feat_size": 1}), "llvm")
    A = skewed_matrix(seed=2)
    M = SparseMatrix(A)
    layout = HybLayout.of(M, config.parts, config.widths, config.tiles)
    expected = {name: layout.arrays["a_" + name].copy() for name in config.rule_names()}
    for name in config.rule_names():
        layout.arrays["a_" + name] = np.full_like(expected[name], np.nan)
    kernel(*layout.arguments(convert.specialize({"feat_size": 1}).params, M,
                             np.zeros((A.shape[1], 1), np.float32),
                             np.zeros((A.shape[0], 1), np.float32)))
    assert not all(layout.arrays["mask_" + name].all() for name in config.rule_names())
    for name in config.rule_names():
        np.testing.assert_array_equal(layout.arrays["a_" + name], expected[name])


@pytest.mark.parametrize("multiple", [1, 4, 32])
def test_padded_rows_rule_equals_scipy(multiple):
    """CSR padded to a multiple of 32 (or 4, or unpadded) per row: one rule, masked padding."""
    A = skewed_matrix(seed=4)
    func = sparsetir.remove_preprocess(sparsetir.format_decompose(
        spmm, [padded_rows_rule("pad")])).specialize({"feat_size": 16})
    kernel = sparsetir.build(func, "llvm")
    indptr, indices, mask, data = sparsetir.format.csr_pad(A.indptr, A.indices, A.data,
                                                           A.shape, multiple)
    X = np.random.default_rng(6).standard_normal((A.shape[1], 16)).astype(np.float32)
    Y = np.full((A.shape[0], 16), np.nan, np.float32)
    values = dict(a=A.data, x=X, y=Y, indptr=A.indptr, indices=A.indices, m=A.shape[0],
                  n=A.shape[1], nnz=A.nnz, a_pad=data, indptr_pad=indptr,
                  indices_pad=indices, mask_pad=mask, nnz_pad=indices.size)
    kernel(*[values[p.name] for p in func.params])
    np.testing.assert_allclose(Y, A @ X, rtol=1e-5, atol=1e-5)
