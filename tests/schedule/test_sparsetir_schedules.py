"""SparseTIR's published schedules, applied to our Stage II with TVM's checks on.

Each schedule is the one of SparseTIR's benchmark scripts (``examples/spmm/bench_spmm_naive.py``,
``examples/sddmm/bench_sddmm.py``, ``examples/rgms/rgcn/bench_rgcn_non_composable.py``) with the
renames TVM 0.27 needs (``tvm.s_tir.Schedule``, ``get_sblock``). Where our Stage II differs,
the change is named at the step. Each builds for CUDA (sm_80, sm_90; nvcc, no GPU needed) into
the source of the golden file ``golden/test_sparsetir_schedules/...-<schedule>.txt`` (the same
for both architectures; ``pytest --update-golden`` rewrites it after a deliberate change), and
its result is checked on the CPU with the thread loops run one after another, forwards and
backwards (``cuda_emulation``); SpMM also has a CPU variant built for llvm. Outputs start as
NaN (``zoo_check``).
"""

from __future__ import annotations

import pytest
import sparse_inputs as si
from cuda_emulation import emulate
from kernel_zoo import CASES
from tvm import s_tir
from zoo_check import check_kernel, zoo_inputs

import sparsetir
from sparsetir.backend.target import cuda_source

ARCHS = ("sm_80", "sm_90")


def spmm_schedule(sch, cwm=2):
    """bench_spmm_naive.py. Its kernel declares the features as three axes (tiles, cwm, 32);
    ours has one feature axis, split into the same three loops."""
    outer_blk, inner_blk = sch.get_sblock("csrmm0"), sch.get_sblock("csrmm1")
    (i,) = sch.get_loops(outer_blk)
    j, k = sch.get_loops(inner_blk)
    foo, foi, fi = sch.split(k, [None, cwm, 32])
    sch.reorder(foo, fi, j, foi)
    sch.bind(fi, "threadIdx.x")
    sch.bind(foo, "blockIdx.y")
    sch.unroll(foi)
    io, ii = sch.split(i, [None, 8])
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    init_blk = sch.decompose_reduction(inner_blk, fi)
    ax0, _ = sch.get_loops(init_blk)[-2:]
    sch.bind(ax0, "threadIdx.x")


def spmm_cpu_schedule(sch):
    """The CPU form of the same schedule: rows split and parallel, features split, vectorised."""
    (i,) = sch.get_loops(sch.get_sblock("csrmm0"))
    _, k = sch.get_loops(sch.get_sblock("csrmm1"))
    io, _ = sch.split(i, [None, 8])
    sch.parallel(io)
    _, ki = sch.split(k, [None, 8])
    sch.vectorize(ki)


def sddmm_schedule(sch, tx=8, ty=2, vec_size=2, group_size=2):
    """bench_sddmm.py on the fused iteration (``sparse_fuse(sddmm, [i, j])`` = fused_sddmm).

    Its preprocess (the row search) is the ``preprocess`` nest ``fused_sddmm0_search0`` here.
    Our C is one-dimensional (``[nnz]``), so the rfactor axis is 1 (SparseTIR: 2) and the
    write-back block has one loop fewer. The write-back's row loop is not unrolled: TVM 0.27
    cannot unroll a loop around a cross-thread reduction ("red_buf0 ... not passed").
    """
    blk = sch.get_sblock("fused_sddmm0")
    j, k = sch.get_loops(blk)
    _, kio, _ = sch.split(k, [None, tx, vec_size])
    rf_blk = sch.rfactor(kio, 1)
    j = sch.get_loops(rf_blk)[0]
    joo, joi, ji = sch.split(j, [None, ty, group_size])
    sch.bind(joo, "blockIdx.x")
    sch.bind(joi, "threadIdx.y")
    sch.unroll(ji)
    sch.reverse_compute_at(blk, joi, True)
    sch.set_scope(rf_blk, 0, "local")
    read_a = sch.cache_read(rf_blk, 0, "local")
    read_b = sch.cache_read(rf_blk, 2, "local")
    write_c = sch.cache_write(blk, 0, "local")
    ko, kio, kii = sch.get_loops(rf_blk)[-3:]
    sch.reorder(ko, ji)
    for read in (read_a, read_b):
        sch.compute_at(read, ji, True)
        ax0, ax1 = sch.split(sch.get_loops(read)[-1], [tx, vec_size])
        sch.bind(ax0, "threadIdx.x")
        sch.vectorize(ax1)
    sch.reverse_compute_at(write_c, joi, True)
    sch.vectorize(sch.get_loops(write_c)[-1])
    sch.bind(kio, "threadIdx.x")
    sch.unroll(kii)
    sch.unroll(ko)
    ax0, ax1 = sch.get_loops(blk)[-2:]
    sch.reorder(ax1, ax0)
    sch.bind(ax0, "threadIdx.x")


def rgcn_schedule(sch, split_factor_f=2):
    """bench_rgcn_non_composable.py. The cached read is W, found by name (its index among the
    block's reads differs from SparseTIR's); ``i`` is split in 4 (SparseTIR: 256, for its
    larger graphs)."""
    blk0 = sch.get_sblock("rgcn_hetero_forward0")
    blk1 = sch.get_sblock("rgcn_hetero_forward1")
    blk2 = sch.get_sblock("rgcn_hetero_forward2")
    w_index = [region.source.name for region in sch.get(blk1).reads].index("W")
    read_blk = sch.cache_read(blk1, w_index, "local")
    write_blk = sch.cache_write(blk2, 0, "local")
    sch.annotate(write_blk, "atomic", True)
    fo, r = sch.get_loops(blk0)
    foo, foi = sch.split(fo, [split_factor_f, None])
    (i,) = sch.get_loops(blk1)
    io, _ = sch.split(i, [4, None])
    j, f_in = sch.get_loops(blk2)
    sch.reorder(f_in, j)
    sch.bind(r, "blockIdx.y")
    sch.bind(io, "blockIdx.x")
    sch.bind(foo, "blockIdx.z")
    sch.bind(f_in, "threadIdx.x")
    sch.bind(foi, "threadIdx.y")
    _, _, ax2 = sch.get_loops(read_blk)
    sch.bind(ax2, "threadIdx.x")


# kernel, schedule, scalar parameters specialised (as SparseTIR's scripts did)
SCHEDULES = {
    "spmm": ("csrmm", spmm_schedule, ("feat_size",)),
    "sddmm": ("fused_sddmm", sddmm_schedule, ("feat_size", "m", "n", "nnz")),
    "rgcn": ("rgcn_hetero_forward", rgcn_schedule,
             ("m", "n", "num_rels", "feat_size", "nnz_i", "nnz_j")),
}


def _scheduled(label: str, schedule=None):
    """(kernel name, specialised function, its inputs, the schedule applied)."""
    name, default_schedule, params = SCHEDULES[label]
    inputs = CASES[name].make_inputs(si.case_rng(name, "medium"), "medium")
    func = CASES[name].func.specialize({p: inputs[p] for p in params})
    sch = s_tir.Schedule(sparsetir.lower_sparse_iter(func))   # TVM's checks on
    (schedule or default_schedule)(sch)
    return name, func, inputs, sch


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("label", sorted(SCHEDULES))
def test_schedule_builds_for_cuda(label, arch, golden):
    # "auto" keeps the user's schedule and schedules only the nests nobody touched (the
    # SDDMM's preprocess search)
    _, _, _, sch = _scheduled(label)
    kernel = sparsetir.build(sch.mod, {"kind": "cuda", "arch": arch})
    source = cuda_source(kernel.executable)
    assert "threadIdx.x" in source
    golden(source, variant=label)


def test_a_cuda_nest_left_unbound_is_refused():
    _, _, _, sch = _scheduled("sddmm")
    with pytest.raises(ValueError, match="loop nest 0 binds no loop.*run on the host"):
        sparsetir.build(sch.mod, "cuda", schedule="none")


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("label", sorted(SCHEDULES))
def test_schedule_computes_the_reference(label, reverse):
    name, func, inputs, sch = _scheduled(label)
    check_kernel(emulate(sch.mod, reverse), func, name, inputs)


def test_spmm_cpu_schedule_builds_vectorised_and_right():
    name, func, inputs, sch = _scheduled("spmm", spmm_cpu_schedule)
    kernel = sparsetir.build(sch.mod, "llvm", schedule="none")
    assert "<8 x float>" in kernel.inspect_source("ll")
    check_kernel(kernel, func, name, inputs)


def test_atomic_annotation_gives_atomic_adds_on_cuda():
    sch = s_tir.Schedule(sparsetir.lower_sparse_iter(CASES["csrmm"].func))
    block = sch.get_sblock("csrmm1")
    (i,) = sch.get_loops(sch.get_sblock("csrmm0"))
    j, k = sch.get_loops(block)
    sch.bind(i, "blockIdx.x")
    sch.bind(sch.split(k, [None, 32])[1], "threadIdx.x")
    sch.decompose_reduction(block, j)
    update = sch.get_sblock("csrmm1_update")
    plain = cuda_source(sparsetir.build(sch.mod, "cuda", schedule="none").executable)
    sch.annotate(update, "atomic", True)
    atomic = cuda_source(sparsetir.build(sch.mod, "cuda", schedule="none").executable)
    assert "atomicAdd" not in plain and "atomicAdd" in atomic


def test_atomic_block_under_a_cpu_parallel_loop_adds_atomically():
    sch = s_tir.Schedule(sparsetir.lower_sparse_iter(CASES["csrmm"].func))
    block = sch.get_sblock("csrmm1")
    (i,) = sch.get_loops(sch.get_sblock("csrmm0"))
    sch.parallel(i)
    sch.decompose_reduction(block, sch.get_loops(block)[0])
    sch.annotate(sch.get_sblock("csrmm1_update"), "atomic", True)
    kernel = sparsetir.build(sch.mod, "llvm", schedule="none")    # extern atomic adds
    assert "sparsetir_atomic_add_float32" in kernel.inspect_source("ll")
    check_kernel(kernel, CASES["csrmm"].func, "csrmm", zoo_inputs("csrmm", "small"))


def test_atomic_block_with_an_init_is_refused():
    sch = s_tir.Schedule(sparsetir.lower_sparse_iter(CASES["csrmm"].func))
    sch.annotate(sch.get_sblock("csrmm1"), "atomic", True)
    with pytest.raises(sparsetir.AtomicBlockError, match="csrmm1 is annotated atomic but has"):
        sparsetir.build(sch.mod, "cuda")
