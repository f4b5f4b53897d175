"""The Stage I kernels behind ``sparsetir.ops``, each written once over CSR.

``spmm``: ``Y[i, k] = sum_j A[i, j] * X[j, k]`` (DGL's ``u_mul_e_sum``); ``spmm_unweighted``:
the same over A's pattern (``copy_u_sum``); ``sddmm``: ``out[i, j] = sum_k X[i, k] * Y[j, k]``
on A's nonzeros (``u_dot_v``), rows in parallel. ``sparsetir.ops`` specialises the feature size and schedules them.

Example
-------
>>> from sparsetir.ops.kernels import KERNELS
>>> sorted(KERNELS)
['sddmm', 'spmm', 'spmm_unweighted']
"""

from ..script import tir as T


@T.prim_func
def spmm(a: T.handle, x: T.handle, y: T.handle, indptr: T.handle, indices: T.handle,
         m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    A = T.match_sparse_buffer(a, (I, J), "float32")
    X = T.match_sparse_buffer(x, (J_detach, K), "float32")
    Y = T.match_sparse_buffer(y, (I, K), "float32")
    with T.sp_iter([I, J, K], "SRS", "spmm") as [i, j, k]:
        with T.init():
            Y[i, k] = 0.0
        Y[i, k] = Y[i, k] + A[i, j] * X[j, k]


@T.prim_func
def spmm_unweighted(x: T.handle, y: T.handle, indptr: T.handle, indices: T.handle,
                    m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    X = T.match_sparse_buffer(x, (J_detach, K), "float32")
    Y = T.match_sparse_buffer(y, (I, K), "float32")
    with T.sp_iter([I, J, K], "SRS", "spmm") as [i, j, k]:
        with T.init():
            Y[i, k] = 0.0
        Y[i, k] = Y[i, k] + X[j, k]


@T.prim_func
def sddmm(x: T.handle, y: T.handle, out: T.handle, indptr: T.handle, indices: T.handle,
          m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    X = T.match_sparse_buffer(x, (I, K), "float32")
    Y = T.match_sparse_buffer(y, (J_detach, K), "float32")
    OUT = T.match_sparse_buffer(out, (I, J), "float32")
    with T.sp_iter([I, J, K], "SSR", "sddmm") as [i, j, k]:
        with T.init():
            OUT[i, j] = 0.0
        OUT[i, j] = OUT[i, j] + X[i, k] * Y[j, k]


KERNELS = {"spmm": spmm, "spmm_unweighted": spmm_unweighted, "sddmm": sddmm}
