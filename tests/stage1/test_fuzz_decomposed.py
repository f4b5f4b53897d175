"""Random matrices through decomposed kernels (hyb, BSR, ELL, padded; preprocess in the
kernel or values from ``sparsetir.format``): every call equals scipy, SparseTIR's ELL rule
on rows cut into several ELL rows too. The calls run in a subprocess (``fuzz_decomposed.py``), so a crash fails this test
and names the last case; ``SPARSETIR_FUZZ_CASES`` sets how many (240 by default)."""

import json
import os
import subprocess
import sys
from pathlib import Path


def test_decomposed_kernels_equal_scipy_on_random_matrices():
    cases = int(os.environ.get("SPARSETIR_FUZZ_CASES", "240"))
    script = Path(__file__).with_name("fuzz_decomposed.py")
    proc = subprocess.run([sys.executable, str(script), str(cases), "20261124"],
                          capture_output=True, text=True, timeout=600)
    last = proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []
    assert proc.returncode == 0, f"exit {proc.returncode} after {last}\n{proc.stderr[-3000:]}"
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats["cases"] == cases
    assert not stats["wrong"], stats["wrong"]
    assert not stats["bad_refusal"], stats["bad_refusal"]
    assert stats["right"] == cases
    assert stats["split_rows"] > 0
