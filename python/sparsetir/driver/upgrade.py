"""Kernels upgraded in the background: a prebuilt kernel runs at once while the kernel tuned for
this machine's CPU is compiled by a worker thread, then takes its place.

``upgrade_later(kernel, make, what)`` queues ``make()`` (the compile the prebuilt kernel
stood in for: it keeps its result in the disk cache, so later processes load it) and returns
at once; one daemon thread compiles the queue in order, one kernel at a time (most of a
compile is LLVM, which runs without the GIL; the lowering before it is Python and shares the
GIL with the caller), and hands each result to ``kernel.take_code``: calls already running
finish on the old code, the next ones run the new (bound kernels too). A compile that fails
leaves the prebuilt kernel in place and says why (a ``logging`` warning). ``wait()`` blocks
until the queue is done (tests, benchmarks). At exit, kernels still queued are dropped (the
next process finds them prebuilt again) and a compile under way is waited for, so that LLVM is
not torn down under it.

Example
-------
>>> import sparsetir
>>> from sparsetir.ops.kernels import spmm
>>> spmm16 = spmm.specialize({"feat_size": 16})
>>> kernel = sparsetir.build(spmm16, {"kind": "llvm", "mcpu": "x86-64-v3"})  # as if prebuilt
>>> prebuilt_code = kernel.executable
>>> make = lambda: sparsetir.build(spmm16, "llvm", cache=True)     # for this machine's CPU
>>> upgrade_later(kernel, make, "spmm float32 (16,)")
>>> wait()                 # kernel now runs the code compiled for this CPU
>>> kernel.executable is not prebuilt_code
True
"""

from __future__ import annotations

import atexit
import os
import queue
import threading

from . import compile_log

_QUEUE: queue.Queue = queue.Queue()
_STATE = {"worker": None, "stopping": False}
_LOCK = threading.Lock()
_BUSY = threading.Lock()            # held while a compile runs


def upgrade_later(kernel, make, what: str) -> None:
    """Compile ``make()`` in the background and give its code to ``kernel`` when it is ready."""
    with _LOCK:
        if _STATE["stopping"]:
            return
        _QUEUE.put((kernel, make, what))
        if _STATE["worker"] is None:
            _STATE["worker"] = threading.Thread(target=_work, name="sparsetir-upgrade",
                                                daemon=True)
            _STATE["worker"].start()


def wait() -> None:
    """Block until every queued upgrade has been compiled and swapped in (or has failed)."""
    _QUEUE.join()


def _work() -> None:
    while True:
        kernel, make, what = _QUEUE.get()
        try:
            with _BUSY:
                if not _STATE["stopping"]:
                    _upgrade(kernel, make, what)
        finally:
            _QUEUE.task_done()


def _upgrade(kernel, make, what: str) -> None:
    try:
        with compile_log.compiling(what):
            kernel.take_code(make())
    except Exception as err:  # pylint: disable=broad-exception-caught
        compile_log.LOGGER.warning("compiling %s for this CPU failed (%s: %s); its prebuilt "
                                   "kernel stays in use", what, type(err).__name__, err)


def _forget_in_child() -> None:
    """A forked child has no worker thread: it starts its own if it queues anything (what the
    parent had queued stays the parent's)."""
    global _QUEUE, _BUSY  # pylint: disable=global-statement
    _QUEUE, _BUSY = queue.Queue(), threading.Lock()
    _STATE["worker"] = None


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def _stop() -> None:
    with _LOCK:
        _STATE["stopping"] = True
    with _BUSY:                      # the compile under way, if any, ends first
        pass
