"""Kernels keep working in a child made by ``os.fork`` (multiprocessing's default on Linux,
torch DataLoader workers).

TVM runs a parallel loop on a pool of worker threads owned by the calling thread. ``fork``
copies that pool but not its threads, so the child's first parallel call would wait forever
for workers that do not exist. TVM's pool cannot be rebuilt in the child either: tearing it
down joins those threads and takes locks they may have held. Instead, right after ``fork``
the child's thread (the only one it has) is told to run parallel loops itself, on one thread,
as TVM does when it has a single core; the copied pool is never touched again. Threads the
child starts later get pools of their own and run in parallel as usual. Importing
``sparsetir.runtime`` registers the handler. (What stays is TVM's: a child of a bare
``os.fork`` that starts threads and then leaves through ``sys.exit`` may abort at exit, when
TVM destroys the copied pool; multiprocessing and DataLoader workers leave with ``os._exit``.)

Example
-------
>>> import functools, multiprocessing, numpy as np, scipy.sparse, sparsetir.ops
>>> A = scipy.sparse.random(50, 40, density=0.1, format="csr", dtype=np.float32)
>>> X = np.ones((4, 40, 16), np.float32)
>>> work = functools.partial(sparsetir.ops.spmm, A)   # work(x) = A @ x
>>> _ = work(X[0])                                   # the parent's pool starts
>>> with multiprocessing.get_context("fork").Pool(2) as pool:
...     results = pool.map(work, X)                  # each child runs its kernels on one thread
>>> all(np.allclose(Y, A @ x, atol=1e-5) for Y, x in zip(results, X))
True
"""
from __future__ import annotations

import ctypes
import os

import tvm

# tvm::runtime::threading::SetMaxConcurrency(int): the calling thread's limit on the threads a
# parallel loop uses (thread-local in TVM 0.27; 1 runs the loop without the pool)
_SET_MAX_CONCURRENCY = "_ZN3tvm7runtime9threading17SetMaxConcurrencyEi"


def _serial_setter():
    """The function limiting the calling thread's parallel loops, or None where this TVM
    build does not export it."""
    try:
        setter = getattr(tvm.base._LOADED_LIBS["tvm_runtime"], _SET_MAX_CONCURRENCY)
    except (AttributeError, KeyError):
        return None
    setter.argtypes = [ctypes.c_int]
    setter.restype = None
    return setter


def _run_serially_in_child(setter=_serial_setter()) -> None:
    """After ``fork``, in the child: parallel loops of this thread run on it alone."""
    if setter is not None:
        setter(1)
    else:        # read by TVM at each launch while no limit was set: one thread everywhere
        os.environ["TVM_NUM_THREADS"] = "1"


os.register_at_fork(after_in_child=_run_serially_in_child)
