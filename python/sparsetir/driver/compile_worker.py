"""A background compile worker (``driver.background``): ``python -m
sparsetir.driver.compile_worker`` reads jobs from its standard input and reports on its
standard output, both as a stream of pickles, until its input ends.

A job is ``(work, args)``; the worker runs ``work(*args)`` and sends what it reports meanwhile
(``("started", key)``, ``("made", key)``, ``("failed", key, pickled error)`` for each kernel,
``("record", level, message, extra)`` for each ``"sparsetir"`` log record) and then
``("ended", ok, pickled result or error)``. Whatever else writes to its standard output (a
``print``) goes to its standard error instead. It compiles into the disk cache of its
``SPARSETIR_CACHE``, where its parent loads the kernels.

Example
-------
>>> import pickle, subprocess, sys
>>> worker = subprocess.Popen([sys.executable, "-m", "sparsetir.driver.compile_worker"],
...                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
>>> pickle.dump((pow, (6, 2)), worker.stdin); worker.stdin.flush()
>>> pickle.load(worker.stdout)[:2]
('ended', True)
>>> worker.stdin.close(); worker.wait()      # its input ends: it exits
0
>>> worker.stdout.close()
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
import threading

from . import background
from .compile_log import EVENT, LOGGER


def main() -> None:
    jobs = os.fdopen(os.dup(0), "rb")
    reports = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                       # stray prints go to stderr, not into the reports
    sys.stdout = sys.stderr

    lock = threading.Lock()         # one message at a time, whichever thread sends it

    def report(message: tuple) -> None:
        with lock:
            pickle.dump(message, reports)
            reports.flush()

    background.report_to_parent(report)
    for handler in list(LOGGER.handlers):   # the parent logs the records
        LOGGER.removeHandler(handler)
    LOGGER.addHandler(_Forward(report))
    LOGGER.setLevel(logging.DEBUG)
    LOGGER.propagate = False
    while True:
        try:
            work, args = pickle.load(jobs)
        except EOFError:
            return
        try:
            message = ("ended", True, pickle.dumps(work(*args)))
        except Exception as error:  # pylint: disable=broad-exception-caught
            message = ("ended", False, background.pickled_error(error))
        report(message)


class _Forward(logging.Handler):
    """The worker's records, sent to the parent (which logs them)."""

    def __init__(self, report):
        super().__init__(logging.DEBUG)
        self.report = report

    def emit(self, record: logging.LogRecord) -> None:
        extra = {name: getattr(record, name) for name in (EVENT, "seconds")
                 if hasattr(record, name)}
        self.report(("record", record.levelno, record.getMessage(), extra))


if __name__ == "__main__":
    main()
