"""The Stage I kernels behind ``sparsetir.ops``.

``spmm``: ``Y[i, k] = sum_j A[i, j] * X[j, k]`` over CSR (DGL's ``u_mul_e_sum``), the kernel
``format_decompose`` rewrites into hyb. The kernels ``sparsetir.ops`` calls iterate CSR through
row tiles: ``O`` (``t`` tiles) over ``I`` (each tile's rows, ids in ``rows``, here ``0..m-1``)
over ``J`` (the CSR row). Tiles are cut where the nonzeros are balanced, so a parallel loop over
tiles gives every thread the same work however skewed the rows are (TVM splits a parallel loop
into equal ranges of iterations: rows of a power-law graph would not be equal work).
``spmm_tiled`` (``u_mul_e_sum``), ``spmm_unweighted_tiled`` (A's pattern, ``copy_u_sum``) and
``sddmm_tiled`` (``out[p] = X[i] . Y[j]`` for nonzero ``p = (i, j)``, ``u_dot_v``), made by
``tiled_kernels(index_dtype)`` for CSR index arrays of int32 (``KERNELS``) or int64.
``segment_tiled_kernels`` gives the same kernels over row segments (``s`` positions apart from
the ``m`` rows; ``tiled_kernels`` is them with ``s = m``), which the nonzero split
(``ops.split``) binds.

The CUDA schedules (``schedule/operators_cuda.py``) take the forms in ``CUDA_KERNELS``
instead: plain CSR ``spmm`` and ``spmm_unweighted`` (rows go to warps), and ``sddmm_fused``,
which iterates the
nonzeros as one fused axis (``T.fuse(I, J)``, each nonzero's row found by a binary search over
``indptr``), so that they go to groups of threads whatever the rows' lengths. On a matrix with
long rows, ``spmm_segments`` and ``spmm_unweighted_segments`` take the rows cut into segments
of bounded length (``sparsetir.format.row_segments``: ``seg_ptr`` over the CSR's nonzeros,
``seg_rows`` the row of each): the output is zeroed by a nest of its own, then every segment
adds its sum into its row (``"atomic"``: a row's segments run in different warps).
``sddmm_segments`` walks the same segments for SDDMM: a segment's row is read from
``seg_rows`` instead of searched for every nonzero, and every nonzero's result is written once
(no zeroing, no atomics).

Example
-------
>>> from sparsetir.ops.kernels import KERNELS
>>> sorted(KERNELS)
['sddmm', 'spmm', 'spmm_unweighted']
>>> [func.params[0].name for func in CUDA_KERNELS.values()]
['a', 'x', 'x', 'a', 'x', 'x']
"""

from functools import lru_cache

from ..ir.attrs import ATOMIC_ANNOTATION, INIT_PER_POINT_ANNOTATION
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


def tiled_kernels(index_dtype: str = "int32") -> dict:
    """The row-tiled CPU kernels (``spmm``, ``spmm_unweighted``, ``sddmm``) over CSR index arrays
    of ``index_dtype`` (``"int32"``, or ``"int64"`` for the plain call on arrays kept in
    int64, as torch keeps them); the row tiles' arrays stay int32."""
    return _tiled_kernels(index_dtype)


@lru_cache(maxsize=None)
def _tiled_kernels(index_dtype: str) -> dict:
    return {name: func.specialize({"s": func.get_param("m")})     # one position per row
            for name, func in segment_tiled_kernels(index_dtype).items()}


def segment_tiled_kernels(index_dtype: str = "int32") -> dict:
    """The kernels of ``tiled_kernels`` over ``s`` row segments instead of the ``m`` rows: the
    tiles (``tile_ptr``) cut positions ``0..s-1``, position ``p``'s nonzeros are
    ``indptr[p]..indptr[p+1]`` and its row is ``rows[p]``, so several segments may share a row
    (SDDMM, whose results go to their nonzeros; ``ops.split`` gives SpMM the rows no other
    segment shares and the pieces of the others as matrices of their own)."""
    return _segment_tiled_kernels(index_dtype)


@lru_cache(maxsize=None)
def _segment_tiled_kernels(index_dtype: str) -> dict:
    @T.prim_func
    def spmm_tiled(a: T.handle, x: T.handle, y: T.handle, tile_ptr: T.handle, rows: T.handle,
                   indptr: T.handle, indices: T.handle, t: T.int32, s: T.int32, m: T.int32,
                   n: T.int32, feat_size: T.int32, nnz: T.int32) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        O = T.dense_fixed(t)
        I = T.sparse_variable(O, (m, s), (tile_ptr, rows), "int32")
        J = T.sparse_variable(I, (n, nnz), (indptr, indices), index_dtype)
        I_detach = T.dense_fixed(m)
        J_detach = T.dense_fixed(n)
        K = T.dense_fixed(feat_size)
        A = T.match_sparse_buffer(a, (O, I, J), "float32")
        X = T.match_sparse_buffer(x, (J_detach, K), "float32")
        Y = T.match_sparse_buffer(y, (I_detach, K), "float32")
        with T.sp_iter([O, I, J, K], "SSRS", "spmm") as [o, i, j, k]:
            T.sp_iter_attr({INIT_PER_POINT_ANNOTATION: True})     # row tiles share no row
            with T.init():
                Y[i, k] = 0.0
            Y[i, k] = Y[i, k] + A[o, i, j] * X[j, k]

    @T.prim_func
    def spmm_unweighted_tiled(x: T.handle, y: T.handle, tile_ptr: T.handle, rows: T.handle,
                              indptr: T.handle, indices: T.handle, t: T.int32, s: T.int32,
                              m: T.int32, n: T.int32, feat_size: T.int32,
                              nnz: T.int32) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        O = T.dense_fixed(t)
        I = T.sparse_variable(O, (m, s), (tile_ptr, rows), "int32")
        J = T.sparse_variable(I, (n, nnz), (indptr, indices), index_dtype)
        I_detach = T.dense_fixed(m)
        J_detach = T.dense_fixed(n)
        K = T.dense_fixed(feat_size)
        X = T.match_sparse_buffer(x, (J_detach, K), "float32")
        Y = T.match_sparse_buffer(y, (I_detach, K), "float32")
        with T.sp_iter([O, I, J, K], "SSRS", "spmm") as [o, i, j, k]:
            T.sp_iter_attr({INIT_PER_POINT_ANNOTATION: True})     # row tiles share no row
            with T.init():
                Y[i, k] = 0.0
            Y[i, k] = Y[i, k] + X[j, k]

    @T.prim_func
    def sddmm_tiled(x: T.handle, y: T.handle, out: T.handle, tile_ptr: T.handle, rows: T.handle,
                    indptr: T.handle, indices: T.handle, t: T.int32, s: T.int32, m: T.int32,
                    n: T.int32, feat_size: T.int32, nnz: T.int32) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        O = T.dense_fixed(t)
        I = T.sparse_variable(O, (m, s), (tile_ptr, rows), "int32")
        J = T.sparse_variable(I, (n, nnz), (indptr, indices), index_dtype)
        I_detach = T.dense_fixed(m)
        J_detach = T.dense_fixed(n)
        K = T.dense_fixed(feat_size)
        X = T.match_sparse_buffer(x, (I_detach, K), "float32")
        Y = T.match_sparse_buffer(y, (J_detach, K), "float32")
        OUT = T.match_sparse_buffer(out, (O, I, J), "float32")
        with T.sp_iter([O, I, J, K], "SSSR", "sddmm") as [o, i, j, k]:
            with T.init():
                OUT[o, i, j] = 0.0
            OUT[o, i, j] = OUT[o, i, j] + X[i, k] * Y[j, k]

    return {"spmm": spmm_tiled, "spmm_unweighted": spmm_unweighted_tiled,
            "sddmm": sddmm_tiled}


@T.prim_func
def spmm_unweighted(x: T.handle, y: T.handle, indptr: T.handle, indices: T.handle, m: T.int32,
                    n: T.int32, feat_size: T.int32, nnz: T.int32) -> None:
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
def sddmm_fused(x: T.handle, y: T.handle, out: T.handle, indptr: T.handle, indices: T.handle,
                m: T.int32, n: T.int32, feat_size: T.int32, nnz: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    X = T.match_sparse_buffer(x, (I, K), "float32")  # on I itself: the searched row is proven
    Y = T.match_sparse_buffer(y, (J_detach, K), "float32")
    OUT = T.match_sparse_buffer(out, (I, J), "float32")
    with T.sp_iter([T.fuse(I, J), K], "SSR", "sddmm") as [i, j, k]:
        with T.init():
            OUT[i, j] = 0.0
        OUT[i, j] = OUT[i, j] + X[i, k] * Y[j, k]


@T.prim_func
def spmm_segments(a: T.handle, x: T.handle, y: T.handle, seg_ptr: T.handle, seg_rows: T.handle,
                  indices: T.handle, s: T.int32, m: T.int32, n: T.int32, feat_size: T.int32,
                  nnz: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    O = T.dense_fixed(s)
    I = T.sparse_fixed(O, (m, 1), seg_rows, "int32")      # one row per segment
    J = T.sparse_variable(I, (n, nnz), (seg_ptr, indices), "int32")
    I_detach = T.dense_fixed(m)
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    A = T.match_sparse_buffer(a, (O, I, J), "float32")
    X = T.match_sparse_buffer(x, (J_detach, K), "float32")
    Y = T.match_sparse_buffer(y, (I_detach, K), "float32")
    with T.sp_iter([I_detach, K], "SS", "zero") as [i, k]:
        Y[i, k] = T.float32(0)
    with T.sp_iter([O, I, J, K], "SSRS", "spmm") as [o, i, j, k]:
        T.sp_iter_attr({ATOMIC_ANNOTATION: True})           # a row's segments share it
        with T.init():
            Y[i, k] = Y[i, k]                               # adds into the zeroed row
        Y[i, k] = Y[i, k] + A[o, i, j] * X[j, k]


@T.prim_func
def spmm_unweighted_segments(x: T.handle, y: T.handle, seg_ptr: T.handle, seg_rows: T.handle,
                             indices: T.handle, s: T.int32, m: T.int32, n: T.int32,
                             feat_size: T.int32, nnz: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    O = T.dense_fixed(s)
    I = T.sparse_fixed(O, (m, 1), seg_rows, "int32")
    J = T.sparse_variable(I, (n, nnz), (seg_ptr, indices), "int32")
    I_detach = T.dense_fixed(m)
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    X = T.match_sparse_buffer(x, (J_detach, K), "float32")
    Y = T.match_sparse_buffer(y, (I_detach, K), "float32")
    with T.sp_iter([I_detach, K], "SS", "zero") as [i, k]:
        Y[i, k] = T.float32(0)
    with T.sp_iter([O, I, J, K], "SSRS", "spmm") as [o, i, j, k]:
        T.sp_iter_attr({ATOMIC_ANNOTATION: True})
        with T.init():
            Y[i, k] = Y[i, k]
        Y[i, k] = Y[i, k] + X[j, k]


@T.prim_func
def sddmm_segments(x: T.handle, y: T.handle, out: T.handle, seg_ptr: T.handle,
                   seg_rows: T.handle, indices: T.handle, s: T.int32, m: T.int32, n: T.int32,
                   feat_size: T.int32, nnz: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    O = T.dense_fixed(s)
    I = T.sparse_fixed(O, (m, 1), seg_rows, "int32")      # one row per segment
    J = T.sparse_variable(I, (n, nnz), (seg_ptr, indices), "int32")
    I_detach = T.dense_fixed(m)
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    X = T.match_sparse_buffer(x, (I_detach, K), "float32")
    Y = T.match_sparse_buffer(y, (J_detach, K), "float32")
    OUT = T.match_sparse_buffer(out, (O, I, J), "float32")  # position seg_ptr[o] + j: CSR's
    with T.sp_iter([O, I, J, K], "SSSR", "sddmm") as [o, i, j, k]:
        with T.init():
            OUT[o, i, j] = 0.0
        OUT[o, i, j] = OUT[o, i, j] + X[i, k] * Y[j, k]


KERNELS = tiled_kernels("int32")
CUDA_KERNELS = {"spmm": spmm, "spmm_unweighted": spmm_unweighted, "sddmm": sddmm_fused,
                "spmm_segments": spmm_segments,
                "spmm_unweighted_segments": spmm_unweighted_segments,
                "sddmm_segments": sddmm_segments}
