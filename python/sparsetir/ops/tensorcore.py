"""Block-sparse SpMM in fp16 on tensor cores: ``Y = A @ X`` with ``A`` in BSR.

The kernel is produced by the compiler pipeline from the Stage I kernel ``bsrmm_fp16``: fp16
values and features, fp32 products summed in fp32, ``Y`` in fp32. ``lower_sparse_iter`` gives an
ordinary reduction block over ``(block j, row bi, feature f, column bj)`` of each block row,
which is scheduled with TVM's checked ``tvm.s_tir.Schedule`` (every check on) and
tensorized with TVM's own WMMA intrinsics (``tvm.s_tir.tensor_intrin.cuda``: 16 x 16 x 16
``wmma_sync_16x16x16_f16f16f32``, ``wmma_load_16x16x16_f16_{a,b}_shared``,
``wmma_fill_16x16x16_f32``, ``wmma_store_16x16x16_f32_shared``):

* a CUDA block per (block row, 16 * ``tiles_per_warp`` features): ``blockIdx.x``, ``blockIdx.y``;
* one warp per 16 rows of the block row (``threadIdx.y``, ``block_size / 16`` warps), holding
  ``tiles_per_warp`` 16 x 16 fp32 accumulators, zeroed by ``wmma_fill`` before the loop over the
  row's nonzero blocks (so an empty block row gives zeros);
* per nonzero block, all threads copy the ``A`` block and the ``X`` rows it needs into shared
  memory, 16 bytes per thread and access, rows padded by 16 bytes against bank conflicts
  (``reindex`` gives the gathered ``X`` tile its own iteration space, so the tile copy is a
  plain block and the fragment loads from it tensorize), then each warp loads 16 x 16 fragments
  and multiplies;
* the accumulators go to shared memory and all threads copy the tile to ``Y`` (16 bytes each).
  Global memory is read and written only by these copies: every parameter stays a flat buffer,
  and the kernel's signature asks 16-byte alignment of ``A``, ``X`` and ``Y`` (a call stages a
  view that is not).

Row and column counts must be multiples of the block size: ``sparsetir.format.csr_to_bsr`` pads a
matrix whose shape is not, and ``X`` needs its rows padded to match (``bsr_operands``).

Example
-------
>>> import numpy as np, scipy.sparse
>>> from sparsetir.ops.tensorcore import bsr_operands, bsr_spmm_tensorcore
>>> kernel = bsr_spmm_tensorcore(32, 64, {"kind": "cuda", "arch": "sm_80"})  # nvcc: no GPU needed
>>> "wmma::mma_sync" in kernel.inspect_source("cuda")
True
>>> A = scipy.sparse.random(100, 90, density=0.05, format="csr")
>>> X = np.ones((90, 64))
>>> args = bsr_operands(A, X, 32)          # data, x, y, indptr, indices, mb, nb, nnzb
>>> kernel(*args.values())                 # runs on a GPU only    # doctest: +SKIP
>>> np.allclose(args["y"].reshape(-1, 64)[:100], A @ X, atol=0.1)  # needs the GPU run above  # doctest: +SKIP
True
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys

import numpy as np
import tvm
from tvm import s_tir

from .. import format as sparse_format
from ..driver.build_module import build
from ..script import tir as T
from ..lower import lower_sparse_iter
from ..errors import SparseTIRValueError

WMMA = 16          # the m = n = k of the fragments
WARP = 32
VECTOR_BYTES = 16  # a copy's access per thread (uint4 / float4), and the padding of a shared row


@T.prim_func
def bsrmm_fp16(a: T.handle, x: T.handle, y: T.handle, indptr: T.handle, indices: T.handle,
               mb: T.int32, nb: T.int32, nnzb: T.int32, blk: T.int32,
               feat_size: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    I = T.dense_fixed(mb)
    J = T.sparse_variable(I, (nb, nnzb), (indptr, indices), "int32")
    J_detach = T.dense_fixed(nb)
    BI = T.dense_fixed(blk)
    BJ = T.dense_fixed(blk)
    F = T.dense_fixed(feat_size)
    A = T.match_sparse_buffer(a, (I, J, BI, BJ), "float16")
    X = T.match_sparse_buffer(x, (J_detach, BJ, F), "float16")
    Y = T.match_sparse_buffer(y, (I, BI, F), "float32")
    with T.sp_iter([I, J, BI, F, BJ], "SRSSR", "bsrmm") as [i, j, bi, f, bj]:
        with T.init():
            Y[i, bi, f] = T.float32(0)
        Y[i, bi, f] = Y[i, bi, f] + T.cast(A[i, j, bi, bj], "float32") * T.cast(
            X[j, bj, f], "float32")


def schedule_bsr_spmm_tensorcore(block_size: int, feat_size: int, tiles_per_warp: int = 0,
                                 tensorize: bool = True) -> tvm.IRModule:
    """The scheduled Stage II module of ``bsrmm_fp16`` for ``block_size`` x ``block_size``
    blocks (a multiple of 16) and ``feat_size`` features (a multiple of 16).

    ``tiles_per_warp`` (default: 2 where ``feat_size / 16`` is even, else 1) is how many 16-wide
    feature tiles one warp accumulates. ``tensorize=False`` stops before the tensorize steps and
    keeps the fragments in ``local`` memory: the same loops, tiles and copies, which the CPU can
    run once the thread bindings are made serial (the tests check it against scipy that way).

    >>> mod = schedule_bsr_spmm_tensorcore(16, 32)
    >>> "tvm_mma_sync" in mod.script()
    True
    """
    tiles_per_warp = _check_sizes(block_size, feat_size, tiles_per_warp)
    warps = block_size // WMMA
    func = bsrmm_fp16.specialize({"blk": block_size, "feat_size": feat_size})
    sch = s_tir.Schedule(lower_sparse_iter(func))
    block = sch.get_sblock("bsrmm1")
    (row,) = sch.get_loops(sch.get_sblock("bsrmm0"))

    # Shared tiles of A's block and of the X rows it multiplies, indexed like the block's
    # iteration space (X's tile laid out [block, bj, f] so its rows are contiguous).
    a_tile = sch.reindex(block, ("read", _read_index(sch, block, "A")))
    x_tile = sch.reindex(block, ("read", _read_index(sch, block, "X")))
    sch.transform_layout(x_tile, ("write", 0), lambda j, f, bj: (j, bj, f))
    for tile in (a_tile, x_tile):
        sch.set_scope(tile, 0, "shared")

    j, bi, f, bj = sch.get_loops(block)
    bi_warp, bi_in = sch.split(bi, [warps, WMMA])
    f_block, f_warp, f_in = sch.split(f, [None, tiles_per_warp, WMMA])
    bj_tile, bj_in = sch.split(bj, [None, WMMA])
    sch.reorder(f_block, bi_warp, j, bj_tile, f_warp, bi_in, f_in, bj_in)
    sch.bind(row, "blockIdx.x")
    sch.bind(f_block, "blockIdx.y")
    sch.bind(bi_warp, "threadIdx.y")

    for tile in (a_tile, x_tile):
        sch.compute_at(tile, j)
    # the tile copy iterates [f, bj]: put f innermost so that threads read X's rows in order
    sch.reorder(*reversed(sch.get_loops(x_tile)[-2:]))
    scopes = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator") if tensorize else \
        ("local",) * 3
    a_frag = sch.cache_read(block, _read_index(sch, block, "A_reindex_shared"), scopes[0])
    sch.compute_at(a_frag, bj_tile)
    x_frag = sch.cache_read(block, _read_index(sch, block, "X_reindex_shared"), scopes[1])
    sch.compute_at(x_frag, f_warp)
    y_tile = sch.cache_write(block, 0, "shared")
    acc = sch.cache_write(block, 0, scopes[2])
    sch.reverse_compute_at(acc, bi_warp)
    sch.reverse_compute_at(y_tile, f_block)
    feat_tile = WMMA * tiles_per_warp
    for tile, row in ((a_tile, block_size), (x_tile, feat_tile)):
        _pad_rows(sch, tile, row)
    for copy, itemsize in ((a_tile, 2), (x_tile, 2), (y_tile, 4)):
        _spread_over_threads(sch, copy, warps, itemsize)
    init = sch.decompose_reduction(block, j)
    # the accumulator store as (feature tile, 16 rows, 16 features): one 16 x 16 store each
    rows, cols = sch.get_loops(acc)[-2:]
    col_tile, _ = sch.split(cols, [None, WMMA])
    sch.reorder(col_tile, rows)
    if tensorize:
        wmma = tvm_cuda_intrinsics()
        update = sch.get_sblock("bsrmm1_update")
        # The update reads only the tiles now, by position; its regions still list the index
        # arrays the original block read, which the intrinsic's description does not have.
        sch.unsafe_hide_buffer_access(update, "read", [
            _read_index(sch, update, name) for name in ("J_indptr", "J_indices")])
        sch.tensorize(sch.get_loops(update)[-3], wmma.WMMA_SYNC_16x16x16_f16f16f32_INTRIN)
        sch.tensorize(sch.get_loops(init)[-2], wmma.WMMA_FILL_16x16x16_F32_INTRIN)
        sch.tensorize(sch.get_loops(a_frag)[-2], wmma.WMMA_LOAD_16x16x16_F16_A_INTRIN)
        sch.tensorize(sch.get_loops(x_frag)[-2], wmma.WMMA_LOAD_16x16x16_F16_B_INTRIN)
        sch.tensorize(rows, wmma.WMMA_STORE_16x16x16_F32_SHARED_INTRIN)
    return sch.mod


def bsr_spmm_tensorcore(block_size: int, feat_size: int, target="cuda", tiles_per_warp: int = 0):
    """The compiled tensor-core BSR SpMM (a ``sparsetir.runtime.Kernel``) for ``target``
    (``"cuda"`` is sm_80; ``{"kind": "cuda", "arch": "sm_90"}``; any CUDA target with tensor
    cores, sm_70 or later).

    Call it as ``kernel(data, x, y, indptr, indices, mb, nb, nnzb)``: ``data`` the
    ``(nnzb, block_size, block_size)`` fp16 blocks, ``x`` the fp16 features, shaped
    ``(nb, block_size, feat_size)`` (or flat), ``y`` the fp32 output (overwritten), shaped
    ``(mb, block_size, feat_size)`` (or flat),
    ``indptr``/``indices`` the int32 block-row pointers and block-column indices
    (``bsr_operands`` makes them from a scipy matrix). Runs on a GPU only.

    >>> kernel = bsr_spmm_tensorcore(16, 32, {"kind": "cuda", "arch": "sm_90"})  # compiles with nvcc
    >>> "wmma::load_matrix_sync" in kernel.inspect_source("cuda")
    True
    """
    return build(schedule_bsr_spmm_tensorcore(block_size, feat_size, tiles_per_warp), target,
                 schedule="none")


def bsr_operands(matrix, x: np.ndarray, block_size: int) -> dict:
    """The arguments of the kernel, by Stage I parameter name, for ``Y = matrix @ x`` with
    ``matrix`` any scipy sparse matrix and ``x`` of shape ``(matrix.shape[1], feat_size)``: the
    BSR blocks in fp16 (rows and columns padded with zeros to whole blocks by
    ``sparsetir.format.csr_to_bsr``), ``x`` in fp16 with zero rows appended to match, shaped
    ``(nb, block_size, feat_size)`` as the kernel declares it, and ``y`` an fp32 output of shape
    ``(mb, block_size, feat_size)`` filled with NaN: ``y.reshape(-1, feat_size)[:rows]`` is the
    product.

    >>> import scipy.sparse
    >>> ops = bsr_operands(scipy.sparse.eye(20, format="csr"), np.ones((20, 16)), 16)
    >>> ops["x"].shape, ops["y"].shape, ops["mb"], int(ops["nnzb"])
    ((2, 16, 16), (2, 16, 16), 2, 2)
    """
    csr = matrix.tocsr()
    csr.sort_indices()
    indptr, indices, data = sparse_format.csr_to_bsr(csr.indptr, csr.indices, csr.data,
                                                     csr.shape, block_size)
    mb, nb = len(indptr) - 1, -(-csr.shape[1] // block_size)
    feat_size = x.shape[1]
    x_padded = np.zeros((nb * block_size, feat_size), np.float16)
    x_padded[:x.shape[0]] = x
    return {"a": data.astype(np.float16), "x": x_padded.reshape(nb, block_size, feat_size),
            "y": np.full((mb, block_size, feat_size), np.nan, np.float32),
            "indptr": indptr, "indices": indices, "mb": mb, "nb": nb, "nnzb": indices.size}


@functools.cache
def tvm_cuda_intrinsics():
    """TVM's CUDA tensor intrinsics module (``tvm.s_tir.tensor_intrin.cuda``), imported, which
    registers them.

    That module parses about 250 TVMScript functions, and TVM's parser calls ``inspect.stack()``
    for each. ``inspect`` looks up the module of every frame on the stack, and for a frame whose
    file does not exist (the import machinery's frozen modules, ``python -c``) it scans all of
    ``sys.modules`` again on every lookup: a plain import takes over a minute on 2 cores. Telling
    ``inspect`` which module those frames belong to first makes it a few seconds.

    >>> tvm_cuda_intrinsics().WMMA_FILL_16x16x16_F32_INTRIN
    'wmma_fill_16x16x16_f32'
    """
    frame = sys._getframe()
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.exists(filename) and "__name__" in frame.f_globals:
            inspect.modulesbyfile.setdefault(filename, frame.f_globals["__name__"])
        frame = frame.f_back
    for name in ("importlib._bootstrap", "importlib._bootstrap_external"):
        inspect.modulesbyfile.setdefault(f"<frozen {name}>", name)
    return importlib.import_module("tvm.s_tir.tensor_intrin.cuda")


def _check_sizes(block_size: int, feat_size: int, tiles_per_warp: int) -> int:
    """``tiles_per_warp``, defaulted, after checking the sizes the schedule supports."""
    if block_size <= 0 or block_size % WMMA:
        raise SparseTIRValueError(f"block_size must be a positive multiple of {WMMA}, got {block_size}")
    if feat_size <= 0 or feat_size % WMMA:
        raise SparseTIRValueError(f"feat_size must be a positive multiple of {WMMA}, got {feat_size}")
    tiles = feat_size // WMMA
    if not tiles_per_warp:
        return 2 if tiles % 2 == 0 else 1
    if tiles % tiles_per_warp:
        raise SparseTIRValueError(f"tiles_per_warp {tiles_per_warp} must divide feat_size / {WMMA} = "
                         f"{tiles}")
    return tiles_per_warp


def _read_index(sch: s_tir.Schedule, block, name: str) -> int:
    """The position of buffer ``name`` among ``block``'s read regions."""
    return [region.source.name for region in sch.get(block).reads].index(name)


def _pad_rows(sch: s_tir.Schedule, writer, row: int) -> None:
    """Pad the rows (``row`` elements) of the shared tile ``writer`` writes by 16 bytes, so that
    the 16 rows of a fragment load do not fall on the same memory banks."""
    tile = sch.get(writer).writes[0].source
    sch.storage_align(writer, 0, len(tile.shape) - 2, row, VECTOR_BYTES // tile.dtype.itemsize)


def _spread_over_threads(sch: s_tir.Schedule, copy, warps: int, itemsize: int) -> None:
    """Share a 2-D tile copy among all threads of the CUDA block: 16 bytes per thread and
    access, consecutive vectors on consecutive ``threadIdx.x``."""
    fused = sch.fuse(*sch.get_loops(copy)[-2:])
    _, warp, lane, vector = sch.split(fused, [None, warps, WARP, VECTOR_BYTES // itemsize])
    sch.bind(warp, "threadIdx.y")
    sch.bind(lane, "threadIdx.x")
    sch.vectorize(vector)
