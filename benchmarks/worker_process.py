"""The harness's side of a ``worker.py`` process: start it, ask it for one case at a time, and
keep it stopped while another contender is timed.

``bench.py`` keeps one worker per contender for a graph and asks every contender for a case
before moving to the next case. A contender that has just run may still have threads spinning
(an OpenMP team spins after a region, Intel's OpenMP for 200 ms by default, ``KMP_BLOCKTIME``,
and for good with ``OMP_WAIT_POLICY=active``), so the harness stops every other worker
(``SIGSTOP``: none of its threads runs) before it starts a worker or asks one for a case, and
a worker continues (``SIGCONT``) only when it is asked. Each worker ends itself when the
harness dies (``worker.py`` asks Linux for ``SIGKILL`` then), so none is left stopped.

Example
-------
>>> import sys
>>> proc = WorkerProcess([sys.executable, "-c", "print('READY'); print('RESULT {}')"],
...                      env=None, cwd=None, stderr=None)
>>> proc.pause()
>>> proc.ask("32 spmm float32")         # continued first
'{}'
>>> proc.close()
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

from worker import PREFIX, READY

CASE_TIMEOUT_S = 1800
"""The longest a worker may take to set up or to answer one case before it is stopped."""


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
        self._reader = threading.Thread(target=self._read_lines, daemon=True)
        self._reader.start()
        try:
            self._read_until(lambda line: line.strip() == READY)
        except WorkerGone:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def pause(self) -> None:
        """Stop every thread of the worker (``SIGSTOP``) until it is next asked."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def ask(self, case: str) -> str:
        """The worker's answer to ``case`` (a line ``FEAT OP DTYPE``): the JSON text of its
        ``RESULT`` line; the worker is continued first. Raises :class:`WorkerGone` when it
        exited or took too long."""
        self._resume()
        try:
            self.proc.stdin.write(case + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerGone(self._how_it_ended()) from None
        line = self._read_until(lambda text: PREFIX in text)
        return line[line.index(PREFIX) + len(PREFIX):].strip()

    def close(self) -> None:
        """End the worker (continued, stdin closed: it leaves its loop) and wait for it."""
        self._resume()
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self._end()

    def _resume(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def _end(self) -> None:
        """Wait for the process, its reader and close the pipes and the stderr file."""
        self.proc.wait()
        self._reader.join(timeout=60)
        for stream in (self.proc.stdin, self.proc.stdout, self._stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:       # stdin of a worker that died: the flush fails
                    pass

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
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:     # stdout closed, the process still there
            self.proc.kill()
            rc = self.proc.wait()
        last = ""
        if self._stderr is not None:
            self._stderr.flush()
            text = Path(self._stderr.name).read_text(errors="replace").strip()
            last = (text.splitlines() or [""])[-1]
        return f"worker exited ({rc}): {last}"
