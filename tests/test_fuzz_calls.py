"""Random valid and invalid calls of zoo kernels: right answers, ArgumentErrors, no signal.

A few hundred cases in CI; set ``SPARSETIR_FUZZ_CASES`` for more. The calls run in a
subprocess (``fuzz_calls.py``), so a crash fails this test and names the last case.
"""

import json
import os
import subprocess
import sys
from pathlib import Path


def test_random_calls_are_right_or_refused():
    cases = int(os.environ.get("SPARSETIR_FUZZ_CASES", "300"))
    script = Path(__file__).with_name("fuzz_calls.py")
    proc = subprocess.run([sys.executable, str(script), str(cases), "20261123"],
                          capture_output=True, text=True, timeout=1200)
    last = proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []
    assert proc.returncode == 0, f"exit {proc.returncode} after {last}\n{proc.stderr[-3000:]}"
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats["cases"] == cases
    assert not stats["wrong"], stats["wrong"]
    assert not stats["silent"], stats["silent"]
    assert stats["valid_right"] + stats["invalid_refused"] == cases
