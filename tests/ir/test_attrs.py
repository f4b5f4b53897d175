"""``ir.attrs`` is the one home of sparsetir's attribute and annotation keys, and the Stage II
metadata it describes are expressions over the function's parameters, not text read back."""

import ast
from pathlib import Path

import tvm
import tvm_ffi
from kernel_zoo import CASES

import sparsetir
from sparsetir.ir import attrs

PACKAGE = Path(sparsetir.__file__).resolve().parent
KEY_SUFFIXES = ("_ATTR", "_KEY", "_ANNOTATION")


def defined_keys() -> dict:
    """Name -> value of every key ``ir.attrs`` defines."""
    return {name: value for name, value in vars(attrs).items()
            if name.endswith(KEY_SUFFIXES) and isinstance(value, str)}


def key_literals(source: str, keys: set) -> list:
    """``(line, text)`` of each string literal in ``source`` that is one of ``keys`` or looks
    like a sparsetir key (``"sparsetir.lower_case"``); names listed in ``__all__`` are not keys."""
    tree = ast.parse(source)
    exported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            exported.update(id(c) for c in ast.walk(node.value))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in exported:
            text = node.value
            looks_like_key = text.startswith("sparsetir.") and text[10:].isidentifier() \
                and text[10:].islower()
            if text in keys or looks_like_key:
                found.append((node.lineno, text))
    return found


def test_no_key_is_written_outside_attrs():
    keys = set(defined_keys().values())
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "ir" / "attrs.py":
            continue
        offenders += [f"{path.relative_to(PACKAGE)}:{line}: {text!r}"
                      for line, text in key_literals(path.read_text(), keys)]
    assert not offenders, "import these keys from sparsetir.ir.attrs:\n" + "\n".join(offenders)


def test_the_check_finds_a_key_literal():
    source = 'X = "sparsetir.first_slots"\ndef f(sch, b):\n    sch.annotate(b, "atomic", 1)\n' \
             '__all__ = ["atomic"]\nsch.annotate(b, "sparsetir.Pass", 1)\n'
    assert key_literals(source, {"atomic"}) == [(1, "sparsetir.first_slots"), (3, "atomic")]


def test_each_key_has_one_name():
    values = list(defined_keys().values())
    assert len(values) == len(set(values)) and len(values) >= 11


def test_metadata_are_expressions_bound_to_the_parameters():
    mod = sparsetir.lower_sparse_iter(CASES["csrmm"].func)
    func = mod["main"]
    params = {p.name: p for p in func.params}
    (check,) = attrs.index_checks(func)
    assert check.nnz.same_as(params["nnz"]) and check.bound.same_as(params["n"])
    assert (check.indptr, check.indices, check.width, check.sorted) == ("indptr", "indices", 0,
                                                                          True)
    assert attrs.param_names(func)["J_indptr"] == "indptr"
    # printed and parsed back: the same module, the sizes still the parameters themselves
    back = tvm.script.from_source(mod.script())
    tvm.ir.assert_structural_equal(mod, back)
    back_params = {p.name: p for p in back["main"].params}
    assert attrs.index_checks(back["main"])[0].nnz.same_as(back_params["nnz"])


def test_specialize_substitutes_the_metadata():
    func = sparsetir.lower_sparse_iter(CASES["csrmm"].func)["main"]
    params = {p.name: p for p in func.params}
    special = func.specialize({params["n"]: 9, params["A"]: tvm.tirx.decl_buffer((40,))})
    (check,) = attrs.index_checks(special)
    assert (int(check.bound), int(check.nnz)) == (9, 40)
    flat = sparsetir.lower_sparse_buffer(tvm.IRModule({"main": special}))["main"]
    shapes = attrs.stage2_shapes(flat)
    assert [str(d) for d in shapes["B"]] == ["9", "feat_size"]
    assert shapes["C"][0].same_as(flat.params[5])                   # m, still a parameter
    assert tvm_ffi.structural_equal(shapes["J_indptr"][0], flat.params[5] + 1)
