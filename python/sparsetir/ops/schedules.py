"""Stage II schedules for the ``sparsetir.ops`` kernels, and the cost model that sizes them.

Both iterate CSR through row tiles balanced by nonzeros (``kernels``), the tiles in parallel.

CPU SpMM: the feature loop is split into register tiles of ``lanes``
features and the tile loop is moved outside the row's nonzeros, so one tile of the output row
stays in vector registers while the row is walked, and each nonzero costs one vector load of X
and one fused multiply-add per tile. The cost model picks the widest tile (64, 32 or 16 lanes of
float32) that divides the feature size, keeping at most 4 AVX-512 accumulators live; a feature
size no tile divides keeps one scalar loop.

CPU SDDMM: every nonzero's dot product accumulates in a register.

CUDA: ``build``'s default schedule (one row per block, features over threads).

Example
-------
>>> from sparsetir.ops.schedules import spmm_lanes
>>> spmm_lanes(128), spmm_lanes(32), spmm_lanes(24)
(64, 32, 8)
"""

from __future__ import annotations

import tvm

from ..schedule import default_schedule

LANE_CHOICES = (64, 32, 16, 8)


def spmm_lanes(feat_size: int) -> int:
    """The register tile of the CPU SpMM feature loop (see the module docstring); 1 when no
    tile divides ``feat_size``."""
    return next((lanes for lanes in LANE_CHOICES if feat_size % lanes == 0), 1)


def schedule_spmm_cpu(mod: tvm.IRModule, feat_size: int) -> tvm.IRModule:
    """Row tiles in parallel, register-tiled vectorised feature loops."""
    sch = tvm.s_tir.Schedule(mod)
    (tiles,) = sch.get_loops(sch.get_sblock("spmm0"))
    update = sch.get_sblock("spmm2")
    nonzeros, features = sch.get_loops(update)[-2:]
    lanes = spmm_lanes(feat_size)
    if lanes > 1:
        feature_tiles, lane = sch.split(features, [None, lanes])
        sch.reorder(feature_tiles, nonzeros)
        sch.vectorize(lane)
    sch.parallel(tiles)
    return sch.mod


def schedule_sddmm_cpu(mod: tvm.IRModule, feat_size: int) -> tvm.IRModule:
    """Row tiles in parallel; each nonzero's dot product starts from a zero moved out of its
    feature loop, so the sum stays in a register."""
    del feat_size
    sch = tvm.s_tir.Schedule(mod)
    (tiles,) = sch.get_loops(sch.get_sblock("sddmm0"))
    update = sch.get_sblock("sddmm2")
    features = sch.get_loops(update)[-1]
    sch.parallel(tiles)          # before decompose_reduction, which TVM's parallel check refuses
    sch.decompose_reduction(update, features)
    return sch.mod


def schedule_for(name: str, mod: tvm.IRModule, feat_size: int, target_kind: str):
    """The scheduled module of kernel ``name`` (see ``kernels.KERNELS``)."""
    if target_kind == "cuda":
        return default_schedule(mod, "cuda").mod
    if name.startswith("spmm"):
        return schedule_spmm_cpu(mod, feat_size)
    return schedule_sddmm_cpu(mod, feat_size)
