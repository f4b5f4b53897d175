"""Co-iteration on bundled graphs: A + B, A .* B and A @ B where B is A's two-hop pattern.

Every result is checked against scipy (values compared densely: our results keep the explicit
zeros the merge produces, scipy drops them) and timed beside scipy and, when it is installed
(``make bench`` installs it), python-graphblas: median of repeats in this process, with
``TVM_NUM_THREADS`` threads (on a shared machine compare ratios only, and read the CPU pressure,
``/proc/pressure/cpu``, printed at the end). Where other processes hold the cores, run with
``OMP_WAIT_POLICY=PASSIVE``: with OpenMP's default spinning, a parallel launch at 2 threads
waited about 8 ms for its second thread on a shared 2-core machine.

A SpGEMM of more than ``MAX_PRODUCTS`` products (Email-Enron's three-hop pattern: 1.5e9) is
skipped, for every side: its result would not fit in memory.

    TVM_NUM_THREADS=1 python examples/coiteration.py [graph ...]   # default: cora citeseer
"""

import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import sparsetir.algebra as alg
from sparsetir.data import load_graph

try:
    import graphblas as gb
except ImportError:                   # optional contender
    gb = None

CSR = {"A": "CSR", "B": "CSR", "C": "CSR"}
MAX_PRODUCTS = 5 * 10 ** 8
"""The most products (``sum(nnz(B[k, :]) for every stored A[i, k])``) of a SpGEMM run here."""
OPS = {
    "A + B": ("C(i,j) = A(i,j) + B(i,j)", lambda a, b: a + b,
              lambda a, b: a.ewise_add(b, gb.binary.plus).new()),
    "A .* B": ("C(i,j) = A(i,j) * B(i,j)", lambda a, b: a.multiply(b),
               lambda a, b: a.ewise_mult(b, gb.binary.times).new()),
    "A @ B": ("C(i,j) = A(i,k) * B(k,j)", lambda a, b: a @ b,
              lambda a, b: a.mxm(b, gb.semiring.plus_times).new()),
}


def median_ms(fn, repeats=7) -> float:
    """Median wall time of ``fn()`` in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def operands(name: str):
    """The graph with random weights, and its two-hop pattern (a different pattern)."""
    a = load_graph(name).astype(np.float64)
    a.data = np.random.default_rng(0).random(a.nnz)
    b = sp.csr_matrix(a @ a)
    b.sort_indices()
    return a, b


def same(ours, theirs) -> bool:
    """Equal values, compared densely (explicit zeros either side)."""
    diff = (ours.to_scipy() - theirs).tocsr()
    return bool(np.allclose(diff.data, 0, atol=1e-9 * max(1.0, abs(theirs).max())))


def main(graphs) -> None:
    kernels = {label: alg.compile(stmt, formats=CSR) for label, (stmt, _, _) in OPS.items()}
    print(f"{'graph':<12}{'op':<8}{'nnz(A)':>8}{'nnz(B)':>10}{'nnz(C)':>10}"
          f"{'ours ms':>10}{'scipy ms':>10}{'graphblas ms':>14}")
    for name in graphs:
        a, b = operands(name)
        ga, gbb = (gb.io.from_scipy_sparse(a), gb.io.from_scipy_sparse(b)) if gb else (None, None)
        for label, (_, reference, graphblas) in OPS.items():
            products = int(np.diff(b.indptr)[a.indices].sum()) if label == "A @ B" else 0
            if products > MAX_PRODUCTS:
                print(f"{name:<12}{label:<8}{a.nnz:>8}{b.nnz:>10}   skipped: {products:.1e} "
                      "products")
                continue
            kernel = kernels[label]
            result = kernel(A=a, B=b)
            assert same(result, reference(a, b)), f"{name} {label}: differs from scipy"
            ours = median_ms(lambda: kernel(A=a, B=b))
            theirs = median_ms(lambda: reference(a, b))
            other = f"{median_ms(lambda: graphblas(ga, gbb)):>14.3f}" if gb else f"{'n/a':>14}"
            print(f"{name:<12}{label:<8}{a.nnz:>8}{b.nnz:>10}{result.nse:>10}"
                  f"{ours:>10.3f}{theirs:>10.3f}{other}")
    pressure = Path("/proc/pressure/cpu")
    if pressure.exists():
        print(f"# cpu pressure: {pressure.read_text().splitlines()[0]}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:] or ["cora", "citeseer"])
