"""A float32 copy in 64-byte lines, on the threads the kernels use: the copy ``ops.alignment``
makes of a gathered operand, so that it costs each thread ``1 / threads`` of the copy.

``line_copy`` is a Stage I kernel over a dense (lines, 16) space, lowered and scheduled by the
default CPU schedule (the loop over lines in parallel, each line's 16 floats one vector) and
compiled once per machine like every ``ops`` kernel (``driver.background.remembered``: kept in
memory and in the disk cache; one kernel serves every shape). Its parallel loop runs where the
other kernels' do (``runtime.threads``): a launch cuts the lines into contiguous blocks, 8 a
thread, taken by the task pool's threads (a copy of less than ``SERIAL_BYTES`` runs on the
calling thread). On one thread it copies at about numpy's speed (2 MiB: 0.14-0.16 ms against
numpy's 0.14; 0.5 MiB: 13 against 10 us, the call's 2-3 us; ``benchmarks/alignment_copy.py``).
It stays a pass of its own before the SDDMM kernel (SpMM's realign ``X``'s rows in registers
instead, ``backend.realign_gathers``): fused into the kernel it would
still be a parallel loop that every thread finishes before any thread gathers, saving only
one call (2-3 us), at the price of a second variant of every kernel.

Example
-------
>>> import numpy as np
>>> source = np.arange(64, dtype=np.float32).reshape(2, 32)
>>> target = np.full_like(source, np.nan)
>>> copy_lines(source, target)
>>> np.array_equal(source, target)
True
"""

from __future__ import annotations

import threading

import numpy as np

from ..driver.background import remembered
from ..driver.build_module import build
from ..errors import SparseTIRTypeError, SparseTIRValueError
from ..schedule.cpu_target import LINE_FLOATS
from ..script import tir as T



@T.prim_func
def line_copy(source: T.handle, target: T.handle, lines: T.int32) -> None:
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    I = T.dense_fixed(lines)
    K = T.dense_fixed(LINE_FLOATS)
    S = T.match_sparse_buffer(source, (I, K), "float32")
    D = T.match_sparse_buffer(target, (I, K), "float32")
    with T.sp_iter([I, K], "SS", "copy") as [i, k]:
        D[i, k] = S[i, k]


_bound: dict = {}               # lines -> the kernel bound for that many (bound once)
_lock = threading.Lock()
_MAX_BOUND = 64                 # shapes kept bound; more and the dict starts again


def line_copy_kernel():
    """The compiled ``line_copy`` (built on first use, then from memory or the disk cache)."""
    return remembered(("ops", "line_copy", "float32"),
                      lambda: build(line_copy, "llvm", schedule="auto", cache=True))


def copy_lines(source: np.ndarray, target: np.ndarray) -> None:
    """Copy the C-contiguous float32 numpy array ``source`` into ``target`` (the same size,
    C-contiguous, not overlapping it), whose size must be a whole number of ``LINE_FLOATS``,
    in parallel (see the module docstring)."""
    if source.size != target.size or source.size % LINE_FLOATS:
        raise SparseTIRValueError(
            f"copy_lines copies whole lines of {LINE_FLOATS} floats between arrays of one "
            f"size; got sizes {source.size} and {target.size}")
    if type(target) is not np.ndarray or not target.flags.c_contiguous:
        raise SparseTIRTypeError("copy_lines writes into target in place: pass a "
                                 "C-contiguous numpy array")
    lines = source.size // LINE_FLOATS
    bound = _bound.get(lines)
    if bound is None:
        bound = line_copy_kernel().bind(lines=lines)
        with _lock:
            if len(_bound) >= _MAX_BOUND:
                _bound.clear()
            _bound[lines] = bound
    bound(source.reshape(-1), target.reshape(-1))
