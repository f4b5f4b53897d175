"""A kernel works in a child made by ``fork`` after the parent ran a parallel kernel
(multiprocessing workers, torch DataLoader workers): ``sparsetir.runtime.fork``.

The calls run in a subprocess (``fork_workers.py``) in a process group of its own, killed
whole after a timeout, so a hang fails the test instead of stopping the run.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("fork_workers.py")


def test_forked_workers_run_parallel_kernels():
    env = {**os.environ, "TVM_NUM_THREADS": "2"}
    with subprocess.Popen([sys.executable, str(SCRIPT)], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError("a forked worker hung in a kernel call") from None
    assert proc.returncode == 0, err[-2000:]
    assert out.strip() == "OK 11", out + err[-2000:]
