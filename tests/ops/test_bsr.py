"""The BSR SpMM of ``sparsetir.ops.bsr``: the CSR kernel decomposed into BSR, scheduled for the
CPU (register tiles loaded from the zeroed output), equal to scipy on matrices whose shapes are
not multiples of the block, with empty block rows, into outputs that held NaN."""

import numpy as np
import pytest
import scipy.sparse
import tvm

import sparsetir
from sparsetir.ops.bsr import bsr_spmm_function, schedule_bsr_cpu


def _block_matrix(rows, cols, block, seed):
    rng = np.random.default_rng(seed)
    keep = rng.random((-(-rows // block), -(-cols // block))) < 0.3
    keep[1] = False                                      # an empty block row
    dense = np.kron(keep, np.ones((block, block)))[:rows, :cols]
    dense = dense * rng.standard_normal(dense.shape)
    return scipy.sparse.csr_matrix(dense.astype(np.float32))


@pytest.mark.parametrize("block, feat", [(4, 1), (4, 20), (8, 16), (16, 64), (32, 128)])
def test_scheduled_bsr_spmm_equals_scipy(block, feat):
    a = _block_matrix(3 * block + 5, 4 * block + 3, block, seed=block + feat)
    func = bsr_spmm_function(block, feat)
    mod = schedule_bsr_cpu(sparsetir.lower_sparse_iter(func))
    tvm.s_tir.Schedule(mod)                               # TVM's checks accept it
    kernel = sparsetir.build(mod, "llvm", schedule="none")
    indptr, indices, data = sparsetir.format.csr_to_bsr(a.indptr, a.indices, a.data, a.shape,
                                                        block)
    x = np.random.default_rng(1).standard_normal((a.shape[1], feat)).astype(np.float32)
    y = np.full((a.shape[0], feat), np.nan, np.float32)
    m, n = a.shape
    values = dict(a=a.data, x=x, y=y, indptr=a.indptr, indices=a.indices, m=m, n=n, nnz=a.nnz,
                  a_bsr=data, indptr_bsr=indptr, indices_bsr=indices, mb_bsr=-(-m // block),
                  nb_bsr=-(-n // block), nnzb_bsr=indices.size)
    kernel(*[values[p.name] for p in func.params])
    np.testing.assert_allclose(y, a @ x, rtol=1e-4, atol=1e-4)


def test_register_tiles_load_the_zeroed_output():
    mod = schedule_bsr_cpu(sparsetir.lower_sparse_iter(bsr_spmm_function(8, 64)))
    sch = tvm.s_tir.Schedule(mod)
    init = sch.get(sch.get_sblock("spmm_bsr1_init"))
    assert init.body.buffer.name == "Y_global" and init.body.value.source.name == "Y"
    assert "T.parallel(mb_bsr)" in mod.script()
