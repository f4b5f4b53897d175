"""SparseTIR's ``tests/python/sparsetir/test_stage_i_schedule.py`` (9b3f843), ported.

Each test keeps SparseTIR's name and text apart from the renames of ``docs/migration.md`` §1;
where SparseTIR only compares IR, the scheduled kernel is also built for the CPU and checked
against numpy/scipy (``numbers_stage1``: outputs start as NaN, inputs have empty rows).

| SparseTIR test | status |
|---|---|
| test_get_sparse_iteration | passes with documented renames (Schedule, ``.body.block.body``) |
| test_get_sp_iters | passes with documented renames (Schedule, ``.body.block.body``) |
| test_reorder | passes with documented renames (Schedule, ``sch.mod["main"]``); numbers added |
| test_fuse | passes with documented renames (Schedule, ``sch.mod["main"]``); numbers added |
| test_reorder_fail_on_dependency | passes with documented renames (Schedule, ScheduleError) |
| test_reorder_fail_on_new_order_length | passes with documented renames (Schedule, ScheduleError) |

Renames used: ``tir.Schedule`` -> ``sparsetir.Schedule``; ``func.body.block.body`` ->
``func.body[0]``; ``sch.mod["main"]`` -> ``sch.func``; ``tvm.tir.ScheduleError`` ->
``tvm.s_tir.ScheduleError``; ``from tvm.script import tir as T`` -> ``from
sparsetir.script import tir as T``; SparseTIR's ``sparse_tir_scripts`` is ``scripts_stage1``.
"""
# pylint: disable=invalid-name,missing-function-docstring
import tvm
import tvm.testing
import sparsetir
import scipy.sparse as sp
import numpy as np
from sparsetir.script import tir as T
from scipy.sparse import bsr
import pytest
from scripts_stage1 import csrmm, bsrmm, sddmm, fused_sddmm
from numbers_stage1 import check_numbers


@T.prim_func
def reordered_bsrmm(
    a: T.handle,
    b: T.handle,
    c: T.handle,
    indptr: T.handle,
    indices: T.handle,
    nb: T.int32,
    mb: T.int32,
    nnzb: T.int32,
    blk: T.int32,
    feat_size: T.int32,
) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True, "sparse_tir_level": 2})
    I = T.dense_fixed(nb)
    J = T.sparse_variable(I, (mb, nnzb), (indptr, indices), "int32")
    J_detach = T.dense_fixed(mb)
    BI = T.dense_fixed(blk)
    BJ = T.dense_fixed(blk)
    F = T.dense_fixed(feat_size)
    A = T.match_sparse_buffer(a, (I, J, BI, BJ), "float32")
    B = T.match_sparse_buffer(b, (J_detach, BJ, F), "float32")
    C = T.match_sparse_buffer(c, (I, BI, F), "float32")

    with T.sp_iter([BI, BJ, I, J, F], "SRSRS", "bsrmm") as [
        vbi,
        vbj,
        vi,
        vj,
        vf,
    ]:
        with T.init():
            C[vi, vbi, vf] = 0.0
        C[vi, vbi, vf] = C[vi, vbi, vf] + A[vi, vj, vbi, vbj] * B[vj, vbj, vf]


def test_get_sparse_iteration():
    sch = sparsetir.Schedule(csrmm, debug_mask="all")
    sp_iteration_rv = sch.get_sparse_iteration("csrmm")
    sp_iteration = sch.get(sp_iteration_rv)
    assert sp_iteration.name == "csrmm"
    assert sp_iteration.same_as(csrmm.body[0])
    sch.annotate(sp_iteration_rv, "guard", True)
    new_sp_iteration = sch.get(sp_iteration_rv)
    assert new_sp_iteration.annotations.get("guard") == True


def test_get_sp_iters():
    sch = sparsetir.Schedule(csrmm, debug_mask="all")
    block = sch.get_sparse_iteration("csrmm")
    vi, vj, vk = sch.get_sp_iters(block)
    assert vi.same_as(csrmm.body[0].sp_iter_vars[0])
    assert vj.same_as(csrmm.body[0].sp_iter_vars[1])
    assert vk.same_as(csrmm.body[0].sp_iter_vars[2])


def test_reorder():
    sch = sparsetir.Schedule(bsrmm, debug_mask="all")
    block = sch.get_sparse_iteration("bsrmm")
    i, bi, bj, f, j = sch.get_sp_iters(block)
    sch.sparse_reorder(block, [bi, bj, i, j, f])
    tvm.ir.assert_structural_equal(sch.func, reordered_bsrmm, True)
    assert sch.get(block).name == "bsrmm"
    check_numbers("bsrmm", sch.func)  # added


def test_fuse():
    sch = sparsetir.Schedule(sddmm, debug_mask="all")
    block = sch.get_sparse_iteration("sddmm")
    i, j, k = sch.get_sp_iters(block)
    sch.sparse_fuse(block, [i, j])
    tvm.ir.assert_structural_equal(sch.func, fused_sddmm)
    check_numbers("sddmm", sch.func)  # added


def test_reorder_fail_on_dependency():
    sch = sparsetir.Schedule(bsrmm, debug_mask="all")
    block = sch.get_sparse_iteration("bsrmm")
    i, bi, bj, f, j = sch.get_sp_iters(block)
    with pytest.raises(tvm.s_tir.ScheduleError):
        sch.sparse_reorder(block, [bi, bj, j, i, f])


def test_reorder_fail_on_new_order_length():
    sch = sparsetir.Schedule(bsrmm, debug_mask="all")
    block = sch.get_sparse_iteration("bsrmm")
    i, bi, bj, f, j = sch.get_sp_iters(block)
    with pytest.raises(tvm.s_tir.ScheduleError):
        sch.sparse_reorder(block, [bi, bj, i, j])
