"""Would column partitions help SpMM on the arxiv-size graph? A lower bound of their cost.

A column-partitioned SpMM splits A into ``P`` blocks of columns, so that each block gathers
from ``1/P`` of X (which may then stay in cache), and adds the blocks' products into Y. This
script times ``sparsetir.ops``' CSR kernel on the whole matrix and on each column block alone
(each writing Y, without the reads a real accumulation adds): when the blocks' sum is not
below the whole, partitions cannot win on this machine.

Run: ``TVM_NUM_THREADS=2 .venv/bin/python benchmarks/column_partitions.py [--feat 128]
[--parts 2 4 8]``
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from sparsetir import ops
from sparsetir.data import power_law_graph
from sparsetir.ops.operators import bind_kernel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feat", type=int, default=128)
    parser.add_argument("--parts", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    A = power_law_graph(169_343, 1_166_243, seed=0)
    m, n = A.shape
    X = np.random.default_rng(0).standard_normal((n, args.feat)).astype(np.float32)
    Y = np.empty((m, args.feat), np.float32)
    whole = bind_kernel(ops.SparseMatrix(A), "spmm", args.feat)
    print(f"synthetic-arxiv, feature size {args.feat}, "
          f"TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')}: kernel ms (median of rounds)")
    for parts in args.parts:
        bounds = np.linspace(0, n, parts + 1).astype(int)
        blocks = [(bind_kernel(ops.SparseMatrix(A[:, lo:hi]), "spmm", args.feat),
                   np.ascontiguousarray(X[lo:hi])) for lo, hi in zip(bounds, bounds[1:])]
        whole_ms, blocks_ms = [], []
        for _ in range(args.rounds):
            whole_ms.append(whole.time(X, Y, number=5, repeat=1) * 1e3)
            blocks_ms.append(sum(k.time(x, Y, number=5, repeat=1) for k, x in blocks) * 1e3)
        w, b = float(np.median(whole_ms)), float(np.median(blocks_ms))
        print(f"P={parts}: whole {w:.2f}, sum of {parts} column blocks {b:.2f} ({b / w:.2f}x)",
              flush=True)


if __name__ == "__main__":
    main()
