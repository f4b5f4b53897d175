"""Every reference kernel takes TVM's checked ``parallel`` and ``vectorize`` and stays right.

``tvm.s_tir.Schedule(mod)`` with its default checks: the outermost loop of every top-level nest
goes parallel, and the innermost loop of each block that binds a spatial variable of constant
extent (the feature loop, once its size is specialised) is vectorised. The listed loops must be
accepted; the result is compared with the reference on inputs with empty rows and NaN-filled
outputs, and on inputs where a reduction has zero extent (the init must still run).
"""

from __future__ import annotations

import numpy as np
import pytest
import sparse_inputs as si
import tvm_ffi
from kernel_zoo import CASES
from tvm import s_tir, tirx

import sparsetir
from sparsetir.lower.loop_signature import top_level_nests
from zoo_check import check_kernel, with_nan_outputs, zoo_inputs

# scalar parameters baked in so that feature loops have a constant extent
SPECIALIZE = {
    "csrmm": ["feat_size"], "csrmm_dense_iter": ["feat_size"], "bsrmm": ["blk", "feat_size"],
    "ellmm": ["feat_size", "blk"], "hyper_gnn": ["feat_size"], "sddmm": ["feat_size"],
    "fused_sddmm": ["feat_size"], "rgcn_homo_forward": ["feat_size"],
    "rgcn_hetero_forward": ["feat_size"], "csr2bsr": ["blk_size"],
}

# the vectorised loops each kernel must accept (block.loop); kernels whose innermost spatial
# loop is data-dependent (csr_element_wise, bmm, sparse_softmax...) or whose feature loop is a
# reduction (sddmm) have none, as the equivalent dense nest would not
VECTORIZED = {
    "csrmm": {"csrmm1.k"}, "csrmm_dense_iter": {"csrmm_dense_iter0.k"},
    "bsrmm": {"bsrmm0.f"}, "ellmm": {"ellmm0.f"}, "hyper_gnn": {"hyper_gnn0.f"},
    "rgcn_homo_forward": {"rgcn_homo_forward0.fo"}, "csr2bsr": {"zero1.bj"},
}


def _specialized(name: str, inputs: dict):
    func = CASES[name].func
    params = SPECIALIZE.get(name, [])
    return func.specialize({p: inputs[p] for p in params}) if params else func


def _parallel_and_vectorize(mod) -> tuple:
    """Apply the primitives with TVM's checks; return the schedule and the vectorised loops."""
    sch = s_tir.Schedule(mod)
    vectorized = set()
    for stmt in top_level_nests(mod["main"]):
        realizes = []
        tvm_ffi.structural_walk(stmt, (s_tir.SBlockRealize, realizes.append), order="pre")
        sch.parallel(sch.get_loops(sch.get_sblock(realizes[0].block.name_hint))[0])
        for realize in realizes:
            block = realize.block
            loops = sch.get_loops(sch.get_sblock(block.name_hint))
            if not loops or not block.iter_vars:
                continue
            loop = sch.get(loops[-1])
            if (block.iter_vars[-1].iter_type == tirx.IterVar.DataPar
                    and realize.iter_values[-1].same_as(loop.loop_var)
                    and isinstance(loop.extent, tirx.IntImm) and loop.kind == tirx.ForKind.SERIAL):
                try:
                    sch.vectorize(loops[-1])
                    vectorized.add(f"{block.name_hint}.{loop.loop_var.name}")
                except s_tir.ScheduleError:
                    pass
    return sch, vectorized


@pytest.mark.parametrize("size", si.SIZES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_parallel_and_vectorize_with_checks_keep_results(name, size):
    inputs = CASES[name].make_inputs(si.case_rng(name, size), size)
    func = _specialized(name, inputs)
    sch, vectorized = _parallel_and_vectorize(sparsetir.lower_sparse_iter(func))
    assert VECTORIZED.get(name, set()) <= vectorized
    check_kernel(sparsetir.build(sch.mod, "llvm", schedule="none"), func, name, inputs)


def _zero_feature_size(inputs: dict) -> dict:
    """SDDMM with no features: every output entry is an empty sum."""
    return dict(inputs, feat_size=0, a=np.zeros(0, np.float32), b=np.zeros(0, np.float32),
                c=np.empty(inputs["nnz"], np.float32))


def _zero_columns(inputs: dict) -> dict:
    rows = inputs["m"]
    return dict(inputs, n=0, nnz=0, a=np.zeros(0, np.float32), indices=np.zeros(0, np.int32),
                indptr=np.zeros(rows + 1, np.int32), b=np.zeros(0, np.float32))


def _zero_ell_width(inputs: dict) -> dict:
    return dict(inputs, col=0, a=np.zeros(0, np.float32), indices=np.zeros(0, np.int32))


# (kernel, how its inputs are made to give a reduction of zero extent)
ZERO_EXTENT = [("sddmm", _zero_feature_size), ("fused_sddmm", _zero_feature_size),
               ("csrmm_dense_iter", _zero_columns), ("csrmm", _zero_columns),
               ("ellmm", _zero_ell_width)]


@pytest.mark.parametrize("name,zero", ZERO_EXTENT, ids=[f"{n}-{z.__name__.strip('_')}"
                                                        for n, z in ZERO_EXTENT])
@pytest.mark.parametrize("scheduled", [False, True], ids=["default", "parallel-vectorize"])
def test_init_runs_when_a_reduction_is_empty(name, zero, scheduled):
    case = CASES[name]
    inputs = with_nan_outputs(name, zero(zoo_inputs(name)))
    func = case.func
    mod = sparsetir.lower_sparse_iter(func)
    if scheduled:
        mod = _parallel_and_vectorize(mod)[0].mod
    sparsetir.build(mod, "llvm")(*[inputs[p.name] for p in func.params])
    for out in case.outputs:
        assert inputs[out].size and not np.any(inputs[out]), f"{name}: {out} is not all zero"
