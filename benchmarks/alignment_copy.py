"""The measurement behind ``ops.alignment``'s thresholds: what a gathered operand 16 bytes off a
cache line costs the SpMM and SDDMM kernels, against the parallel copy (``ops.line_copy``)
that puts it on one. Since 2026-11-29 only SDDMM copies (``ops.alignment.COPIED``); SpMM's
kernels realign a row off a line in registers (``backend.realign_gathers``), so its ``off``
column is now that kernel's time, and the SpMM rows show what the copy would cost beside it.

For each graph and feature size, in one process, in alternating rounds: the kernel on the
operand off the boundary (``off``), the copy followed by the kernel on the copy (``copied``),
the copy alone (``copy``) and numpy's copy (``numpy``), the kernels bound once (the call path
that ``ops.spmm`` takes minus its Python); ``aligned`` is ``copied - copy``. The operand was
read by the call before, as an operator's output was just written. Each is timed by the
caller's CPU clock (``time.thread_time_ns``), which a shared machine's other processes do not
inflate as they do the wall clock: run with ``TVM_NUM_THREADS=1`` so the caller does all the
work (``--clock wall`` times several threads, on an idle machine). Medians of ``--rounds``.
``reuse`` is the gathers per operand row (nonzeros / rows); the copy pays where ``copied <
off``. The graphs are the bundled ones and uniform random ones of facebook's size (4,039
nodes) with ``--degrees`` nonzeros a row, to find the reuse at which it starts to pay;
operands larger than two L2 caches are skipped (``ops.alignment`` never copies them).

Run: ``TVM_NUM_THREADS=1 .venv/bin/python benchmarks/alignment_copy.py [--graphs facebook
pubmed] [--degrees 4 8 16] [--feat 32 128] [--rounds 200] [--clock cpu|wall]``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.sparse

CACHE_LINE = 64


def off_boundary(shape, offset_bytes: int, rng) -> np.ndarray:
    """A float32 array of ``shape`` starting ``offset_bytes`` past a 64-byte boundary."""
    size = int(np.prod(shape))
    buffer = np.empty(size + CACHE_LINE, np.float32)
    start = (-buffer.ctypes.data % CACHE_LINE + offset_bytes) // 4
    array = buffer[start:start + size].reshape(shape)
    array[:] = rng.standard_normal(shape)
    return array


def random_graph(nodes: int, degree: int, seed: int = 0) -> scipy.sparse.csr_matrix:
    """``nodes`` rows of ``degree`` distinct uniformly random columns each."""
    rng = np.random.default_rng(seed)
    indices = np.concatenate([np.sort(rng.choice(nodes, degree, replace=False))
                              for _ in range(nodes)]).astype(np.int32)
    indptr = np.arange(nodes + 1, dtype=np.int32) * degree
    values = rng.uniform(0.5, 1.5, indices.size).astype(np.float32)
    return scipy.sparse.csr_matrix((values, indices, indptr), shape=(nodes, nodes))


def cases(M, feat: int, rng) -> dict:
    """``{op: (kernel on the gathered operand off the boundary, the same after the copy, the
    copy, numpy's copy)}``, each a function of no arguments. SpMM gathers ``X``, SDDMM ``Y``
    (its ``X``, read row by row, stays off the boundary: copying it did not pay)."""
    from sparsetir.ops.line_copy import copy_lines  # pylint: disable=import-outside-toplevel
    from sparsetir.ops.operators import bind_kernel  # pylint: disable=import-outside-toplevel
    m, n = M.shape
    gathered = off_boundary((n, feat), 16, rng)
    copy = off_boundary((n, feat), 0, rng)
    rows = off_boundary((m, feat), 16, rng)
    Y = np.empty((m, feat), np.float32)
    values = np.empty(M.nnz, np.float32)
    spmm, sddmm = bind_kernel(M, "spmm", feat), bind_kernel(M, "sddmm", feat)
    kernels = {"spmm": lambda operand: spmm(operand, Y),
               "sddmm": lambda operand: sddmm(rows, operand, values)}

    def variants(kernel):
        def copied():
            copy_lines(gathered, copy)
            kernel(copy)
        return (lambda: kernel(gathered), copied, lambda: copy_lines(gathered, copy),
                lambda: np.copyto(copy, gathered))

    return {op: variants(kernel) for op, kernel in kernels.items()}


CLOCKS = {"cpu": time.thread_time_ns, "wall": time.perf_counter_ns}


def measure(M, feat: int, rounds: int, clock=time.thread_time_ns) -> dict:
    """Median microseconds per op and variant by ``clock``, variants alternating."""
    calls = cases(M, feat, np.random.default_rng(0))
    times = {(op, k): [] for op in calls for k in range(4)}
    for _ in range(rounds):
        for op, variants in calls.items():
            for k, call in enumerate(variants):
                start = clock()
                call()
                times[(op, k)].append(clock() - start)
    return {key: float(np.median(t)) / 1e3 for key, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", default=["facebook", "email-enron", "pubmed",
                                                          "cora"])
    parser.add_argument("--degrees", type=int, nargs="*", default=[2, 4, 8, 16, 32])
    parser.add_argument("--feat", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: the caller's CPU time (one thread); wall: for 2+ threads on "
                             "an idle machine")
    args = parser.parse_args()
    import sparsetir.ops  # pylint: disable=import-outside-toplevel
    from sparsetir.data import load_graph  # pylint: disable=import-outside-toplevel
    from sparsetir.schedule.operators import l2_cache_bytes  # pylint: disable=C0415
    graphs = [(name, load_graph(name)) for name in args.graphs]
    graphs += [(f"random-{d}", random_graph(4039, d)) for d in args.degrees]
    print(f"{args.clock} us, medians of {args.rounds} (TVM_NUM_THREADS="
          f"{os.environ.get('TVM_NUM_THREADS')})")
    print(f"{'graph':14s} {'reuse':>5s} {'feat':>4s} {'op':5s} {'off':>8s} {'copied':>8s} "
          f"{'copy':>7s} {'numpy':>7s} {'aligned':>8s}")
    for name, A in graphs:
        M = sparsetir.ops.SparseMatrix(A)
        for feat in args.feat:
            if max(M.shape) * feat * 4 > 2 * l2_cache_bytes():
                continue                    # read where it is (ops.alignment)
            result = measure(M, feat, args.rounds, CLOCKS[args.clock])
            for op in ("spmm", "sddmm"):
                off, copied, copy, numpy_copy = (result[(op, k)] for k in range(4))
                print(f"{name:14s} {M.nnz / M.shape[1]:5.1f} {feat:4d} {op:5s} {off:8.1f} "
                      f"{copied:8.1f} {copy:7.1f} {numpy_copy:7.1f} {copied - copy:8.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
