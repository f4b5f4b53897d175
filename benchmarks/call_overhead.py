"""What a whole call costs next to the compiled kernel alone.

Two ways users call kernels, on the bundled graphs and the synthetic arxiv-size graph:

- ``sparsetir.ops.spmm(M, X, out=Y)`` on a ``SparseMatrix`` made once (validated when made,
  its arrays bound to the kernel once): the call converts and checks X and Y only;
- a kernel from ``sparsetir.build`` (SparseTIR's csrmm, feature size baked in) called with
  scipy's arrays, every index check made by the compiled check function on each call.

Both are given numpy arrays straight from scipy and numpy (16-byte aligned, passed without a
copy). The kernel alone is timed with TVM's time evaluator on the same arguments. Times are
medians of interleaved rounds in one process.

A second table compares graph operators on torch tensors called eagerly
(``ops.u_mul_e_sum(M, X, w)``, ``ops.u_dot_v(M, X, Y)``) with the same calls through their
torch custom operators (``torch.ops.sparsetir.gspmm``, ``gsddmm``: what ``torch.compile`` and
``torch.export`` run): the same kernels, so the difference is torch's dispatch of the
operator. It starts with a 16 x 16 graph of 8 features, where the kernel costs little; eager
and operator calls alternate call by call and each row gives medians of up to ``--calls``
calls. With ``TVM_NUM_THREADS=1`` (and torch on one thread) every call runs in the calling
thread, which is timed by its own CPU time (``time.thread_time_ns``): what other processes on
a loaded machine take does not count; otherwise wall time.

Run: ``TVM_NUM_THREADS=2 .venv/bin/python benchmarks/call_overhead.py [--feat 32 128]
[--graphs cora synthetic-arxiv]``; the dispatch alone:
``TVM_NUM_THREADS=1 .venv/bin/python benchmarks/call_overhead.py --custom-ops-only
--graphs cora --feat 32``
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import sparsetir  # noqa: E402
import sparsetir.ops  # noqa: E402
from kernel_zoo import KERNELS  # noqa: E402
from sparsetir.data import graph_names, load_graph, power_law_graph  # noqa: E402
from sparsetir.ops.operators import bind_kernel  # noqa: E402
from sparsetir.runtime.timing import median_seconds  # noqa: E402

ARXIV = (169_343, 1_166_243)


def graph(name: str):
    return power_law_graph(*ARXIV, seed=0) if name == "synthetic-arxiv" else load_graph(name)


def rounds(kernel_time, call, count: int, budget_s: float = 0.2) -> tuple:
    """Median kernel and call seconds over ``count`` interleaved rounds."""
    repeat = max(3, int(budget_s / max(kernel_time(1), 1e-6)))
    kernel_s, call_s = [], []
    for _ in range(count):       # interleaved, so machine noise hits both
        kernel_s.append(kernel_time(repeat))
        call_s.append(median_seconds(call, repeat))
    return float(np.median(kernel_s)), float(np.median(call_s))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feat", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--graphs", nargs="+", default=graph_names() + ["synthetic-arxiv"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=4000,
                        help="calls of each operator timed, at most (custom operator table)")
    parser.add_argument("--budget", type=float, default=2.0,
                        help="seconds of eager calls timed per row, at most (custom operator "
                        "table)")
    parser.add_argument("--custom-ops-only", action="store_true",
                        help="only the custom operator table")
    args = parser.parse_args()
    if args.custom_ops_only:
        custom_operator_rows(args)
        return
    from tvm.target.codegen import llvm_get_system_cpu
    print(f"SpMM call overhead on {platform.machine()} (LLVM cpu {llvm_get_system_cpu()}, "
          f"TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')})")
    print(f"{'graph':16s} {'feat':>4s} {'caller':>16s} {'kernel ms':>10s} {'call ms':>9s} "
          f"{'overhead us':>11s} {'call/kernel':>11s}")
    for feat in args.feat:
        built = sparsetir.build(KERNELS["csrmm"].specialize({"feat_size": feat}), "llvm")
        for name in args.graphs:
            A = graph(name)
            m, n = A.shape
            X = np.random.default_rng(0).standard_normal((n, feat)).astype(np.float32)
            Y = np.full((m, feat), np.nan, np.float32)
            expected = A @ X
            M = sparsetir.ops.SparseMatrix(A)
            sparsetir.ops.spmm(M, X, out=Y)
            np.testing.assert_allclose(Y, expected, rtol=1e-4, atol=1e-4)
            bound = bind_kernel(M, "spmm", feat)
            build_args = (A.data, X, Y, A.indptr, A.indices, m, n, A.nnz)
            built(*build_args)
            np.testing.assert_allclose(Y, expected, rtol=1e-4, atol=1e-4)
            cases = {
                "ops.spmm": (lambda r: bound.time(X, Y, number=r, repeat=1),
                             lambda: sparsetir.ops.spmm(M, X, out=Y)),
                "build (checked)": (lambda r: built.time(*build_args, number=r, repeat=1),
                                    lambda: built(*build_args)),
            }
            for caller, (kernel_time, call) in cases.items():
                k, c = rounds(kernel_time, call, args.rounds)
                print(f"{name:16s} {feat:4d} {caller:>16s} {k * 1e3:10.4f} {c * 1e3:9.4f} "
                      f"{(c - k) * 1e6:11.1f} {c / k:10.3f}x", flush=True)
    custom_operator_rows(args)


def custom_operator_rows(args) -> None:
    """The eager graph operators against their torch custom operators (see the docstring)."""
    import torch  # pylint: disable=import-outside-toplevel
    threads = os.environ.get("TVM_NUM_THREADS")
    if threads == "1":        # every call runs in this thread: its CPU time, not the wall's
        torch.set_num_threads(1)
        clock, clock_name = time.thread_time_ns, "thread CPU time"
    else:
        clock, clock_name = time.perf_counter_ns, "wall time"
    print(f"\nTorch custom operators, {clock_name}, median of up to {args.calls} calls each "
          "(eager and operator alternated call by call)")
    print(f"{'graph':16s} {'feat':>4s} {'operator':>8s} {'calls':>5s} {'eager us':>9s} "
          f"{'custom op us':>12s} {'dispatch us':>11s}")
    for name, A, feat in dispatch_cases(args):
        for operator, (eager, custom) in operator_pairs(A, feat).items():
            torch.testing.assert_close(custom(), eager())
            calls = max(20, min(args.calls,
                                int(args.budget / max(median_seconds(eager, 5), 1e-7))))
            e, o = alternated_medians(eager, custom, calls, clock)
            print(f"{name:16s} {feat:4d} {operator:>8s} {calls:5d} {e:9.1f} {o:12.1f} "
                  f"{o - e:11.1f}", flush=True)


def dispatch_cases(args):
    """``(name, scipy matrix, features)``: a 16 x 16 graph with 8 features, where the kernel
    costs little beside the dispatch, then the graphs and feature sizes asked for."""
    yield "16x16", scipy.sparse.random(16, 16, density=0.25, format="csr", dtype=np.float32,
                                       random_state=0), 8
    for feat in args.feat:
        for name in args.graphs:
            yield name, graph(name), feat


def operator_pairs(A, feat: int) -> dict:
    """``{operator: (eager call, custom operator call)}`` on ``A`` with ``feat`` features:
    ``u_mul_e_sum`` against ``gspmm``, ``u_dot_v`` against ``gsddmm``."""
    import torch  # pylint: disable=import-outside-toplevel
    from sparsetir.ops.graph_tensors import graph_tensors
    M = sparsetir.ops.SparseMatrix(A)
    arrays = graph_tensors(M)
    X, Y = torch.randn(M.shape[1], feat), torch.randn(M.shape[0], feat)
    w, ops = arrays.data, torch.ops.sparsetir
    return {
        "gspmm": (lambda: sparsetir.ops.u_mul_e_sum(M, X, w),
                  lambda: ops.gspmm(arrays.indptr, arrays.indices, "mul", "sum", X, w)[0]),
        "gsddmm": (lambda: sparsetir.ops.u_dot_v(M, X, Y),
                   lambda: ops.gsddmm(arrays.indptr, arrays.indices, "dot", X, Y, "u", "v")),
    }


def alternated_medians(first, second, calls: int, clock) -> tuple:
    """Median microseconds of ``calls`` calls of ``first`` and of ``second``, alternated call by
    call (so load on the machine hits both alike), timed with ``clock`` (nanoseconds). Each
    result is freed after the clock is read: freeing a large one (memory given back to the
    system) is no part of the call."""
    times = ([], [])
    for _ in range(calls):
        for call, kept in zip((first, second), times):
            start = clock()
            result = call()
            kept.append(clock() - start)
            del result
    return tuple(float(np.median(kept)) / 1e3 for kept in times)


if __name__ == "__main__":
    main()
