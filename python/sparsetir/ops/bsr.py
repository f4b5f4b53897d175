"""BSR SpMM on the CPU: the CSR kernel of ``sparsetir.ops`` decomposed into BSR by
``format_decompose``, scheduled like the CSR kernel.

``bsr_spmm_function`` gives the decomposed Stage I function (compute only: the data comes from
``sparsetir.format.csr_to_bsr``); ``schedule_bsr_cpu`` runs block rows in parallel and, for each
row of a block row, sums register tiles of the output row over every nonzero block of the block
row (the accumulator loaded from Y, which the zeroing nest cleared: ``transform.accumulator``),
so a nonzero costs one vector load of X and one fused multiply-add per vector, and X is read in
runs of ``block_size`` consecutive rows.

Example
-------
>>> import numpy as np, scipy.sparse, sparsetir
>>> func = bsr_spmm_function(2, feat_size=16)
>>> kernel = sparsetir.build(schedule_bsr_cpu(sparsetir.lower_sparse_iter(func)), "llvm",
...                          schedule="none", cache=True)
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
>>> indptr_b, indices_b, data_b = sparsetir.format.csr_to_bsr(A.indptr, A.indices, A.data,
...                                                           A.shape, 2)
>>> X, Y = np.ones((5, 16), np.float32), np.zeros((6, 16), np.float32)
>>> values = dict(a=A.data, x=X, y=Y, indptr=A.indptr, indices=A.indices, m=6, n=5,
...               nnz=A.nnz, a_bsr=data_b, indptr_bsr=indptr_b, indices_bsr=indices_b,
...               mb_bsr=3, nb_bsr=3, nnzb_bsr=indices_b.size)
>>> kernel(*[values[p.name] for p in func.params])
>>> np.allclose(Y, A @ X)
True
"""

from __future__ import annotations

import tvm

from ..schedule.accumulator import start_from_output
from ..stage1.bsr import bsr_rule
from ..stage1.format_decompose import format_decompose, remove_preprocess
from .kernels import spmm
from ..schedule.operators import accumulate_in_registers, schedule_zeroing, spmm_lanes


def bsr_spmm_function(block_size: int, feat_size: int):
    """``sparsetir.ops.kernels.spmm`` computed through BSR blocks of ``block_size`` (the
    rule's parameters are suffixed ``_bsr``), for ``feat_size`` features."""
    decomposed = format_decompose(spmm, [bsr_rule("bsr", block_size)])
    return remove_preprocess(decomposed).specialize({"feat_size": feat_size})


def schedule_bsr_cpu(mod: tvm.IRModule) -> tvm.IRModule:
    """The CPU schedule of the lowered ``bsr_spmm_function`` (see the module docstring)."""
    sch = tvm.s_tir.Schedule(mod)
    update = sch.get_sblock("spmm_bsr1")
    (block_rows,) = sch.get_loops(sch.get_sblock("spmm_bsr0"))
    blocks, rows, columns, features = sch.get_loops(update)[-4:]
    lanes = spmm_lanes(int(sch.get(features).extent))
    sch.parallel(block_rows)
    schedule_zeroing(sch)
    if lanes == 1:
        return sch.mod
    sch.reorder(rows, blocks)
    init = accumulate_in_registers(sch, update, [blocks, columns], features, lanes)
    return start_from_output(sch.mod, [sch.get(init).name_hint])
