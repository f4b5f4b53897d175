"""Atomic adds for CPU kernels: ``src/cpu_atomics/cpu_atomics.c``, called as extern functions.

TVM 0.27's CPU backend has no atomic add ("CPU backend does not support atomic add yet").
``transform.atomic`` therefore turns each accumulation of an ``"atomic"`` block that runs
under a parallel loop into ``T.call_extern("int32", "sparsetir_atomic_add_float32",
T.address_of(X[e]), v)``; the C source implements them (a compare-and-swap loop for floats).
``load_cpu_atomics`` builds it with gcc once (``native.build_shared``, disk cache) and loads it
into the process with its symbols global, so that the compiled kernel, JIT-compiled or loaded
from the kernel cache, finds them. ``compile_module`` and the kernel cache call it for every
module that ``uses_cpu_atomics``.

Example
-------
>>> # if uses_cpu_atomics(mod): load_cpu_atomics()
>>> # tvm.compile(mod, "llvm")
"""

from __future__ import annotations

import ctypes
import functools

import tvm
import tvm_ffi
from tvm import tirx

from ..transform.atomic import CPU_ATOMIC_PREFIX
from .native import build_shared

def uses_cpu_atomics(mod: tvm.IRModule) -> bool:
    """Whether a function of ``mod`` calls one of the atomic adds."""
    extern = tvm.ir.Op.get("tirx.call_extern")
    found = []

    def on_call(call):
        if call.op.same_as(extern) and isinstance(call.args[0], tvm.ir.StringImm) \
                and str(call.args[0].value).startswith(CPU_ATOMIC_PREFIX):
            found.append(call)

    for func in mod.functions.values():
        if isinstance(func, tirx.PrimFunc):
            tvm_ffi.structural_walk(func.body, (tvm.ir.Call, on_call), order="pre")
    return bool(found)


@functools.lru_cache(maxsize=1)
def load_cpu_atomics() -> str:
    """Build (once per machine) and load (once per process) the atomic adds with global
    symbols; return the library's path."""
    path = build_shared("cpu_atomics.c")
    ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    return str(path)
