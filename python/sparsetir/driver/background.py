"""Compiles in the background: worker processes, one per usable core but the caller's, that compile
into the disk cache while this process goes on, and a caller that waits only for the kernel
it needs now.

``submit(work, *args)`` runs ``work(*args)`` (a module-level function and picklable arguments:
a ``sparsetir.nn`` layer's planned operator calls, ``nn.kernel_plans``) in a worker
(``driver.compile_worker``). Each kernel a worker starts, finishes or fails to compile is
reported to this process (a kernel is known by its ``ops`` key); ``remembered(key, make)``,
the way ``ops`` gets each kernel (``driver.named.remembered``), waits for a kernel a worker is
compiling and then loads it from the disk cache instead of compiling it a second time, and
compiles here any kernel no worker has started, so a caller never waits behind the queue. A
compile that fails in a worker is raised at the first call here that needs the kernel (once: a
later call compiles it again); a worker that dies leaves its kernels to their callers. The
workers' compile records (``driver.compile_log``) are logged here, so ``SPARSETIR_LOG`` and
``sparsetir.warmup``'s progress show them.

Processes, not threads: tvm-ffi releases the GIL at every call into TVM, and the lowering and
scheduling make thousands of small calls from Python; with compiles on threads each such call
waited for the GIL (up to the 5 ms switch interval): two GCN kernels took 6.6-7.4 s of compile
instead of 0.7-1.3 s (``docs/cold-start.md``). A worker is a ``python -m
sparsetir.driver.compile_worker`` started when the first job comes (it imports sparsetir
once, and never the caller's script), fed jobs through a pipe, restarted when the job's
``SPARSETIR_*``/``TVM_*`` environment differs from its own. At exit, jobs not started are
dropped, each worker finishes the job under way (its cache entries are whole) and is waited
for: no process is left behind. With no usable disk cache nothing is submitted.

It is on where the process may use at least ``AUTO_CORES`` (4) cores: on the 2-core machine
of ``docs/cold-start.md`` one worker's import and compiles, competing with the caller for the
cores, made fresh first epochs slower. ``SPARSETIR_BACKGROUND_COMPILE=1`` turns it on and ``0``
off (``enabled()``); off, nothing is submitted and every kernel is compiled by the call that
needs it, as before. A forked child starts with no worker and no compile under way.

Example
-------
>>> from sparsetir.driver import background
>>> future = background.submit(pow, 6, 2)       # None when turned off
>>> future is None or future.result() == 36
True
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import threading
from concurrent.futures import Future, wait
from pathlib import Path

from ..backend import cache_folder
from . import cache, named

ENV = "SPARSETIR_BACKGROUND_COMPILE"
_PASSED = ("SPARSETIR_", "TVM_")
"""The environment variables a job carries to its worker."""
_LOCK = threading.Lock()
_FLIGHTS: dict = {}
"""Kernel key -> Future while a worker compiles it; a failed compile stays until a call needing
the key raises its error."""
_JOBS: queue.Queue = queue.Queue()
_STATE: dict = {"drivers": [], "workers": [], "submitted": [], "closing": False}
_WORKER: dict = {"report": None}
"""In a worker: ``report(message)`` sends a message to the parent."""


AUTO_CORES = 4
"""Unless ``$SPARSETIR_BACKGROUND_COMPILE`` says, background compiles are on with this many
usable cores or more: on 2 cores they made first epochs slower (``docs/cold-start.md``)."""


def enabled() -> bool:
    """Whether background compiles are on: ``$SPARSETIR_BACKGROUND_COMPILE`` ``1`` (or
    ``true``, ``yes``, ``on``) or ``0`` (``false``, ``no``, ``off``); unset or ``auto``: with
    at least ``AUTO_CORES`` usable cores."""
    value = os.environ.get(ENV, "auto").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    return len(os.sched_getaffinity(0)) >= AUTO_CORES


def workers() -> int:
    """The most workers at a time: the cores this process may run on but one, which the
    caller keeps (it compiles any kernel no worker has started), and at least one."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


def compiling() -> list:
    """The keys of the kernels workers are compiling now (or failed to, until a call
    needing one raises the error)."""
    with _LOCK:
        return list(_FLIGHTS)


def submit(work, *args) -> Future | None:
    """Run ``work(*args)`` in a worker process; its future, or None when background compiles
    are off or the disk cache (where workers leave their kernels) cannot be used."""
    if not enabled() or _WORKER["report"] is not None or _STATE["closing"] or \
            cache_folder.folder(cache.NAMES) is None:
        return None
    environment = {name: value for name, value in os.environ.items()
                   if name.startswith(_PASSED)}
    future = Future()
    with _LOCK:
        if not _STATE["drivers"]:
            for number in range(workers()):
                driver = threading.Thread(target=_drive, name=f"sparsetir-compile-{number}",
                                          daemon=True)
                _STATE["drivers"].append(driver)
                driver.start()
        _STATE["submitted"] = [f for f in _STATE["submitted"] if not f.done()] + [future]
    _JOBS.put((future, environment, work, args))
    return future


def drain() -> None:
    """Wait for everything submitted so far."""
    with _LOCK:
        pending = list(_STATE["submitted"])
    wait(pending)


def remembered(key: tuple, make):
    """``driver.named.remembered(key, make)``; a kernel a worker is compiling is waited for and
    loaded from the disk cache (or its error raised) instead of compiled here."""
    return named.remembered(key, lambda: _made_here_or_there(key, make))


def held_by_kernel(error: BaseException) -> bool:
    """In a worker: whether ``error`` is a kernel's failed compile (reported with the kernel)."""
    return error is _WORKER.get("failed")


def _made_here_or_there(key: tuple, make):
    report = _WORKER["report"]
    if report is not None:                      # in a worker: say what it makes
        report(("started", key))
        try:
            kernel = make()
        except Exception as error:
            _WORKER["failed"] = error
            report(("failed", key, pickled_error(error)))
            raise
        report(("made", key))
        return kernel
    with _LOCK:
        flight = _FLIGHTS.get(key)
    if flight is None:
        return make()
    try:
        flight.result()
    finally:
        _land(key, flight)          # raised once: a later call compiles it again
    return make()       # build(cache=True) finds the worker's entry in the disk cache


def _land(key: tuple, flight: Future) -> None:
    with _LOCK:
        if _FLIGHTS.get(key) is flight:
            del _FLIGHTS[key]


def report_to_parent(report) -> None:
    """Make this process a worker whose kernels ``report(message)`` announces
    (``driver.compile_worker``)."""
    _WORKER["report"] = report


def pickled_error(error: BaseException) -> bytes:
    """``error`` pickled, or a RuntimeError naming it where it does not pickle."""
    try:
        return pickle.dumps(error)
    except Exception:  # pylint: disable=broad-exception-caught
        return pickle.dumps(RuntimeError(f"in a background compile: {error!r}"))


# -- this process's side: a driver thread per worker ----------------------------------------

def _drive() -> None:
    """Take jobs one at a time, run each in this driver's worker, and act on its reports."""
    worker = None
    while True:
        job = _JOBS.get()
        if job is None:
            break
        future, environment, work, args = job
        if not future.set_running_or_notify_cancel():
            continue
        try:
            if worker is None or worker.environment != environment or worker.poll() is not None:
                _stop(worker)
                worker = _Worker(environment)
            future.set_result(worker.run(work, args))
        except BaseException as error:  # pylint: disable=broad-exception-caught
            future.set_exception(error)
    _stop(worker)


class _Worker:
    """A ``python -m sparsetir.driver.compile_worker`` process with ``environment``."""

    def __init__(self, environment: dict):
        self.environment = environment
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(_PASSED)}
        env.update(environment)
        env["SPARSETIR_PREBUILT"] = "0"         # it compiles the kernels for this CPU
        package_root = str(Path(__file__).resolve().parents[2])    # holds sparsetir/
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root,
                                                          env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sparsetir.driver.compile_worker"], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        with _LOCK:
            _STATE["workers"].append(self.process)

    def poll(self):
        return self.process.poll()

    def run(self, work, args):
        """``work(*args)`` in the worker: its result, or its error raised."""
        started = set()
        try:
            pickle.dump((work, args), self.process.stdin)
            self.process.stdin.flush()
            while True:
                message = pickle.load(self.process.stdout)
                if message[0] == "ended":
                    ok, value = message[1], pickle.loads(message[2])
                    if not ok:
                        raise value
                    return value
                _act_on(message, started)
        except (EOFError, OSError, pickle.UnpicklingError) as error:
            raise RuntimeError(f"the background compile worker ended: {error!r}") from error
        finally:
            for key in started:        # made, or its worker ended without a word: look on disk
                with _LOCK:
                    flight = _FLIGHTS.get(key)
                if flight is not None and not flight.done():
                    flight.set_result(None)
                    _land(key, flight)


def _act_on(message: tuple, started: set) -> None:
    kind, *rest = message
    if kind == "record":
        level, text, extra = rest
        from .compile_log import LOGGER  # pylint: disable=import-outside-toplevel
        LOGGER.log(level, "%s", text, extra=extra)
        return
    key = rest[0]
    with _LOCK:
        flight = _FLIGHTS.setdefault(key, Future()) if kind == "started" else _FLIGHTS.get(key)
    if kind == "started":
        started.add(key)
    elif flight is not None and not flight.done():
        started.discard(key)
        if kind == "failed":
            flight.set_exception(pickle.loads(rest[1]))     # stays until a call raises it
        else:
            flight.set_result(None)
            _land(key, flight)


def _stop(worker) -> None:
    """End ``worker`` (None: nothing) after its job, and reap it."""
    if worker is None:
        return
    try:
        worker.process.stdin.close()            # it ends when it reads the end of its input
    except OSError:
        pass
    worker.process.wait()
    with _LOCK:
        if worker.process in _STATE["workers"]:
            _STATE["workers"].remove(worker.process)


def _close() -> None:
    """At exit: drop the jobs not started, let each worker finish its job, and reap it."""
    _STATE["closing"] = True
    while True:
        try:
            job = _JOBS.get_nowait()
        except queue.Empty:
            break
        if job is not None:
            job[0].cancel()
    for process in list(_STATE["workers"]):
        try:
            process.stdin.close()
        except OSError:
            pass
    for process in list(_STATE["workers"]):
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _forget_in_child() -> None:
    """In a forked child: no driver thread or worker of the parent's is there."""
    global _LOCK, _JOBS  # pylint: disable=global-statement
    _LOCK, _JOBS = threading.Lock(), queue.Queue()
    _FLIGHTS.clear()
    _STATE.update(drivers=[], workers=[], submitted=[], closing=False)


# threading's exit hooks run before Python finalises (atexit hooks would run later)
getattr(threading, "_register_atexit", lambda hook: None)(_close)
os.register_at_fork(after_in_child=_forget_in_child)
