"""Stage II is ordinary TensorIR: TVM's own schedule primitives apply, and results stay right.

Each case lowers a reference kernel, applies primitives through ``tvm.s_tir.Schedule``, builds
without the default schedule and compares with the numpy reference (outputs start as NaN).
"""

import pytest
from kernel_zoo import CASES
from tvm import s_tir
from zoo_check import check_kernel, zoo_inputs

import sparsetir


def _split_rows_parallel_unroll(sch):
    (rows,) = sch.get_loops(sch.get_sblock("csrmm0"))
    outer, inner = sch.split(rows, [None, 4])
    sch.parallel(outer)
    sch.unroll(inner)


def _split_features_and_reorder(sch):
    nz, feat = sch.get_loops(sch.get_sblock("csrmm1"))
    outer, _ = sch.split(feat, [None, 4])
    sch.reorder(outer, nz)


def _decompose_bsr_reduction(sch):
    block = sch.get_sblock("bsrmm0")
    _, _, bj, _ = sch.get_loops(block)
    sch.decompose_reduction(block, bj)


def _reorder_block_loops(sch):
    i, bi, bj, f = sch.get_loops(sch.get_sblock("bsrmm0"))
    sch.reorder(i, bj, bi, f)
    sch.parallel(i)


def _rfactor_sddmm(sch):
    _, k = sch.get_loops(sch.get_sblock("sddmm1"))
    _, inner = sch.split(k, [None, 4])
    sch.rfactor(inner, 0)


def _parallel_ell(sch):
    sch.parallel(sch.get_loops(sch.get_sblock("ellmm0"))[0])


CASES_AND_SCHEDULES = [
    ("csrmm", _split_rows_parallel_unroll),
    ("csrmm", _split_features_and_reorder),
    ("bsrmm", _decompose_bsr_reduction),
    ("bsrmm", _reorder_block_loops),
    ("sddmm", _rfactor_sddmm),
    ("ellmm", _parallel_ell),
]


@pytest.mark.parametrize("name,schedule", CASES_AND_SCHEDULES,
                         ids=[f"{n}-{s.__name__.strip('_')}" for n, s in CASES_AND_SCHEDULES])
def test_schedule_primitives_keep_results(name, schedule):
    case = CASES[name]
    sch = s_tir.Schedule(sparsetir.lower_sparse_iter(case.func))   # TVM's checks on
    schedule(sch)
    check_kernel(sparsetir.build(sch.mod, "llvm", schedule="none"), case.func, name,
                 zoo_inputs(name))


def test_blocks_are_found_by_iteration_name():
    sch = s_tir.Schedule(sparsetir.lower_sparse_iter(CASES["rgcn_hetero_forward"].func))
    for name in ("rgcn_hetero_forward0", "rgcn_hetero_forward1", "rgcn_hetero_forward2"):
        sch.get_sblock(name)
