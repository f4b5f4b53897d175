"""Expected Stage II (and Stage III) IR of reference kernels, written as TVMScript.

Reviewed by hand when first generated; a change in the lowering shows up as a structural
mismatch against these. Regenerate only after reading the new IR.
"""
from __future__ import annotations
# ruff: noqa
# fmt: off
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class csrmm_iter:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(("nnz",), "float32"), B: T.Buffer(("n", "feat_size"), "float32"), C: T.Buffer(("m", feat_size), "float32"), J_indptr: T.Buffer((m + 1,), "int32"), J_indices: T.Buffer((nnz,), "int32"), m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32):
        T.func_attr({"sparsetir.index_checks": [{"axis": "J", "bound": "n", "indices": "indices", "indptr": "indptr", "nnz": "nnz", "sorted": True, "width": "0"}], "sparsetir.lowered_loops": {"csrmm0": ["i"], "csrmm1": ["j", "k"]}, "sparsetir.param_names": {"A": "a", "B": "b", "C": "c", "J_indices": "indices", "J_indptr": "indptr", "feat_size": "feat_size", "m": "m", "n": "n", "nnz": "nnz"}, "sparsetir.param_shapes": {"A": ["nnz"], "B": ["n", "feat_size"], "C": ["m", "feat_size"], "J_indices": ["nnz"], "J_indptr": ["m + 1"]}, "sparsetir.value_domains": [], "tir.noalias": True})
        # with T.sblock("root"):
        for i in range(m):
            with T.sblock("csrmm0"):
                vi = T.axis.spatial(m, i)
                T.reads(J_indptr[vi:vi + 2], A[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi])], B[0:n, 0:feat_size], J_indices[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi])])
                T.writes(C[vi, 0:feat_size])
                T.sblock_attr({"sparsetir.rows_owned": 1})
                for j, k in T.grid(J_indptr[vi + 1] - J_indptr[vi], feat_size):
                    with T.sblock("csrmm1"):
                        vj, vk = T.axis.remap("RS", [j, k])
                        T.reads(J_indptr[vi:vi + 2], A[J_indptr[vi] + vj], B[J_indices[J_indptr[vi] + vj], vk], J_indices[J_indptr[vi] + vj])
                        T.writes(C[vi, vk])
                        with T.init():
                            C[vi, vk] = T.float32(0.0)
                        C[vi, vk] = C[vi, vk] + A[J_indptr[vi] + vj] * B[J_indices[J_indptr[vi] + vj], vk]


@I.ir_module
class csrmm_dense_iter_iter:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(("nnz",), "float32"), B: T.Buffer(("n", "feat_size"), "float32"), C: T.Buffer(("m", feat_size), "float32"), J_indptr: T.Buffer((m + 1,), "int32"), J_indices: T.Buffer((nnz,), "int32"), m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32):
        T.func_attr({"sparsetir.index_checks": [{"axis": "J", "bound": "n", "indices": "indices", "indptr": "indptr", "nnz": "nnz", "sorted": True, "width": "0"}], "sparsetir.lowered_loops": {"csrmm_dense_iter0": ["i", "j", "k"], "csrmm_dense_iter0_search0": ["i", "j"]}, "sparsetir.param_names": {"A": "a", "B": "b", "C": "c", "J_indices": "indices", "J_indptr": "indptr", "feat_size": "feat_size", "m": "m", "n": "n", "nnz": "nnz"}, "sparsetir.param_shapes": {"A": ["nnz"], "B": ["n", "feat_size"], "C": ["m", "feat_size"], "J_indices": ["nnz"], "J_indptr": ["m + 1"]}, "sparsetir.value_domains": [], "tir.noalias": True})
        # with T.sblock("root"):
        J_indices_pos = T.sblock_alloc_buffer((2,), "int32", scope="local")
        for i, j in T.grid(m, n):
            with T.sblock("csrmm_dense_iter0_search0"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(J_indices[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi])], J_indptr[vi], J_indptr[vi + 1])
                T.writes(J_indices_pos[0:2])
                J_indices_pos[0] = J_indptr[vi]
                J_indices_pos[1] = J_indptr[vi + 1] - J_indptr[vi]
                while J_indices_pos[1] > 0:
                    if J_indices[J_indices_pos[0] + J_indices_pos[1] // 2] < vj:
                        J_indices_pos[0] = J_indices_pos[0] + J_indices_pos[1] // 2 + 1
                        J_indices_pos[1] = J_indices_pos[1] - J_indices_pos[1] // 2 - 1
                    else:
                        J_indices_pos[1] = J_indices_pos[1] // 2
            for k in range(feat_size):
                with T.sblock("csrmm_dense_iter0"):
                    vi, vj, vk = T.axis.remap("SRS", [i, j, k])
                    T.reads(J_indices_pos[0], J_indptr[vi + 1], J_indices[J_indices_pos[0]], A[J_indices_pos[0]], B[vj, vk])
                    T.writes(C[vi, vk])
                    T.sblock_attr({"sparsetir.rows_owned": 1})
                    with T.init():
                        C[vi, vk] = T.float32(0.0)
                    C[vi, vk] = C[vi, vk] + T.if_then_else(J_indices_pos[0] < J_indptr[vi + 1], T.if_then_else(J_indices[J_indices_pos[0]] == vj, A[J_indices_pos[0]], T.float32(0.0)), T.float32(0.0)) * B[vj, vk]


@I.ir_module
class bsrmm_iter:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(("nnzb", "blk", blk), "float32"), B: T.Buffer(("mb", blk, "feat_size"), "float32"), C: T.Buffer(("nb", blk, feat_size), "float32"), J_indptr: T.Buffer((nb + 1,), "int32"), J_indices: T.Buffer((nnzb,), "int32"), nb: T.int32, mb: T.int32, nnzb: T.int32, blk: T.int32, feat_size: T.int32):
        T.func_attr({"sparsetir.index_checks": [{"axis": "J", "bound": "mb", "indices": "indices", "indptr": "indptr", "nnz": "nnzb", "sorted": True, "width": "0"}], "sparsetir.lowered_loops": {"bsrmm0": ["i", "bi", "bj", "f"], "bsrmm1": ["j"]}, "sparsetir.param_names": {"A": "a", "B": "b", "C": "c", "J_indices": "indices", "J_indptr": "indptr", "blk": "blk", "feat_size": "feat_size", "mb": "mb", "nb": "nb", "nnzb": "nnzb"}, "sparsetir.param_shapes": {"A": ["nnzb", "blk", "blk"], "B": ["mb", "blk", "feat_size"], "C": ["nb", "blk", "feat_size"], "J_indices": ["nnzb"], "J_indptr": ["nb + 1"]}, "sparsetir.value_domains": [], "tir.noalias": True})
        # with T.sblock("root"):
        for i, bi, bj, f in T.grid(nb, blk, blk, feat_size):
            with T.sblock("bsrmm0"):
                vi, vbi, vbj, vf = T.axis.remap("SSRS", [i, bi, bj, f])
                T.reads(J_indptr[vi:vi + 2], A[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi]), vbi, vbj], B[0:mb, vbj, vf], J_indices[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi])])
                T.writes(C[vi, vbi, vf])
                T.sblock_attr({"sparsetir.rows_owned": 1})
                with T.init():
                    C[vi, vbi, vf] = T.float32(0.0)
                for j in range(J_indptr[vi + 1] - J_indptr[vi]):
                    with T.sblock("bsrmm1"):
                        vj = T.axis.reduce(J_indptr[vi + 1] - J_indptr[vi], j)
                        T.reads(J_indptr[vi:vi + 2], C[vi, vbi, vf], A[J_indptr[vi] + vj, vbi, vbj], B[J_indices[J_indptr[vi] + vj], vbj, vf], J_indices[J_indptr[vi] + vj])
                        T.writes(C[vi, vbi, vf])
                        C[vi, vbi, vf] = C[vi, vbi, vf] + A[J_indptr[vi] + vj, vbi, vbj] * B[J_indices[J_indptr[vi] + vj], vbj, vf]


@I.ir_module
class ellmm_iter:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(("nb", "col", "blk", blk), "float32"), B: T.Buffer(("mb", blk, "feat_size"), "float32"), C: T.Buffer((nb, blk, feat_size), "float32"), J_indices: T.Buffer((nb * col,), "int32"), nb: T.int32, mb: T.int32, feat_size: T.int32, col: T.int32, blk: T.int32):
        T.func_attr({"sparsetir.index_checks": [{"axis": "J", "bound": "mb", "indices": "indices", "indptr": "", "nnz": "0", "sorted": True, "width": "col"}], "sparsetir.lowered_loops": {"ellmm0": ["i", "j", "bi", "bj", "f"]}, "sparsetir.param_names": {"A": "a", "B": "b", "C": "c", "J_indices": "indices", "blk": "blk", "col": "col", "feat_size": "feat_size", "mb": "mb", "nb": "nb"}, "sparsetir.param_shapes": {"A": ["nb", "col", "blk", "blk"], "B": ["mb", "blk", "feat_size"], "C": ["nb", "blk", "feat_size"], "J_indices": ["nb * col"]}, "sparsetir.value_domains": [], "tir.noalias": True})
        # with T.sblock("root"):
        for i, j, bi, bj, f in T.grid(nb, col, blk, blk, feat_size):
            with T.sblock("ellmm0"):
                vi, vj, vbi, vbj, vf = T.axis.remap("SRSRS", [i, j, bi, bj, f])
                T.reads(A[vi, vj, vbi, vbj], B[J_indices[vi * col + vj], vbj, vf], J_indices[vi * col + vj])
                T.writes(C[vi, vbi, vf])
                T.sblock_attr({"sparsetir.rows_owned": 1})
                with T.init():
                    C[vi, vbi, vf] = T.float32(0.0)
                C[vi, vbi, vf] = C[vi, vbi, vf] + A[vi, vj, vbi, vbj] * B[J_indices[vi * col + vj], vbj, vf]


@I.ir_module
class sddmm_iter:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(("m", "feat_size"), "float32"), B: T.Buffer(("n", feat_size), "float32"), C: T.Buffer(("nnz",), "float32"), J_indptr: T.Buffer((m + 1,), "int32"), J_indices: T.Buffer((nnz,), "int32"), m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32):
        T.func_attr({"sparsetir.index_checks": [{"axis": "J", "bound": "n", "indices": "indices", "indptr": "indptr", "nnz": "nnz", "sorted": True, "width": "0"}], "sparsetir.lowered_loops": {"sddmm0": ["i"], "sddmm1": ["j", "k"]}, "sparsetir.param_names": {"A": "a", "B": "b", "C": "c", "J_indices": "indices", "J_indptr": "indptr", "feat_size": "feat_size", "m": "m", "n": "n", "nnz": "nnz"}, "sparsetir.param_shapes": {"A": ["m", "feat_size"], "B": ["n", "feat_size"], "C": ["nnz"], "J_indices": ["nnz"], "J_indptr": ["m + 1"]}, "sparsetir.value_domains": [], "tir.noalias": True})
        # with T.sblock("root"):
        for i in range(m):
            with T.sblock("sddmm0"):
                vi = T.axis.spatial(m, i)
                T.reads(J_indptr[vi:vi + 2], A[vi, 0:feat_size], B[0:n, 0:feat_size], J_indices[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi])])
                T.writes(C[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi])])
                T.sblock_attr({"sparsetir.rows_owned": 1})
                for j, k in T.grid(J_indptr[vi + 1] - J_indptr[vi], feat_size):
                    with T.sblock("sddmm1"):
                        vj, vk = T.axis.remap("SR", [j, k])
                        T.reads(J_indptr[vi:vi + 2], A[vi, vk], B[J_indices[J_indptr[vi] + vj], vk], J_indices[J_indptr[vi] + vj])
                        T.writes(C[J_indptr[vi] + vj])
                        with T.init():
                            C[J_indptr[vi] + vj] = T.float32(0.0)
                        C[J_indptr[vi] + vj] = C[J_indptr[vi] + vj] + A[vi, vk] * B[J_indices[J_indptr[vi] + vj], vk]


@I.ir_module
class fused_sddmm_iter:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(("m", "feat_size"), "float32"), B: T.Buffer(("n", feat_size), "float32"), C: T.Buffer(("nnz",), "float32"), J_indptr: T.Buffer((m + 1,), "int32"), J_indices: T.Buffer((nnz,), "int32"), m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32):
        T.func_attr({"sparsetir.index_checks": [{"axis": "J", "bound": "n", "indices": "indices", "indptr": "indptr", "nnz": "nnz", "sorted": True, "width": "0"}], "sparsetir.lowered_loops": {"fused_sddmm0": ["j", "k"], "fused_sddmm0_search0": ["j"]}, "sparsetir.param_names": {"A": "a", "B": "b", "C": "c", "J_indices": "indices", "J_indptr": "indptr", "feat_size": "feat_size", "m": "m", "n": "n", "nnz": "nnz"}, "sparsetir.param_shapes": {"A": ["m", "feat_size"], "B": ["n", "feat_size"], "C": ["nnz"], "J_indices": ["nnz"], "J_indptr": ["m + 1"]}, "sparsetir.value_domains": [], "tir.noalias": True})
        # with T.sblock("root"):
        J_indptr_pos = T.sblock_alloc_buffer((nnz,), "int32")
        for j in range(nnz):
            with T.sblock("fused_sddmm0_search0"):
                vj = T.axis.spatial(nnz, j)
                T.reads(J_indptr[0:m + 1])
                T.writes(J_indptr_pos[vj])
                T.sblock_attr({"preprocess": 1, "sparsetir.rows_owned": 1})
                J_indptr_pos_state = T.sblock_alloc_buffer((2,), "int32", scope="local")
                J_indptr_pos_state[0] = 0
                J_indptr_pos_state[1] = m + 1
                while J_indptr_pos_state[1] > 0:
                    if J_indptr[J_indptr_pos_state[0] + J_indptr_pos_state[1] // 2] <= vj:
                        J_indptr_pos_state[0] = J_indptr_pos_state[0] + J_indptr_pos_state[1] // 2 + 1
                        J_indptr_pos_state[1] = J_indptr_pos_state[1] - J_indptr_pos_state[1] // 2 - 1
                    else:
                        J_indptr_pos_state[1] = J_indptr_pos_state[1] // 2
                J_indptr_pos[vj] = J_indptr_pos_state[0]
        for j, k in T.grid(nnz, feat_size):
            with T.sblock("fused_sddmm0"):
                vj, vk = T.axis.remap("SR", [j, k])
                T.reads(A[J_indptr_pos[vj] - 1, vk], J_indptr_pos[vj], B[J_indices[vj], vk], J_indices[vj])
                T.writes(C[vj])
                T.sblock_attr({"sparsetir.rows_owned": 1})
                with T.init():
                    C[vj] = T.float32(0.0)
                C[vj] = C[vj] + A[J_indptr_pos[vj] - 1, vk] * B[J_indices[vj], vk]


@I.ir_module
class csrmm_buffer:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(("nnz",), "float32", align=4), B: T.Buffer(("n * feat_size",), "float32", align=4), C: T.Buffer(("m * feat_size",), "float32", align=4), J_indptr: T.Buffer((m + 1,), "int32", align=4), J_indices: T.Buffer((nnz,), "int32", align=4), m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32):
        T.func_attr({"sparsetir.index_checks": [{"axis": "J", "bound": "n", "indices": "indices", "indptr": "indptr", "nnz": "nnz", "sorted": True, "width": "0"}], "sparsetir.lowered_loops": {"csrmm0": ["i"], "csrmm1": ["j", "k"]}, "sparsetir.param_names": {"A": "a", "B": "b", "C": "c", "J_indices": "indices", "J_indptr": "indptr", "feat_size": "feat_size", "m": "m", "n": "n", "nnz": "nnz"}, "sparsetir.param_shapes": {"A": ["nnz"], "B": ["n", "feat_size"], "C": ["m", "feat_size"], "J_indices": ["nnz"], "J_indptr": ["m + 1"]}, "sparsetir.value_domains": [], "tir.noalias": True})
        # with T.sblock("root"):
        for i in range(m):
            with T.sblock("csrmm0"):
                vi = T.axis.spatial(m, i)
                T.reads(J_indptr[vi:vi + 2], A[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi])], B[0:n * feat_size], J_indices[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi])])
                T.writes(C[0:m * feat_size])
                T.sblock_attr({"sparsetir.rows_owned": 1})
                for k_init in range(feat_size):
                    with T.sblock("csrmm1_init"):
                        vk = T.axis.spatial(feat_size, k_init)
                        T.reads()
                        T.writes(C[0:m * feat_size])
                        C[vi * feat_size + vk] = T.float32(0.0)
                for j, k in T.grid(J_indptr[vi + 1] - J_indptr[vi], feat_size):
                    with T.sblock("csrmm1_update"):
                        vj, vk = T.axis.remap("RS", [j, k])
                        T.reads(C[0:m * feat_size], J_indptr[vi:vi + 2], A[J_indptr[vi] + vj], B[0:n * feat_size], J_indices[J_indptr[vi] + vj])
                        T.writes(C[0:m * feat_size])
                        C[vi * feat_size + vk] = C[vi * feat_size + vk] + A[J_indptr[vi] + vj] * B[J_indices[J_indptr[vi] + vj] * feat_size + vk]


@I.ir_module
class bsrmm_buffer:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(("nnzb * blk * blk",), "float32", align=4), B: T.Buffer(("mb * blk * feat_size",), "float32", align=4), C: T.Buffer(("nb * blk * feat_size",), "float32", align=4), J_indptr: T.Buffer((nb + 1,), "int32", align=4), J_indices: T.Buffer((nnzb,), "int32", align=4), nb: T.int32, mb: T.int32, nnzb: T.int32, blk: T.int32, feat_size: T.int32):
        T.func_attr({"sparsetir.index_checks": [{"axis": "J", "bound": "mb", "indices": "indices", "indptr": "indptr", "nnz": "nnzb", "sorted": True, "width": "0"}], "sparsetir.lowered_loops": {"bsrmm0": ["i", "bi", "bj", "f"], "bsrmm1": ["j"]}, "sparsetir.param_names": {"A": "a", "B": "b", "C": "c", "J_indices": "indices", "J_indptr": "indptr", "blk": "blk", "feat_size": "feat_size", "mb": "mb", "nb": "nb", "nnzb": "nnzb"}, "sparsetir.param_shapes": {"A": ["nnzb", "blk", "blk"], "B": ["mb", "blk", "feat_size"], "C": ["nb", "blk", "feat_size"], "J_indices": ["nnzb"], "J_indptr": ["nb + 1"]}, "sparsetir.value_domains": [], "tir.noalias": True})
        # with T.sblock("root"):
        for i, bi in T.grid(nb, blk):
            for f_init in range(feat_size):
                with T.sblock("bsrmm0_init"):
                    vi, vbi, vf = T.axis.remap("SSS", [i, bi, f_init])
                    T.reads()
                    T.writes(C[0:nb * blk * feat_size])
                    T.sblock_attr({"sparsetir.rows_owned": 1})
                    C[(vi * blk + vbi) * feat_size + vf] = T.float32(0.0)
            for bj, f in T.grid(blk, feat_size):
                with T.sblock("bsrmm0_update"):
                    vi, vbi, vbj, vf = T.axis.remap("SSRS", [i, bi, bj, f])
                    T.reads(C[0:nb * blk * feat_size], J_indptr[vi:vi + 2], A[0:nnzb * blk * blk], B[0:mb * blk * feat_size], J_indices[J_indptr[vi]:J_indptr[vi] + (J_indptr[vi + 1] - J_indptr[vi])])
                    T.writes(C[0:nb * blk * feat_size])
                    T.sblock_attr({"sparsetir.rows_owned": 1})
                    for j in range(J_indptr[vi + 1] - J_indptr[vi]):
                        with T.sblock("bsrmm1"):
                            vj = T.axis.reduce(J_indptr[vi + 1] - J_indptr[vi], j)
                            T.reads(J_indptr[vi:vi + 2], C[0:nb * blk * feat_size], A[0:nnzb * blk * blk], B[0:mb * blk * feat_size], J_indices[J_indptr[vi] + vj])
                            T.writes(C[0:nb * blk * feat_size])
                            C[(vi * blk + vbi) * feat_size + vf] = C[(vi * blk + vbi) * feat_size + vf] + A[((J_indptr[vi] + vj) * blk + vbi) * blk + vbj] * B[(J_indices[J_indptr[vi] + vj] * blk + vbj) * feat_size + vf]
