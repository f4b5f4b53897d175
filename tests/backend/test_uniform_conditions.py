"""``mark_uniform_conditions``: a condition on blockIdx variables and scalars only, whose
branch touches shared memory, is marked ``tvm_thread_invariant`` (TVM may then put a
``__syncthreads`` inside it); one that uses a threadIdx variable or reads memory, or guards no
shared memory, is left alone."""

import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from sparsetir.backend.uniform_conditions import mark_uniform_conditions

# pylint: disable=missing-class-docstring,missing-function-docstring,invalid-name


def test_only_shared_memory_branches_every_thread_of_a_block_takes_are_marked():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def main(x: T.Buffer((4,), "float32"), y: T.Buffer((128,), "float32"), n: T.int32):
            for bx in T.thread_binding(4, thread="blockIdx.x"):
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    s = T.alloc_buffer((32,), scope="shared")
                    if bx < n - 2:                          # marked
                        s[tx] = x[bx]
                        y[bx * 32 + tx] = s[31 - tx]
                    if bx < 3:                              # no shared memory
                        y[bx * 32 + tx] = T.float32(1)
                    if tx < 16:                             # threads differ
                        s[tx] = T.float32(2)
                    if x[bx] > T.float32(0):                # reads memory
                        s[tx] = T.float32(3)

    @I.ir_module
    class Expected:
        @T.prim_func(s_tir=True)
        def main(x: T.Buffer((4,), "float32"), y: T.Buffer((128,), "float32"), n: T.int32):
            for bx in T.thread_binding(4, thread="blockIdx.x"):
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    s = T.alloc_buffer((32,), scope="shared")
                    if T.tvm_thread_invariant(bx < n - 2):
                        s[tx] = x[bx]
                        y[bx * 32 + tx] = s[31 - tx]
                    if bx < 3:
                        y[bx * 32 + tx] = T.float32(1)
                    if tx < 16:
                        s[tx] = T.float32(2)
                    if x[bx] > T.float32(0):
                        s[tx] = T.float32(3)

    tvm.ir.assert_structural_equal(mark_uniform_conditions(Before), Expected)
