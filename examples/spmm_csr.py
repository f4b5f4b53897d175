"""CSR SpMM end to end: take the Stage I kernel (sparsetir.ops.kernels.spmm), lower it, schedule
it with TVM primitives, build it, check it against scipy and time it next to scipy and
torch.sparse.

Run: ``.venv/bin/python examples/spmm_csr.py [graph ...] [--feat 64]`` (``make bench`` runs the full
benchmark against DGL and the CPU libraries).
"""

import argparse
import os
import platform
import warnings

import numpy as np
import tvm
from tvm.target.codegen import llvm_get_system_cpu

import sparsetir
from sparsetir.data import graph_names, load_graph
from sparsetir.ops.kernels import spmm as csrmm    # CSR SpMM in Stage I: see its source
from sparsetir.runtime.timing import median_seconds


def schedule_cpu(mod: tvm.IRModule, lanes: int = 16) -> tvm.IRModule:
    """Rows in parallel, features vectorised: plain TVM schedule primitives on Stage II, with
    TVM's checks on. ``build`` moves the init before the row's loop (empty rows get zeros)
    and keeps the vectorised feature loop for it."""
    sch = tvm.s_tir.Schedule(mod)
    (rows,) = sch.get_loops(sch.get_sblock("spmm0"))
    _, feature = sch.get_loops(sch.get_sblock("spmm1"))
    sch.vectorize(sch.split(feature, [None, lanes])[1])
    sch.parallel(rows)
    return sch.mod


def run(graph: str, feat: int, kernel_cache: dict) -> None:
    A = load_graph(graph)
    m, n = A.shape
    rng = np.random.default_rng(0)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    X = rng.standard_normal((n, feat)).astype(np.float32)
    Y = np.full((m, feat), np.nan, np.float32)          # garbage before the call
    if feat not in kernel_cache:
        stage2 = sparsetir.lower_sparse_iter(csrmm.specialize({"feat_size": feat}))
        kernel_cache[feat] = sparsetir.build(schedule_cpu(stage2), "llvm")
    kernel = kernel_cache[feat]
    args = (A.data, X, Y, A.indptr, A.indices, m, n, A.nnz)
    kernel(*args)
    expected = A @ X
    np.testing.assert_allclose(Y, expected, rtol=1e-4, atol=1e-4)

    ours = kernel.time(*args, number=20, repeat=5)   # compiled function only, mean per call
    scipy_t = median_seconds(lambda: A @ X)
    line = f"{graph:12s} {m:7d} {A.nnz:8d} {feat:5d} {ours * 1e3:9.3f} {scipy_t * 1e3:9.3f} " \
           f"{scipy_t / ours:7.2f}x"
    try:
        import torch
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                     torch.from_numpy(A.indices.astype(np.int64)),
                                     torch.from_numpy(A.data), size=A.shape,
                                     check_invariants=False)
        Xt = torch.from_numpy(X)
        torch_t = median_seconds(lambda: torch.sparse.mm(At, Xt))
        line += f" {torch_t * 1e3:9.3f} {torch_t / ours:7.2f}x"
    except ImportError:
        line += "   (torch not installed)"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graphs", nargs="*", default=graph_names())
    parser.add_argument("--feat", type=int, nargs="+", default=[32, 128])
    args = parser.parse_args()
    threads = os.environ.get("TVM_NUM_THREADS", "default")
    cpu = llvm_get_system_cpu()
    print(f"CSR SpMM, float32, on {platform.machine()} (LLVM cpu {cpu}, {os.cpu_count()} cores, "
          f"TVM_NUM_THREADS={threads}); results checked against scipy.")
    print("ours: compiled kernel, mean per call (time_evaluator); scipy/torch: median of 20 calls.")
    print(f"{'graph':12s} {'rows':>7s} {'nnz':>8s} {'feat':>5s} {'ours ms':>9s} {'scipy ms':>9s} "
          f"{'vs scipy':>8s} {'torch ms':>9s} {'vs torch':>8s}")
    cache = {}
    for feat in args.feat:
        for graph in args.graphs:
            run(graph, feat, cache)


if __name__ == "__main__":
    main()
