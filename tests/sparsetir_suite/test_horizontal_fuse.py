"""SparseTIR's ``tests/python/sparsetir/test_horizontal_fuse.py`` (HEAD 9b3f843), ported.

| SparseTIR test | status |
|---|---|
| ``test_horizontal_fuse_pass`` | passes with documented renames (``tvm.tir.transform.HorizontalFusion`` -> ``sparsetir.transform.HorizontalFusion``; functions compared structurally are ``@T.prim_func(s_tir=True, private=True)``, since TVM 0.27 records the Python name as ``global_symbol``) |
| ``test_end_to_end`` | runs CUDA: passes with documented renames under the ``gpu`` marker; here ``test_end_to_end_compiles`` builds the same schedule with nvcc (one ``__global__``, ``__syncthreads`` inside the fused branches) and ``test_end_to_end_emulated`` checks the fused kernel's numbers with its thread loops run one after another |

``original`` keeps SparseTIR's ``T.func_attr({"horizontal_fuse": 1})``: ``sparsetir.build`` fuses
its launches (``transform.function_fusion``) once cross-thread reductions are lowered.
"""

import functools

import numpy as np
import pytest
import tvm
import tvm.testing
from tvm.script import tirx as T

import sparsetir
from cuda_device import device_kernels
from cuda_emulation import emulate
from sparsetir.backend.target import cuda_source


@T.prim_func(s_tir=True)
def original(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((64, 128), "float32"),
    C1: T.Buffer((128,), "float32"),
    C2: T.Buffer((64,), "float32"),
) -> None:
    T.func_attr({"horizontal_fuse": 1})
    for i, j in T.grid(128, 128):
        with T.sblock("first"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                C1[vi] = T.float32(0)
            C1[vi] = C1[vi] + A[vi, vj]
    for i, j in T.grid(64, 128):
        with T.sblock("second"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                C2[vi] = T.float32(0)
            C2[vi] = C2[vi] + B[vi, vj]


@T.prim_func(s_tir=True, private=True)
def before_horizontal_fuse(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((64, 128), "float32"),
    C1: T.Buffer((128,), "float32"),
    C2: T.Buffer((64,), "float32"),
) -> None:
    # function attr dict
    T.func_attr({"horizontal_fuse": 1})
    # body
    # with T.block("root")
    A_shared = T.alloc_buffer([128, 128], dtype="float32", scope="shared")
    B_shared = T.alloc_buffer([64, 128], dtype="float32", scope="shared")
    C1_local = T.alloc_buffer([128], dtype="float32", scope="local")
    C2_local = T.alloc_buffer([64], dtype="float32", scope="local")
    for i_0 in T.thread_binding(32, thread="blockIdx.x"):
        for i_1 in T.serial(4):
            for ax0 in T.serial(128):
                with T.sblock("A_shared"):
                    v0 = T.axis.spatial(128, i_0 * 4 + i_1)
                    v1 = T.axis.spatial(128, ax0)
                    T.reads(A[v0, v1])
                    T.writes(A_shared[v0, v1])
                    A_shared[v0, v1] = A[v0, v1]
            for j in T.thread_binding(128, thread="threadIdx.x"):
                with T.sblock("first"):
                    vi = T.axis.spatial(128, i_0 * 4 + i_1)
                    vj = T.axis.reduce(128, j)
                    T.reads(A_shared[vi, vj])
                    T.writes(C1_local[vi])
                    with T.init():
                        C1_local[vi] = T.float32(0)
                    C1_local[vi] = C1_local[vi] + A_shared[vi, vj]
            with T.sblock("C1_local"):
                v0 = T.axis.spatial(128, i_0 * 4 + i_1)
                T.reads(C1_local[v0])
                T.writes(C1[v0])
                C1[v0] = C1_local[v0]
    for i_0 in T.thread_binding(16, thread="blockIdx.x"):
        for i_1 in T.serial(4):
            for ax0 in T.serial(128):
                with T.sblock("B_shared"):
                    v0 = T.axis.spatial(64, i_0 * 4 + i_1)
                    v1 = T.axis.spatial(128, ax0)
                    T.reads(B[v0, v1])
                    T.writes(B_shared[v0, v1])
                    B_shared[v0, v1] = B[v0, v1]
            for j in T.thread_binding(128, thread="threadIdx.x"):
                with T.sblock("second"):
                    vi = T.axis.spatial(64, i_0 * 4 + i_1)
                    vj = T.axis.reduce(128, j)
                    T.reads(B_shared[vi, vj])
                    T.writes(C2_local[vi])
                    with T.init():
                        C2_local[vi] = T.float32(0)
                    C2_local[vi] = C2_local[vi] + B_shared[vi, vj]
            with T.sblock("C2_local"):
                v0 = T.axis.spatial(64, i_0 * 4 + i_1)
                T.reads(C2_local[v0])
                T.writes(C2[v0])
                C2[v0] = C2_local[v0]


@T.prim_func(s_tir=True, private=True)
def after_horizontal_fuse(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((64, 128), "float32"),
    C1: T.Buffer((128,), "float32"),
    C2: T.Buffer((64,), "float32"),
) -> None:
    # body
    # with T.block("root")
    A_shared = T.alloc_buffer([128, 128], dtype="float32", scope="shared")
    B_shared = T.alloc_buffer([64, 128], dtype="float32", scope="shared")
    C1_local = T.alloc_buffer([128], dtype="float32", scope="local")
    C2_local = T.alloc_buffer([64], dtype="float32", scope="local")
    for block_idx_x in T.thread_binding(48, thread="blockIdx.x"):
        for thread_idx_x in T.thread_binding(128, thread="threadIdx.x"):
            if block_idx_x < 32:
                for i_1 in T.serial(4):
                    for ax0 in T.serial(128):
                        with T.sblock("A_shared"):
                            v0 = T.axis.spatial(128, block_idx_x * 4 + i_1)
                            v1 = T.axis.spatial(128, ax0)
                            T.reads(A[v0, v1])
                            T.writes(A_shared[v0, v1])
                            A_shared[v0, v1] = A[v0, v1]
                    with T.sblock("first"):
                        vi = T.axis.spatial(128, block_idx_x * 4 + i_1)
                        vj = T.axis.reduce(128, thread_idx_x)
                        T.reads(A_shared[vi, vj])
                        T.writes(C1_local[vi])
                        with T.init():
                            C1_local[vi] = T.float32(0)
                        C1_local[vi] = C1_local[vi] + A_shared[vi, vj]
                    with T.sblock("C1_local"):
                        v0 = T.axis.spatial(128, block_idx_x * 4 + i_1)
                        T.reads(C1_local[v0])
                        T.writes(C1[v0])
                        C1[v0] = C1_local[v0]
            else:
                if block_idx_x < 48:
                    for i_1 in T.serial(4):
                        for ax0 in T.serial(128):
                            with T.sblock("B_shared"):
                                v0 = T.axis.spatial(64, (block_idx_x - 32) * 4 + i_1)
                                v1 = T.axis.spatial(128, ax0)
                                T.reads(B[v0, v1])
                                T.writes(B_shared[v0, v1])
                                B_shared[v0, v1] = B[v0, v1]
                        with T.sblock("second"):
                            vi = T.axis.spatial(64, (block_idx_x - 32) * 4 + i_1)
                            vj = T.axis.reduce(128, thread_idx_x)
                            T.reads(B_shared[vi, vj])
                            T.writes(C2_local[vi])
                            with T.init():
                                C2_local[vi] = T.float32(0)
                            C2_local[vi] = C2_local[vi] + B_shared[vi, vj]
                        with T.sblock("C2_local"):
                            v0 = T.axis.spatial(64, (block_idx_x - 32) * 4 + i_1)
                            T.reads(C2_local[v0])
                            T.writes(C2[v0])
                            C2[v0] = C2_local[v0]


def test_horizontal_fuse_pass():
    mod = tvm.IRModule.from_expr(before_horizontal_fuse)
    mod = sparsetir.transform.HorizontalFusion()(mod)
    tvm.ir.assert_structural_equal(mod["main"], after_horizontal_fuse)


@functools.lru_cache(maxsize=None)
def scheduled():
    """SparseTIR's schedule of ``original`` in ``test_end_to_end``."""
    sch = tvm.s_tir.Schedule(original)
    blk1 = sch.get_sblock("first")
    blk2 = sch.get_sblock("second")
    A_read = sch.cache_read(blk1, 0, "shared")
    B_read = sch.cache_read(blk2, 0, "shared")
    C_write_0 = sch.cache_write(blk1, 0, "local")
    C_write_1 = sch.cache_write(blk2, 0, "local")
    i, j = sch.get_loops(blk1)
    sch.compute_at(A_read, i)
    sch.reverse_compute_at(C_write_0, i)
    io, ii = sch.split(i, [None, 4])
    sch.bind(io, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    i, j = sch.get_loops(blk2)
    sch.compute_at(B_read, i)
    sch.reverse_compute_at(C_write_1, i)
    io, ii = sch.split(i, [None, 4])
    sch.bind(io, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    return sch


@functools.lru_cache(maxsize=None)
def built():
    return sparsetir.build(scheduled().mod, "cuda")


def inputs():
    x_np = np.random.rand(128, 128).astype("float32")
    y_np = np.random.rand(64, 128).astype("float32")
    return x_np, y_np, x_np.sum(axis=-1), y_np.sum(axis=-1)


@pytest.mark.cuda
def test_end_to_end_compiles():
    f = built()
    assert device_kernels(f.executable, "original") == ["original_kernel"]     # one launch
    source = cuda_source(f.executable)
    before, branches = source.split("((int)blockIdx.x) < 32)", 1)   # the first nest's branch
    assert "__syncthreads();" not in before and "__syncthreads();" in branches


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
def test_end_to_end_emulated(reverse):
    fused = sparsetir.transform.HorizontalFusion()(scheduled().mod)
    f = emulate(fused, reverse)
    x_np, y_np, z1_golden, z2_golden = inputs()
    z1 = np.full(128, np.nan, np.float32)
    z2 = np.full(64, np.nan, np.float32)
    f(x_np, y_np, z1, z2)
    tvm.testing.assert_allclose(z1, z1_golden, rtol=1e-5, atol=1e-5)
    tvm.testing.assert_allclose(z2, z2_golden, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_end_to_end():
    f = built()

    x_np = np.random.rand(128, 128).astype("float32")
    y_np = np.random.rand(64, 128).astype("float32")
    z1_np = np.full(128, np.nan).astype("float32")
    z2_np = np.full(64, np.nan).astype("float32")

    z1_golden = x_np.sum(axis=-1)
    z2_golden = y_np.sum(axis=-1)

    x = tvm.runtime.tensor(x_np, device=tvm.cuda(0))
    y = tvm.runtime.tensor(y_np, device=tvm.cuda(0))
    z1 = tvm.runtime.tensor(z1_np, device=tvm.cuda(0))
    z2 = tvm.runtime.tensor(z2_np, device=tvm.cuda(0))

    f(x, y, z1, z2)

    tvm.testing.assert_allclose(z1.numpy(), z1_golden, rtol=1e-5, atol=1e-5)
    tvm.testing.assert_allclose(z2.numpy(), z2_golden, rtol=1e-5, atol=1e-5)
