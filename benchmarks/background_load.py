"""A fixed background load for benchmarks: busy-looping processes beside the one measured.

``busy_processes(count)`` starts ``count`` separate Python processes that each spin in a pure
Python loop (one per usable core by default), waits until every one is spinning, and kills them
when the ``with`` block ends, however it ends. A spinner also dies with its parent: Linux sends
it SIGKILL when the parent dies (``PR_SET_PDEATHSIG``), and it checks its parent's id every few
million iterations in case that signal could not be armed. The spinners start from a bare
interpreter (``-S -c``), so they load nothing and inherit no thread pool.

Example
-------
>>> from background_load import busy_processes
>>> with busy_processes(2) as pids:          # two cores kept busy by two other processes
...     elapsed = time_one_epoch()
>>> len(pids)
2
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

# Runs in each spinner. It arms PR_SET_PDEATHSIG (1) with SIGKILL (9), says it is ready (one
# byte on stdout), then spins; every 2**22 iterations it leaves if its parent has changed.
_SPINNER = """
import ctypes, os, sys
parent = int(sys.argv[1])
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    sys.exit(0)
sys.stdout.write("r"); sys.stdout.flush()
n = 0
while True:
    n += 1
    if n & 0x3FFFFF == 0 and os.getppid() != parent:
        break
"""


def _default_count() -> int:
    return len(os.sched_getaffinity(0))


@contextlib.contextmanager
def busy_processes(count: int | None = None):
    """Keep ``count`` other processes (default: one per core this process may use) spinning
    for the duration of the ``with`` block; yields their process ids."""
    if count is None:
        count = _default_count()
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    spinners = []
    try:
        for _ in range(count):
            spinners.append(subprocess.Popen(
                [sys.executable, "-S", "-c", _SPINNER, str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE))
        for proc in spinners:
            if proc.stdout.read(1) != b"r":
                raise RuntimeError(f"busy process {proc.pid} exited before it started spinning")
        yield [proc.pid for proc in spinners]
    finally:
        for proc in spinners:
            proc.kill()
        for proc in spinners:
            proc.wait()
            proc.stdout.close()
