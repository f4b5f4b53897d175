"""Block-sparse SpMM through format decomposition: a CSR kernel computed in BSR.

A prunebert-style weight matrix (blocks of 32 kept with probability 10%) is stored as CSR;
``format_decompose`` rewrites the CSR SpMM kernel (written once, over CSR) into a BSR kernel,
``sparsetir.format.csr_to_bsr`` converts the data at run time, and the result is compared with
``scipy.sparse.bsr_matrix @ X``. Times of the BSR kernel and of the CSR kernel are printed side
by side (same process, median of repeats, whole calls).

Run: ``.venv/bin/python examples/bsr_spmm.py [--rows 768 --cols 3072 --feat 128]``
"""

import argparse

import numpy as np
import scipy.sparse

import sparsetir
from sparsetir.ops.kernels import spmm as csrmm    # the CSR SpMM, written once
from sparsetir.runtime.timing import median_seconds
from sparsetir.script import tir as T

BLOCK = 32


@T.prim_func
def bsr(a: T.handle, indptr: T.handle, indices: T.handle, mb: T.int32, nb: T.int32,
        nnzb: T.int32) -> None:
    IO = T.dense_fixed(mb)
    JO = T.sparse_variable(IO, (nb, nnzb), (indptr, indices), "int32")
    II = T.dense_fixed(32)
    JI = T.dense_fixed(32)
    A = T.match_sparse_buffer(a, (IO, JO, II, JI), "float32")


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
    rng = np.random.default_rng(0)
    a = block_sparse_matrix(args.rows, args.cols, 0.1, rng)
    x = rng.standard_normal((args.cols, args.feat)).astype(np.float32)
    rule = sparsetir.FormatRewriteRule(
        "bsr", bsr, ["A"], ["I", "J"], ["IO", "JO", "II", "JI"],
        {"I": ["IO", "II"], "J": ["JO", "JI"]},
        lambda i, j: (i // BLOCK, j // BLOCK, i % BLOCK, j % BLOCK),
        lambda io, jo, ii, ji: (io * BLOCK + ii, jo * BLOCK + ji))
    compute = sparsetir.remove_preprocess(sparsetir.format_decompose(csrmm, [rule]))
    compute = compute.specialize({"feat_size": args.feat})
    kernel = sparsetir.build(compute, "llvm")
    indptr_b, indices_b, data_b = sparsetir.format.csr_to_bsr(a.indptr, a.indices, a.data,
                                                              a.shape, BLOCK)
    y = np.full((args.rows, args.feat), np.nan, np.float32)
    values = dict(a=a.data, x=x, y=y, indptr=a.indptr, indices=a.indices, m=args.rows,
                  n=args.cols, nnz=a.nnz, a_bsr=data_b, indptr_bsr=indptr_b,
                  indices_bsr=indices_b, mb_bsr=args.rows // BLOCK, nb_bsr=args.cols // BLOCK,
                  nnzb_bsr=indices_b.size)
    call = [values[p.name] for p in compute.params]
    kernel(*call)
    reference = scipy.sparse.bsr_matrix((data_b, indices_b, indptr_b),
                                        shape=(args.rows, args.cols)) @ x
    np.testing.assert_allclose(y, reference, rtol=1e-4, atol=1e-3)
    print(f"{args.rows} x {args.cols}, blocks of {BLOCK} at 10% density ({indices_b.size} blocks,"
          f" {a.nnz} nonzeros), feature size {args.feat}: equal to scipy.sparse.bsr_matrix @ X")
    csr_kernel = sparsetir.build(csrmm.specialize({"feat_size": args.feat}), "llvm")
    y_csr = np.empty_like(y)
    t_bsr = median_seconds(lambda: kernel(*call))
    t_csr = median_seconds(lambda: csr_kernel(a.data, x, y_csr, a.indptr, a.indices, args.rows,
                                              args.cols, a.nnz))
    print(f"BSR kernel {t_bsr * 1e3:.3f} ms, CSR kernel {t_csr * 1e3:.3f} ms "
          "(default schedules, whole calls)")


if __name__ == "__main__":
    main()
