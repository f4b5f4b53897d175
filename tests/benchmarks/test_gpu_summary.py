"""The GPU runner's summary (``benchmarks/gpu/runner/summary.py``): its example, and the figures
``docs/benchmark.md`` quotes from the committed H200 run, recomputed from that run's CSV."""

from __future__ import annotations

import csv
import doctest
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "gpu"


def _summary():
    spec = importlib.util.spec_from_file_location(
        "gpu_summary", ROOT / "benchmarks" / "gpu" / "runner" / "summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_holds():
    assert doctest.testmod(_summary()).failed == 0


def test_the_documented_figures_come_from_the_run():
    with open(RESULTS / "h200-2026-11-30-groups.csv", newline="") as stream:
        lines = _summary().summary_lines(list(csv.DictReader(stream)))
    quoted = {  # docs/benchmark.md, "The second GPU session"
        ("sddmm", "ops_sddmm_segments/32"): "geomean 4.21x  worst 1.97x",
        ("sddmm", "ops_sddmm_segments/8"): "geomean 6.38x  worst 1.82x",
        ("sddmm", "ops_sddmm "): "geomean 2.71x  worst 0.42x",
        ("spmm", "best ops_* per problem"): "geomean 1.86x  worst 0.87x",
        ("spmm_unweighted", "best ops_* per problem"): "geomean 1.96x  worst 0.90x",
    }
    for (op, kernel), figures in quoted.items():
        found = [line for line in lines if line.split()[0] == op and kernel in line]
        assert len(found) == 1 and figures in found[0], (op, kernel, found)
    assert not any("left out" in line for line in lines)
