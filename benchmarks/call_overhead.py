"""What a whole call costs next to the compiled kernel alone.

Two ways users call kernels, on the bundled graphs and the synthetic arxiv-size graph:

- ``sparsetir.ops.spmm(M, X, out=Y)`` on a ``SparseMatrix`` made once (validated when made,
  its arrays bound to the kernel once): the call converts and checks X and Y only;
- a kernel from ``sparsetir.build`` (SparseTIR's csrmm, feature size baked in) called with
  scipy's arrays, every index check made by the compiled check function on each call.

Both are given numpy arrays straight from scipy and numpy (16-byte aligned, passed without a
copy). The kernel alone is timed with TVM's time evaluator on the same arguments. Times are
medians of interleaved rounds in one process.

A second table compares a graph operator on torch tensors called eagerly
(``ops.u_mul_e_sum(M, X, w)``) with the same call through its torch custom operator
(``torch.ops.sparsetir.gspmm``, what ``torch.compile`` and ``torch.export`` run): the same
kernel, so the difference is torch's dispatch of the operator.

Run: ``TVM_NUM_THREADS=2 .venv/bin/python benchmarks/call_overhead.py [--feat 32 128]
[--graphs cora synthetic-arxiv]``
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
    args = parser.parse_args()
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
    """The eager graph operator against its torch custom operator (see the docstring)."""
    import torch  # pylint: disable=import-outside-toplevel
    from sparsetir.ops.graph_tensors import graph_tensors
    print(f"\n{'graph':16s} {'feat':>4s} {'eager ms':>9s} {'custom op ms':>12s} "
          f"{'dispatch us':>11s}")
    for feat in args.feat:
        for name in args.graphs:
            M = sparsetir.ops.SparseMatrix(graph(name))
            arrays = graph_tensors(M)
            X = torch.randn(M.shape[1], feat)
            w = arrays.data
            eager = sparsetir.ops.u_mul_e_sum(M, X, w)
            operator = torch.ops.sparsetir.gspmm(arrays.indptr, arrays.indices, "mul", "sum",
                                                 X, w)[0]
            torch.testing.assert_close(operator, eager)
            eager_s, operator_s = [], []
            for _ in range(args.rounds):       # interleaved, so machine noise hits both
                eager_s.append(median_seconds(lambda: sparsetir.ops.u_mul_e_sum(M, X, w), 50))
                operator_s.append(median_seconds(lambda: torch.ops.sparsetir.gspmm(
                    arrays.indptr, arrays.indices, "mul", "sum", X, w), 50))
            e, o = float(np.median(eager_s)), float(np.median(operator_s))
            print(f"{name:16s} {feat:4d} {e * 1e3:9.4f} {o * 1e3:12.4f} {(o - e) * 1e6:11.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
