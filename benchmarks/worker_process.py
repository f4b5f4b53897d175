"""The harness's side of a ``worker.py`` process: start it, ask it for one case at a time,
and wait for the other workers' threads to go quiet before a contender is timed.

``bench.py`` keeps one worker per contender for a graph and asks every contender for a case
before moving to the next case. Between two contenders' turns the one that just ran may still
have threads spinning (an OpenMP team spins after a region, Intel's OpenMP for 200 ms by
default, ``KMP_BLOCKTIME``); :func:`wait_until_quiet` waits, at most ``QUIET_LIMIT_S``, until no
thread of the other workers has run for ``QUIET_WINDOW_S``, so that no contender is timed
beside another's spinning threads.

Example
-------
>>> import sys
>>> proc = WorkerProcess([sys.executable, "-c", "print('READY'); print('RESULT {}')"],
...                      env=None, cwd=None, stderr=None)
>>> proc.ask("32 spmm float32")
'{}'
>>> proc.close()
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from pathlib import Path

from worker import PREFIX, READY

CASE_TIMEOUT_S = 1800
"""The longest a worker may take to set up or to answer one case before it is stopped."""

QUIET_WINDOW_S = 0.005
"""Workers count as quiet when none of their threads ran during this long..."""
QUIET_LIMIT_S = 0.5
"""...and the harness waits at most this long for it."""


class WorkerGone(Exception):
    """The worker exited or ran past ``CASE_TIMEOUT_S``; the message says how it ended."""


class WorkerProcess:
    """One ``worker.py`` process (``cmd``), ready to answer cases once constructed; its stderr
    goes to ``stderr`` (an open file, closed with the worker, or None), read back for the
    reason when it exits."""

    def __init__(self, cmd: list, env, cwd, stderr):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, text=True, env=env, cwd=cwd)
        self._stderr = stderr
        self._lines = queue.Queue()     # stdout's lines, read by a thread; None at its end
        threading.Thread(target=self._read_lines, daemon=True).start()
        try:
            self._read_until(lambda line: line.strip() == READY)
        except WorkerGone:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ask(self, case: str) -> str:
        """The worker's answer to ``case`` (a line ``FEAT OP DTYPE``): the JSON text of its
        ``RESULT`` line; raises :class:`WorkerGone` when it exited or took too long."""
        try:
            self.proc.stdin.write(case + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerGone(self._how_it_ended()) from None
        return self._read_until(lambda line: line.startswith(PREFIX))[len(PREFIX):]

    def close(self) -> None:
        """End the worker (stdin closed: it leaves its loop) and wait for it."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if self._stderr is not None:
            self._stderr.close()

    def _read_lines(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _read_until(self, wanted) -> str:
        deadline = time.monotonic() + CASE_TIMEOUT_S
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                self.proc.kill()
                raise WorkerGone(f"no answer within {CASE_TIMEOUT_S} s") from None
            if line is None:
                raise WorkerGone(self._how_it_ended())
            if wanted(line):
                return line

    def _how_it_ended(self) -> str:
        rc = self.proc.wait()
        last = ""
        if self._stderr is not None:
            self._stderr.flush()
            text = Path(self._stderr.name).read_text(errors="replace").strip()
            last = (text.splitlines() or [""])[-1]
        return f"worker exited ({rc}): {last}"


def cpu_time_ns(pids) -> int:
    """The CPU time every thread of processes ``pids`` has run so far (ns; Linux's
    ``/proc/PID/task/TID/schedstat``); 0 where it cannot be read."""
    total = 0
    for pid in pids:
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                    total += int(stat.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total


def wait_until_quiet(pids) -> float:
    """Wait until no thread of processes ``pids`` has run for ``QUIET_WINDOW_S`` (at most
    ``QUIET_LIMIT_S``); the seconds waited."""
    start = time.perf_counter()
    before = cpu_time_ns(pids)
    while time.perf_counter() - start < QUIET_LIMIT_S:
        time.sleep(QUIET_WINDOW_S)
        now = cpu_time_ns(pids)
        if now == before:
            break
        before = now
    return time.perf_counter() - start
