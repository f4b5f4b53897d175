"""The CPU schedules of sparsetir.ops: SpMM accumulates each register tile of an output row
outside Y and stores it once; results equal scipy for every feature size the cost model
treats differently."""

import numpy as np
import pytest
import tvm_ffi
from tvm import s_tir, tirx

import sparsetir
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.ops import SparseMatrix, spmm
from sparsetir.ops.kernels import KERNELS
from sparsetir.schedule.operators import schedule_for, spmm_lanes
from sparsetir.backend.pipeline import lower_blocks
from sparse_inputs import skewed_csr


def stores_by_loop(feat):
    """For the Stage III SpMM: the buffers stored to inside the loop over a row's nonzeros."""
    mod = schedule_for("spmm", sparsetir.lower_sparse_iter(
        KERNELS["spmm"].specialize({"feat_size": feat})), feat, "llvm")
    flat = lower_to_stage3(mod, "llvm", "none")
    flat = lower_blocks(flat)
    inside = []

    def on_for(loop):
        if loop.loop_var.name == "j":
            tvm_ffi.structural_walk(loop.body, (tirx.BufferStore, lambda s: inside.append(
                s.buffer.name)), order="pre")

    tvm_ffi.structural_walk(flat["main"].body, (tirx.For, on_for), order="pre")
    return inside


@pytest.mark.parametrize("feat", [32, 128, 256])
def test_spmm_row_tiles_accumulate_outside_the_output(feat):
    inside = stores_by_loop(feat)
    assert inside and "Y" not in inside          # the row-local accumulator only


@pytest.mark.parametrize("feat", [1, 8, 24, 64, 96, 256])
def test_spmm_equals_scipy(feat):
    A = skewed_csr(120, 80, seed=feat)
    X = np.random.default_rng(feat).standard_normal((80, feat)).astype(np.float32)
    out = np.full((120, feat), np.nan, np.float32)
    spmm(SparseMatrix(A), X, out=out)
    np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-5)
    assert spmm_lanes(feat) in (1, 8, 16, 32, 64, 128)


def row_buffers(dtype, dot_size, targets=("u", "v")):
    """The float32 buffers a half-precision dot's schedule allocates per row: (name, shape)."""
    from sparsetir.ops.generic_kernels import gsddmm_kernel
    from sparsetir.schedule.generic import schedule_gsddmm_cpu
    mod = schedule_gsddmm_cpu(sparsetir.lower_sparse_iter(gsddmm_kernel(
        "dot", dtype, (), (), (), *targets, dot_size)), True)
    found = []

    def on_block(block):
        found.extend((b.name, tuple(int(s) for s in b.shape)) for b in block.alloc_buffers
                     if str(b.dtype) == "float32" and not b.name.startswith("OUT"))

    tvm_ffi.structural_walk(mod["main"].body, (s_tir.SBlock, on_block), order="pre")
    return found


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_dot_widens_the_rows_operand_once_a_row(dtype):
    """u_dot_v: the row's operand (target v, buffer Y) is widened into a float32 row of its own
    before the edge loop; the gathered one (X) is not; float32 kernels and rows past
    WIDENED_ROW_LIMIT keep reading where they are."""
    from sparsetir.schedule.generic import WIDENED_ROW_LIMIT
    assert row_buffers(dtype, 32) == [("Y_global", (1, 32))]
    assert row_buffers(dtype, 32, ("v", "u")) == [("X_global", (1, 32))]
    assert row_buffers(dtype, 32, ("u", "e")) == []
    assert row_buffers("float32", 32) == []
    assert row_buffers(dtype, 2 * WIDENED_ROW_LIMIT) == []
