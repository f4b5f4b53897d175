"""Horizontal fusion keeps nests apart when one reads or writes what another writes, and still
fuses nests that only accumulate into a shared output (atomically on CUDA)."""

import numpy as np
import pytest
import tvm
from tvm.script import tirx as TS

import sparsetir
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.ops.hyb import HybConfig, hyb_function, schedule_hyb_cuda
from sparsetir.script import from_source
from sparsetir.script import tir as T
from sparsetir.errors import HorizontalFusionError, SparseTIRValueError
from sparsetir.ir.attrs import FUSE_ANNOTATION
from sparsetir.lower.loop_signature import top_level_nests

M = 64


@T.prim_func
def two_nests(a: T.handle, b: T.handle, c: T.handle, m: T.int32) -> None:
    I = T.dense_fixed(m)
    A = T.match_sparse_buffer(a, (I,), "float32")
    B = T.match_sparse_buffer(b, (I,), "float32")
    C = T.match_sparse_buffer(c, (I,), "float32")
    with T.sp_iter([I], "S", "first") as [i]:
        B[i] = A[i] * T.float32(2)
    with T.sp_iter([I], "S", "second") as [i]:
        C[i] = B[m - 1 - i]                   # reads what the first nest writes, elsewhere


@T.prim_func
def two_adds(a: T.handle, b: T.handle, c: T.handle, m: T.int32) -> None:
    I = T.dense_fixed(m)
    K = T.dense_fixed(1)
    A = T.match_sparse_buffer(a, (I,), "float32")
    B = T.match_sparse_buffer(b, (I,), "float32")
    C = T.match_sparse_buffer(c, (I,), "float32")
    with T.sp_iter([I], "S", "zero") as [i]:
        C[i] = T.float32(0)
    with T.sp_iter([I, K], "SR", "add_a") as [i, k]:   # adds into C, as format_decompose's
        with T.init():                                 # parts do (identity init)
            C[i] = C[i]
        C[i] = C[i] + A[i]
    with T.sp_iter([I, K], "SR", "add_b") as [i, k]:
        with T.init():
            C[i] = C[i]
        C[i] = C[i] + B[i]


def _marked(func, names):
    """``func`` lowered with the first loop of each named nest parallel and marked for fusion."""
    sch = tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(func.specialize({"m": M})))
    for name in names:
        block = sch.get_sblock(f"{name}0")
        sch.parallel(sch.get_loops(block)[0])
        sch.annotate(block, FUSE_ANNOTATION, True)
    return sch.mod


def test_a_nest_reading_what_another_writes_is_not_fused():
    mod = _marked(two_nests, ["first", "second"])
    with pytest.raises(HorizontalFusionError, match=r"share B, which one writes"):
        sparsetir.build(mod, "llvm", schedule="none", horizontal_fuse=True)
    kernel = sparsetir.build(mod, "llvm", schedule="none")      # unfused: right
    a = np.arange(M, dtype=np.float32)
    b, c = np.full(M, np.nan, np.float32), np.full(M, np.nan, np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, (2 * a)[::-1])


def test_nests_that_only_add_into_one_output_are_fused():
    mod = _marked(two_adds, ["add_a", "add_b"])
    fused = lower_to_stage3(mod, "llvm", "none", True)
    assert len(top_level_nests(fused["main"])) == 2            # zeroing, both adds in one loop
    kernel = sparsetir.build(mod, "llvm", schedule="none", horizontal_fuse=True)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(M).astype(np.float32), rng.standard_normal(M).astype(np.float32)
    c = np.full(M, np.nan, np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_an_overwrite_and_an_add_of_the_element_each_iteration_owns_are_fused():
    """C[i] = 0 then C[i] += A[i]: iteration i of both touches C[i] alone (was refused, as
    any mix with an overwrite was)."""
    mod = _marked(two_adds, ["zero", "add_a"])
    assert len(top_level_nests(lower_to_stage3(mod, "llvm", "none", True)["main"])) == 2
    kernel = sparsetir.build(mod, "llvm", schedule="none", horizontal_fuse=True)
    a, b = np.arange(M, dtype=np.float32), np.ones(M, np.float32)
    c = np.full(M, np.nan, np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_cuda_adds_into_a_shared_output_must_be_atomic():
    config = HybConfig(1, (1, 2), 2)
    target = {"kind": "cuda", "arch": "sm_90"}
    atomic = schedule_hyb_cuda(sparsetir.lower_sparse_iter(hyb_function(config, 32)), config)
    lower_to_stage3(atomic, target, "none", True)               # the hyb schedule fuses
    sch = tvm.s_tir.Schedule(atomic)
    for name in config.rule_names():
        sch.unannotate(sch.get_sblock(f"spmm_{name}1"), "atomic")
    with pytest.raises(HorizontalFusionError, match=r"share Y, .*atomically adding"):
        lower_to_stage3(sch.mod, target, "none", True)


TWO_UPDATES = """
@T.prim_func
def two_updates(a: T.handle, b: T.handle, c: T.handle, m: T.int32) -> None:
    I = T.dense_fixed(m)
    K = T.dense_fixed(1)
    A = T.match_sparse_buffer(a, (I,), "float32")
    B = T.match_sparse_buffer(b, (I,), "float32")
    C = T.match_sparse_buffer(c, (I,), "float32")
    with T.sp_iter([I, K], "SR", "{first}") as [i, k]:   # reductions (identity inits), so
        with T.init():                                    # TVM lets the loops be parallel
            C[{row_a}] = C[{row_a}]
        C[{row_a}] = {update_a}
    with T.sp_iter([I, K], "SR", "{second}") as [i, k]:
        with T.init():
            C[{row_b}] = C[{row_b}]
        C[{row_b}] = {update_b}
"""


def two_updates(first, row_a, update_a, second, row_b, update_b):
    """Two nests updating C (nest names, rows and new values), over A and B."""
    return from_source(TWO_UPDATES.format(first=first, row_a=row_a, update_a=update_a,
                                          second=second, row_b=row_b, update_b=update_b))


crossing_updates = two_updates("scale", "i", "C[i] * T.float32(2)",
                               "add_mirror", "m - 1 - i", "C[m - 1 - i] + A[i]")
mirrored_adds = two_updates("add_a", "i", "C[i] + A[i]", "add_b", "m - 1 - i",
                            "C[m - 1 - i] + B[i]")
scale_then_add = two_updates("scale", "i", "C[i] * T.float32(2)", "add", "i", "C[i] + A[i]")


def test_a_product_is_no_addition_and_crossing_rows_race():
    """C = 2 C, then C[m-1-i] += A[i]: fused, the scaling of row i met the addition into it
    in either order (a wrong answer even on one thread). Two additions into mirrored rows
    commute but race across threads, so they are fused only when made atomic."""
    mod = _marked(crossing_updates, ["scale", "add_mirror"])
    with pytest.raises(HorizontalFusionError, match=r"share C, which one writes and another "
                                                    r"reads or writes other than by atomically adding"):
        lower_to_stage3(mod, "llvm", "none", True)


def test_additions_into_rows_other_iterations_touch_must_be_atomic_on_the_cpu():
    mod = _marked(mirrored_adds, ["add_a", "add_b"])
    with pytest.raises(HorizontalFusionError, match=r"on the CPU too, unless iteration t"):
        lower_to_stage3(mod, "llvm", "none", True)
    sch = tvm.s_tir.Schedule(mod)
    for name in ("add_a0", "add_b0"):
        sch.annotate(sch.get_sblock(name), "atomic", True)
    kernel = sparsetir.build(sch.mod, "llvm", schedule="none", horizontal_fuse=True)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(M).astype(np.float32), rng.standard_normal(M).astype(np.float32)
    for _ in range(20):
        c = np.zeros(M, np.float32)
        kernel(a, b, c)
        np.testing.assert_allclose(c, a + b[::-1], rtol=1e-6)


def test_any_updates_of_the_one_element_an_iteration_owns_are_fused_in_order():
    """C[i] *= 2 then C[i] += A[i]: iteration i of both touches C[i] alone, so fusion keeps
    the order of every element's updates; a product is fine there."""
    kernel = sparsetir.build(_marked(scale_then_add, ["scale", "add"]), "llvm",
                             schedule="none", horizontal_fuse=True)
    rng = np.random.default_rng(2)
    a, c0 = rng.standard_normal(M).astype(np.float32), rng.standard_normal(M).astype(np.float32)
    c = c0.copy()
    kernel(a, a, c)
    np.testing.assert_allclose(c, 2 * c0 + a, rtol=1e-6)


def test_a_false_annotation_opts_a_nest_out():
    mod = _marked(two_adds, ["add_a", "add_b"])
    sch = tvm.s_tir.Schedule(mod)
    sch.unannotate(sch.get_sblock("add_b0"), FUSE_ANNOTATION)    # annotate keeps an old value
    sch.annotate(sch.get_sblock("add_b0"), FUSE_ANNOTATION, False)
    fused = lower_to_stage3(sch.mod, "llvm", "none", True)
    assert len(top_level_nests(fused["main"])) == 3            # zeroing, add_a, add_b apart


@TS.prim_func(s_tir=True)
def stepped(A: TS.Buffer((64,), "float32"), C: TS.Buffer((64,), "float32")):
    TS.func_attr({"sparsetir.param_names": {"A": "a", "C": "c"}})
    with TS.sblock("root"):
        for i in TS.parallel(0, 64, step=2):
            with TS.sblock("add_a0"):
                C[i] = C[i] + A[i]


def test_a_loop_with_a_step_is_refused():
    """Fusion (and sparsetir's other passes) rebuilt loops from their bounds: a loop of step
    2 ran at every index."""
    with pytest.raises(SparseTIRValueError, match="loop i has step 2"):
        sparsetir.build(tvm.IRModule({"main": stepped}), "llvm", schedule="none")
