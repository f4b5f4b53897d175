"""Fused (one loop over the nonzeros) against unfused (rows, then their nonzeros) SDDMM.

Both kernels come from the reference zoo's scripts, built by ``sparsetir.build`` with the
default CPU schedule for a fixed feature size. The fused kernel finds each nonzero's row in a
``preprocess`` nest (a binary search per nonzero, not per feature). Each variant is timed in a
process of its own (whole call, median of repeats after warm-up), and checked against numpy
first.

Run: ``.venv/bin/python benchmarks/sddmm_fusion.py [--graph pubmed] [--feat 64]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def measure(variant: str, graph: str, feat: int, repeat: int) -> dict:
    """Build and time one variant in this process."""
    sys.path.insert(0, str(ROOT / "tests"))
    import sparsetir
    from kernel_zoo import KERNELS
    from sparsetir.data import load_graph

    adj = load_graph(graph)
    m, n = adj.shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, feat)).astype(np.float32)
    y = rng.standard_normal((n, feat)).astype(np.float32)
    out = np.full(adj.nnz, np.nan, np.float32)
    name = "fused_sddmm" if variant == "fused" else "sddmm"
    start = time.perf_counter()
    kernel = sparsetir.build(KERNELS[name].specialize({"feat_size": feat}), "llvm")
    compile_s = time.perf_counter() - start

    def call():
        kernel(x, y, out, adj.indptr, adj.indices, m, n, adj.nnz)

    call()
    rows = np.repeat(np.arange(m), np.diff(adj.indptr))
    expected = np.einsum("ef,ef->e", x[rows], y[adj.indices])
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return {"variant": variant, "median_ms": 1e3 * float(np.median(times)),
            "min_ms": 1e3 * min(times), "max_ms": 1e3 * max(times), "compile_s": compile_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="pubmed")
    parser.add_argument("--feat", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--variant", choices=["fused", "unfused"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(measure(args.variant, args.graph, args.feat, args.repeat)))
        return
    env = dict(os.environ)
    env.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    results = {}
    for variant in ("unfused", "fused"):
        proc = subprocess.run([sys.executable, __file__, "--variant", variant, "--graph",
                               args.graph, "--feat", str(args.feat), "--repeat",
                               str(args.repeat)], env=env, check=True, capture_output=True,
                              text=True)
        results[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"SDDMM on {args.graph}, feature size {args.feat}, "
          f"TVM_NUM_THREADS={env['TVM_NUM_THREADS']}; whole call, median of {args.repeat}")
    print(f"{'variant':10s} {'median ms':>10s} {'min ms':>8s} {'max ms':>8s} {'compile s':>10s}")
    for variant, r in results.items():
        print(f"{variant:10s} {r['median_ms']:10.3f} {r['min_ms']:8.3f} {r['max_ms']:8.3f} "
              f"{r['compile_s']:10.2f}")
    ratio = results["unfused"]["median_ms"] / results["fused"]["median_ms"]
    print(f"fused speedup over unfused: {ratio:.2f}x")


if __name__ == "__main__":
    main()
