"""The pipeline's own passes on lowered TIR: index loads bound once per iteration, loop-invariant
tests unswitched, dot products split into vector lanes; results unchanged."""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx

import sparsetir
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.ops import SparseMatrix
from sparsetir.ops.kernels import KERNELS
from sparsetir.schedule.operators import schedule_for
from sparsetir.backend.pipeline import lower_blocks
from sparsetir.backend.index_loads import hoist_index_loads
from sparsetir.backend.vector_reductions import LANES, vectorize_reductions


def lowered(name, feat, passes):
    mod = schedule_for(name, sparsetir.lower_sparse_iter(
        KERNELS[name].specialize({"feat_size": feat})), feat, "llvm")
    flat = lower_to_stage3(mod, "llvm", "none")
    with tvm.target.Target("llvm"):
        return tvm.transform.Sequential(passes)(lower_blocks(flat))


def nodes(mod, kind):
    found = []
    tvm_ffi.structural_walk(mod["main"].body, (kind, found.append), order="pre")
    return found


def test_index_loads_are_bound_once_per_iteration():
    before = lowered("sddmm", 32, [])
    after = lowered("sddmm", 32, [hoist_index_loads])
    lets = [s.var.name for s in nodes(after, tirx.LetStmt)]
    assert not nodes(before, tirx.LetStmt)
    assert any(n.startswith("J_indices") for n in lets)   # the column of a nonzero
    assert any(n.startswith("J_indptr") for n in lets)    # the start of a row


@pytest.mark.parametrize("feat, split", [(32, True), (64, True), (24, False), (8, False)])
def test_dot_products_get_vector_lanes_when_the_extent_allows(feat, split):
    mod = lowered("sddmm", feat, [vectorize_reductions])
    lanes = [f for f in nodes(mod, tirx.For) if f.kind == tirx.ForKind.VECTORIZED]
    assert bool(lanes) == split
    if split:   # 16 lanes, or 2-4 vectors of them, 16 where they are folded, then halvings
        assert {int(f.extent) for f in lanes} == ({LANES} if feat % (2 * LANES) else
                                                  {LANES, min(4, feat // LANES) * LANES}) \
            | {8, 4, 2}
        allocs = nodes(mod, tirx.AllocBuffer)
        assert len(allocs) == 1
        parallel = [f for f in nodes(mod, tirx.For) if f.kind == tirx.ForKind.PARALLEL][0]
        assert isinstance(parallel.body, tirx.SeqStmt)            # allocated once per tile,
        assert any(isinstance(s, tirx.AllocBuffer) for s in parallel.body.seq)   # not per row


@pytest.mark.parametrize("feat", [16, 48, 128])
def test_sddmm_with_lanes_equals_reference(feat):
    import scipy.sparse
    A = scipy.sparse.random(60, 50, density=0.1, format="csr", dtype=np.float32,
                            random_state=feat)
    rng = np.random.default_rng(feat)
    X = rng.standard_normal((60, feat)).astype(np.float32)
    Y = rng.standard_normal((50, feat)).astype(np.float32)
    out = sparsetir.ops.sddmm(SparseMatrix(A), X, Y)
    coo = SparseMatrix(A).to_scipy().tocoo()
    np.testing.assert_allclose(out, np.einsum("ij,ij->i", X[coo.row], Y[coo.col]),
                               rtol=1e-5, atol=1e-5)
