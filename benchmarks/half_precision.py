"""bfloat16 and float16 SpMM and SDDMM against float32, ours and torch.sparse's and DGL's.

One thread (``TVM_NUM_THREADS`` and torch's), a graph whose features do not fit in the cache
(by default the synthetic ogbn-arxiv-sized power-law graph: 169,343 nodes, 1,166,243 edges),
F features. Our kernels are timed interleaved (each round calls every one once, in turn, so a
busy machine slows them alike): each row is the median of ``--reps`` rounds after two warm-up
calls, and the speedups are medians of the per-round ratios to float32. The contenders are
timed alone (median of a third as many calls). Rows:

- ours float32: ``spmm`` (the tuned tiled kernel, with prefetching) and ``sddmm``;
- ours half: ``spmm`` under ``torch.autocast`` (bf16/fp16 X, the matrix's float32 values, a
  half result), ``copy_u_sum`` (``weighted=False``), ``u_mul_e_sum`` with half edge values,
  ``sddmm`` on half operands;
- torch.sparse (CSR ``torch.sparse.mm``) and DGL (``dgl.ops.u_mul_e_sum``) in float32 and in
  the half dtype, or the error with which they refuse it.

Run: ``TVM_NUM_THREADS=1 .venv/bin/python benchmarks/half_precision.py --feat 128``
(``--graph email-enron`` for a stored graph).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import sparsetir.ops as ops
from sparsetir.data import load_graph, power_law_graph
from sparsetir.runtime.timing import median_seconds


def interleaved_ms(calls: dict, reps: int) -> dict:
    """``{name: [ms per round]}`` of ``calls`` (name -> callable), called in turn each round."""
    for call in calls.values():
        call()
        call()
    times = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


def _autocast(call, dtype):
    def run():
        with torch.autocast("cpu", dtype=dtype):
            return call()
    return run


def contender_rows(A, x, y, reps: int) -> dict:
    """torch.sparse's and DGL's SpMM in ``x``'s dtype: ms, or the refusal's text."""
    rows = {}
    csr = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                  torch.from_numpy(A.indices.astype(np.int64)),
                                  torch.from_numpy(A.data).to(x.dtype), size=A.shape)
    rows[f"torch.sparse.mm {x.dtype}"] = _attempt(lambda: torch.sparse.mm(csr, x), reps)
    try:
        import dgl                    # pylint: disable=import-outside-toplevel
        graph = dgl.graph((torch.from_numpy(A.indices.astype(np.int64)),
                           torch.from_numpy(np.repeat(np.arange(A.shape[0]),
                                                      np.diff(A.indptr)))),
                          num_nodes=max(A.shape))
        weights = torch.from_numpy(A.data).to(x.dtype)
        rows[f"dgl u_mul_e_sum {x.dtype}"] = _attempt(
            lambda: dgl.ops.u_mul_e_sum(graph, x, weights), reps)
        rows[f"dgl u_dot_v {x.dtype}"] = _attempt(
            lambda: dgl.ops.u_dot_v(graph, x, y), reps)
    except ImportError as err:
        rows["dgl"] = f"not installed ({err})"
    return rows


def _attempt(call, reps: int):
    try:
        return median_seconds(call, reps) * 1e3
    except Exception as err:  # noqa: BLE001  (a library's refusal, of whatever class, is a row)
        return f"refused: {type(err).__name__}: {str(err).splitlines()[0][:90]}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="arxiv-synthetic")
    parser.add_argument("--feat", type=int, default=128)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    A = (power_law_graph(169_343, 1_166_243, seed=0) if args.graph == "arxiv-synthetic"
         else load_graph(args.graph)).astype(np.float32)
    A = A[:, :A.shape[0]] if A.shape[1] > A.shape[0] else A
    M = ops.SparseMatrix(A)
    m, n = A.shape
    x32, y32 = torch.randn(n, args.feat), torch.randn(m, args.feat)
    values32 = torch.from_numpy(np.array(M.values))
    calls = {"ours spmm float32": lambda: ops.spmm(M, x32),
             "ours copy_u_sum float32": lambda: ops.spmm(M, x32, weighted=False),
             "ours sddmm float32": lambda: ops.sddmm(M, y32, x32)}
    for dtype in (torch.bfloat16, torch.float16):
        x, y, values = x32.to(dtype), y32.to(dtype), values32.to(dtype)
        calls[f"ours spmm autocast {dtype}"] = _autocast(lambda x=x: ops.spmm(M, x), dtype)
        calls[f"ours copy_u_sum {dtype}"] = lambda x=x: ops.spmm(M, x, weighted=False)
        calls[f"ours u_mul_e_sum {dtype}"] = lambda x=x, v=values: ops.u_mul_e_sum(M, x, v)
        calls[f"ours sddmm {dtype}"] = lambda x=x, y=y: ops.sddmm(M, y, x)
    times = interleaved_ms(calls, args.reps)
    rows = {}
    for name, ms in times.items():
        kind = next((k for k in ("sddmm", "copy_u_sum") if k in name), "spmm")
        base = times[f"ours {kind} float32"]
        ratio = statistics.median(b / t for b, t in zip(base, ms))
        rows[name] = f"{statistics.median(ms):9.2f} ms  x{ratio:4.2f} vs float32"
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        rows.update(contender_rows(A, x32.to(dtype), y32.to(dtype), max(3, args.reps // 3)))
    print(f"graph {args.graph} ({m} x {n}, nnz {A.nnz}), F = {args.feat}, one thread")
    for name, value in rows.items():
        print(f"{name:42s} " + (f"{value:9.2f} ms" if isinstance(value, float) else value))


if __name__ == "__main__":
    main()
