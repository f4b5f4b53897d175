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
``transform.atomic``'s CSC SpMV, columns in parallel:

>>> import numpy as np, scipy.sparse, sparsetir
>>> from sparsetir.script import tir as T
>>> from sparsetir.schedule.default import default_schedule
>>> from sparsetir.transform.pipeline import stage3_passes
>>> @T.prim_func
... def spmv_csc(a: T.handle, x: T.handle, y: T.handle, indptr: T.handle, indices: T.handle,
...              m: T.int32, n: T.int32, nnz: T.int32):
...     J = T.dense_fixed(n)
...     I = T.sparse_variable(J, (m, nnz), (indptr, indices), "int32")
...     I_out = T.dense_fixed(m)
...     A = T.match_sparse_buffer(a, (J, I), "float32")
...     X = T.match_sparse_buffer(x, (J,), "float32")
...     Y = T.match_sparse_buffer(y, (I_out,), "float32")
...     with T.sp_iter([I_out], "S", "zero") as [i]:
...         Y[i] = T.float32(0)
...     with T.sp_iter([J, I], "RS", "spmv") as [j, i]:
...         T.sp_iter_attr({"atomic": True})
...         Y[i] = Y[i] + A[j, i] * X[j]
>>> mod = stage3_passes("llvm")(default_schedule(sparsetir.lower_sparse_iter(spmv_csc)).mod)
>>> if uses_cpu_atomics(mod):
...     path = load_cpu_atomics()
>>> [line.strip().split(", T.address_of")[0] for line in mod.script().splitlines()
...  if "atomic_add" in line]
['T.call_extern("int32", "sparsetir_atomic_add_float32"']

``sparsetir.build`` does so itself:

>>> kernel = sparsetir.build(spmv_csc, "llvm", cache=True)
>>> A = scipy.sparse.random(6, 5, density=0.4, format="csc", dtype=np.float32, random_state=0)
>>> x, y = np.arange(5, dtype=np.float32), np.full(6, np.nan, np.float32)
>>> kernel(A.data, x, y, A.indptr, A.indices, 6, 5, A.nnz)
>>> np.allclose(y, A @ x)
True
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
