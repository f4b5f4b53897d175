"""SparseTIR's ``tests/python/sparsetir/test_specialize_buffer.py`` (HEAD 9b3f843), ported.

| SparseTIR test | status |
|---|---|
| ``test_specialize_ellmm`` | passes with documented renames: ``tvm.IRModule.from_expr(ellmm)`` -> ``ellmm``; ``tvm.sparse.lower_sparse_iter`` -> ``sparsetir.lower_sparse_iter``; ``tvm.sparse.specialize_buffer`` -> ``sparsetir.transform.specialize_buffer.specialize_buffer`` |

SparseTIR only printed the result; the test here also checks that the kernel no longer reads
``J_indices`` and runs it against numpy on a banded ELL matrix (row ``i`` holds the block
columns ``i .. i + col - 1``, the formula's promise), and that a formula pointing past ``B`` stops
the kernel with an ``ArgumentError`` instead of reading out of bounds.
"""

import numpy as np
import pytest
import tvm
from scripts_stage1 import ellmm

import sparsetir
from sparsetir import lower_sparse_iter
from sparsetir.transform.specialize_buffer import specialize_buffer


def test_specialize_ellmm():
    mod = ellmm
    mod = lower_sparse_iter(mod)
    mod = specialize_buffer(mod, "J_indices", lambda i, j: (i + j,))
    print(mod["main"].script())
    # added
    assert "J_indices[" not in mod["main"].script()
    tvm.s_tir.Schedule(mod)                              # TVM's checks hold
    _check_banded(nb=6, col=3, blk=2, feat=4, mb=8)      # mb = nb + col - 1: in range
    with pytest.raises(sparsetir.ArgumentError, match="formula gives an index of B"):
        _check_banded(nb=6, col=3, blk=2, feat=4, mb=6)  # rows 4, 5 reach past B


def _check_banded(nb, col, blk, feat, mb):
    func = ellmm.specialize({"nb": nb, "mb": mb, "feat_size": feat, "col": col, "blk": blk})
    kernel = sparsetir.build(specialize_buffer(lower_sparse_iter(func), "J_indices",
                                               lambda i, j: (i + j,)), "llvm")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((nb, col, blk, blk)).astype(np.float32)
    B = rng.standard_normal((mb, blk, feat)).astype(np.float32)
    C = np.full((nb, blk, feat), np.nan, np.float32)
    band = np.arange(nb)[:, None] + np.arange(col)
    indices = np.minimum(band, mb - 1).astype(np.int32).ravel()   # valid, sorted; unread
    kernel(A, B, C, indices)
    np.testing.assert_allclose(C, np.einsum("ijab,ijbf->iaf", A, B[band]), rtol=1e-5,
                               atol=1e-5)


if __name__ == "__main__":
    test_specialize_ellmm()
