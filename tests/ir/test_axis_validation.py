"""Stage I axes validate when built: a typo in a kind or a missing field fails at once, and
consistent fields of each kind build the axis the helper functions build."""

import pytest
import tvm
from tvm import tirx

from sparsetir.ir.axis import (Axis, dense_fixed, dense_variable, sparse_fixed,
                               sparse_variable)

M = tirx.Var("m", "int32")
NNZ = tirx.Var("nnz", "int32")
WIDTH = tirx.Var("width", "int32")
HANDLE = tirx.Var("indptr", "handle")
INDICES = tirx.Var("indices", "handle")
PARENT = dense_fixed("I", M)


def _fields(**changes) -> dict:
    """The fields of a valid dense_fixed axis J, with ``changes``."""
    fields = dict(name="J", kind="dense_fixed", parent=None, length=M, nnz=None, nnz_cols=None,
                  indptr=None, indices=None, idtype="int32", sorted=True)
    fields.update(changes)
    return fields


@pytest.mark.parametrize("kwargs,message", [
    ({"kind": "dense_fixd"}, "unknown kind 'dense_fixd'"),
    ({"idtype": "int16"}, "idtype must be int32 or int64"),
    ({"kind": "sparse_variable"}, "needs a parent"),
    ({"parent": PARENT}, "has no parent"),
    ({"kind": "dense_variable", "parent": PARENT}, "needs indptr"),
    ({"kind": "sparse_variable", "parent": PARENT, "indptr": HANDLE, "nnz": M}, "needs indices"),
])
def test_inconsistent_axis_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Axis(*_fields(**kwargs).values())


# each kind with exactly the fields it needs, and the helper that builds it
VALID = {
    "dense_fixed": ({}, lambda: dense_fixed("J", M)),
    "dense_variable": ({"parent": PARENT, "nnz": NNZ, "indptr": HANDLE},
                       lambda: dense_variable("J", PARENT, M, NNZ, HANDLE)),
    "sparse_fixed": ({"parent": PARENT, "nnz_cols": WIDTH, "indices": INDICES, "sorted": False},
                     lambda: sparse_fixed("J", PARENT, M, WIDTH, INDICES, sorted=False)),
    "sparse_variable": ({"parent": PARENT, "nnz": NNZ, "indptr": HANDLE, "indices": INDICES,
                         "idtype": "int64"},
                        lambda: sparse_variable("J", PARENT, M, NNZ, HANDLE, INDICES, "int64")),
}


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_axis_is_built(kind):
    """The base fields of the refusals above with one kind's needs build an axis that keeps
    every field as given, and equal to the helper's axis of that kind (so each refusal above
    comes from its one change)."""
    changes, helper = VALID[kind]
    fields = _fields(kind=kind, **changes)
    axis = Axis(*fields.values())
    for name, value in fields.items():
        kept = getattr(axis, name)
        if isinstance(value, (str, bool)) or value is None:
            assert kept == value, name
        else:
            assert kept.same_as(value), name
    assert (axis.is_sparse, axis.is_variable) == (kind.startswith("sparse"),
                                                  kind.endswith("variable"))
    tvm.ir.assert_structural_equal(axis, helper())
