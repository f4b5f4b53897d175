"""SparseTIR's ``tests/python/sparsetir/test_reverse_cache_read_write.py`` (HEAD 9b3f843), ported.

| SparseTIR test | status |
|---|---|
| ``test_tc_spmm_cache_read`` | cannot: ``tcspmm``'s ``A`` is declared over ``[IO, JO, II, JI]`` with ``JI`` a child of ``JO`` placed after ``II``, a layout ``lower_sparse_iter`` refuses (``LayoutError``: ``JI`` must directly follow ``JO``); and TVM 0.27's ``Schedule`` has no ``reverse_cache_read`` (a primitive of SparseTIR's TVM fork) |
| ``test_tc_spmm_cache_read_dim_order`` | cannot: the same two reasons |
| ``test_rev_cache_write`` | cannot: TVM 0.27's ``Schedule`` has no ``reverse_cache_write``; TVM's ``cache_write`` caches ``B`` in its own coordinates instead |

Each test is SparseTIR's text with the documented renames (``T.iter`` kernels from
``sparsetir.script``, Stage II TIR as ``tirx`` with ``T.sblock``, ``tvm.tir.Schedule`` ->
``tvm.s_tir.Schedule``, ``get_block`` -> ``get_sblock``, ``tvm.IRModule.from_expr(f)`` ->
``tvm.IRModule({"main": f})``), marked ``xfail(strict=True)`` with the error it stops at, so
the file fails the day one of them starts to pass. The expected functions
(``tcspmm_rev_cache_read``, ``tcspmm_rev_cache_read_21``, ``scatter_add_rev_cache_write``) are
not transcribed: no test reaches them.
"""

import pytest
import tvm
from tvm.script import tirx as TX

from sparsetir import LayoutError, lower_sparse_iter
from sparsetir.script import tir as T


@T.prim_func
def tcspmm(
    a: T.handle,
    b: T.handle,
    c: T.handle,
    indptr: T.handle,
    indices: T.handle,
    mb: T.int32,
    nb: T.int32,
    nnzb: T.int32,
    feat_size: T.int32,
    block_size: T.int32,
) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True, "sparse_tir_level": 2})
    IO = T.dense_fixed(mb)
    JO = T.dense_variable(IO, (nb, nnzb), indptr, "int32")
    II = T.dense_fixed(block_size)
    JI = T.sparse_fixed(JO, (nb * block_size, block_size), indices, "int32")
    J = T.dense_fixed(nb * block_size)
    F = T.dense_fixed(feat_size)
    A = T.match_sparse_buffer(a, [IO, JO, II, JI], "float16")
    B = T.match_sparse_buffer(b, [J, F], "float16")
    C = T.match_sparse_buffer(c, [IO, II, F], "float16")
    with T.sp_iter([IO, JO, II, JI, F], "SRSRS", "tcspmm") as [io, jo, ii, ji, f]:
        with T.init():
            C[io, ii, f] = T.float16(0)
        C[io, ii, f] = C[io, ii, f] + A[io, jo, ii, ji] * B[ji, f]


@TX.prim_func(s_tir=True)
def scatter_add(
    a: TX.handle,
    b: TX.handle,
    idx: TX.handle,
):
    A = TX.match_buffer(a, (128, 16), "float32")
    B = TX.match_buffer(b, (1024,), "float32")
    I = TX.match_buffer(idx, (128,), "int32")

    for i, j in TX.grid(128, 16):
        with TX.sblock("scatter"):
            vi, vj = TX.axis.remap("SR", [i, j])
            with TX.init():
                B[I[vi]] = TX.float32(0)
            B[I[vi]] = B[I[vi]] + A[vi, vj]


@pytest.mark.xfail(strict=True, raises=LayoutError, reason="A's layout [IO, JO, II, JI]")
def test_tc_spmm_cache_read():
    MB, NB, NNZB, F, B = tcspmm.params[-5:]
    mod = tcspmm.specialize({MB: 128, NB: 128, NNZB: 1024, F: 64, B: 16})
    mod = lower_sparse_iter(mod)
    sch = tvm.s_tir.Schedule(mod)
    blk_outer = sch.get_sblock("tcspmm0")
    blk_inner = sch.get_sblock("tcspmm1")
    (i,) = sch.get_loops(blk_outer)
    jo, ii, ji, f = sch.get_loops(blk_inner)
    fo, fi = sch.split(f, [None, 16])
    sch.reorder(fo, ii, ji, fi)
    new_blk = sch.blockize(ii)
    B_shared = sch.reverse_cache_read(blk_inner, 2, "shared")
    B_warp = sch.reverse_cache_read(blk_inner, 2, "wmma.matrix_b")


@pytest.mark.xfail(strict=True, raises=LayoutError, reason="A's layout [IO, JO, II, JI]")
def test_tc_spmm_cache_read_dim_order():
    MB, NB, NNZB, F, B = tcspmm.params[-5:]
    mod = tcspmm.specialize({MB: 128, NB: 128, NNZB: 1024, F: 64, B: 16})
    mod = lower_sparse_iter(mod)
    sch = tvm.s_tir.Schedule(mod)
    blk_outer = sch.get_sblock("tcspmm0")
    blk_inner = sch.get_sblock("tcspmm1")
    (i,) = sch.get_loops(blk_outer)
    jo, ii, ji, f = sch.get_loops(blk_inner)
    fo, fi = sch.split(f, [None, 16])
    sch.reorder(fo, ii, ji, fi)
    new_blk = sch.blockize(ii)
    B_shared = sch.reverse_cache_read(blk_inner, 2, "shared", [2, 1])


@pytest.mark.xfail(strict=True, raises=AttributeError, reason="no reverse_cache_write")
def test_rev_cache_write():
    mod = tvm.IRModule({"main": scatter_add})
    sch = tvm.s_tir.Schedule(mod)
    blk = sch.get_sblock("scatter")
    sch.reverse_cache_write(blk, 0, "shared")


if __name__ == "__main__":
    test_tc_spmm_cache_read()
    test_tc_spmm_cache_read_dim_order()
    test_rev_cache_write()
