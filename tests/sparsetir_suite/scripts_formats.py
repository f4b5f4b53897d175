"""SparseTIR's format descriptions (``sparse_tir_composable_format_scripts.py`` at 9b3f843:
``bsr``, ``padding``, ``ell``), transcribed with the documented rename of ``T``; the Stage I
kernels (``csrmm``, ``ellmm``, ...) are in ``scripts_stage1.py``. The
``*_rewrite_with_preprocess`` functions are what ``sparsetir.format_decompose`` gives here, not
SparseTIR's text: ``test_composable_format.py`` says why they differ.

Example
-------
>>> # func = sparsetir.format_decompose(scripts_stage1.csrmm, rules)
"""

from sparsetir.script import tir as T


@T.prim_func
def bsr(
    a: T.handle,
    indptr: T.handle,
    indices: T.handle,
    m: T.int32,
    n: T.int32,
    nnz: T.int32,
    block_size: T.int32,
) -> None:
    IO = T.dense_fixed(m)
    JO = T.sparse_variable(IO, (n, nnz), (indptr, indices), "int32")
    II = T.dense_fixed(block_size)
    JI = T.dense_fixed(block_size)
    A = T.match_sparse_buffer(a, (IO, JO, II, JI), "float32")
    T.evaluate(0)


@T.prim_func
def padding(
    a: T.handle,
    indptr: T.handle,
    indices: T.handle,
    m: T.int32,
    n: T.int32,
    nnz_chunks: T.int32,
    pad_size: T.int32,
) -> None:
    I = T.dense_fixed(m)
    JO = T.dense_variable(I, ((n + pad_size - 1) // pad_size, nnz_chunks), indptr, "int32")
    JI = T.sparse_fixed(JO, (n, pad_size), indices, "int32")
    A = T.match_sparse_buffer(a, (I, JO, JI), "float32")
    T.evaluate(0)


@T.prim_func
def ell(
    a: T.handle,
    indptr_i: T.handle,
    indices_i: T.handle,
    indices_j: T.handle,
    m: T.int32,
    n: T.int32,
    num_rows: T.int32,
    nnz_cols: T.int32,
) -> None:
    O = T.dense_fixed(1)
    I = T.sparse_variable(O, (m, num_rows), (indptr_i, indices_i))
    J = T.sparse_fixed(I, (n, nnz_cols), indices_j)
    A = T.match_sparse_buffer(a, (O, I, J), "float32")
    T.evaluate(0)


@T.prim_func
def bsr_rewrite_with_preprocess(
    a: T.handle,
    b: T.handle,
    c: T.handle,
    indptr: T.handle,
    indices: T.handle,
    m: T.int32,
    n: T.int32,
    feat_size: T.int32,
    nnz: T.int32,
    a_4: T.handle,
    indptr_4: T.handle,
    indices_4: T.handle,
    m_4: T.int32,
    n_4: T.int32,
    nnz_4: T.int32,
    a_16: T.handle,
    indptr_16: T.handle,
    indices_16: T.handle,
    m_16: T.int32,
    n_16: T.int32,
    nnz_16: T.int32,
    a_32: T.handle,
    indptr_32: T.handle,
    indices_32: T.handle,
    m_32: T.int32,
    n_32: T.int32,
    nnz_32: T.int32,
):
    T.func_attr({"global_symbol": "main", "tir.noalias": True, "sparse_tir_level": 2})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    IO_4 = T.dense_fixed(m_4)
    JO_4 = T.sparse_variable(IO_4, (n_4, nnz_4), (indptr_4, indices_4), "int32")
    II_4 = T.dense_fixed(4)
    JI_4 = T.dense_fixed(4)
    IO_16 = T.dense_fixed(m_16)
    JO_16 = T.sparse_variable(IO_16, (n_16, nnz_16), (indptr_16, indices_16), "int32")
    II_16 = T.dense_fixed(16)
    JI_16 = T.dense_fixed(16)
    IO_32 = T.dense_fixed(m_32)
    JO_32 = T.sparse_variable(IO_32, (n_32, nnz_32), (indptr_32, indices_32), "int32")
    II_32 = T.dense_fixed(32)
    JI_32 = T.dense_fixed(32)
    A = T.match_sparse_buffer(a, (I, J), "float32")
    B = T.match_sparse_buffer(b, (J_detach, K), "float32")
    C = T.match_sparse_buffer(c, (I, K), "float32")
    A_4 = T.match_sparse_buffer(a_4, (IO_4, JO_4, II_4, JI_4), "float32")
    A_16 = T.match_sparse_buffer(a_16, (IO_16, JO_16, II_16, JI_16), "float32")
    A_32 = T.match_sparse_buffer(a_32, (IO_32, JO_32, II_32, JI_32), "float32")
    with T.sp_iter([IO_4, JO_4, II_4, JI_4], "SSSS", "rewrite_A_4") as [io, jo, ii, ji]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["jo"]})
        A_4[io, jo, ii, ji] = T.Select(
            io * 4 + ii < m and jo * 4 + ji < n,
            A[T.min(io * 4 + ii, m - 1), T.min(jo * 4 + ji, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([IO_16, JO_16, II_16, JI_16], "SSSS", "rewrite_A_16") as [io, jo, ii, ji]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["jo"]})
        A_16[io, jo, ii, ji] = T.Select(
            io * 16 + ii < m and jo * 16 + ji < n,
            A[T.min(io * 16 + ii, m - 1), T.min(jo * 16 + ji, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([IO_32, JO_32, II_32, JI_32], "SSSS", "rewrite_A_32") as [io, jo, ii, ji]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["jo"]})
        A_32[io, jo, ii, ji] = T.Select(
            io * 32 + ii < m and jo * 32 + ji < n,
            A[T.min(io * 32 + ii, m - 1), T.min(jo * 32 + ji, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([I, K], "SS", "csrmm_init") as [i, k]:
        C[i, k] = T.float32(0.0)
    with T.sp_iter([IO_4, JO_4, II_4, JI_4, K], "SRSRS", "csrmm_4") as [io, jo, ii, ji, k]:
        with T.init():
            C[T.min(io * 4 + ii, m - 1), k] = C[T.min(io * 4 + ii, m - 1), k]
        if io * 4 + ii < m and jo * 4 + ji < n:
            C[T.min(io * 4 + ii, m - 1), k] = (
                C[T.min(io * 4 + ii, m - 1), k]
                + A_4[io, jo, ii, ji] * B[T.min(jo * 4 + ji, n - 1), k]
            )
    with T.sp_iter([IO_16, JO_16, II_16, JI_16, K], "SRSRS", "csrmm_16") as [io, jo, ii, ji, k]:
        with T.init():
            C[T.min(io * 16 + ii, m - 1), k] = C[T.min(io * 16 + ii, m - 1), k]
        if io * 16 + ii < m and jo * 16 + ji < n:
            C[T.min(io * 16 + ii, m - 1), k] = (
                C[T.min(io * 16 + ii, m - 1), k]
                + A_16[io, jo, ii, ji] * B[T.min(jo * 16 + ji, n - 1), k]
            )
    with T.sp_iter([IO_32, JO_32, II_32, JI_32, K], "SRSRS", "csrmm_32") as [io, jo, ii, ji, k]:
        with T.init():
            C[T.min(io * 32 + ii, m - 1), k] = C[T.min(io * 32 + ii, m - 1), k]
        if io * 32 + ii < m and jo * 32 + ji < n:
            C[T.min(io * 32 + ii, m - 1), k] = (
                C[T.min(io * 32 + ii, m - 1), k]
                + A_32[io, jo, ii, ji] * B[T.min(jo * 32 + ji, n - 1), k]
            )


@T.prim_func
def ell_rewrite_with_preprocess(
    a: T.handle,
    b: T.handle,
    c: T.handle,
    indptr: T.handle,
    indices: T.handle,
    m: T.int32,
    n: T.int32,
    feat_size: T.int32,
    nnz: T.int32,
    a_4: T.handle,
    indptr_i_4: T.handle,
    indices_i_4: T.handle,
    indices_j_4: T.handle,
    m_4: T.int32,
    n_4: T.int32,
    num_rows_4: T.int32,
    a_8: T.handle,
    indptr_i_8: T.handle,
    indices_i_8: T.handle,
    indices_j_8: T.handle,
    m_8: T.int32,
    n_8: T.int32,
    num_rows_8: T.int32,
    a_16: T.handle,
    indptr_i_16: T.handle,
    indices_i_16: T.handle,
    indices_j_16: T.handle,
    m_16: T.int32,
    n_16: T.int32,
    num_rows_16: T.int32,
    a_32: T.handle,
    indptr_i_32: T.handle,
    indices_i_32: T.handle,
    indices_j_32: T.handle,
    m_32: T.int32,
    n_32: T.int32,
    num_rows_32: T.int32,
    a_64: T.handle,
    indptr_i_64: T.handle,
    indices_i_64: T.handle,
    indices_j_64: T.handle,
    m_64: T.int32,
    n_64: T.int32,
    num_rows_64: T.int32,
    a_128: T.handle,
    indptr_i_128: T.handle,
    indices_i_128: T.handle,
    indices_j_128: T.handle,
    m_128: T.int32,
    n_128: T.int32,
    num_rows_128: T.int32,
    a_512: T.handle,
    indptr_i_512: T.handle,
    indices_i_512: T.handle,
    indices_j_512: T.handle,
    m_512: T.int32,
    n_512: T.int32,
    num_rows_512: T.int32,
):
    T.func_attr({"global_symbol": "main", "tir.noalias": True, "sparse_tir_level": 2})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    O_4 = T.dense_fixed(1)
    I_4 = T.sparse_variable(O_4, (m_4, num_rows_4), (indptr_i_4, indices_i_4), "int32")
    J_4 = T.sparse_fixed(I_4, (n_4, 4), indices_j_4, "int32")
    O_8 = T.dense_fixed(1)
    I_8 = T.sparse_variable(O_8, (m_8, num_rows_8), (indptr_i_8, indices_i_8), "int32")
    J_8 = T.sparse_fixed(I_8, (n_8, 8), indices_j_8, "int32")
    O_16 = T.dense_fixed(1)
    I_16 = T.sparse_variable(O_16, (m_16, num_rows_16), (indptr_i_16, indices_i_16), "int32")
    J_16 = T.sparse_fixed(I_16, (n_16, 16), indices_j_16, "int32")
    O_32 = T.dense_fixed(1)
    I_32 = T.sparse_variable(O_32, (m_32, num_rows_32), (indptr_i_32, indices_i_32), "int32")
    J_32 = T.sparse_fixed(I_32, (n_32, 32), indices_j_32, "int32")
    O_64 = T.dense_fixed(1)
    I_64 = T.sparse_variable(O_64, (m_64, num_rows_64), (indptr_i_64, indices_i_64), "int32")
    J_64 = T.sparse_fixed(I_64, (n_64, 64), indices_j_64, "int32")
    O_128 = T.dense_fixed(1)
    I_128 = T.sparse_variable(O_128, (m_128, num_rows_128), (indptr_i_128, indices_i_128), "int32")
    J_128 = T.sparse_fixed(I_128, (n_128, 128), indices_j_128, "int32")
    O_512 = T.dense_fixed(1)
    I_512 = T.sparse_variable(O_512, (m_512, num_rows_512), (indptr_i_512, indices_i_512), "int32")
    J_512 = T.sparse_fixed(I_512, (n_512, 512), indices_j_512, "int32")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    B = T.match_sparse_buffer(b, (J_detach, K), "float32")
    C = T.match_sparse_buffer(c, (I, K), "float32")
    A_4 = T.match_sparse_buffer(a_4, (O_4, I_4, J_4), "float32")
    A_8 = T.match_sparse_buffer(a_8, (O_8, I_8, J_8), "float32")
    A_16 = T.match_sparse_buffer(a_16, (O_16, I_16, J_16), "float32")
    A_32 = T.match_sparse_buffer(a_32, (O_32, I_32, J_32), "float32")
    A_64 = T.match_sparse_buffer(a_64, (O_64, I_64, J_64), "float32")
    A_128 = T.match_sparse_buffer(a_128, (O_128, I_128, J_128), "float32")
    A_512 = T.match_sparse_buffer(a_512, (O_512, I_512, J_512), "float32")
    with T.sp_iter([O_4, I_4, J_4], "SSS", "rewrite_A_4") as [o, i, j]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["j"]})
        A_4[o, i, j] = T.Select(
            i < m and j < n,
            A[T.min(i, m - 1), T.min(j, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([O_8, I_8, J_8], "SSS", "rewrite_A_8") as [o, i, j]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["j"]})
        A_8[o, i, j] = T.Select(
            i < m and j < n,
            A[T.min(i, m - 1), T.min(j, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([O_16, I_16, J_16], "SSS", "rewrite_A_16") as [o, i, j]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["j"]})
        A_16[o, i, j] = T.Select(
            i < m and j < n,
            A[T.min(i, m - 1), T.min(j, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([O_32, I_32, J_32], "SSS", "rewrite_A_32") as [o, i, j]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["j"]})
        A_32[o, i, j] = T.Select(
            i < m and j < n,
            A[T.min(i, m - 1), T.min(j, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([O_64, I_64, J_64], "SSS", "rewrite_A_64") as [o, i, j]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["j"]})
        A_64[o, i, j] = T.Select(
            i < m and j < n,
            A[T.min(i, m - 1), T.min(j, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([O_128, I_128, J_128], "SSS", "rewrite_A_128") as [o, i, j]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["j"]})
        A_128[o, i, j] = T.Select(
            i < m and j < n,
            A[T.min(i, m - 1), T.min(j, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([O_512, I_512, J_512], "SSS", "rewrite_A_512") as [o, i, j]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["j"]})
        A_512[o, i, j] = T.Select(
            i < m and j < n,
            A[T.min(i, m - 1), T.min(j, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([I, K], "SS", "csrmm_init") as [i, k]:
        C[i, k] = T.float32(0.0)
    with T.sp_iter([O_4, I_4, J_4, K], "SSRS", "csrmm_4") as [o, i, j, k]:
        with T.init():
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k]
        if i < m and j < n:
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k] + A_4[o, i, j] * B[T.min(j, n - 1), k]
    with T.sp_iter([O_8, I_8, J_8, K], "SSRS", "csrmm_8") as [o, i, j, k]:
        with T.init():
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k]
        if i < m and j < n:
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k] + A_8[o, i, j] * B[T.min(j, n - 1), k]
    with T.sp_iter([O_16, I_16, J_16, K], "SSRS", "csrmm_16") as [o, i, j, k]:
        with T.init():
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k]
        if i < m and j < n:
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k] + A_16[o, i, j] * B[T.min(j, n - 1), k]
    with T.sp_iter([O_32, I_32, J_32, K], "SSRS", "csrmm_32") as [o, i, j, k]:
        with T.init():
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k]
        if i < m and j < n:
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k] + A_32[o, i, j] * B[T.min(j, n - 1), k]
    with T.sp_iter([O_64, I_64, J_64, K], "SSRS", "csrmm_64") as [o, i, j, k]:
        with T.init():
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k]
        if i < m and j < n:
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k] + A_64[o, i, j] * B[T.min(j, n - 1), k]
    with T.sp_iter([O_128, I_128, J_128, K], "SSRS", "csrmm_128") as [o, i, j, k]:
        with T.init():
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k]
        if i < m and j < n:
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k] + A_128[o, i, j] * B[T.min(j, n - 1), k]
    with T.sp_iter([O_512, I_512, J_512, K], "SSRS", "csrmm_512") as [o, i, j, k]:
        with T.init():
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k]
        if i < m and j < n:
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k] + A_512[o, i, j] * B[T.min(j, n - 1), k]


@T.prim_func
def padding_rewrite_with_preprocess(
    a: T.handle,
    b: T.handle,
    c: T.handle,
    indptr: T.handle,
    indices: T.handle,
    m: T.int32,
    n: T.int32,
    feat_size: T.int32,
    nnz: T.int32,
    a_32: T.handle,
    indptr_32: T.handle,
    indices_32: T.handle,
    m_32: T.int32,
    n_32: T.int32,
    nnz_chunks_32: T.int32,
):
    T.func_attr({"global_symbol": "main", "tir.noalias": True, "sparse_tir_level": 2})
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    J_detach = T.dense_fixed(n)
    K = T.dense_fixed(feat_size)
    I_32 = T.dense_fixed(m_32)
    JO_32 = T.dense_variable(I_32, ((n_32 + 32 - 1) // 32, nnz_chunks_32), indptr_32, "int32")
    JI_32 = T.sparse_fixed(JO_32, (n_32, 32), indices_32, "int32")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    B = T.match_sparse_buffer(b, (J_detach, K), "float32")
    C = T.match_sparse_buffer(c, (I, K), "float32")
    A_32 = T.match_sparse_buffer(a_32, (I_32, JO_32, JI_32), "float32")
    with T.sp_iter([I_32, JO_32, JI_32], "SSS", "rewrite_A_32") as [i, jo, ji]:
        T.sp_iter_attr({"preprocess": 1, "sparsetir.first_slots": ["ji"]})
        A_32[i, jo, ji] = T.Select(
            i < m and ji < n,
            A[T.min(i, m - 1), T.min(ji, n - 1)],
            T.float32(0.0),
        )
    with T.sp_iter([I, K], "SS", "csrmm_init") as [i, k]:
        C[i, k] = T.float32(0.0)
    with T.sp_iter([I_32, JO_32, JI_32, K], "SRRS", "csrmm_32") as [i, jo, ji, k]:
        with T.init():
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k]
        if i < m and ji < n:
            C[T.min(i, m - 1), k] = C[T.min(i, m - 1), k] + A_32[i, jo, ji] * B[T.min(ji, n - 1), k]
