"""Stage II schedules for the ``sparsetir.ops`` kernels, and the cost model that sizes them.

Both iterate CSR through row tiles balanced by nonzeros (``kernels``), the tiles in parallel.

CPU SpMM: the feature loop is split into register tiles of ``lanes``
features and the tile loop is moved outside the row's nonzeros, so one tile of the output row
stays in vector registers while the row is walked (``cache_write`` into a row-local buffer,
written to Y once per tile), and each nonzero costs one vector load of X and one fused
multiply-add per vector. The cost model picks the widest tile (128, 64, 32, 16 or 8 lanes)
that divides the feature size and keeps at most ``ACCUMULATORS`` vector registers of the
target as accumulators (``cpu_target.float32_lanes``): 128 lanes with AVX-512's 32 registers
of 16, 64 with AVX2's 16 of 8, whose 128-lane tile spilled its accumulators to the stack at
every nonzero; a feature size no tile divides keeps one scalar loop. Each tile walks the row's
nonzeros again, so a wider tile reads the indices and values fewer times and has more of a
gathered row's cache lines in flight at once: on the arxiv-size synthetic graph at 256
features (one thread, caller CPU time, median of 21 calls, 2026-11-28, Intel VM), 128 lanes
took 88 ms against 98-115 with 64, and bfloat16 53-58 against 65-67.

CPU SDDMM: every nonzero's dot product accumulates in a register.

CPU, both: when the gathered operand (X for SpMM, Y for SDDMM) is larger than two cores' L2
caches, the loop over a row's nonzeros prefetches the rows it will gather 8 nonzeros ahead
(``transform.prefetch``). Measured by ``benchmarks/prefetch.py``: on the synthetic arxiv-size
graph and email-Enron the kernels get 1.2-2x faster; on graphs whose operand stays in L2
(cora at feature size 32, facebook) the prefetches cost more than they save.

CUDA: ``operators_cuda`` (warps over CSR rows or row segments for SpMM, thread groups over
nonzeros or row segments with a warp-shuffle reduction for SDDMM), on the forms in
``kernels.CUDA_KERNELS``.

Example
-------
>>> from sparsetir.schedule.operators import prefetch_distance, spmm_lanes
>>> spmm_lanes(256, vector_lanes=16), spmm_lanes(256, vector_lanes=8), spmm_lanes(24)
(128, 64, 8)
>>> prefetch_distance(2708, 32), prefetch_distance(169343, 128)   # on 1 MiB L2 per core
(0, 8)
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import tvm

from ..ir.attrs import PREFETCH_ANNOTATION, REALIGN_ANNOTATION
from .cpu_target import LINE_FLOATS, float32_lanes, vectors_are_lines
from .operators_cuda import CUDA_SCHEDULES
from ..errors import SparseTIRValueError

LANE_CHOICES = (128, 64, 32, 16, 8)

ACCUMULATORS = 8
"""Vector registers a register tile of SpMM keeps as accumulators: a quarter of AVX-512's 32,
half of AVX2's 16 (the others hold the gathered row's vectors as they are loaded and
realigned, and the prefetch addresses). On AMD Zen 3 an AVX2 tile of all 16 registers was
no consistent gain: up to 5% faster on pubmed and email-Enron, 2-7% slower on the synthetic
arxiv-size graph (``docs/tuning.md``)."""

def realigns_gathers(lanes: int, vector_lanes: int | None = None) -> bool:
    """Whether a register tile of ``lanes`` loads the rows it gathers that start off a cache
    line as the whole lines they span (``backend.realign_gathers``): where a vector register
    of ``vector_lanes`` float32 (by default the target's) is a whole line
    (``cpu_target.vectors_are_lines``: AVX-512), and the tile a whole number of them. With
    AVX2's 32-byte vectors only every other vector of such a row straddles two lines, and the
    shuffles cost more than the split loads save: on AMD Zen 3 (2 threads, medians alternating
    in one process, X 16 bytes past a line) SpMM ran 1.10-1.12x slower realigned on pubmed
    and email-Enron at 64 and 128 features, and the same on the R-MAT graph of arxiv size.

    Example
    -------
    >>> realigns_gathers(64, vector_lanes=16), realigns_gathers(64, vector_lanes=8)
    (True, False)
    """
    return vectors_are_lines(vector_lanes) and lanes % LINE_FLOATS == 0


def spmm_lanes(feat_size: int, vector_lanes: int | None = None) -> int:
    """The register tile of the CPU SpMM feature loop (see the module docstring) for vector
    registers of ``vector_lanes`` float32 (by default those of the CPU ``"llvm"`` compiles
    for, ``cpu_target.float32_lanes``); 1 when no tile divides ``feat_size``."""
    widest = ACCUMULATORS * (float32_lanes() if vector_lanes is None else vector_lanes)
    return next((lanes for lanes in LANE_CHOICES
                 if lanes <= widest and feat_size > 0 and feat_size % lanes == 0), 1)


PREFETCH_DISTANCE = 8


def prefetch_distance(gathered_rows: int, feat_size: int) -> int:
    """How many nonzeros ahead the CPU kernels prefetch the rows they gather (0: not at all),
    for a gathered operand of ``gathered_rows`` rows of ``feat_size`` float32: 8 when the
    operand is larger than two cores' L2 caches (it then comes from L3 or memory), else 0."""
    return PREFETCH_DISTANCE if gathered_rows * feat_size * 4 > 2 * l2_cache_bytes() else 0


@lru_cache(maxsize=None)
def l2_cache_bytes() -> int:
    """One core's L2 cache size (Linux sysfs; 1 MiB where it cannot be read)."""
    caches = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(caches.glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2":
                size = (index / "size").read_text().strip()
                return int(size[:-1]) * {"K": 1 << 10, "M": 1 << 20}[size[-1]]
        except (OSError, KeyError, ValueError):
            break
    return 1 << 20


def schedule_spmm_cpu(mod: tvm.IRModule, feat_size: int, prefetch: int = 0,
                      lanes: int | None = None) -> tvm.IRModule:
    """Row tiles in parallel, register-tiled vectorised feature loops (tiles of ``lanes``
    features, by default ``spmm_lanes``'s; it must divide ``feat_size``); with ``prefetch``,
    the loop over a row's nonzeros prefetches the X rows that many nonzeros ahead."""
    sch = tvm.s_tir.Schedule(mod)
    (tiles,) = sch.get_loops(sch.get_sblock("spmm0"))
    update = sch.get_sblock("spmm2")
    nonzeros, features = sch.get_loops(update)[-2:]
    lanes = spmm_lanes(feat_size) if lanes is None else lanes
    if feat_size % lanes:
        raise ValueError(f"a register tile of {lanes} lanes does not divide {feat_size} features")
    if prefetch:
        sch.annotate(nonzeros, PREFETCH_ANNOTATION, prefetch)
    if lanes == 1:
        sch.parallel(tiles)
        return sch.mod
    sch.parallel(tiles)
    accumulate_in_registers(sch, update, [nonzeros], features, lanes)
    return sch.mod


def schedule_zeroing(sch, block: str = "spmm_init0") -> None:
    """The nest that clears the output before decomposed sub-kernels add into it: rows in
    parallel, features vectorised."""
    rows, features = sch.get_loops(sch.get_sblock(block))
    sch.parallel(rows)
    sch.vectorize(features)


def accumulate_in_registers(sch, update, reductions: list, features, lanes: int):
    """Split ``update``'s feature loop into tiles of ``lanes`` placed above its
    ``reductions`` loops (outermost first), and sum each tile in a buffer of its own: a
    "global" allocation of constant size becomes a stack array, which LLVM keeps in vector
    registers (summing into the output itself stores every vector after every nonzero),
    written back once per tile. Where ``realigns_gathers``, the rows it gathers that start off a
    cache line are loaded as whole lines (``backend.realign_gathers``).
    Returns the init block that ``decompose_reduction`` made (an init that keeps the output,
    ``Y = Y``, must then load it: ``transform.accumulator``)."""
    feature_tiles, lane = sch.split(features, [None, lanes])
    sch.reorder(feature_tiles, *reductions)
    sch.vectorize(lane)
    if realigns_gathers(lanes):
        sch.annotate(reductions[0], REALIGN_ANNOTATION, 1)
    accumulate = sch.cache_write(update, 0, "global")
    sch.reverse_compute_at(accumulate, feature_tiles)
    sch.vectorize(sch.get_loops(accumulate)[-1])
    init = sch.decompose_reduction(update, reductions[0])
    sch.vectorize(sch.get_loops(init)[-1])
    return init


def schedule_sddmm_cpu(mod: tvm.IRModule, feat_size: int, prefetch: int = 0) -> tvm.IRModule:
    """Row tiles in parallel; each nonzero's dot product starts from a zero moved out of its
    feature loop, so the sum stays in a register; with ``prefetch``, the loop over a row's
    nonzeros prefetches the Y rows that many nonzeros ahead."""
    del feat_size
    sch = tvm.s_tir.Schedule(mod)
    (tiles,) = sch.get_loops(sch.get_sblock("sddmm0"))
    update = sch.get_sblock("sddmm2")
    nonzeros, features = sch.get_loops(update)[-2:]
    if prefetch:
        sch.annotate(nonzeros, PREFETCH_ANNOTATION, prefetch)
    sch.parallel(tiles)          # before decompose_reduction, which TVM's parallel check refuses
    sch.decompose_reduction(update, features)
    return sch.mod


def schedule_for(name: str, mod: tvm.IRModule, feat_size: int, target_kind: str,
                 prefetch: int = 0, lanes: int | None = None):
    """The scheduled module of kernel ``name`` (see ``kernels.KERNELS``; for ``"cuda"``,
    ``kernels.CUDA_KERNELS``); ``lanes``: the CPU SpMM's register tile (``schedule_spmm_cpu``)."""
    if target_kind == "cuda":
        if name not in CUDA_SCHEDULES:
            raise SparseTIRValueError(f"no CUDA schedule for kernel {name!r}; there are "
                                      f"{sorted(CUDA_SCHEDULES)}")
        return CUDA_SCHEDULES[name](mod, feat_size)
    if name.startswith("spmm"):
        return schedule_spmm_cpu(mod, feat_size, prefetch, lanes)
    return schedule_sddmm_cpu(mod, feat_size, prefetch)
