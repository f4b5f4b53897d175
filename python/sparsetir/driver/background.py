"""Compiles in the background: a pool of threads, one per usable core, and kernels made once
however many threads ask for them.

``submit(work)`` runs ``work()`` (e.g. a ``sparsetir.nn`` layer's planned operator calls,
``nn.kernel_plans``) on the pool and returns its future. ``remembered(key, make)`` is the way
``ops`` gets each kernel (``driver.named.remembered``, made single-flight): while one thread
makes a kernel, every other thread that needs it waits for that compile instead of starting
a second one, and a thread needing a kernel nobody is making compiles it itself, so a caller
never waits behind the pool's queue, only for the kernel it needs now. A compile that fails in
the background is kept with its key and raised at the first call that needs the kernel (a later
call compiles it again); any other error of ``work`` is its future's.

Threads, not processes: tvm-ffi releases the GIL inside every call into TVM, so the lowering
passes, LLVM's code generation and object emission and the link (about 60% of a compile,
profiled) run in parallel; the Stage I lowering and schedules are Python and take turns. A
process pool would run those too, but each worker pays ``import sparsetir`` (with TVM and
torch: 3-12 s on the 2-core machine of ``docs/cold-start.md``), more than most first epochs
compile. At exit, work not yet started is cancelled and a compile under way is finished (its
cache entry is whole); a forked child starts with no pool and no compile under way.

``SPARSETIR_BACKGROUND_COMPILE=0`` turns it off (``enabled()``): nothing is submitted, and
every kernel is compiled by the call that needs it, as before.

Example
-------
>>> from sparsetir.driver import background
>>> future = background.submit(lambda: 6 * 7)      # None when turned off
>>> future is None or future.result() == 42
True
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait

from . import named

ENV = "SPARSETIR_BACKGROUND_COMPILE"
THREAD_PREFIX = "sparsetir-compile"

_LOCK = threading.Lock()
_FLIGHTS: dict = {}
"""Kernel key -> Future while a thread makes the kernel; a failed background compile stays
until a call needing the key raises its error."""
_WORKER = threading.local()
_STATE: dict = {"pool": None, "submitted": []}


def enabled() -> bool:
    """Whether background compiles are on (``$SPARSETIR_BACKGROUND_COMPILE`` is not ``0``,
    ``false``, ``no`` or ``off``)."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def workers() -> int:
    """The pool's size: the cores this process may run on."""
    return max(1, len(os.sched_getaffinity(0)))


def submit(work) -> Future | None:
    """Run ``work()`` on the pool; its future, or None when background compiles are off."""
    if not enabled():
        return None
    with _LOCK:
        if _STATE["pool"] is None:
            _STATE["pool"] = ThreadPoolExecutor(workers(), thread_name_prefix=THREAD_PREFIX)
        future = _STATE["pool"].submit(_run, work)
        _STATE["submitted"] = [f for f in _STATE["submitted"] if not f.done()] + [future]
    return future


def drain() -> None:
    """Wait for everything submitted so far to finish (failures stay with their kernels)."""
    with _LOCK:
        pending = list(_STATE["submitted"])
    wait(pending)


def remembered(key: tuple, make):
    """``driver.named.remembered(key, make)``, with ``make`` run by one thread at a time per
    ``key``: the others wait for its kernel (or its error)."""
    return named.remembered(key, lambda: _made_once(key, make))


def _made_once(key: tuple, make):
    with _LOCK:
        flight = _FLIGHTS.get(key)
        owner = flight is None
        if owner:
            flight = _FLIGHTS[key] = Future()
    if not owner:
        try:
            return flight.result()
        except BaseException:
            _land(key, flight)         # raised here once: a later call compiles again
            raise
    try:
        kernel = make()
    except BaseException as error:
        flight.set_exception(error)
        if getattr(_WORKER, "active", False):
            _WORKER.failed = error     # kept for the call that needs the kernel
        else:
            _land(key, flight)         # raised to this caller
        raise
    flight.set_result(kernel)
    _land(key, flight)
    return kernel


def _land(key: tuple, flight: Future) -> None:
    with _LOCK:
        if _FLIGHTS.get(key) is flight:
            del _FLIGHTS[key]


def held_by_kernel(error: BaseException) -> bool:
    """Whether ``error``, raised on this pool thread, is a kernel's failed compile, kept for
    the call that needs the kernel."""
    return error is getattr(_WORKER, "failed", None)


def _run(work):
    """``work()`` on a pool thread."""
    _WORKER.active, _WORKER.failed = True, None
    try:
        return work()
    finally:
        _WORKER.active, _WORKER.failed = False, None


def _cancel_queued() -> None:
    """At exit: drop the work not yet started (a compile under way finishes)."""
    pool = _STATE["pool"]
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def _forget_in_child() -> None:
    """In a forked child: no pool thread exists, so no compile is under way."""
    global _LOCK  # pylint: disable=global-statement
    _LOCK = threading.Lock()
    _FLIGHTS.clear()
    _STATE.update(pool=None, submitted=[])


# threading's exit hooks run before it joins the pool's threads (atexit would run after)
getattr(threading, "_register_atexit", lambda hook: None)(_cancel_queued)
os.register_at_fork(after_in_child=_forget_in_child)
