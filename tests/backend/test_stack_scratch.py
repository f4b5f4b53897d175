"""``sparsetir.StackScratch``: small constant-size ``"local"`` buffers of llvm functions
become ``"global"`` ones (stack arrays, which a failing check cannot leak); others stay."""

import pytest
import tvm
from tvm.script import tirx as T

from sparsetir.backend.stack_scratch import stack_scratch


def _module(shape, scope, target):
    """A function with a scratch buffer of ``shape`` and ``scope``, compiled for ``target``."""
    @T.prim_func
    def func(A: T.Buffer((8,), "int32"), n: T.int32):
        pos = T.alloc_buffer(shape, "int32", scope=scope)
        for i in range(8):
            pos[0] = i
            A[i] = pos[0] + n
    return tvm.tirx.transform.BindTarget(tvm.target.Target(target))(
        tvm.IRModule({"main": func}))


def test_a_small_local_buffer_of_a_cpu_function_goes_on_the_stack():
    after = stack_scratch(_module((2,), "local", "llvm"))
    tvm.ir.assert_structural_equal(after, _module((2,), "global", "llvm"), map_free_vars=True)


@pytest.mark.parametrize("shape, target", [((2,), "cuda"), ((256,), "llvm")])
def test_registers_and_buffers_of_a_kilobyte_stay_local(shape, target):
    before = _module(shape, "local", target)
    tvm.ir.assert_structural_equal(stack_scratch(before), before)
