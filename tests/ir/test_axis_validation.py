"""Stage I axes validate when built: a typo in a kind or a missing field fails at once."""

import pytest
from tvm import tirx

from sparsetir.ir.axis import Axis, dense_fixed

M = tirx.Var("m", "int32")
HANDLE = tirx.Var("indptr", "handle")


@pytest.mark.parametrize("kwargs,message", [
    ({"kind": "dense_fixd"}, "unknown kind 'dense_fixd'"),
    ({"idtype": "int16"}, "idtype must be int32 or int64"),
    ({"kind": "sparse_variable"}, "needs a parent"),
    ({"parent": "I"}, "has no parent"),
    ({"kind": "dense_variable", "parent": "I"}, "needs indptr"),
    ({"kind": "sparse_variable", "parent": "I", "indptr": HANDLE, "nnz": M}, "needs indices"),
])
def test_inconsistent_axis_is_refused(kwargs, message):
    fields = dict(name="J", kind="dense_fixed", parent=None, length=M, nnz=None, nnz_cols=None,
                  indptr=None, indices=None, idtype="int32", sorted=True)
    if kwargs.get("parent") == "I":
        kwargs = dict(kwargs, parent=dense_fixed("I", M))
    fields.update(kwargs)
    with pytest.raises(ValueError, match=message):
        Axis(*fields.values())


def test_valid_axis_is_built():
    assert dense_fixed("I", M).kind == "dense_fixed"
