"""hyb SpMM: the CSR kernel written once, decomposed by the compiler into column partitions x
ELL buckets, data converted at run time, sub-kernels fused into one parallel loop.

Steps, as a user of sparsetir takes them:
1. ``sparsetir.ops.kernels.spmm`` is the CSR SpMM in Stage I (``Y = A @ X``).
2. ``ell_bucket_rule`` gives one ``FormatRewriteRule`` per (column partition, bucket width);
   ``format_decompose`` rewrites the kernel into one sub-kernel per rule (plus the zeroing of
   Y) and ``remove_preprocess`` drops the data-movement iterations: conversion happens once,
   outside, with ``sparsetir.format.column_part_hyb`` (``HybLayout.of`` calls it).
3. ``schedule_hyb_cpu``: each sub-kernel's loop over row tiles in parallel, marked for
   fusion, and each output row's register tiles summed in an accumulator loaded from Y (what
   earlier buckets added), prefetching gathered X rows when X is larger than the L2 caches;
   ``build(..., horizontal_fuse=True)`` runs them all under one parallel loop (tiles own the
   same rows in every bucket, so no two threads share a row).
4. The same function, scheduled by ``schedule_hyb_cuda`` (tiles to blocks, features to threads,
   atomic adds), compiles for sm_90 into one fused kernel (nvcc; no GPU needed to compile).

Checked against scipy on the bundled Pubmed and email-Enron graphs; times (whole calls,
median of repeats, same process) next to the CSR kernel's default schedule and torch.sparse.

Run: ``.venv/bin/python examples/spmm_hyb.py [--graphs pubmed email-enron] [--feat 128]``
"""

import argparse
import os
import re
import warnings

import numpy as np

import sparsetir
from sparsetir.data import load_graph
from sparsetir.ops import SparseMatrix
from sparsetir.ops.hyb import HybConfig, HybLayout, schedule_hyb_cpu, schedule_hyb_cuda
from sparsetir.ops.kernels import spmm
from sparsetir.schedule.operators import prefetch_distance
from sparsetir.runtime.timing import median_seconds
from sparsetir.backend.target import cuda_source
from sparsetir.stage1.hyb import ell_bucket_rule

CONFIG = HybConfig(parts=2, widths=(1, 2, 4, 8, 16, 32, 64), tiles=64)


def decomposed(config: HybConfig, feat: int):
    """Step 2, spelled out (``hyb_function`` in sparsetir.ops.hyb does the same)."""
    rules = [ell_bucket_rule(name, config.widths[i % len(config.widths)], config.tiles)
             for i, name in enumerate(config.rule_names())]
    func = sparsetir.remove_preprocess(sparsetir.format_decompose(spmm, rules))
    return func.specialize({"feat_size": feat})


def torch_call(A, X):
    import torch  # pylint: disable=import-outside-toplevel
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                 torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data), size=A.shape,
                                 check_invariants=False)
    Xt = torch.from_numpy(X)
    return lambda: torch.sparse.mm(At, Xt)


def run(graph: str, feat: int) -> None:
    A = load_graph(graph)
    rng = np.random.default_rng(0)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    X = rng.standard_normal((A.shape[1], feat)).astype(np.float32)
    M = SparseMatrix(A)
    func = decomposed(CONFIG, feat)
    prefetch = prefetch_distance(A.shape[1], feat)        # the cost model of sparsetir.ops
    kernel = sparsetir.build(schedule_hyb_cpu(sparsetir.lower_sparse_iter(func), CONFIG,
                                              prefetch),
                             "llvm", schedule="none", horizontal_fuse=True)
    layout = HybLayout.of(M, CONFIG.parts, CONFIG.widths, CONFIG.tiles)
    Y = np.full((A.shape[0], feat), np.nan, np.float32)
    args = layout.arguments(func.params, M, X, Y)
    kernel(*args)
    np.testing.assert_allclose(Y, A @ X, rtol=1e-4, atol=1e-4)

    csr = sparsetir.build(spmm.specialize({"feat_size": feat}), "llvm")   # default schedule
    Y_csr = np.full_like(Y, np.nan)
    csr_args = (M.data, X, Y_csr, M.indptr, M.indices, *A.shape, M.nnz)
    csr(*csr_args)
    np.testing.assert_allclose(Y_csr, A @ X, rtol=1e-4, atol=1e-4)
    call = torch_call(A, X)
    np.testing.assert_allclose(call().numpy(), A @ X, rtol=1e-4, atol=1e-4)
    t_hyb = median_seconds(lambda: kernel(*args, validate=False)) * 1e3
    t_csr = median_seconds(lambda: csr(*csr_args, validate=False)) * 1e3
    t_torch = median_seconds(call) * 1e3
    print(f"{graph:12s} feat {feat:4d}: all three equal to scipy; hyb {t_hyb:7.3f} ms, CSR default "
          f"{t_csr:7.3f} ms (hyb {t_csr / t_hyb:4.2f}x), torch.sparse {t_torch:7.3f} ms "
          f"(hyb {t_torch / t_hyb:4.2f}x)", flush=True)


def compile_for_cuda(feat: int) -> None:
    func = decomposed(CONFIG, feat)
    mod = schedule_hyb_cuda(sparsetir.lower_sparse_iter(func), CONFIG)
    kernel = sparsetir.build(mod, {"kind": "cuda", "arch": "sm_90"}, schedule="none",
                             horizontal_fuse=True)
    source = cuda_source(kernel.executable)
    kernels = set(re.findall(r"__global__ void __launch_bounds__\(\d+\) (\w+)\(", source))
    print(f"CUDA sm_90: {len(kernels)} kernels (zeroing + the {len(CONFIG.rule_names())} "
          f"sub-kernels fused, {source.count('((int)blockIdx.x) <')} blockIdx.x ranges), "
          f"{source.count('cuda_atomic_add((&')} atomic adds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", default=["pubmed", "email-enron"])
    parser.add_argument("--feat", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--no-cuda", action="store_true", help="skip the CUDA compile")
    args = parser.parse_args()
    print(f"hyb = {CONFIG.parts} column partitions x buckets {CONFIG.widths}, "
          f"{CONFIG.tiles} row tiles; TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')}")
    for feat in args.feat:
        for graph in args.graphs:
            run(graph, feat)
    if not args.no_cuda:
        compile_for_cuda(128)


if __name__ == "__main__":
    main()
