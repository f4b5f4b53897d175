"""Each Stage II -> Stage III pass on a small module written by hand: ``pass(before)`` must be
structurally equal to ``expected`` (TVM's style), and ``stage3_passes`` runs them by name."""

import pytest
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from sparsetir import AtomicBlockError, transform

# pylint: disable=missing-class-docstring,missing-function-docstring,invalid-name


def check(pass_, before, expected):
    tvm.ir.assert_structural_equal(pass_(before), expected)


def test_decompose_conditional_inits_moves_an_init_a_row_may_skip():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(indptr: T.Buffer((5,), "int32"), a: T.Buffer((8,), "float32"),
                 y: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.sblock("rows"):
                    vi = T.axis.spatial(4, i)
                    T.reads(indptr[vi:vi + 2], a[indptr[vi]:indptr[vi + 1]])
                    T.writes(y[vi])
                    for j in range(indptr[vi + 1] - indptr[vi]):
                        with T.sblock("sum"):
                            vj = T.axis.reduce(indptr[vi + 1] - indptr[vi], j)
                            T.reads(indptr[vi:vi + 2], a[indptr[vi] + vj])
                            T.writes(y[vi])
                            with T.init():
                                y[vi] = T.float32(0)
                            y[vi] = y[vi] + a[indptr[vi] + vj]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(indptr: T.Buffer((5,), "int32"), a: T.Buffer((8,), "float32"),
                 y: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.sblock("rows"):
                    vi = T.axis.spatial(4, i)
                    T.reads(indptr[vi:vi + 2], a[indptr[vi]:indptr[vi + 1]])
                    T.writes(y[vi])
                    with T.sblock("sum_init"):                  # runs for an empty row too
                        T.reads()
                        T.writes(y[vi])
                        y[vi] = T.float32(0)
                    for j in range(indptr[vi + 1] - indptr[vi]):
                        with T.sblock("sum_update"):
                            vj = T.axis.reduce(indptr[vi + 1] - indptr[vi], j)
                            T.reads(y[vi], indptr[vi:vi + 2], a[indptr[vi] + vj])
                            T.writes(y[vi])
                            y[vi] = y[vi] + a[indptr[vi] + vj]

    check(transform.DecomposeConditionalInits(), Before, Expected)


def test_decompose_conditional_inits_keeps_an_init_that_always_runs():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(a: T.Buffer((4, 2), "float32"), y: T.Buffer((4,), "float32")):
            for i, j in T.grid(4, 2):
                with T.sblock("sum"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        y[vi] = T.float32(0)
                    y[vi] = y[vi] + a[vi, vj]

    check(transform.DecomposeConditionalInits(), Before, Before)


def test_lower_sparse_buffer_flattens_and_records_the_stage2_shapes():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(a: T.handle, b: T.handle, n: T.int32):
            A = T.match_buffer(a, (n, 4), "float32")
            B = T.match_buffer(b, (n, 4), "float32")
            for i, j in T.grid(n, 4):
                with T.sblock("scale"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(a: T.handle, b: T.handle, n: T.int32):
            A = T.match_buffer(a, (n * 4,), "float32", align=4)
            B = T.match_buffer(b, (n * 4,), "float32", align=4)
            with T.sblock("root"):
                T.reads()
                T.writes()
                T.sblock_attr({"sparsetir.stage2_shapes": {"A": [n, 4], "B": [n, 4]}})
                for i, j in T.grid(n, 4):
                    with T.sblock("scale"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        T.reads(A[0:n * 4])                    # flat regions cover the buffer
                        T.writes(B[0:n * 4])
                        B[vi * 4 + vj] = A[vi * 4 + vj] * T.float32(2)

    check(transform.LowerSparseBuffer(), Before, Expected)


def test_horizontal_fuse_merges_marked_parallel_loops_of_one_extent():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32"),
                 c: T.Buffer((8,), "float32")):
            for i in T.parallel(8):
                with T.sblock("first"):
                    vi = T.axis.spatial(8, i)
                    T.sblock_attr({"horizontal_fuse": True})
                    b[vi] = a[vi] + T.float32(1)
            for i in T.parallel(8):
                with T.sblock("second"):
                    vi = T.axis.spatial(8, i)
                    T.sblock_attr({"horizontal_fuse": True})
                    c[vi] = a[vi] * T.float32(2)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32"),
                 c: T.Buffer((8,), "float32")):
            for fused in T.parallel(8):
                with T.sblock("first"):
                    vi = T.axis.spatial(8, fused)
                    T.reads(a[vi])
                    T.writes(b[vi])
                    T.sblock_attr({"horizontal_fuse": True})
                    b[vi] = a[vi] + T.float32(1)
                with T.sblock("second"):
                    vi = T.axis.spatial(8, fused)
                    T.reads(a[vi])
                    T.writes(c[vi])
                    T.sblock_attr({"horizontal_fuse": True})
                    c[vi] = a[vi] * T.float32(2)

    check(transform.HorizontalFuse("llvm"), Before, Expected)


@I.ir_module
class Scatter:
    @T.prim_func(s_tir=True)
    def main(rows: T.Buffer((8,), "int32"), a: T.Buffer((8,), "float32"),
             y: T.Buffer((4,), "float32")):
        for i in range(8):
            with T.sblock("scatter"):
                vi = T.axis.spatial(8, i)
                T.reads(y[rows[vi]], rows[vi], a[vi])
                T.writes(y[rows[vi]])
                T.sblock_attr({"atomic": True})
                y[rows[vi]] = y[rows[vi]] + a[vi]


def test_lower_atomic_blocks_makes_accumulations_atomic_on_cuda():
    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(rows: T.Buffer((8,), "int32"), a: T.Buffer((8,), "float32"),
                 y: T.Buffer((4,), "float32")):
            for i in range(8):
                with T.sblock("scatter"):
                    vi = T.axis.spatial(8, i)
                    T.reads(y[rows[vi]], rows[vi], a[vi])
                    T.writes(y[rows[vi]])
                    T.sblock_attr({"atomic": True})
                    T.cuda.atomic_add(T.address_of(y[rows[vi]]), a[vi])

    check(transform.LowerAtomicBlocks("cuda"), Scatter, Expected)


def test_lower_atomic_blocks_runs_an_atomic_nest_in_parallel_with_extern_adds_on_the_cpu():
    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(rows: T.Buffer((8,), "int32"), a: T.Buffer((8,), "float32"),
                 y: T.Buffer((4,), "float32")):
            for i in T.parallel(8):
                with T.sblock("scatter"):
                    vi = T.axis.spatial(8, i)
                    T.reads(y[rows[vi]], rows[vi], a[vi])
                    T.writes(y[rows[vi]])
                    T.sblock_attr({"atomic": True})
                    T.call_extern("int32", "sparsetir_atomic_add_float32",
                                  T.address_of(y[rows[vi]]), a[vi])

    check(transform.LowerAtomicBlocks("llvm"), Scatter, Expected)


def test_lower_atomic_blocks_keeps_a_nest_serial_when_it_also_stores_plainly():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(rows: T.Buffer((8,), "int32"), a: T.Buffer((8,), "float32"),
                 y: T.Buffer((4,), "float32"), last: T.Buffer((1,), "float32")):
            for i in range(8):
                with T.sblock("scatter"):
                    vi = T.axis.spatial(8, i)
                    T.reads(y[rows[vi]], rows[vi], a[vi])
                    T.writes(y[rows[vi]], last[0])
                    T.sblock_attr({"atomic": True})
                    y[rows[vi]] = y[rows[vi]] + a[vi]
                    last[0] = a[vi]                      # the order of iterations matters

    check(transform.LowerAtomicBlocks("llvm"), Before, Before)    # one thread: as written


def test_lower_atomic_blocks_removes_an_init_that_keeps_the_output():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(a: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
            for i, j in T.grid(8, 2):
                with T.sblock("add"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    T.reads(a[vi])
                    T.writes(y[vi])
                    with T.init():
                        y[vi] = y[vi]
                    y[vi] = y[vi] + a[vi]

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(a: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
            for i, j in T.grid(8, 2):
                with T.sblock("add"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    T.reads(a[vi])
                    T.writes(y[vi])
                    y[vi] = y[vi] + a[vi]

    check(transform.LowerAtomicBlocks("llvm"), Before, Expected)


def test_check_atomic_inits_refuses_an_init_in_an_atomic_block():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(a: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
            for i, j in T.grid(8, 2):
                with T.sblock("add"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    T.sblock_attr({"atomic": True})
                    with T.init():
                        y[vi] = T.float32(0)
                    y[vi] = y[vi] + a[vi]

    check(transform.CheckAtomicInits(), Scatter, Scatter)
    with pytest.raises(AtomicBlockError, match="block add is annotated atomic but has a T.init"):
        transform.CheckAtomicInits()(Before)


@I.ir_module
class Checked:
    @T.prim_func(s_tir=True)
    def main(idx: T.Buffer((8,), "int32"), a: T.Buffer((4,), "float32"),
             y: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("gather"):
                vi = T.axis.spatial(8, i)
                T.reads(idx[vi], a[idx[vi]])
                T.writes(y[vi])
                assert 0 <= idx[vi] and idx[vi] < 4, "idx out of range"
                y[vi] = a[idx[vi]]


def test_lower_device_checks_traps_on_cuda_and_keeps_assertions_on_the_cpu():
    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(idx: T.Buffer((8,), "int32"), a: T.Buffer((4,), "float32"),
                 y: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.sblock("gather"):
                    vi = T.axis.spatial(8, i)
                    T.reads(idx[vi], a[idx[vi]])
                    T.writes(y[vi])
                    if not (0 <= idx[vi] and idx[vi] < 4):
                        T.call_extern("int32", "__trap")
                    y[vi] = a[idx[vi]]

    check(transform.LowerDeviceChecks("cuda"), Checked, Expected)
    check(transform.LowerDeviceChecks("llvm"), Checked, Checked)


@tvm.instrument.pass_instrument
class PassNames:
    def __init__(self):
        self.names = []

    def run_before_pass(self, _mod, info):
        self.names.append(info.name)


@pytest.mark.parametrize("kind", ["llvm", "cuda"])
def test_stage3_passes_run_in_order_by_name(kind):
    names = PassNames()
    with tvm.transform.PassContext(instruments=[names]):
        transform.stage3_passes(kind)(Scatter)
    expected = ["sparsetir.CheckAtomicInits", "sparsetir.DecomposeConditionalInits",
                "sparsetir.LowerSparseBuffer", "sparsetir.HorizontalFuse",   # asked or attribute
                "sparsetir.LowerAtomicBlocks", "sparsetir.LowerDeviceChecks"]
    assert [n for n in names.names if n != "sparsetir.Stage2ToStage3"] == expected


def test_lower_sparse_buffer_is_the_two_passes():
    module = Checked
    tvm.ir.assert_structural_equal(
        transform.lower_sparse_buffer(module),
        transform.LowerSparseBuffer()(transform.DecomposeConditionalInits()(module)))
    with pytest.raises(TypeError, match="lower_sparse_buffer expects an IRModule"):
        transform.lower_sparse_buffer(module["main"])
