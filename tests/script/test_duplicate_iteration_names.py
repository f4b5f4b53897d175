"""Two sparse iterations with one name are refused (F8): ``sparsetir.Schedule`` and the lowered
block names find an iteration by its name, so ``annotate("same", ...)`` used to rewrite both."""

from __future__ import annotations

import pytest

import sparsetir
from sparsetir.ir.node import replace
from sparsetir.script import SparseScriptError, from_source

HEADER = '''
@T.prim_func
def two(a: T.handle, b: T.handle, n: T.int32):
    I = T.dense_fixed(n)
    A = T.match_sparse_buffer(a, (I,), "float32")
    B = T.match_sparse_buffer(b, (I,), "float32")
'''

SIBLINGS = HEADER + '''
    with T.sp_iter([I], "S", "same") as [i]:
        A[i] = 1.0
    with T.sp_iter([I], "S", "same") as [i]:
        B[i] = 2.0
'''

NESTED = HEADER + '''
    with T.sp_iter([I], "S", "same") as [i]:
        A[i] = 1.0
        with T.sp_iter([I], "S", "same") as [k]:
            B[k] = 2.0
'''


@pytest.mark.parametrize("src", [SIBLINGS, NESTED], ids=["siblings", "nested"])
def test_duplicate_iteration_names_are_refused(src):
    with pytest.raises(SparseScriptError, match=r"function two: sparse iteration same is declared "
                                                r"twice \(sparse iterations 1 and 2 in program"):
        from_source(src)


def test_a_function_built_with_a_repeated_name_is_refused():
    func = from_source(SIBLINGS.replace('"same") as [i]:\n        B', '"other") as [i]:\n        B'))
    assert [it.name for it in func.body] == ["same", "other"]
    with pytest.raises(sparsetir.SparseTIRValueError, match="sparse iteration same is declared "
                                                            "twice"):
        replace(func, body=[func.body[0], replace(func.body[1], name="same")])


def test_distinct_names_are_annotated_one_at_a_time():
    func = from_source(SIBLINGS.replace('"same") as [i]:\n        B', '"other") as [i]:\n        B'))
    sch = sparsetir.Schedule(func)
    sch.annotate(sch.get_sparse_iteration("same"), "note", 1)
    first, second = sch.func.body
    assert dict(first.annotations) == {"note": 1} and dict(second.annotations) == {}
    assert first.body[0].buffer.name == "A" and second.body[0].buffer.name == "B"
