"""``HorizontalFusion`` (SparseTIR's pass, ``transform.function_fusion``) beyond SparseTIR's own
test: a nest with fewer threads than the launch runs under a guard, and what cannot be fused
is refused by name."""

import pytest
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from sparsetir.errors import HorizontalFusionError
from sparsetir.transform import HorizontalFusion

# pylint: disable=missing-class-docstring,missing-function-docstring,invalid-name


def test_a_nest_with_fewer_threads_runs_under_a_guard():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True, private=True)
        def main(a: T.Buffer((256,), "float32"), b: T.Buffer((64,), "float32"),
                 c: T.Buffer((2,), "float32")):
            T.func_attr({"horizontal_fuse": 1})
            for bx in T.thread_binding(4, thread="blockIdx.x"):
                for tx in T.thread_binding(64, thread="threadIdx.x"):
                    with T.sblock("double"):
                        vi = T.axis.spatial(256, bx * 64 + tx)
                        a[vi] = a[vi] * T.float32(2)
            for bx in T.thread_binding(2, thread="blockIdx.x"):
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    with T.sblock("halve"):
                        vi = T.axis.spatial(64, bx * 32 + tx)
                        b[vi] = b[vi] * T.float32(0.5)
            for bx in T.thread_binding(2, thread="blockIdx.x"):
                with T.sblock("one"):
                    vi = T.axis.spatial(2, bx)
                    c[vi] = T.float32(1)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True, private=True)
        def main(a: T.Buffer((256,), "float32"), b: T.Buffer((64,), "float32"),
                 c: T.Buffer((2,), "float32")):
            for bx in T.thread_binding(8, thread="blockIdx.x"):
                for tx in T.thread_binding(64, thread="threadIdx.x"):
                    if bx < 4:
                        with T.sblock("double"):
                            vi = T.axis.spatial(256, bx * 64 + tx)
                            a[vi] = a[vi] * T.float32(2)
                    elif bx < 6:
                        if tx < 32:
                            with T.sblock("halve"):
                                vi = T.axis.spatial(64, (bx - 4) * 32 + tx)
                                b[vi] = b[vi] * T.float32(0.5)
                    elif bx < 8:
                        if tx < 1:
                            with T.sblock("one"):
                                vi = T.axis.spatial(2, bx - 6)
                                c[vi] = T.float32(1)

    tvm.ir.assert_structural_equal(HorizontalFusion()(Before), Expected)


def test_a_narrower_nest_with_a_cross_thread_reduction_is_refused():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(a: T.Buffer((4, 64), "float32"), s: T.Buffer((4,), "float32"),
                 b: T.Buffer((128,), "float32")):
            T.func_attr({"horizontal_fuse": 1})
            for bx in T.thread_binding(4, thread="blockIdx.x"):
                for tx in T.thread_binding(64, thread="threadIdx.x"):
                    with T.sblock("sum"):
                        vi, vk = T.axis.remap("SR", [bx, tx])
                        with T.init():
                            s[vi] = T.float32(0)
                        s[vi] = s[vi] + a[vi, vk]
            for bx in T.thread_binding(1, thread="blockIdx.x"):
                for tx in T.thread_binding(128, thread="threadIdx.x"):
                    with T.sblock("fill"):
                        vi = T.axis.spatial(128, tx)
                        b[vi] = T.float32(0)

    with pytest.raises(HorizontalFusionError, match=r"a nest runs on 64 of the 128 threadIdx.x "
                                                    r"threads and holds a cross-thread reduction"):
        HorizontalFusion()(Before)


def test_a_nest_not_bound_to_block_x_is_refused():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(a: T.Buffer((8,), "float32")):
            T.func_attr({"horizontal_fuse": 1})
            for i in range(8):
                with T.sblock("host"):
                    vi = T.axis.spatial(8, i)
                    a[vi] = T.float32(0)

    with pytest.raises(HorizontalFusionError, match=r"top-level nest 0 is not a loop bound to "
                                                    r"blockIdx.x"):
        HorizontalFusion()(Before)
