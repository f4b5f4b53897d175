"""Small scratch buffers of CPU kernels live on the stack, where a failing check cannot leak them.

On the CPU, TVM 0.27 turns a ``"local"`` allocation into a ``TVMBackendAllocWorkspace`` call
and a ``TVMBackendFreeWorkspace`` call after its last use; an assertion that fails between the
two returns from the function before the free, and the thread's workspace pool keeps the
memory for good (about 4 KB per refused call of a kernel with a binary search, whose
``int32[2]`` search state is such a buffer). A ``"global"`` allocation of constant size under
TVM's stack limit (1 KB) becomes a stack array instead, which the early return releases. This
pass (run by the ``sparsetir`` pipeline once blocks are lowered) gives every constant-size
``"local"`` allocation under that limit in a function compiled for ``llvm`` the ``"global"``
scope; on CUDA ``"local"`` means registers, and nothing changes.

Example
-------
The search state of SDDMM's fused loop, in a function compiled for llvm:

>>> import sparsetir, tvm
>>> from sparsetir.ops.kernels import sddmm_fused
>>> from sparsetir.transform.pipeline import stage3_passes
>>> from sparsetir.backend.pipeline import lower_blocks
>>> stage2 = sparsetir.lower_sparse_iter(sddmm_fused.specialize({"feat_size": 16}))
>>> func = lower_blocks(stage3_passes("llvm")(stage2))["main"]
>>> mod = tvm.IRModule({"main": func.with_attr("target", tvm.target.Target("llvm"))})
>>> def state(m):
...     return [line.strip().split(", annotations")[0] for line in m.script().splitlines()
...             if "_state = " in line]
>>> state(mod)
['J_indptr_pos_state = T.alloc_local((2,), "int32"']
>>> state(stack_scratch(mod))                    # a stack array
['J_indptr_pos_state = T.alloc_buffer((2,), "int32")']
"""

from __future__ import annotations

import math

import tvm_ffi
from tvm import tirx

from ..ir.utils import retarget_buffers

STACK_LIMIT = 1024
"""Bytes under which TVM 0.27 puts a constant-size CPU allocation on the stack
(``runtime::kMaxStackAlloca``)."""


@tirx.transform.prim_func_pass(opt_level=0, name="sparsetir.StackScratch")
def stack_scratch(func, _mod, _ctx):
    """The pass (see the module docstring)."""
    target = func.attrs.get("target") if func.attrs is not None else None
    if target is None or str(target.kind.name) != "llvm":
        return func
    found = []
    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, lambda node: found.append(node.buffer)
                                        if _small_local(node.buffer) else None), order="pre")
    if not found:
        return func
    mapping = {old: tirx.decl_buffer(old.shape, old.dtype, old.name, scope="global")
               for old in found}

    def on_alloc(node):
        return tirx.AllocBuffer(mapping[node.buffer]) if node.buffer in mapping else node

    return func.with_body(retarget_buffers(func.body, mapping, [(tirx.AllocBuffer, on_alloc)]))


def _small_local(buffer) -> bool:
    """Whether ``buffer`` is a ``"local"`` buffer of constant size under ``STACK_LIMIT``."""
    if buffer.scope() != "local" or not all(isinstance(d, tirx.IntImm) for d in buffer.shape):
        return False
    return math.prod(int(d) for d in buffer.shape) * buffer.dtype.itemsize < STACK_LIMIT
