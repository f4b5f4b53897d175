"""SparseTIR's ``tests/python/sparsetir/test_lift_loop.py`` (9b3f843), ported.

| SparseTIR test | status |
|---|---|
| test_nested_loop_no_dependency | cannot: ``lift_loop`` is a schedule primitive of SparseTIR's TVM fork; TVM 0.27's ``tvm.s_tir.Schedule`` has none and sparsetir adds no Stage II primitives. Kept as a strict xfail (it fails with ``AttributeError: ... lift_loop``; once a ``lift_loop`` exists it must give SparseTIR's result). Replacement: Stage I ``sparse_reorder`` (``test_stage_i_schedule.py``) or TVM's ``blockize``/``reorder`` on Stage II. |

Renames used: ``from tvm.script import tir as T`` -> ``from tvm.script import tirx as T`` with
``@T.prim_func(s_tir=True)``; ``T.block`` -> ``T.sblock``; ``tvm.tir.Schedule`` ->
``tvm.s_tir.Schedule``; ``sch.get_block`` -> ``sch.get_sblock``; ``verify_trace_roundtrip`` from
``tvm.s_tir.schedule.testing``.
"""
# pylint: disable=missing-function-docstring,missing-module-docstring
import sys

import pytest
import tvm
from tvm.script import tirx as T

# pylint: disable=no-member,invalid-name,unused-variable


@T.prim_func(s_tir=True)
def nested_loop_no_dependency() -> None:
    a = T.alloc_buffer((16, 16), "float32")
    b = T.alloc_buffer((16, 16), "float32")
    for i in T.grid(16):
        with T.sblock("outer"):
            vi = T.axis.spatial(16, i)
            for jo in T.grid(4):
                for ji in T.grid(4):
                    with T.sblock("inner"):
                        vj = T.axis.spatial(16, 4 * jo + ji)
                        a[vi, vj] = b[vi, vj]


@T.prim_func(s_tir=True)
def nested_loop_no_dependency_after_transform() -> None:
    a = T.alloc_buffer([16, 16], dtype="float32")
    b = T.alloc_buffer([16, 16], dtype="float32")
    for i, jo in T.grid(16, 4):
        with T.sblock("outer"):
            vi = T.axis.spatial(16, i)
            v_jo = T.axis.spatial(4, jo)
            T.reads(b[vi, 0:16])
            T.writes(a[vi, 0:16])
            for ji in T.serial(4):
                with T.sblock("inner"):
                    vj = T.axis.spatial(16, 4 * v_jo + ji)
                    T.reads(b[vi, vj])
                    T.writes(a[vi, vj])
                    a[vi, vj] = b[vi, vj]


@pytest.mark.xfail(raises=AttributeError, strict=True,
                   reason="lift_loop is a primitive of SparseTIR's TVM fork, not of TVM 0.27")
def test_nested_loop_no_dependency() -> None:
    from tvm.s_tir.schedule.testing import verify_trace_roundtrip
    sch = tvm.s_tir.Schedule(nested_loop_no_dependency)
    inner = sch.get_sblock("inner")
    jo, ji = sch.get_loops(inner)
    sch.lift_loop(jo)
    tvm.ir.assert_structural_equal(sch.mod["main"], nested_loop_no_dependency_after_transform)
    verify_trace_roundtrip(sch=sch, mod=nested_loop_no_dependency)
