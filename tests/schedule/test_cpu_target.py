"""The CPU "llvm" compiles for sizes the register tiles: SpMM keeps 8 vector registers of
accumulators, 128 float32 lanes with AVX-512 and 64 with AVX2 (whose 128-lane tile spilled to
the stack at every nonzero)."""

import pytest
import tvm_ffi
from tvm import tirx

import sparsetir
from sparsetir.errors import SparseTIRValueError
from sparsetir.ops.kernels import KERNELS
from sparsetir.schedule.cpu_target import float32_lanes, host_target, vectors_are_lines
from sparsetir.schedule.operators import realigns_gathers, schedule_for, spmm_lanes
from cpu_targets import AVX2, AVX512, SSE


@pytest.mark.parametrize("target, lanes", [(AVX512, 16), (AVX2, 8), (SSE, 4),
                                           ({**AVX512, "mattr": ["-avx512f"]}, 8)])
def test_float32_lanes_follow_the_targets_vector_registers(target, lanes):
    assert float32_lanes(target) == lanes


@pytest.mark.parametrize("target, whole_lines", [(AVX512, True), (AVX2, False), (SSE, False)])
def test_only_avx512_vectors_are_whole_cache_lines(target, whole_lines):
    """The one rule behind SDDMM's operand copy and SpMM's realigned gathers."""
    with host_target(target):
        assert vectors_are_lines() is whole_lines
        assert realigns_gathers(64) is whole_lines and not realigns_gathers(8)


def test_llvm_means_the_host_target_and_other_kinds_are_refused():
    with host_target(AVX2):
        assert float32_lanes("llvm") == float32_lanes() == 8
        with host_target("llvm"):             # "llvm" inside a block: that block's target
            assert float32_lanes() == 8
    with pytest.raises(SparseTIRValueError, match="not a CPU"):
        float32_lanes({"kind": "cuda", "arch": "sm_80"})


@pytest.mark.parametrize("feat, avx512, avx2, sse", [(256, 128, 64, 32), (128, 128, 64, 32),
                                                     (96, 32, 32, 32), (24, 8, 8, 8), (7, 1, 1, 1)])
def test_spmm_lanes_keep_eight_registers_of_accumulators(feat, avx512, avx2, sse):
    assert [spmm_lanes(feat, width) for width in (16, 8, 4)] == [avx512, avx2, sse]


def spmm_feature_tile(target) -> int:
    """The extent of the vectorised feature loop inside SpMM's loop over a row's nonzeros, as
    scheduled at 256 features with "llvm" meaning ``target``."""
    with host_target(target):
        mod = schedule_for("spmm", sparsetir.lower_sparse_iter(
            KERNELS["spmm"].specialize({"feat_size": 256})), 256, "llvm")
    tiles = []

    def on_for(loop):
        if loop.loop_var.name == "j":
            tvm_ffi.structural_walk(loop.body, (tirx.For, lambda inner: tiles.append(
                (int(inner.extent), inner.kind))), order="pre")

    tvm_ffi.structural_walk(mod["main"].body, (tirx.For, on_for), order="pre")
    (extent, kind), = tiles
    assert kind == tirx.ForKind.VECTORIZED
    return extent


def test_spmm_schedule_tiles_for_the_cpu_it_compiles_for():
    assert spmm_feature_tile(AVX512) == 128
    assert spmm_feature_tile(AVX2) == 64

