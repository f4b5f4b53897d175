"""``run(fn, world_size, ...)``: start ``world_size`` processes on this machine, each a rank of a
gloo process group on 127.0.0.1, run ``fn(rank, world_size, *args)`` in each, and stop them all.

Bounded everywhere: every collective times out after ``collective_timeout`` seconds (so a rank
whose peer died raises a ``CommunicationError`` instead of hanging), and the whole run after
``timeout`` seconds, when the processes still alive are terminated (then killed) and
``CommunicationError`` is raised; a rank that raises stops the others, and its error is raised
here. No process outlives the call.

Each rank's kernels use ``threads`` threads (default: ``OMP_NUM_THREADS`` when set, else the
usable cores divided among the ranks): the children get ``TVM_NUM_THREADS`` and
``OMP_NUM_THREADS``.

Example
-------
>>> def work(rank, world_size):
...     print(rank, "of", world_size)

``fn`` must be importable (a module's top-level function), which ``work`` here is not:

>>> run(work, 2)
Traceback (most recent call last):
...
sparsetir.errors.SparseTIRTypeError: fn and args go to the ranks by pickle (spawn): fn must be a
function defined at a module's top level and args picklable (...)
"""

from __future__ import annotations

import os
import pickle
import socket
import time
from datetime import timedelta

import numpy as np
import torch.distributed as dist
import torch.multiprocessing as mp

from ..errors import CommunicationError, SparseTIRTypeError, SparseTIRValueError


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def init_group(rank: int, world_size: int, address: str, collective_timeout: float) -> None:
    """Join the gloo group at ``address`` (``host:port``) as ``rank``, every collective
    bounded by ``collective_timeout`` seconds."""
    dist.init_process_group("gloo", init_method=f"tcp://{address}", rank=rank,
                            world_size=world_size,
                            timeout=timedelta(seconds=collective_timeout))


def _rank_main(rank, fn, world_size, address, collective_timeout, args):
    init_group(rank, world_size, address, collective_timeout)
    try:
        fn(rank, world_size, *args)
    finally:
        dist.destroy_process_group()


def run(fn, world_size: int, args: tuple = (), timeout: float = 120.0,
        collective_timeout: float = 30.0, threads: int | None = None) -> None:
    """See the module docstring. Every argument is checked before a process starts."""
    world_size = _positive_int("world_size", world_size)
    timeout = _positive_seconds("timeout", timeout)
    collective_timeout = _positive_seconds("collective_timeout", collective_timeout)
    if threads is not None:
        threads = _positive_int("threads", threads)
    try:
        pickle.dumps((fn, tuple(args)))
    except (pickle.PicklingError, AttributeError, TypeError) as err:
        raise SparseTIRTypeError(f"fn and args go to the ranks by pickle (spawn): fn must be a "
                                 f"function defined at a module's top level and args picklable "
                                 f"({err})") from None
    if threads is None:
        given = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
        threads = int(given) if given.isdigit() and int(given) > 0 else max(
            1, len(os.sched_getaffinity(0)) // world_size)
    address = f"127.0.0.1:{free_port()}"
    saved = {name: os.environ.get(name) for name in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    os.environ.update(TVM_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    try:
        context = mp.start_processes(_rank_main, args=(fn, world_size, address,
                                                       collective_timeout, tuple(args)),
                                     nprocs=world_size, join=False, start_method="spawn")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    deadline = time.monotonic() + timeout
    try:
        while not context.join(timeout=max(0.1, min(1.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                alive = [rank for rank, p in enumerate(context.processes) if p.is_alive()]
                raise CommunicationError(f"run: ranks {alive} of {world_size} still running "
                                         f"after {timeout} s; stopped")
    finally:
        _stop(context.processes)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise SparseTIRValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _positive_seconds(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0 < value < float("inf"):
        raise SparseTIRValueError(f"{name} must be a positive, finite number of seconds, got "
                                  f"{value!r}")
    return float(value)


def _stop(processes) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join(5)
