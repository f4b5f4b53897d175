"""How fusion is asked for: SparseTIR's ``T.func_attr({"horizontal_fuse": 1})`` is honoured
(CPU: one parallel loop; CUDA: one launch, ``transform.function_fusion``), and
``build(..., horizontal_fuse=True)`` on nests nobody marked fuses every nest it can or says
what is missing; marked CUDA nests with shared-memory caches compile to one kernel."""

import functools

import numpy as np
import pytest
import tvm
from tvm import tirx

import sparsetir
from cuda_device import device_kernels
from cuda_emulation import emulate
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.errors import HorizontalFusionError
from sparsetir.ir import replace
from sparsetir.ir.attrs import FUSE_ANNOTATION
from sparsetir.lower.loop_signature import top_level_nests
from sparsetir.schedule import default_schedule
from sparsetir.script import tir as T

M = 100
K = 64


@T.prim_func
def scale_and_shift(a: T.handle, b: T.handle, c: T.handle, m: T.int32) -> None:
    T.func_attr({"horizontal_fuse": 1})
    I = T.dense_fixed(m)
    A = T.match_sparse_buffer(a, (I,), "float32")
    B = T.match_sparse_buffer(b, (I,), "float32")
    C = T.match_sparse_buffer(c, (I,), "float32")
    with T.sp_iter([I], "S", "scale") as [i]:
        B[i] = A[i] * T.float32(2)
    with T.sp_iter([I], "S", "shift") as [i]:
        C[i] = A[i] + T.float32(1)


@T.prim_func
def row_sums(a: T.handle, b: T.handle, c1: T.handle, c2: T.handle, m: T.int32) -> None:
    I = T.dense_fixed(m)
    F = T.dense_fixed(64)
    A = T.match_sparse_buffer(a, (I, F), "float32")
    B = T.match_sparse_buffer(b, (I, F), "float32")
    C1 = T.match_sparse_buffer(c1, (I,), "float32")
    C2 = T.match_sparse_buffer(c2, (I,), "float32")
    with T.sp_iter([I, F], "SR", "sum_a") as [i, f]:
        with T.init():
            C1[i] = T.float32(0)
        C1[i] = C1[i] + A[i, f]
    with T.sp_iter([I, F], "SR", "sum_b") as [i, f]:
        with T.init():
            C2[i] = T.float32(0)
        C2[i] = C2[i] + B[i, f] * B[i, f]


def unmarked():
    return replace(scale_and_shift.specialize({"m": M}), attrs={})


def check_scale_and_shift(kernel):
    a = np.arange(M, dtype=np.float32)
    b, c = np.full(M, np.nan, np.float32), np.full(M, np.nan, np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(b, 2 * a)
    np.testing.assert_array_equal(c, a + 1)


def test_the_function_attribute_fuses_the_nests_on_the_cpu():
    func = scale_and_shift.specialize({"m": M})
    (loop,) = top_level_nests(lower_to_stage3(func, "llvm")["main"])
    assert loop.kind == tirx.ForKind.PARALLEL and "horizontal_fuse" not in \
        lower_to_stage3(func, "llvm")["main"].attrs
    check_scale_and_shift(sparsetir.build(func, "llvm"))


@pytest.mark.cuda
def test_the_function_attribute_gives_one_cuda_launch():
    func = scale_and_shift.specialize({"m": M})
    assert device_kernels(sparsetir.build(func, "cuda").executable) == ["main_kernel"]
    assert len(device_kernels(sparsetir.build(unmarked(), "cuda").executable)) == 2
    scheduled = default_schedule(sparsetir.lower_sparse_iter(func), "cuda").mod
    check_scale_and_shift(emulate(sparsetir.transform.HorizontalFusion()(scheduled)))


def test_horizontal_fuse_fuses_every_nest_when_none_is_marked():
    flat = lower_to_stage3(unmarked(), "llvm", horizontal_fuse=True)
    assert len(top_level_nests(flat["main"])) == 1
    check_scale_and_shift(sparsetir.build(unmarked(), "llvm", horizontal_fuse=True))


def test_horizontal_fuse_says_what_is_missing_when_nothing_can_be_fused():
    with pytest.raises(HorizontalFusionError, match=r"nothing to fuse \(scale0: outermost loop "
                                                    r"not parallel .*shift0: outermost loop"):
        sparsetir.build(unmarked(), "llvm", schedule="none", horizontal_fuse=True)


@functools.lru_cache(maxsize=None)
def cached_row_sums():
    """``row_sums`` for CUDA: rows on blockIdx.x, each row's values cached in shared memory,
    features on threadIdx.x (a cross-thread sum), both nests marked for fusion."""
    sch = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(row_sums.specialize({"m": M})))
    for name, source in (("sum_a0", "A"), ("sum_b0", "B")):
        block = sch.get_sblock(name)
        reads = [r.source.name for r in sch.get(block).reads]
        cache = sch.cache_read(block, reads.index(source), "shared")
        row, feature = sch.get_loops(block)
        sch.compute_at(cache, row)
        sch.bind(row, "blockIdx.x")
        sch.bind(feature, "threadIdx.x")
        sch.annotate(block, FUSE_ANNOTATION, True)
    return sch.mod


@pytest.mark.cuda
def test_marked_cuda_nests_with_shared_caches_compile_to_one_kernel():
    kernel = sparsetir.build(cached_row_sums(), "cuda", schedule="none", horizontal_fuse=True)
    assert device_kernels(kernel.executable) == ["main_kernel"]


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
def test_fused_cuda_nests_with_shared_caches_compute_the_sums(reverse):
    flat = lower_to_stage3(cached_row_sums(), "cuda", "none", horizontal_fuse=True)
    assert len(top_level_nests(flat["main"])) == 1
    kernel = emulate(flat, reverse)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((M, K), np.float32)
    c1, c2 = np.full(M, np.nan, np.float32), np.full(M, np.nan, np.float32)
    kernel(a, b, c1, c2)
    np.testing.assert_allclose(c1, a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c2, (b * b).sum(1), rtol=1e-5, atol=1e-5)
