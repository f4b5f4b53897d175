"""``tensorize`` on a sparse kernel: BSR SpMM's dense tiles matched to a tensor intrinsic.

With the block loops innermost (``sparsetir.Schedule.sparse_reorder`` to ``[i, j, bi, f, bj]``)
each nonzero block multiplies a dense 4 x 4 tile; TVM's ``tensorize`` replaces that tile loop
nest by an intrinsic once the index arrays, which only place the tile, are hidden from the
match (``unsafe_hide_buffer_access``, SparseTIR's ``hide_buffer_access``). The tiled buffers keep
their dimensions through ``lower_sparse_buffer`` and the call passes them as views.
"""

import sparse_inputs as si
from kernel_zoo import CASES
from tvm import s_tir
from tvm.script import tirx as T
from zoo_check import check_kernel

import sparsetir


@T.prim_func(s_tir=True)
def tile_mm_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4, 4), "float32", offset_factor=1)
    B = T.match_buffer(b, (4, 4), "float32", offset_factor=1)
    C = T.match_buffer(c, (4, 4), "float32", offset_factor=1)
    with T.sblock("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for i, j, k in T.grid(4, 4, 4):
            with T.sblock("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func(s_tir=True)
def tile_mm_impl(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4, 4), "float32", offset_factor=1)
    B = T.match_buffer(b, (4, 4), "float32", offset_factor=1)
    C = T.match_buffer(c, (4, 4), "float32", offset_factor=1)
    with T.sblock("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for k, i, j in T.grid(4, 4, 4):     # another loop order: the intrinsic's own body
            with T.sblock("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


s_tir.TensorIntrin.register("sparsetir_test_tile_mm", tile_mm_desc, tile_mm_impl,
                            override=True)


def test_bsr_tiles_tensorized_and_right():
    case = CASES["bsrmm"]
    inputs = case.make_inputs(si.case_rng("bsrmm", "medium"), "medium")
    stage1 = sparsetir.Schedule(case.func)
    i, bi, bj, f, j = stage1.get_sp_iters("bsrmm")
    stage1.sparse_reorder("bsrmm", [i, j, bi, f, bj])
    func = stage1.func.specialize({"blk": 4, "feat_size": inputs["feat_size"]})
    sch = s_tir.Schedule(sparsetir.lower_sparse_iter(func))     # TVM's checks on
    block = sch.get_sblock("bsrmm1")
    j_loop, bi_loop, f_loop, _ = sch.get_loops(block)
    f_outer, _ = sch.split(f_loop, [None, 4])
    sch.reorder(f_outer, bi_loop)
    sch.decompose_reduction(block, j_loop)
    update = sch.get_sblock("bsrmm1_update")
    reads = [region.source.name for region in sch.get(update).reads]
    sch.unsafe_hide_buffer_access(update, "read", [n for n, name in enumerate(reads)
                                                   if name in ("J_indptr", "J_indices")])
    sch.tensorize(bi_loop, "sparsetir_test_tile_mm")
    sch.get_sblock("bsrmm1_update_o")     # the tile block, now the intrinsic's body
    check_kernel(sparsetir.build(sch.mod, "llvm", schedule="none"), func, "bsrmm", inputs)
