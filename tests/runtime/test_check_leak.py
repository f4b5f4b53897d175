"""A call refused by a kernel's compiled index checks (``checks_kernel``) leaves nothing behind.

The check function once kept its counters in TVM workspaces that the failing path never freed:
16 KB a refused call. The calls run in a subprocess whose resident memory is read from
``/proc/self/statm`` before and after 20,000 refusals.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

REFUSE = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {tests!r})
    from csrmm_calls import NAMES, build_kernel, make_args
    from sparsetir.runtime import ArgumentError
    kernel, args = build_kernel(), make_args()
    assert kernel._compiled_checks is not None
    bad = [dict(args, indices=args["indices"].copy()), dict(args, indptr=args["indptr"].copy())]
    bad[0]["indices"][3] = 9                                  # a column past n
    bad[1]["indptr"][5] = bad[1]["indptr"][6] + 1             # a row pointer going back

    def resident():
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def refuse(calls):
        for i in range(calls):
            try:
                kernel(*[bad[i % 2][k] for k in NAMES])
            except ArgumentError:
                continue
            raise SystemExit("a bad call ran")

    refuse(1000)
    before = resident()
    refuse(20000)
    print(resident() - before)
""")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc (Linux)")
def test_refused_calls_do_not_grow_memory():
    proc = subprocess.run([sys.executable, "-c", REFUSE.format(tests=str(TESTS))],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    growth = int(proc.stdout.split()[-1])
    assert growth < 5 * 2**20, f"{growth / 2**20:.1f} MB more after 20,000 refused calls"
