"""Jobs the tests of ``driver.background`` run in its worker processes (module-level functions,
so that they pickle by name): a kernel whose compile fails there, and a job that reports its
process id."""

import os
import time

from sparsetir.driver import background


def failing_kernel(key: tuple) -> None:
    """Make the kernel ``key`` with a compile that fails in the worker."""
    def make():
        raise RuntimeError("planted failure in the background")
    background.remembered(key, make)


def process_id(seconds: float) -> int:
    """This worker's process id, after ``seconds`` (jobs overlap meanwhile)."""
    time.sleep(seconds)
    return os.getpid()
