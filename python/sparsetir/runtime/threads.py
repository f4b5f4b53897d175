"""One pool of threads in a process that trains with torch: sparsetir's kernels run their
parallel loops on the OpenMP threads torch's operators use, not on a second pool.

Why: a compiled kernel runs a parallel loop on TVM's thread pool, torch runs its operators on
its OpenMP (libgomp) pool, and both keep their threads spinning after each piece of work so
that the next one starts at once (TVM: 300000 ``sched_yield`` calls; libgomp: a busy loop of
the same count, unless ``OMP_WAIT_POLICY=PASSIVE``). A training step alternates between the
two many times, so each pool's threads keep spinning while the other pool works: on 2 cores a
GCN epoch on Cora has three busy threads for two cores, and under a background load five, and
an epoch went from about 2 ms to 15 ms while DGL, whose kernels are OpenMP loops on torch's
pool, stayed at 3.5 ms (``benchmarks/thread_pools.py``). With one pool the two take turns on
the same threads, as DGL's do.

:func:`cooperate_with_torch` (``sparsetir.ops`` calls it before loading their first kernel;
later calls return at once) sets that up:

* It builds ``src/openmp_launch/openmp_launch.c`` (gcc ``-fopenmp``, cached like the other
  helpers), whose launcher runs a kernel's parallel loop as one OpenMP parallel region, and
  registers it with tvm-ffi (``TVMFFIEnvModRegisterContextSymbol``) as the parallel launch and
  barrier of every TVM module loaded in this process from then on; libgomp is the one torch
  loaded (``tvm_ffi`` imports torch), so the threads are torch's. Modules loaded before keep
  TVM's pool; ``sparsetir.ops`` calls this before loading any.
* A launch uses :func:`thread_count` threads (``TVM_NUM_THREADS``, as TVM's pool did), read
  when this runs, except a call whose arrays hold fewer than ``SERIAL_BYTES`` bytes in all
  (:func:`size_launches`, which the call wrappers of ``runtime.kernel`` use): it runs on the
  calling thread, as torch runs a range under its grain size. Such a call takes tens of
  microseconds, less than waking a team costs, and a parallel launch is a point where a call
  waits for every thread of the team: on a loaded machine, for a descheduled one. On a 2-core
  VM beside 2 busy processes, some runs of GCN training on Cora lose a time slice at every
  parallel region of the epoch (whole runs at 184-256 ms per epoch instead of 7-13); its 4
  kernel calls per epoch (0.2-0.4 MiB) running serially took such a run from 216 to 184 ms.
  The rest are torch's own regions, which DGL's runs share: 4 of 20 of ours, 7 of 20 of DGL's.
* Such a run has both threads of the team on one core and both busy processes on the other:
  two runnable threads a core, which the scheduler takes for balanced, so it stays so for the
  whole run, and each thread of the team waits out the other's time slices at every barrier
  (RGCN training on Citeseer: 500 ms an epoch instead of 80-140, in 3 of 8 runs). So a kernel
  call first moves, at most every ``SPREAD_INTERVAL_S`` seconds, the threads of its caller's
  team that share a CPU onto CPUs none of the team is on (:func:`spread_team`), and does not
  bind them: a moved thread's affinity is narrowed to its new CPU for the one system call that
  migrates it and set back at once, so the scheduler stays free to move it. RGCN on Citeseer
  beside 2 busy processes: no run of 12 stalled (2 of 6 before). With ``OMP_PROC_BIND=true``
  in the environment before torch is imported, OpenMP keeps each thread on a core of its own
  (none of 15 runs stalled either), and threads you bind (``OMP_PROC_BIND``, ``OMP_PLACES``,
  ``GOMP_CPU_AFFINITY``) are never moved. Binding is the user's choice, not made here: two
  processes that each bind put their first threads on the same core.
* Nothing else of torch's is changed: its thread count, ``OMP_*`` variables and wait policy
  stay as they are (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``, ``OMP_PROC_BIND`` you set now
  apply to the kernels too). In a child made by ``fork``, the thread that forked runs parallel
  loops on itself alone (its copy of the OpenMP pool has no threads), like ``runtime.fork``
  does for TVM's pool.
* Your settings win: when the environment sets any of TVM's own pool settings
  (``TVM_BIND_THREADS``, ``TVM_THREAD_POOL_SPIN_COUNT``, ``TVM_EXCLUDE_WORKER0``), you chose
  TVM's pool and it is kept as you configured it. Where the launcher cannot be built (no gcc,
  no OpenMP) TVM's pool is kept too.

Example
-------
>>> from sparsetir.runtime.threads import cooperate_with_torch
>>> cooperate_with_torch()
Cooperation(pool='openmp', threads=2, reason='kernels run on the OpenMP threads torch uses')
>>> cooperate_with_torch() is cooperate_with_torch()      # decided once per process
True
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from functools import lru_cache
from typing import NamedTuple

import tvm_ffi.libinfo

from ..backend.native import build_shared

# TVM's pool reads these; one set in the environment means the user configured TVM's pool
TVM_POOL_SETTINGS = ("TVM_BIND_THREADS", "TVM_THREAD_POOL_SPIN_COUNT", "TVM_EXCLUDE_WORKER0")


class Cooperation(NamedTuple):
    """What :func:`cooperate_with_torch` decided: ``pool`` is ``"openmp"`` (kernels run on the
    process's OpenMP threads) or ``"tvm"`` (TVM's own pool, for ``reason``); ``threads``, the
    threads a parallel loop uses."""
    pool: str
    threads: int
    reason: str


SERIAL_BYTES = 1 << 20
"""A call whose arrays hold fewer bytes than this runs its parallel loops on the calling thread."""

SPREAD_INTERVAL_S = 0.1
"""Kernel calls move the team's threads apart (:func:`spread_team`) at most this often."""

_MAIN_THREAD = threading.main_thread()

# set by the user, these bind OpenMP's threads to CPUs: then the team is never moved
BINDING_SETTINGS = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")

_decided: Cooperation | None = None
_lock = threading.Lock()
_launcher = None             # the loaded library: kept alive while modules point into it
_set_serial = None           # its sparsetir_openmp_serial
_this_thread = threading.local()  # .serial: the C flag's copy; .next_spread: see size_launches
_spread = None               # its sparsetir_openmp_spread, unless the user binds threads


def thread_count() -> int:
    """The threads a kernel's parallel loop uses: ``TVM_NUM_THREADS`` when it is a positive
    number (``sparsetir`` sets it to the usable cores unless you set it), else the cores this
    process may use."""
    return _count(os.environ.get("TVM_NUM_THREADS", ""))


@lru_cache(maxsize=None)
def _count(value: str) -> int:
    if value.isascii() and value.isdigit() and int(value) > 0:
        return int(value)
    return len(os.sched_getaffinity(0))


def size_launches(nbytes: int) -> None:
    """Let the calling thread's next kernel launches run on itself when the call's arrays hold
    fewer than ``SERIAL_BYTES`` bytes (``nbytes``), on a team otherwise; nothing changes where
    TVM's pool runs the kernels. Cheap when nothing changes.

    At most every ``SPREAD_INTERVAL_S`` seconds per thread, it first moves the thread's team
    apart (:func:`spread_team`): on a call that runs on a team, or on any call from the main
    thread, whose team is the one torch's operators use; a small call from another thread
    starts no team.

    Example
    -------
    >>> size_launches(4096)          # the next launches from this thread run on it alone
    """
    serial = nbytes < SERIAL_BYTES
    if _set_serial is not None and getattr(_this_thread, "serial", False) != serial:
        _set_serial(serial)
        _this_thread.serial = serial
    if _spread is not None and (not serial or threading.current_thread() is _MAIN_THREAD):
        now = time.monotonic()
        if now >= getattr(_this_thread, "next_spread", 0.0):
            _this_thread.next_spread = now + SPREAD_INTERVAL_S
            _spread()


def spread_team() -> int:
    """Move the threads of the calling thread's OpenMP team that share a CPU with another of
    the team onto CPUs none of it is on, without binding them (the module's docstring says
    why); returns how many moved. Kernel calls do this at most every ``SPREAD_INTERVAL_S``
    seconds (:func:`size_launches`); 0 where TVM's pool runs the kernels, the environment binds
    threads, or in the thread that called ``fork``. On an idle machine it moves a thread too,
    when the thread woke on its caller's CPU (as the scheduler often wakes one): it goes to an
    idle CPU at once instead of when the scheduler next balances.

    Example
    -------
    >>> spread_team() in range(thread_count())
    True
    """
    return _spread() if _spread is not None else 0


def cooperate_with_torch() -> Cooperation:
    """Run kernels' parallel loops on the process's OpenMP threads from now on, unless the
    environment configures TVM's pool (then nothing changes). Decided once per process; the
    decision is returned. Cheap after the first call."""
    global _decided
    if _decided is None:
        with _lock:
            if _decided is None:
                _decided = _decide()
    return _decided


def _decide() -> Cooperation:
    threads = thread_count()
    chosen = [name for name in TVM_POOL_SETTINGS if name in os.environ]
    if chosen:
        return Cooperation("tvm", threads, f"{', '.join(chosen)} set: TVM's pool as configured")
    try:
        _install_openmp_launcher(threads)
    except (RuntimeError, OSError, AttributeError) as err:
        return Cooperation("tvm", threads, f"the OpenMP launcher is unavailable: {err}")
    return Cooperation("openmp", threads, "kernels run on the OpenMP threads torch uses")


def _install_openmp_launcher(threads: int) -> None:
    """Build and load ``openmp_launch.c`` and make it the parallel launch and barrier of TVM
    modules loaded from now on."""
    global _launcher, _set_serial, _spread
    library = ctypes.CDLL(str(build_shared("openmp_launch.c", ["-fopenmp"])))
    ffi = ctypes.CDLL(tvm_ffi.libinfo.find_libtvm_ffi())

    def address(lib, symbol: str) -> int:
        return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value

    library.sparsetir_openmp_setup.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int]
    library.sparsetir_openmp_setup.restype = None
    library.sparsetir_openmp_setup(address(ffi, "TVMFFIErrorMoveFromRaised"),
                                   address(ffi, "TVMFFIErrorSetRaised"),
                                   address(ffi, "TVMFFIObjectDecRef"), threads)
    register = ffi.TVMFFIEnvModRegisterContextSymbol
    register.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    register.restype = ctypes.c_int
    for context_symbol, ours in (("__TVMBackendParallelLaunch", "sparsetir_openmp_launch"),
                                 ("__TVMBackendParallelBarrier", "sparsetir_openmp_barrier")):
        if register(context_symbol.encode(), address(library, ours)) != 0:
            raise RuntimeError(f"tvm-ffi refused to register {context_symbol}")
    library.sparsetir_openmp_serial.argtypes = [ctypes.c_int]
    library.sparsetir_openmp_serial.restype = None
    library.sparsetir_openmp_spread.argtypes = []
    library.sparsetir_openmp_spread.restype = ctypes.c_int
    _launcher = library
    _set_serial = library.sparsetir_openmp_serial
    if not _binds_threads(os.environ):
        _spread = library.sparsetir_openmp_spread


def _binds_threads(environ) -> bool:
    """Whether ``environ`` binds OpenMP's threads to CPUs (``OMP_PROC_BIND=false`` does not)."""
    bind = environ.get("OMP_PROC_BIND", "").strip().lower()
    return (bind not in ("", "false")
            or any(environ.get(name, "").strip() for name in BINDING_SETTINGS[1:]))
