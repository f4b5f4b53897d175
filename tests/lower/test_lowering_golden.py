"""Golden IR of ``lower_sparse_iter`` and ``lower_sparse_buffer`` for the reference kernels.

The expected modules live in ``lowered_scripts.py`` as TVMScript; the comparison is TVM's
structural equality, so a change in block structure, loop extents, index arithmetic, search
placement or init placement fails here with the path of the first difference.
"""

import lowered_scripts
import pytest
import tvm
import tvm_ffi
from kernel_zoo import CASES

import sparsetir

ITER_KERNELS = ["csrmm", "csrmm_dense_iter", "bsrmm", "ellmm", "sddmm", "fused_sddmm"]
BUFFER_KERNELS = ["csrmm", "bsrmm"]


@pytest.mark.parametrize("name", ITER_KERNELS)
def test_lower_sparse_iter_matches_golden(name):
    lowered = sparsetir.lower_sparse_iter(CASES[name].func)
    tvm.ir.assert_structural_equal(lowered, getattr(lowered_scripts, f"{name}_iter"))


@pytest.mark.parametrize("name", BUFFER_KERNELS)
def test_lower_sparse_buffer_matches_golden(name):
    flat = sparsetir.lower_sparse_buffer(sparsetir.lower_sparse_iter(CASES[name].func))
    tvm.ir.assert_structural_equal(flat, getattr(lowered_scripts, f"{name}_buffer"))


def test_golden_comparison_detects_a_different_kernel():
    lowered = sparsetir.lower_sparse_iter(CASES["sddmm"].func)
    assert not tvm_ffi.structural_equal(lowered, lowered_scripts.fused_sddmm_iter)


@pytest.mark.parametrize("name", ITER_KERNELS)
def test_lowered_module_prints_and_parses_back(name):
    lowered = sparsetir.lower_sparse_iter(CASES[name].func)
    tvm.ir.assert_structural_equal(lowered, tvm.script.from_source(lowered.script()))
