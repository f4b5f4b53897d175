"""The measurement behind ``sparsetir.ops``' prefetch distance: SpMM and SDDMM kernels with
the loop over nonzeros prefetching gathered rows ``D`` nonzeros ahead, for several ``D``.

Each (graph, feature size) runs in its own process; within it the distances are timed in
interleaved rounds (TVM's time evaluator on the kernel alone, arguments bound once), median
of rounds. ``D = 0`` is no prefetch.

Run: ``TVM_NUM_THREADS=2 .venv/bin/python benchmarks/prefetch.py [--graphs cora synthetic-arxiv]
[--feat 32 128] [--distances 0 4 8 16 32]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np


def measure(graph: str, feat: int, distances: list, rounds: int) -> dict:
    """Median kernel milliseconds per (op, distance) on one graph and feature size."""
    import sparsetir.ops  # pylint: disable=import-outside-toplevel
    from sparsetir.data import load_graph, power_law_graph
    from sparsetir.ops import operators

    A = power_law_graph(169_343, 1_166_243, seed=0) if graph == "synthetic-arxiv" \
        else load_graph(graph)
    M = sparsetir.ops.SparseMatrix(A)
    m, n = M.shape
    rng = np.random.default_rng(0)
    X, Y = (rng.standard_normal((rows, feat)).astype(np.float32) for rows in (m, n))
    Xn = rng.standard_normal((n, feat)).astype(np.float32)
    calls = {}
    for op in ("spmm", "sddmm"):
        for distance in distances:
            bound = operators.bind_kernel(M, op, feat, prefetch=distance)
            if op == "spmm":
                out = np.full((m, feat), np.nan, np.float32)
                args = (Xn, out)
            else:
                out = np.full(M.nnz, np.nan, np.float32)
                args = (X, Y, out)
            calls[(op, distance)] = (bound, args)
    times = {key: [] for key in calls}
    budget = 0.2
    for _ in range(rounds):
        for key, (bound, args) in calls.items():
            once = bound.time(*args, number=1, repeat=1)
            times[key].append(bound.time(*args, number=max(1, int(budget / once)), repeat=1))
    return {f"{op} {d}": float(np.median(t)) * 1e3 for (op, d), t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+",
                        default=["cora", "pubmed", "email-enron", "synthetic-arxiv"])
    parser.add_argument("--feat", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--distances", type=int, nargs="+", default=[0, 4, 8, 16, 32])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)   # graph feat: the worker
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.distances, args.rounds)))
        return
    print(f"kernel ms by prefetch distance (TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')})")
    print(f"{'graph':16s} {'feat':>4s} {'op':6s} " + " ".join(f"{'D=' + str(d):>8s}"
                                                            for d in args.distances))
    for graph in args.graphs:
        for feat in args.feat:
            done = subprocess.run(
                [sys.executable, __file__, "--one", graph, str(feat), "--rounds",
                 str(args.rounds), "--distances", *map(str, args.distances)],
                capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            for op in ("spmm", "sddmm"):
                print(f"{graph:16s} {feat:4d} {op:6s} " + " ".join(
                    f"{result[f'{op} {d}']:8.3f}" for d in args.distances), flush=True)


if __name__ == "__main__":
    main()
