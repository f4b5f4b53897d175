"""Each rank's kernels use the threads the rank is given: ``import sparsetir`` takes
``OMP_NUM_THREADS`` (torchrun sets it to 1 per rank) for ``TVM_NUM_THREADS`` unless that is
set, and ``launch.run`` gives its ranks a share of the cores."""

import os
import subprocess
import sys

import pytest

import dist_workers
from sparsetir.distributed import run

PROBE = "import sparsetir; from sparsetir.runtime.threads import thread_count; print(thread_count())"


@pytest.mark.parametrize("omp,tvm,expected", [("1", None, "1"), ("3,1", None, "3"),
                                              ("1", "2", "2")])
def test_import_takes_omp_num_threads(omp, tvm, expected):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "TVM_NUM_THREADS")}
    env.update({name: value for name, value in (("OMP_NUM_THREADS", omp),
                                                ("TVM_NUM_THREADS", tvm)) if value})
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.split()[-1] == expected


def test_run_gives_each_rank_its_threads(tmp_path):
    run(dist_workers.report_threads, 2, args=(str(tmp_path),), timeout=120, threads=1)
    assert [(tmp_path / f"threads-{r}.txt").read_text() for r in range(2)] == ["1 1", "1 1"]
