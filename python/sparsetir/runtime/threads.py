"""Where kernels' parallel loops run: a small pool of sparsetir's own whose threads claim a
loop's shares one at a time, wait for work only briefly, and never hold up a call.

Why: a kernel call on a machine with anything else running must not wait for a thread the OS
has parked or descheduled. A parallel loop cut once into equal shares, one per thread, ends at
a barrier that waits for the slowest thread: on a 2-core Intel VM with light activity elsewhere,
SpMM on email-Enron (0.6 ms when idle) took a median of 4.5-8 ms, on multiples of the 8 ms
scheduler tick, while its OpenMP team (torch's libgomp, which the kernels ran on until then)
waited for a parked thread to wake; with ``OMP_WAIT_POLICY=active`` it took 0.6 ms.

How (``src/task_pool/task_pool.c``, registered with tvm-ffi as the parallel launch of every TVM
module loaded from then on):

* A launch cuts the loop into 8 shares per thread (TVM's lambda takes any share count) and the
  calling thread and the pool's workers take them from one counter. The caller then waits only
  for shares already taken, never for a worker that has not started: one the OS has not
  scheduled (a busy machine) or that is still waking takes nothing, so a call is never slower
  than the caller alone by more than one share. Row tiles are balanced by nonzeros
  (``ops.tiles``), so shares are equal work.
* Between calls a worker spins as long as calls have been coming (eight times the recent gap
  between one launch's end and the next one's start, at most ``SPIN_S``; 20 us when the gaps
  are longer), then yields its CPU (``sched_yield``) until ``YIELD_S`` have passed, then
  sleeps until the next launch: back-to-back calls find it awake, another runnable thread on
  its CPU (torch's, or another process's) gets the CPU while it yields, and an idle process
  has no busy threads after a few milliseconds. In a training step, where torch's operators
  run on torch's own threads between the kernel calls, the workers spin only briefly: a
  1 ms spin after every call made GCN training on Cora 1.4x slower (2.6 -> 3.7 ms an epoch;
  two pools that spin for milliseconds, TVM's and torch's, made it 7x slower:
  ``benchmarks/thread_pools.py``). OpenMP's settings (``OMP_WAIT_POLICY``)
  do not apply: this pool is not OpenMP's.
* A call on torch tensors is part of a torch program, whose operators run on torch's OpenMP
  team between the kernel calls; that team's threads spin after every operator, and a kernel
  on a pool of its own then shares the cores with them (GAT's edge softmax on Pubmed: 1.4-1.7
  ms against 0.87 ms on torch's team; GAT training 1.2x slower an epoch). So such a call runs
  its parallel loops on torch's team, whose threads claim the shares from one counter as the
  pool's do (one OpenMP region a launch); a call on numpy arrays runs on the pool
  (:func:`size_launches`). Beside busy processes such a call can wait milliseconds for a team
  thread the OS parked; run off the team, the wait moves to torch's next operator
  (``docs/tuning.md``).
* A call whose arrays hold fewer than ``SERIAL_BYTES`` (64 KiB) in all (:func:`size_launches`,
  which the call wrappers of ``runtime.kernel`` use) runs on the calling thread, as torch runs
  a range under its grain size: below that, waking a worker costs more than it saves. Above it
  a launch pays off even for graphs as small as Cora (SDDMM at 32 features: 62 -> 39 us,
  SpMM 28 -> 22 us on 2 cores), since the caller never waits for a worker that is slow to
  come. One launch at a time uses the pool: a kernel called from another thread meanwhile
  runs on its own thread, as does a launch in the thread that called ``fork`` in the child
  (other threads of the child start a pool of their own).
* Torch's own operators run on its OpenMP team, whose two threads can end up on one core of a
  loaded machine for a whole run (two runnable threads a core look balanced to the scheduler),
  each then waiting out the other's time slices at every barrier (RGCN training on Citeseer: 500
  ms an epoch instead of 80-140). So a kernel call on torch tensors also moves, at most every
  ``SPREAD_INTERVAL_S`` seconds, the threads of torch's team that are runnable on one CPU onto
  CPUs none of the team is on (:func:`spread_team`, ``src/openmp_spread``), without binding
  them: a moved thread's affinity is narrowed to its new CPU for the one system call that
  migrates it and set back at once. A spread reads where the team's threads are from
  ``/proc`` and opens no OpenMP region (but the first, which learns the threads' ids): a
  region waits for every thread of the team, and on a loaded 2-core VM that made a spread
  take 44 ms. Threads you bind (``OMP_PROC_BIND``, ``OMP_PLACES``,
  ``GOMP_CPU_AFFINITY``) are never moved.
* Your settings win: when the environment sets any of TVM's own pool settings
  (``TVM_BIND_THREADS``, ``TVM_THREAD_POOL_SPIN_COUNT``, ``TVM_EXCLUDE_WORKER0``), you chose
  TVM's pool and it is kept as you configured it. Where the pool cannot be built (no gcc) TVM's
  pool is kept too.
* A launch uses :func:`thread_count` threads: ``TVM_NUM_THREADS`` (which ``import sparsetir``
  sets from ``OMP_NUM_THREADS``, else the usable cores, unless you set it) until
  ``torch.set_num_threads(n)`` changes torch's count after ``import sparsetir``; from then on
  ``n``, torch's count, followed at every kernel call (:func:`follow_torch`: one
  ``torch.get_num_threads()``, a few hundred nanoseconds) on the pool and on torch's team
  alike. TVM's own pool, where you chose it, keeps ``TVM_NUM_THREADS``.

Example
-------
>>> from sparsetir.runtime.threads import cooperate_with_torch
>>> cooperate_with_torch()
Cooperation(pool='tasks', threads=2, reason="kernels run on sparsetir's task pool (shares claimed one at a time)")
>>> cooperate_with_torch() is cooperate_with_torch()      # decided once per process
True
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from functools import lru_cache
from typing import NamedTuple

import tvm_ffi.libinfo

from ..backend.native import build_shared

# TVM's pool reads these; one set in the environment means the user configured TVM's pool
TVM_POOL_SETTINGS = ("TVM_BIND_THREADS", "TVM_THREAD_POOL_SPIN_COUNT", "TVM_EXCLUDE_WORKER0")


class Cooperation(NamedTuple):
    """What :func:`cooperate_with_torch` decided: ``pool`` is ``"tasks"`` (kernels run on
    sparsetir's task pool) or ``"tvm"`` (TVM's own pool, for ``reason``); ``threads``, the
    threads a parallel loop uses."""
    pool: str
    threads: int
    reason: str


SERIAL_BYTES = 1 << 16
"""A call whose arrays hold fewer bytes than this runs its parallel loops on the calling thread."""

SPIN_S = 1e-3
"""An idle worker of the task pool spins at most this long after its last share..."""
YIELD_S = 3e-3
"""...then yields its CPU until this long has passed, then sleeps until the next launch."""

SPREAD_INTERVAL_S = 0.1
"""Kernel calls move torch's team's threads apart (:func:`spread_team`) at most this often."""

_MAIN_THREAD = threading.main_thread()

# set by the user, these bind OpenMP's threads to CPUs: then the team is never moved
BINDING_SETTINGS = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")

_decided: Cooperation | None = None
_lock = threading.Lock()
_pool = None                 # the loaded task pool: kept alive while modules point into it
_set_mode = None             # its sparsetir_task_pool_mode
_this_thread = threading.local()  # .mode: the C flag's copy; .next_spread: see size_launches
POOL, SERIAL, OPENMP = 0, 1, 2    # where a thread's launches run (task_pool.c's MODE_*)
_spread_library = None       # openmp_spread.c, loaded unless the user binds threads
_spread = None               # its sparsetir_openmp_spread
_torch_threads = None        # torch.get_num_threads() when follow_torch last looked
_followed = None             # the count torch.set_num_threads gave, once it changed torch's


def thread_count() -> int:
    """The threads a kernel's parallel loop uses: torch's count once ``torch.set_num_threads``
    changed it after ``import sparsetir`` (:func:`follow_torch`), else ``TVM_NUM_THREADS``
    when it is a positive number (``sparsetir`` sets it to the usable cores unless you set
    it), else the cores this process may use."""
    if _followed is not None:
        return _followed
    return _count(os.environ.get("TVM_NUM_THREADS", ""))


def follow_torch() -> None:
    """Look at torch's thread count (``torch.get_num_threads()``) where torch is imported and
    sparsetir's task pool runs the kernels; when it changed since the last look (a
    ``torch.set_num_threads`` call), kernels' launches use that many threads from now on.
    Every kernel call does this (:func:`size_launches`); the count in use is
    :func:`thread_count`.

    Example
    -------
    >>> follow_torch()          # as every kernel call does; thread_count() is the count in use
    """
    global _torch_threads, _followed
    torch = sys.modules.get("torch")
    if torch is None or _pool is None:
        return
    count = torch.get_num_threads()
    if count != _torch_threads:
        if _torch_threads is not None:
            _followed = count
            _pool.sparsetir_task_pool_threads(count)
        _torch_threads = count


@lru_cache(maxsize=None)
def _count(value: str) -> int:
    if value.isascii() and value.isdigit() and int(value) > 0:
        return int(value)
    return len(os.sched_getaffinity(0))


def size_launches(nbytes: int, torch_call: bool = False) -> None:
    """Let the calling thread's next kernel launches run on itself when the call's arrays hold
    fewer than ``SERIAL_BYTES`` bytes (``nbytes``), else on torch's OpenMP team for a call on
    torch tensors (``torch_call``) and on the task pool otherwise; nothing changes where TVM's
    pool runs the kernels. Cheap when nothing changes.

    At most every ``SPREAD_INTERVAL_S`` seconds per thread, a call on torch tensors from the
    main thread (whose team is the one torch's operators use) or a large one from another
    thread first moves torch's team apart (:func:`spread_team`). A call on numpy arrays never
    does: it does not run on that team, and spreading it opens an OpenMP region, which wakes
    (or first starts) the team's threads, and they then spin beside the pool's workers.

    Example
    -------
    >>> size_launches(4096)          # the next launches from this thread run on it alone
    """
    follow_torch()
    serial = nbytes < SERIAL_BYTES
    mode = SERIAL if serial else OPENMP if torch_call else POOL
    if _set_mode is not None and getattr(_this_thread, "mode", POOL) != mode:
        _set_mode(mode)
        _this_thread.mode = mode
    if _spread is not None and torch_call \
            and (not serial or threading.current_thread() is _MAIN_THREAD):
        now = time.monotonic()
        if now >= getattr(_this_thread, "next_spread", 0.0):
            _this_thread.next_spread = now + SPREAD_INTERVAL_S
            _spread()


def spread_team() -> int:
    """Move the threads of the calling thread's OpenMP team (the one torch's next operator runs
    on) that are runnable on the CPU of another of the team onto CPUs none of it is on, without
    binding or waking them (the module's docstring says why); returns how many moved. Kernel calls do this at
    most every ``SPREAD_INTERVAL_S`` seconds (:func:`size_launches`); 0 where TVM's pool runs
    the kernels, the environment binds threads, or in the thread that called ``fork``. On an
    idle machine it moves a thread too, when the thread woke on its caller's CPU (as the
    scheduler often wakes one): it goes to an idle CPU at once instead of when the scheduler
    next balances. A sleeping thread stays: the scheduler places it when it wakes.

    Example
    -------
    >>> spread_team() in range(thread_count())
    True
    """
    return _spread() if _spread is not None else 0


def spread_regions() -> int:
    """How many OpenMP regions :func:`spread_team` has opened in this process: one per calling
    thread and team size, to learn the team's thread ids; later spreads open none.

    Example
    -------
    >>> before = spread_regions()
    >>> moved = [spread_team() for _ in range(3)]
    >>> spread_regions() - before <= 1
    True
    """
    return _spread_library.sparsetir_openmp_spread_regions() if _spread_library is not None \
        else 0


def pool_workers() -> int:
    """How many worker threads sparsetir's task pool has started in this process (it starts
    ``thread_count() - 1`` at its first parallel launch); 0 where TVM's pool runs the kernels.

    Example
    -------
    >>> pool_workers() in (0, thread_count() - 1)
    True
    """
    return _pool.sparsetir_task_pool_workers() if _pool is not None else 0


def pool_launches() -> int:
    """How many parallel launches ran on sparsetir's task pool in this process (a launch a
    call runs on its own thread, :func:`size_launches`, is not counted); 0 where TVM's pool
    runs the kernels.

    Example
    -------
    >>> before = pool_launches()        # ... a large kernel call ...; pool_launches() > before
    """
    return _pool.sparsetir_task_pool_launches() if _pool is not None else 0


def last_launch_threads() -> int:
    """The threads the last parallel launch of this process was cut for: the task pool's
    threads taking part, the size of torch's team for a call on torch tensors, 1 for a launch
    run on its calling thread; 0 before the first launch and where TVM's pool runs the kernels.

    Example
    -------
    >>> last_launch_threads() in range(thread_count() + 1)
    True
    """
    return _pool.sparsetir_task_pool_last_team() if _pool is not None else 0


def cooperate_with_torch() -> Cooperation:
    """Run kernels' parallel loops on sparsetir's task pool from now on, unless the environment
    configures TVM's pool (then nothing changes). Decided once per process; the decision is
    returned. Cheap after the first call."""
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
        _install_task_pool(threads)
    except (RuntimeError, OSError, AttributeError) as err:
        return Cooperation("tvm", threads, f"the task pool is unavailable: {err}")
    _install_spread()
    follow_torch()                       # torch's count now: a later change is followed
    return Cooperation("tasks", threads,
                       "kernels run on sparsetir's task pool (shares claimed one at a time)")


def _install_task_pool(threads: int) -> None:
    """Build and load ``task_pool.c`` and make it the parallel launch and barrier of TVM
    modules loaded from now on."""
    global _pool, _set_mode
    library = ctypes.CDLL(str(build_shared("task_pool.c", ["-pthread", "-fopenmp"])))
    ffi = ctypes.CDLL(tvm_ffi.libinfo.find_libtvm_ffi())

    def address(lib, symbol: str) -> int:
        return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value

    library.sparsetir_task_pool_setup.argtypes = [ctypes.c_void_p] * 4 + [
        ctypes.c_int, ctypes.c_long, ctypes.c_long]
    library.sparsetir_task_pool_setup.restype = None
    library.sparsetir_task_pool_setup(
        address(ffi, "TVMFFIErrorMoveFromRaised"), address(ffi, "TVMFFIErrorSetRaised"),
        address(ffi, "TVMFFIObjectDecRef"), address(ffi, "TVMFFIErrorSetRaisedFromCStr"),
        threads, int(SPIN_S * 1e9), int(YIELD_S * 1e9))
    register = ffi.TVMFFIEnvModRegisterContextSymbol
    register.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    register.restype = ctypes.c_int
    for context_symbol, ours in (("__TVMBackendParallelLaunch", "sparsetir_task_pool_launch"),
                                 ("__TVMBackendParallelBarrier", "sparsetir_task_pool_barrier")):
        if register(context_symbol.encode(), address(library, ours)) != 0:
            raise RuntimeError(f"tvm-ffi refused to register {context_symbol}")
    library.sparsetir_task_pool_mode.argtypes = [ctypes.c_int]
    library.sparsetir_task_pool_mode.restype = None
    library.sparsetir_task_pool_workers.restype = ctypes.c_int
    library.sparsetir_task_pool_launches.restype = ctypes.c_long
    library.sparsetir_task_pool_threads.argtypes = [ctypes.c_int]
    library.sparsetir_task_pool_threads.restype = None
    library.sparsetir_task_pool_last_team.restype = ctypes.c_int
    _pool = library
    _set_mode = library.sparsetir_task_pool_mode


def _install_spread() -> None:
    """Load ``openmp_spread.c`` for :func:`spread_team`, unless the user binds threads or it
    cannot be built (then torch's team is left where it is)."""
    global _spread, _spread_library
    if _binds_threads(os.environ):
        return
    try:
        library = ctypes.CDLL(str(build_shared("openmp_spread.c", ["-fopenmp"])))
    except (RuntimeError, OSError):
        return
    library.sparsetir_openmp_spread.argtypes = []
    library.sparsetir_openmp_spread.restype = ctypes.c_int
    library.sparsetir_openmp_spread_regions.restype = ctypes.c_long
    _spread_library, _spread = library, library.sparsetir_openmp_spread


def _binds_threads(environ) -> bool:
    """Whether ``environ`` binds OpenMP's threads to CPUs (``OMP_PROC_BIND=false`` does not)."""
    bind = environ.get("OMP_PROC_BIND", "").strip().lower()
    return (bind not in ("", "false")
            or any(environ.get(name, "").strip() for name in BINDING_SETTINGS[1:]))
