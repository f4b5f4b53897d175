"""The pipeline's own passes on lowered TIR: index loads bound once per iteration, loop-invariant
tests unswitched, dot products split into vector lanes; results unchanged."""

import numpy as np
import pytest
import tvm
from tvm import tirx

import sparsetir
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.ops import SparseMatrix
from sparsetir.ops.kernels import KERNELS
from sparsetir.schedule.operators import schedule_for
from sparsetir.backend.pipeline import lower_blocks
from sparsetir.backend.index_loads import hoist_index_loads
from sparsetir.backend.vector_reductions import LANES, vectorize_reductions
from ir_nodes import nodes


def lowered(name, feat, passes):
    mod = schedule_for(name, sparsetir.lower_sparse_iter(
        KERNELS[name].specialize({"feat_size": feat})), feat, "llvm")
    flat = lower_to_stage3(mod, "llvm", "none")
    with tvm.target.Target("llvm"):
        return tvm.transform.Sequential(passes)(lower_blocks(flat))


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



def test_float_values_are_computed_as_written():
    """TVM's simplifier would fold ``x - x``, ``x * 0`` and ``0 / x`` to 0 and ``x + 0`` to
    ``x``; the pipeline keeps them from it (``exact_floats``), in a vectorized loop too, so the
    results are numpy's: NaN from inf and NaN, +0 from -0 + 0, and the rounding of
    ``(x + 1) - 1``. The zeros are a parameter substituted as sparsetir's ``specialize`` does
    (TVM's own constructors fold ``x * 0`` as they build it)."""
    from tvm.script import tirx as T
    from sparsetir.backend.pipeline import PIPELINE_NAME
    from sparsetir.ir.utils import substitute

    @T.prim_func
    def kernel(x: T.Buffer((8,), "float64"), y: T.Buffer((5, 8), "float64"), z: T.float64):
        for i in T.vectorized(8):
            y[0, i] = x[i] - x[i]
            y[1, i] = x[i] * z
            y[2, i] = z / x[i]
            y[3, i] = x[i] + z
            y[4, i] = (x[i] + T.float64(1)) - T.float64(1)

    zero = kernel.with_body(substitute(kernel.body, {kernel.params[2]: tirx.const(0.0, "float64")}))
    assert "T.Mul(x[i], T.float64(0.0))" in zero.script()
    executable = tvm.compile(tvm.IRModule({"main": zero}), "llvm", tir_pipeline=PIPELINE_NAME)
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-20, 2.0, -3.0])
    y = tvm.runtime.tensor(np.zeros((5, 8)))
    executable["main"](tvm.runtime.tensor(x), y, 0.0)
    with np.errstate(all="ignore"):
        expected = np.stack([x - x, x * 0.0, 0.0 / x, x + 0.0, (x + 1.0) - 1.0])
    np.testing.assert_array_equal(y.numpy(), expected)
    np.testing.assert_array_equal(np.signbit(y.numpy()), np.signbit(expected))
    assert "fsub <8 x double>" in executable.mod.inspect_source("ll")
