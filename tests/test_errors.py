"""Every refusal is a ``SparseTIRError`` and keeps its builtin base: one case per surface."""
import numpy as np
import pytest
import scipy.sparse
import torch
from csrmm_calls import NAMES, make_args

import sparsetir
import sparsetir.ops as ops
from sparsetir import SparseTIRError
from sparsetir.format import csr_to_bsr
from sparsetir.ops.kernels import spmm as csrmm

A = scipy.sparse.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
X = np.ones((5, 3), np.float32)


def _bad_kernel_call():
    kernel = sparsetir.build(csrmm.specialize({"feat_size": 16}), "llvm")
    args = make_args()
    args["indptr"] = args["indptr"].astype(np.int64)
    kernel(*[args[k] for k in NAMES])


CASES = {
    "ops: float64 X": (TypeError, lambda: ops.spmm(A, X.astype(np.float64))),
    "ops: float64 matrix": (TypeError, lambda: ops.spmm(A.astype(np.float64), X)),
    "ops: rows of X": (ValueError, lambda: ops.spmm(A, np.ones((4, 3), np.float32))),
    "ops: out leaf requires grad": (ValueError, lambda: ops.spmm(
        A, torch.ones(5, 3), out=torch.ones(4, 3, requires_grad=True))),
    "ops: unknown op": (ValueError, lambda: ops.gspmm(A, "pow", "sum", torch.ones(5, 3), None)),
    "ops: not a matrix": (TypeError, lambda: ops.SparseMatrix([[1, 2]])),
    "format: (nnz, 1) indices": (ValueError, lambda: csr_to_bsr(
        A.indptr, A.indices.reshape(-1, 1), A.data, A.shape, 2)),
    "format: block size": (ValueError, lambda: csr_to_bsr(A.indptr, A.indices, A.data,
                                                          A.shape, 0)),
    "format: encoding text": (ValueError, lambda: sparsetir.format.Encoding.parse(
        "(i, j) -> (i : dense)")),
    "build: target": (ValueError, lambda: sparsetir.build(csrmm, "no-such-target")),
    "build: kernel": (TypeError, lambda: sparsetir.build(42, "llvm")),
    "kernel call": (ValueError, _bad_kernel_call),
    "schedule: annotate": (TypeError, lambda: sparsetir.Schedule(csrmm).annotate(
        sparsetir.Schedule(csrmm).get_sparse_iteration("spmm"), "k", object())),
    "format_decompose: rules": (TypeError, lambda: sparsetir.format_decompose(csrmm, 3)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refusal_is_a_sparsetir_error_of_its_builtin_kind(case):
    builtin, call = CASES[case]
    with pytest.raises(SparseTIRError) as caught:
        call()
    assert isinstance(caught.value, builtin), type(caught.value).__mro__
