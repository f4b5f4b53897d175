"""What a level-order conversion costs: ``A = B + C`` with operands and results in declared
formats whose orders agree (no conversion) or contradict (``k.plan``: an operand sorted by each
call, or a result computed in the other order and converted), against scipy's ``B + C``.

Operands are ``SparseTensor``s in their declared formats (what a user holding them passes), two
power-law graphs with random float64 values. Each row is the median of ``--reps`` whole calls
(operands read, kernel, result returned in its declared format) after one warm-up call.

Run: ``TVM_NUM_THREADS=1 .venv/bin/python benchmarks/level_orders.py --nodes 100000 --edges 1000000``
"""

from __future__ import annotations

import argparse

import numpy as np

import sparsetir.algebra as alg
from sparsetir.data import power_law_graph
from sparsetir.format import SparseTensor
from sparsetir.runtime.timing import median_seconds

CASES = (          # (A, B, C)
    ("CSR", "CSR", "CSR"),
    ("CSR", "DCSR", "CSC"),
    ("CSR", "CSC", "CSC"),
    ("CSC", "CSC", "CSC"),
    ("DCSR", "DCSC", "DCSC"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    b, c = (power_law_graph(args.nodes, args.edges, seed=s).astype(np.float64) for s in (0, 1))
    b.data, c.data = rng.random(b.nnz), rng.random(c.nnz)
    scipy_ms = 1e3 * median_seconds(lambda: b + c, args.reps)
    print(f"nnz(B) {b.nnz}, nnz(C) {c.nnz}, nnz(B + C) {(b + c).nnz}; scipy B + C {scipy_ms:.2f} ms")
    print(f"{'A':>5} {'B':>5} {'C':>5}  {'ms':>8}  conversions")
    for a_fmt, b_fmt, c_fmt in CASES:
        k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": a_fmt, "B": b_fmt, "C": c_fmt})
        operands = {"B": SparseTensor.from_scipy(b, b_fmt), "C": SparseTensor.from_scipy(c, c_fmt)}
        assert abs(k(**operands).to_scipy() - (b + c)).max() < 1e-12
        ms = 1e3 * median_seconds(lambda: k(**operands), args.reps)
        converted = ", ".join(name for name, _, _ in k.plan.conversions) or "-"
        print(f"{a_fmt:>5} {b_fmt:>5} {c_fmt:>5}  {ms:8.2f}  {converted}")


if __name__ == "__main__":
    main()
