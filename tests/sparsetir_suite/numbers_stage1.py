"""The numeric check the Stage I/II ports add to SparseTIR's IR comparisons.

``check_numbers(name, mod)`` builds ``mod`` (a Stage II module lowered from SparseTIR's kernel
``name`` of ``scripts_stage1``, or a Stage I function with its parameters) for the CPU, runs it
on the kernel zoo's inputs of that name (outputs start as NaN, inputs have empty rows) and
compares it with the zoo's numpy/scipy reference (``zoo_check``). Two of SparseTIR's kernels
compute something else than the zoo's versions, on purpose; ``OWN_REFERENCES`` gives what
SparseTIR's text computes for those.

>>> # check_numbers("csrmm", sparsetir.lower_sparse_iter(scripts_stage1.csrmm))
"""

from __future__ import annotations

import numpy as np
import scripts_stage1
import sparse_inputs as si
from kernel_references import ELEMENTWISE_TOL, REFERENCE_SPECS
from zoo_check import check_kernel, zoo_inputs

import sparsetir


def _sparse_softmax_as_written(inputs: dict) -> dict:
    """SparseTIR's sparse_softmax: exp(A) divided by the row sum of exp(A - row max), which is
    not a softmax (the zoo's version divides exp(A - row max))."""
    a, indptr = np.asarray(inputs["a"], np.float64), inputs["indptr"]
    rows = si.segment_ids(indptr)
    row_max = np.full(len(indptr) - 1, -np.inf)
    np.maximum.at(row_max, rows, a)
    sums = np.bincount(rows, weights=np.exp(a - row_max[rows]), minlength=len(indptr) - 1)
    return {"b": np.exp(a) / sums[rows]}


def _csr2bsr_as_written(inputs: dict) -> dict:
    """SparseTIR's csr2bsr copies A's entries into their blocks and writes nothing else: the
    zoo's reference (which zeroes the rest of each block first) with NaN where A has no entry."""
    reference = REFERENCE_SPECS["csr2bsr"].reference
    reached = reference(dict(inputs, a=np.ones_like(inputs["a"])))["b"] != 0
    return {"b": np.where(reached, reference(inputs)["b"], np.nan)}


OWN_REFERENCES = {"sparse_softmax": _sparse_softmax_as_written, "csr2bsr": _csr2bsr_as_written}
"""SparseTIR kernels whose text the zoo's reference does not describe, and what they compute."""


def _same_k_fibres(inputs: dict) -> dict:
    """square_sum_two_K as SparseTIR runs it: K1 is K0 (one nnz_k for both)."""
    return dict(inputs, indptr_k1=inputs["indptr_k0"], indices_k1=inputs["indices_k0"],
                nnz_k=inputs["nnz_k0"], nnz_k1=inputs["nnz_k0"])


_ADAPT = {"square_sum_two_K": _same_k_fibres}


def check_numbers(name: str, mod) -> None:
    """Build ``mod`` (the Stage II module of SparseTIR's kernel ``name``, or a Stage I function
    with the same parameters, e.g. a scheduled one) and check its results."""
    func = getattr(scripts_stage1, name)
    inputs = _ADAPT.get(name, lambda x: x)(zoo_inputs(name))
    kernel = sparsetir.build(mod, "llvm")
    if name not in OWN_REFERENCES:
        check_kernel(kernel, func, name, inputs)
        return
    expected = OWN_REFERENCES[name](inputs)
    kernel(*[inputs[p.name] for p in func.params])
    for out, want in expected.items():
        np.testing.assert_allclose(np.asarray(inputs[out], np.float64), want,
                                   rtol=ELEMENTWISE_TOL, atol=ELEMENTWISE_TOL,
                                   err_msg=f"{name}: output {out}")
