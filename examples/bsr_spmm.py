"""Block-sparse SpMM through format decomposition: a CSR kernel computed in BSR.

A prunebert-style weight matrix (blocks of 32 kept with probability 10%) is stored as CSR;
``format_decompose`` rewrites the CSR SpMM kernel (written once, over CSR) into a BSR kernel
(``bsr_rule``), ``sparsetir.format.csr_to_bsr`` converts the data at run time, and the result
is compared with ``scipy.sparse.bsr_matrix @ X``. The BSR kernel is built twice, with the
default schedule and with ``schedule_bsr_cpu`` (block rows in parallel, register tiles of each
output row summed over the block row's blocks); times are printed next to the CSR kernel with
the default schedule and ``sparsetir.ops.spmm`` (same process, median of repeats, whole calls).

Run: ``.venv/bin/python examples/bsr_spmm.py [--rows 768 --cols 3072 --feat 128]``
"""

import argparse

import numpy as np
import scipy.sparse

import sparsetir
import sparsetir.ops
from sparsetir.ops.bsr import schedule_bsr_cpu
from sparsetir.ops.kernels import spmm as csrmm    # the CSR SpMM, written once
from sparsetir.runtime.timing import median_seconds
from sparsetir.stage1.bsr import bsr_rule

BLOCK = 32


def block_sparse_matrix(rows, cols, density, rng):
    """A matrix whose 32 x 32 blocks are each kept with probability ``density``."""
    keep = rng.random((rows // BLOCK, cols // BLOCK)) < density
    dense = np.kron(keep, np.ones((BLOCK, BLOCK), np.float32))
    dense *= rng.standard_normal((rows, cols)).astype(np.float32)
    matrix = scipy.sparse.csr_matrix(dense)
    matrix.sort_indices()
    return matrix


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=768)
    parser.add_argument("--cols", type=int, default=3072)
    parser.add_argument("--feat", type=int, default=128)
    args = parser.parse_args()
    if args.rows % BLOCK or args.cols % BLOCK or min(args.rows, args.cols, args.feat) < 1:
        parser.error(f"--rows and --cols must be positive multiples of the block size {BLOCK}, "
                     "and --feat positive")
    rng = np.random.default_rng(0)
    a = block_sparse_matrix(args.rows, args.cols, 0.1, rng)
    x = rng.standard_normal((args.cols, args.feat)).astype(np.float32)
    decomposed = sparsetir.format_decompose(csrmm, [bsr_rule("bsr", BLOCK)])
    compute = sparsetir.remove_preprocess(decomposed).specialize({"feat_size": args.feat})
    kernels = {
        "BSR, default schedule": sparsetir.build(compute, "llvm"),
        "BSR, schedule_bsr_cpu": sparsetir.build(
            schedule_bsr_cpu(sparsetir.lower_sparse_iter(compute)), "llvm", schedule="none"),
    }
    indptr_b, indices_b, data_b = sparsetir.format.csr_to_bsr(a.indptr, a.indices, a.data,
                                                              a.shape, BLOCK)
    reference = scipy.sparse.bsr_matrix((data_b, indices_b, indptr_b),
                                        shape=(args.rows, args.cols)) @ x
    y = np.full((args.rows, args.feat), np.nan, np.float32)
    values = dict(a=a.data, x=x, y=y, indptr=a.indptr, indices=a.indices, m=args.rows,
                  n=args.cols, nnz=a.nnz, a_bsr=data_b, indptr_bsr=indptr_b,
                  indices_bsr=indices_b, mb_bsr=args.rows // BLOCK, nb_bsr=args.cols // BLOCK,
                  nnzb_bsr=indices_b.size)
    call = [values[p.name] for p in compute.params]
    print(f"{args.rows} x {args.cols}, blocks of {BLOCK} at 10% density ({indices_b.size} blocks,"
          f" {a.nnz} nonzeros), feature size {args.feat}")
    times = {}
    for name, kernel in kernels.items():
        y[...] = np.nan
        kernel(*call)
        np.testing.assert_allclose(y, reference, rtol=1e-4, atol=1e-3)
        times[name] = median_seconds(lambda kernel=kernel: kernel(*call))
    csr_kernel = sparsetir.build(csrmm.specialize({"feat_size": args.feat}), "llvm")
    matrix = sparsetir.ops.SparseMatrix(a)
    for name, run in (("CSR, default schedule", lambda out: csr_kernel(
            a.data, x, out, a.indptr, a.indices, args.rows, args.cols, a.nnz)),
                      ("CSR, sparsetir.ops.spmm", lambda out: sparsetir.ops.spmm(matrix, x,
                                                                                 out=out))):
        y_csr = np.full_like(y, np.nan)
        run(y_csr)
        np.testing.assert_allclose(y_csr, reference, rtol=1e-4, atol=1e-3)
        times[name] = median_seconds(lambda run=run, out=y_csr: run(out))
    print("every kernel equals scipy.sparse.bsr_matrix @ X; whole calls:")
    for name, seconds in times.items():
        print(f"  {name:24s} {seconds * 1e3:7.3f} ms")


if __name__ == "__main__":
    main()
