"""A refused call leaves nothing behind, whichever check refuses it.

The compiled index checks (``runtime.compiled_checks``) once kept their counters in TVM
workspaces that the failing path never freed: 16 KB a refused call. A check inside a kernel
that fails returns before the kernel frees its workspaces too: csr2bsr's binary-search state
(``int32[2]``, ``"local"``) leaked 4 KB a call until ``backend.stack_scratch`` put it on the
stack. The calls run in a subprocess whose resident memory is read from ``/proc/self/statm``
before and after 20,000 refusals.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

MEASURE = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {tests!r})
    from sparsetir.runtime import ArgumentError
    {setup}

    def resident():
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def refuse(calls):
        for i in range(calls):
            try:
                kernel(*bad[i % len(bad)])
            except ArgumentError:
                continue
            raise SystemExit("a bad call ran")

    refuse(1000)
    before = resident()
    refuse(20000)
    print(resident() - before)
""")

INDEX_CHECKS = """
from csrmm_calls import NAMES, build_kernel, make_args
kernel, args = build_kernel(), make_args()
assert kernel._compiled_checks is not None
wrong = [dict(args, indices=args["indices"].copy()), dict(args, indptr=args["indptr"].copy())]
wrong[0]["indices"][3] = 9                                  # a column past n
wrong[1]["indptr"][5] = wrong[1]["indptr"][6] + 1           # a row pointer going back
bad = [[w[k] for k in NAMES] for w in wrong]
"""

IN_KERNEL_CHECK = """
import numpy as np
import sparsetir
from kernel_zoo import CASES
kernel = sparsetir.build(CASES["csr2bsr"].func, "llvm")
rows = 8                            # 8 rows in blocks of 1, but m_out = 1 block row
bad = [(np.ones(rows, np.float32), np.full(1, np.nan, np.float32),
        np.arange(rows + 1, dtype=np.int32), (np.arange(rows) % 4).astype(np.int32),
        np.array([0, 1], np.int32), np.array([0], np.int32), rows, 4, 1, 4, rows, 1, 1)]
"""


def _growth(setup: str) -> int:
    """Bytes of resident memory gained over 20,000 refused calls (``setup`` defines
    ``kernel`` and ``bad``, a list of argument tuples it must refuse)."""
    script = MEASURE.format(tests=str(TESTS), setup=setup.strip())
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split()[-1])


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("setup", [INDEX_CHECKS, IN_KERNEL_CHECK],
                         ids=["compiled_index_checks", "in_kernel_check"])
def test_refused_calls_do_not_grow_memory(setup):
    growth = _growth(setup)
    assert growth < 5 * 2**20, f"{growth / 2**20:.1f} MB more after 20,000 refused calls"
