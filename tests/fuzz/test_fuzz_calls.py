"""Random valid and invalid calls: right answers or refusals, no signal. Three drivers: zoo
kernels from ``sparsetir.build`` (``fuzz_calls.py``: refusals are ArgumentErrors), repeated
``sparsetir.ops`` calls on prepared matrices, mostly on the fast path (``fuzz_ops.py``), and
every conversion routine of ``sparsetir.format`` (``fuzz_formats.py``: outputs rebuild the
input, padding values are +0, refusals are ValueError or TypeError).

A few hundred cases each in CI (a few seconds for the conversions); set
``SPARSETIR_FUZZ_CASES`` for more. The calls run in a subprocess, so a crash fails this test
and names the last case.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("driver", ["fuzz_calls.py", "fuzz_ops.py", "fuzz_formats.py"])
def test_random_calls_are_right_or_refused(driver):
    cases = int(os.environ.get("SPARSETIR_FUZZ_CASES", "300"))
    script = Path(__file__).with_name(driver)
    proc = subprocess.run([sys.executable, str(script), str(cases), "20261123"],
                          capture_output=True, text=True, timeout=1200)
    last = proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []
    assert proc.returncode == 0, f"exit {proc.returncode} after {last}\n{proc.stderr[-3000:]}"
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats["cases"] == cases
    assert not stats["wrong"], stats["wrong"]
    assert not stats["silent"], stats["silent"]
    assert stats["valid_right"] + stats["invalid_refused"] == cases
