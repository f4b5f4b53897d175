"""Default schedules: what ``build`` applies to the loop nests nobody scheduled.

Only nests that are still as ``lower_sparse_iter`` made them (``loop_signature``) are touched,
so a user's ``split``, binding or ``cache_read`` is never overridden. Every primitive runs with
TVM's checks on; a step TVM refuses is skipped, never forced.

CPU: the outermost loop of every nest whose rows are owned (``sparsetir.rows_owned``, set by
``lower_sparse_iter`` when each outer iteration writes its own outputs) runs in parallel; the
innermost loop of a block is vectorised when it is spatial, has a constant extent and is the
last index of every store: split by 16 lanes when 16 divides it, whole when it is at most 64,
else left scalar (a symbolic extent stays scalar, so ``specialize`` the feature size first).

CUDA: every top-level loop nest becomes its own kernel. The outermost loop of an owned nest
goes to ``blockIdx.x`` and the innermost spatial loop of fixed (not data-dependent) extent
that is the last index of its block's stores (features) to ``threadIdx.x``; a nest whose rows
are not owned runs in one thread (a unit loop bound to ``blockIdx.x``). Threads are bound only
when that leaves no race: every access in the nest to a buffer it writes must sit in a
thread-bound block and be indexed last by that block's thread variable, so each thread reads
and writes only its own elements (no reduction crosses threads, no ``__syncthreads`` is
needed). Local buffers (search results) are per thread and do not count. Otherwise the whole
row runs in one thread. A feature loop of symbolic or large extent is split by 32 and its inner
part bound, so launches stay within 1024 threads and all thread loops of a kernel have one
extent (a constant extent up to 1024 is bound as is). An intermediate used by a single nest
becomes ``local``: the row's one thread keeps its own element, which TVM compacts to the region
the row touches (CUDA kernels cannot allocate global memory); such a nest gets no thread
bindings. An intermediate shared by several nests stays global and fails to compile for CUDA.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm as csrmm
>>> mod = sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": 16}))
>>> def loops(m, *kinds):
...     return [line.strip() for line in m.script().splitlines()
...             if any(kind in line for kind in kinds)]
>>> loops(default_schedule(mod).mod, "T.parallel", "T.vectorized")   # rows, features: parallel, vectorised
['for i in T.parallel(m):', 'for k in T.vectorized(16):']
>>> loops(default_schedule(mod, "cuda").mod, "thread_binding")
['for i in T.thread_binding(m, thread="blockIdx.x"):',
 'for k in T.thread_binding(16, thread="threadIdx.x"):']
"""

from __future__ import annotations

import tvm
from tvm import s_tir

from ..lower.loop_signature import untouched_nests
from .cpu import schedule_cpu
from .cuda import schedule_cuda


def default_schedule(mod: tvm.IRModule, target_kind: str = "llvm") -> s_tir.Schedule:
    """Schedule the untouched nests of ``mod["main"]`` for ``target_kind`` ("llvm" or "cuda")."""
    sch = s_tir.Schedule(mod)
    nests = untouched_nests(mod["main"])
    if target_kind == "cuda":
        schedule_cuda(sch, nests)
    else:
        schedule_cpu(sch, nests)
    return sch
