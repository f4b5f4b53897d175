"""``specialize_buffer`` given formulas that are not an index of the buffer's dtype, callables
whose parameters cannot be counted, and modules without ``main``: each a clear
``SparseTIRTypeError`` / ``SparseTIRValueError`` naming the problem, never TVM's internal check
(``Check failed: ... mismatched types``) or a silent cast of a float or a boolean into an index.
"""

import pytest
import tvm
from kernel_zoo import CASES

import sparsetir
from sparsetir.transform.specialize_buffer import specialize_buffer


@pytest.fixture(scope="module")
def mod():
    return sparsetir.lower_sparse_iter(CASES["csrmm"].func.specialize({"feat_size": 4}))


@pytest.mark.parametrize("idx_map,message", [
    (lambda i, j: (j * 0.5,), r"dtype float32 for J_indices, which holds int32"),
    (lambda i, j: (1.5,), r"the float 1.5 for J_indices, which holds int32"),
    (lambda i, j: (tvm.tirx.Cast("int64", j),), r"dtype int64 for J_indices.*nothing is cast"),
    (lambda i, j: (j < 2,), r"dtype bool for J_indices"),
    (lambda i, j: (True,), r"int32 value for J_indices, got True"),
    (lambda i, j: (None,), r"int32 value for J_indices, got None"),
    (lambda i, j: ("j",), r"int32 value for J_indices, got 'j' \(str\)"),
    (max, r"parameters can be counted"),
])
def test_formulas_that_are_not_an_index_are_refused(mod, idx_map, message):
    with pytest.raises(sparsetir.SparseTIRTypeError, match=message):
        specialize_buffer(mod, "J_indices", idx_map)


def test_a_python_int_is_an_index_and_an_int_formula_is_kept(mod):
    out = specialize_buffer(mod, "J_indices", lambda i, j: (0,))
    assert "J_indices[" not in out["main"].script()
    out = specialize_buffer(mod, "A", lambda p: (1,))        # an int for a float buffer: 1.0
    assert "A[" not in out["main"].script().split("with T.init")[-1]


def test_a_module_without_main_is_refused():
    with pytest.raises(sparsetir.SparseTIRValueError, match="no function 'main'"):
        specialize_buffer(tvm.IRModule({}), "J_indices", lambda i: (i,))
