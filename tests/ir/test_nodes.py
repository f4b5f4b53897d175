"""Stage I nodes: validated when built and when changed with ``replace``, frozen otherwise,
built with keywords everywhere in the package, and compared without the function's name."""

import ast
from pathlib import Path

import pytest
import tvm
import tvm_ffi
import tvm_ffi.dataclasses
from tvm import tirx

from sparsetir.ir import (
    AttachedAxis,
    BufferDomain,
    FusedAxis,
    SparseBuffer,
    SparseFunction,
    SparseIteration,
    SpIterVar,
    check_fused_group,
    dense_fixed,
    replace,
    sparse_variable,
)
from sparsetir.ir.node import NODE_TYPES
from sparsetir.script import from_source

M, N, NNZ = (tirx.Var(s, "int32") for s in ("m", "n", "nnz"))
INDPTR, INDICES, A = (tirx.Var(s, "handle") for s in ("indptr", "indices", "a"))
I = dense_fixed("I", M)
J = sparse_variable("J", I, N, NNZ, INDPTR, INDICES)
K = dense_fixed("K", 8)
BUF = SparseBuffer.create("A", [I, J], "float32", handle=A)


def _var(name, axis, reduction=False, fused=None):
    return SpIterVar(var=tirx.Var(name, "int32"), axis=axis, is_reduction=reduction, fused=fused)


def _iteration(sp_iter_vars, name="it"):
    return SparseIteration(name=name, sp_iter_vars=sp_iter_vars, body=[], init=None,
                           annotations={})


def _function(**changes):
    fields = dict(name="f", params=[A, INDPTR, INDICES, M, N, NNZ], axes=[I, J], buffers=[BUF],
                  body=[], attrs={})
    fields.update(changes)
    return SparseFunction(**fields)


# ----------------------------------------------------------------------------------------------
# replace


def test_replace_changes_the_named_fields_of_a_copy():
    renamed = replace(J, name="J2", sorted=False)
    assert (renamed.name, renamed.sorted, renamed.kind) == ("J2", False, "sparse_variable")
    assert renamed.parent.same_as(I) and renamed.indptr.same_as(INDPTR)
    assert (J.name, J.sorted) == ("J", True)


def test_replace_runs_the_validators():
    with pytest.raises(ValueError, match="a sparse_variable axis needs indices"):
        replace(J, indices=None)
    with pytest.raises(ValueError, match="fused axes .*not a parent chain"):
        replace(FusedAxis(group=[I, J]), group=[I, K])


def test_replace_refuses_an_unknown_field_by_name():
    with pytest.raises(TypeError, match="Axis has no field 'lenght'; its fields are name, kind"):
        replace(I, lenght=4)


def test_replace_refuses_what_is_not_a_stage_i_node():
    with pytest.raises(TypeError, match="replace takes a Stage I node .*got Var"):
        replace(M, name="x")


def test_library_replace_validates_too():
    """``tvm_ffi.dataclasses.replace`` (and ``copy.replace`` from Python 3.13) call
    ``__replace__``, which is ``replace``: they cannot skip the validators either."""
    with pytest.raises(ValueError, match="unknown kind 'dense_fixd'"):
        tvm_ffi.dataclasses.replace(I, kind="dense_fixd")
    assert tvm_ffi.dataclasses.replace(I, name="I3").name == "I3"


@pytest.mark.parametrize("node", [I, FusedAxis(group=[I, J]), AttachedAxis(axis=J, new_parent=K),
                                  BUF, _var("i", I), _iteration([]), _function()])
def test_nodes_cannot_be_changed_in_place(node):
    """Changing a field in place would skip the validators; replace() makes a new node."""
    name = tvm_ffi.dataclasses.fields(node)[0].name
    with pytest.raises(AttributeError):
        setattr(node, name, getattr(node, name))


def test_every_node_class_is_registered():
    assert {cls.__name__ for cls in NODE_TYPES} == {
        "Axis", "FusedAxis", "AttachedAxis", "SparseBuffer", "BufferDomain", "SpIterVar",
        "SparseIteration", "SparseFunction", "Merge", "CoiteratedAxis"}


def test_the_package_builds_nodes_with_keywords_only():
    """A positional constructor call silently shifts its arguments when a field is added."""
    package = Path(__file__).resolve().parents[2] / "python" / "sparsetir"
    names = {cls.__name__ for cls in NODE_TYPES}
    positional = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and node.args and (
                    getattr(node.func, "id", None) in names
                    or getattr(node.func, "attr", None) in names):
                positional.append(f"{path.relative_to(package)}:{node.lineno}")
    assert not positional, f"positional construction of a Stage I node at {positional}"


# ----------------------------------------------------------------------------------------------
# validators of each node


def test_fused_group_rule():
    check_fused_group([I, J])
    check_fused_group([I, J], [True, True])
    for axes, reductions, message in [
            ([I], None, r"fused axes \(I\): fuse at least two axes"),
            ([J, K], None, "must start at an axis without parent, not J"),
            ([I, K], None, r"not a parent chain \(K's parent is none, not I\)"),
            ([I, J], [False, True], "must all be spatial or all be reductions")]:
        with pytest.raises(ValueError, match=message):
            check_fused_group(axes, reductions)
    with pytest.raises(TypeError, match="int 3 is not an axis"):
        check_fused_group([I, 3])


def test_attached_axis_needs_a_dense_parent():
    assert AttachedAxis(axis=J, new_parent=K).axis.same_as(J)
    with pytest.raises(ValueError, match="attached axis I: it must have a dense parent"):
        AttachedAxis(axis=I, new_parent=K)


def test_buffer_view_must_match_its_axes():
    with pytest.raises(ValueError, match=r"buffer A: its view is float32 \[m, n\], not "
                                         r"float32 \[m, 8\] .*SparseBuffer.create"):
        replace(BUF, axes=[I, K])
    with pytest.raises(ValueError, match="its view is float32 .*not float16"):
        replace(BUF, dtype="float16")


def test_buffer_handle_and_default_are_checked():
    with pytest.raises(TypeError, match="buffer A: its handle must be a T.handle variable"):
        replace(BUF, handle=M)
    with pytest.raises(TypeError, match="buffer A: default value 1 is int32, not float32"):
        replace(BUF, default_value=tirx.const(1, "int32"))


def test_iteration_variable_must_belong_to_its_fused_group():
    with pytest.raises(ValueError, match=r"its axis K is not one of the fused axes \('I', 'J'\)"):
        _var("k", K, fused=FusedAxis(group=[I, J]))
    with pytest.raises(TypeError, match="is not an axis or T.attach"):
        SpIterVar(var=tirx.Var("b", "int32"), axis=BUF, is_reduction=False, fused=None)


def test_fused_variables_form_one_run_of_one_kind():
    group = FusedAxis(group=[I, J])
    i, j, k = _var("i", I, fused=group), _var("j", J, fused=group), _var("k", K)
    assert [[v.var.name for v in loop] for loop in _iteration([i, j, k]).loops] == [["i", "j"],
                                                                                   ["k"]]
    with pytest.raises(ValueError, match=r"T.fuse\(I, J\) must iterate its axes together"):
        _iteration([i, k, j])
    with pytest.raises(ValueError, match=r"T.fuse\(I, J\) must iterate its axes together"):
        _iteration([j, i, k])
    with pytest.raises(ValueError, match="sparse iteration it: fused axes .*all be spatial"):
        _iteration([i, _var("j", J, reduction=True, fused=group)])


def test_iteration_binds_each_variable_once():
    i = _var("i", I)
    with pytest.raises(ValueError, match="sparse iteration it: variable i is bound twice"):
        _iteration([i, i])


@pytest.mark.parametrize("changes,error,message", [
    ({"axes": [I, J, replace(K, name="J")]}, ValueError, "function f: axis J is declared twice"),
    ({"buffers": [BUF, BUF]}, ValueError, "sparse buffer A is declared twice"),
    ({"params": [A, A]}, ValueError, "parameter a is declared twice"),
    ({"axes": [J]}, ValueError, "axis J uses axis I, which the function does not declare"),
    ({"axes": [I]}, ValueError, "sparse buffer A uses axis J, which the function does not "),
    ({"body": [tirx.Evaluate(0)]}, TypeError, "a body item must be a SparseIteration or a "
                                               "BufferDomain, got Evaluate"),
    ({"axes": [I, J, BUF]}, TypeError, "is not an axis"),
])
def test_function_declarations_are_checked(changes, error, message):
    with pytest.raises(error, match=message):
        _function(**changes)


def test_a_valid_function_is_built():
    domain = BufferDomain(buffer=BUF, min=tirx.const(0, "int32"), max=M)
    func = _function(body=[domain, _iteration([_var("i", I), _var("j", J, reduction=True)])])
    assert func.body[1].kinds == "SR"


# ----------------------------------------------------------------------------------------------
# structural equality


KERNEL = """
@T.prim_func
def {name}(a: T.handle, b: T.handle, indptr: T.handle, indices: T.handle, m: T.int32,
           n: T.int32, nnz: T.int32):
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    B = T.match_sparse_buffer(b, (I,), "float32")
    with T.sp_iter([I, J], "SR", "{iteration}") as [i, j]:
        with T.init():
            B[i] = T.float32(0)
        B[i] = B[i] + A[i, j]
"""


def test_structural_equality_ignores_the_function_name():
    """A transform's result equals the expected kernel whatever that kernel is called."""
    rows = from_source(KERNEL.format(name="row_sum", iteration="sum"))
    assert tvm_ffi.structural_equal(rows, from_source(KERNEL.format(name="expected",
                                                                    iteration="sum")))
    tvm.ir.assert_structural_equal(rows, from_source(KERNEL.format(name="other",
                                                                   iteration="sum")))
    assert tvm_ffi.structural_hash(rows) == tvm_ffi.structural_hash(
        from_source(KERNEL.format(name="other", iteration="sum")))


def test_structural_equality_still_sees_iteration_names():
    """Iteration names become block names after lowering, so they still count."""
    assert not tvm_ffi.structural_equal(from_source(KERNEL.format(name="f", iteration="sum")),
                                        from_source(KERNEL.format(name="f", iteration="rows")))
