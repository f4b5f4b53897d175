"""``"atomic"`` on the CPU for accumulations written as longer sums: ``Y[i] = Y[i] + a + b`` and
``Y[i] = Y[i] - a`` add atomically and run the column loop in parallel, like ``Y[i] = Y[i] + a``;
a store whose added value reads ``Y`` itself is no atomic accumulation and stays serial (and
right).
"""

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import tvm
import tvm_ffi
from tvm import tirx

import sparsetir
from sparsetir.driver.build_module import lower_to_stage3
from sparsetir.script import from_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from csc_spmv_calls import csc_spmv  # noqa: E402  pylint: disable=wrong-import-position


def variant(update: str):
    """``csc_spmv`` with the output zeroed to 1 and the accumulation written as ``update``."""
    text = csc_spmv.script()
    for old, new in (("Y[i] = T.float32(0.0)", "Y[i] = T.float32(1.0)"),
                     ("Y[i] = Y[i] + A[j, i] * X[j]", f"Y[i] = {update}")):
        assert old in text
        text = text.replace(old, new)
    return from_source(text)


@pytest.fixture(scope="module")
def matrix():
    rng = np.random.default_rng(0)
    dense = (rng.random((30, 50)) < 0.2) * rng.standard_normal((30, 50))
    dense[::7] = 0                                                  # empty rows
    dense[:, ::5] = 0                                               # empty columns
    m = sp.csc_matrix(dense.astype(np.float32))
    m.sort_indices()
    return m, rng.standard_normal(50).astype(np.float32)


def _atomic_calls(loop) -> list:
    calls = []
    tvm_ffi.structural_walk(loop, (tvm.ir.Call, lambda c: calls.append(str(c.args[0].value))
                                   if c.op.name == "tirx.call_extern" else None), order="pre")
    return calls


@pytest.mark.parametrize("update, parallel, expected", [
    ("Y[i] + A[j, i] * X[j] + A[j, i]", True, lambda a, x: 1 + a @ x + a.sum(1).A1),
    ("Y[i] - A[j, i] * X[j]", True, lambda a, x: 1 - a @ x),
    ("A[j, i] * X[j] + Y[i] - A[j, i]", True, lambda a, x: 1 + a @ x - a.sum(1).A1),
    ("Y[i] + Y[i] * A[j, i]", False, lambda a, x: np.prod(1 + a.toarray(), axis=1)),
])
def test_sums_into_the_output_add_atomically(matrix, update, parallel, expected):
    func = variant(update)
    flat = lower_to_stage3(func, "llvm")
    tvm.s_tir.Schedule(flat)                                        # TVM's checks accept it
    _, spmv = flat["main"].body.block.body.seq
    assert (spmv.kind == tirx.ForKind.PARALLEL) == parallel
    assert _atomic_calls(spmv) == (["sparsetir_atomic_add_float32"] if parallel else [])
    a, x = matrix
    y = np.full(30, np.nan, np.float32)
    sparsetir.build(sparsetir.lower_sparse_iter(func), "llvm")(
        a.data, x, y, a.indptr, a.indices, 30, 50, a.nnz)
    np.testing.assert_allclose(y, expected(a, x), rtol=1e-4, atol=1e-4)
