"""What a whole kernel call costs next to the compiled kernel alone.

CSR SpMM built by ``sparsetir.build`` (default schedule, feature size baked in) on the bundled
graphs, called the way users call it: numpy arrays straight from scipy and numpy (16-byte
aligned, passed without a copy), every check made (index arrays validated by the compiled
check function). The kernel alone is timed with TVM's time evaluator on the same arrays.
Times are medians of interleaved repeats in one process.

Run: ``.venv/bin/python benchmarks/call_overhead.py [--feat 32 128] [--graphs cora pubmed]``
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import sparsetir  # noqa: E402
from kernel_zoo import KERNELS  # noqa: E402
from sparsetir.data import graph_names, load_graph  # noqa: E402
from sparsetir.runtime.timing import median_seconds  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feat", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--graphs", nargs="+", default=graph_names())
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from tvm.target.codegen import llvm_get_system_cpu
    print(f"CSR SpMM call overhead on {platform.machine()} (LLVM cpu {llvm_get_system_cpu()}, "
          f"TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')})")
    print(f"{'graph':12s} {'feat':>4s} {'kernel ms':>10s} {'call ms':>9s} {'call/kernel':>11s} "
          f"{'unchecked ms':>12s}")
    for feat in args.feat:
        kernel = sparsetir.build(KERNELS["csrmm"].specialize({"feat_size": feat}), "llvm")
        for graph in args.graphs:
            adj = load_graph(graph)
            m, n = adj.shape
            x = np.random.default_rng(0).standard_normal((n, feat)).astype(np.float32)
            y = np.empty((m, feat), np.float32)
            call_args = (adj.data, x, y, adj.indptr, adj.indices, m, n, adj.nnz)
            kernel(*call_args)
            np.testing.assert_allclose(y, adj @ x, rtol=1e-4, atol=1e-4)
            repeat = max(20, int(0.2 / max(kernel.time(*call_args, number=5, repeat=1), 1e-6)))
            kernel_s, call_s, unchecked_s = [], [], []
            for _ in range(args.rounds):   # interleaved, so machine noise hits all three
                kernel_s.append(kernel.time(*call_args, number=repeat, repeat=1))
                call_s.append(median_seconds(lambda: kernel(*call_args), repeat))
                unchecked_s.append(median_seconds(lambda: kernel(*call_args, validate=False),
                                               repeat))
            k, c, u = (float(np.median(v)) * 1e3 for v in (kernel_s, call_s, unchecked_s))
            print(f"{graph:12s} {feat:4d} {k:10.4f} {c:9.4f} {c / k:10.2f}x {u:12.4f}")


if __name__ == "__main__":
    main()
