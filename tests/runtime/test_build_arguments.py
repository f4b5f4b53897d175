"""Calling a built kernel with bad arguments raises ``ArgumentError`` naming the parameter.

The checks come from the kernel's axes (``sparsetir.index_checks``): what the user declared as
``indptr``/``indices`` of a sparse axis is verified before any data reaches compiled code.
Plain, misaligned and strided numpy arrays are accepted and results land in them.
"""

import numpy as np
import pytest
from csrmm_calls import FEAT, call
from kernel_zoo import CASES

import sparsetir
from sparsetir.runtime import ArgumentError


def test_good_arguments_give_the_product(kernel, args):
    np.testing.assert_allclose(call(kernel, args), args["expected"], rtol=1e-5, atol=1e-6)


def test_misaligned_and_strided_outputs_receive_the_result(kernel, args):
    raw = np.full(12 * FEAT * 2 + 1, np.nan, np.float32)
    strided = raw[1:].reshape(12, 2 * FEAT)[:, ::2]          # misaligned by 4 bytes, strided
    call(kernel, args, c=strided)
    np.testing.assert_allclose(strided, args["expected"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change,message", [
    ({"indptr": "int64"}, "indptr.*int64.*int32"),
    ({"b": "float64"}, "'b'.*float64"),
    ({"a": "short"}, "'a'.*elements"),
    ({"m": 11}, "'c'.*shape \\(12, 16\\).*\\(m, 16\\) = \\(11, 16\\)"),
    ({"indptr": "unsorted"}, "indptr 'indptr'.*not monotone"),
    ({"indptr": "end"}, "indptr 'indptr'.*must start at 0 and end at nnz"),
    ({"indices": "range"}, "indices 'indices'.*out of range"),
    ({"indices": "order"}, "indices 'indices'.*sorted"),
    ({"m": 2.5}, "'m'"),
])
def test_bad_arguments_name_the_parameter(kernel, args, change, message):
    (name, how), = change.items()
    value = args[name]
    if how in ("int64", "float64"):
        value = value.astype(how)
    elif how == "short":
        value = value[:-1]
    elif how == "unsorted":
        value = value.copy()
        value[3], value[4] = value[4] + 1, value[3]
    elif how == "end":
        value = value.copy()
        value[-1] += 1
    elif how == "range":
        value = value.copy()
        value[0] = 9
    elif how == "order":
        value = value.copy()
        row = next(r for r in range(12) if args["indptr"][r + 1] - args["indptr"][r] >= 2)
        start = args["indptr"][row]
        value[start], value[start + 1] = value[start + 1], value[start]
    else:
        value = how
    with pytest.raises(ArgumentError, match=message):
        call(kernel, args, **{name: value})


def test_validate_false_skips_only_the_index_checks(kernel, args):
    bad = args["indices"].copy()
    bad[:2] = bad[1::-1]                                      # unsorted, still in range
    merged = {**args, "indices": bad}
    kernel(*[merged[k] for k in ("a", "b", "c", "indptr", "indices", "m", "n", "nnz")],
           validate=False)
    with pytest.raises(ArgumentError, match="'indptr'"):
        kernel(*[args[k] for k in ("a", "b", "c")], args["indptr"].astype(np.int64),
               args["indices"], 12, 9, args["nnz"], validate=False)


def test_tvm_specialize_on_stage2_keeps_every_check(args):
    # TVM's own PrimFunc.specialize removes parameters; the call signature still has the
    # user's names and every index check, with the removed sizes taken from buffer shapes
    mod = sparsetir.lower_sparse_iter(CASES["csrmm"].func)
    params = {p.name: p for p in mod["main"].params}
    mod["main"] = mod["main"].specialize({params["feat_size"]: FEAT, params["n"]: 9})
    kernel = sparsetir.build(mod, "llvm")
    assert [p.name for p in kernel.signature.params] == ["a", "b", "c", "indptr", "indices",
                                                          "m", "nnz"]
    call = [args[k] for k in ("a", "b", "c", "indptr", "indices", "m", "nnz")]
    kernel(*call)
    np.testing.assert_allclose(args["c"], args["expected"], rtol=1e-5, atol=1e-6)
    bad = args["indices"].copy()
    bad[0] = 9                                               # n = 9 was specialised away
    with pytest.raises(ArgumentError, match="indices 'indices'.*out of range"):
        kernel(*call[:4], bad, *call[5:])
