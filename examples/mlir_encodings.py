"""Formats as compiler users write them: MLIR sparse encodings and XLA tiled layouts, SpMM from each.

Steps, as a user of sparsetir takes them:
1. A matrix's format is one MLIR encoding string: CSR with 16-bit coordinates, BSR with 2x4
   blocks and 8-bit coordinates, and 2:4 (two nonzeros in every group of four columns) with
   8-bit coordinates. ``SparseTensor.from_scipy`` stores the matrix as MLIR does.
2. ``encoded_spmm(enc)`` writes the Stage I SpMM kernel over that format (one axis per level);
   its axes declare the index arrays in the encoding's widths (``indices_dtype="int8"``), so
   ``lower_sparse_iter`` keeps them narrow and ``build`` compiles it (default schedule). The
   kernel is called on the tensor's own arrays (``kernel.arguments``) and checked against
   scipy.
3. The same kernels read ``X`` stored in an XLA tiled layout (``{1,0:T(8,16)(2,1)}``: 8x16 tiles,
   row pairs packed together): ``apply_tiled_layout`` reads it through the layout's index map,
   ``X`` is passed as ``layout.to_physical(X)`` with NaN in the padding, and the result is
   checked against scipy again.

Run: ``.venv/bin/python examples/mlir_encodings.py [--rows 64 --cols 96 --feat 20]``
"""

import argparse

import numpy as np
import scipy.sparse

import sparsetir
from sparsetir.format import (Encoding, SparseTensor, TiledLayout, apply_tiled_layout,
                              encoded_spmm)

ENCODINGS = {
    "CSR": "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed), "
           "posWidth = 32, crdWidth = 16 }>",
    "BSR 2x4": "#sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 4 "
               ": compressed, i mod 2 : dense, j mod 4 : dense), posWidth = 32, crdWidth = 8 }>",
    "2:4": "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j floordiv 4 : dense, "
           "j mod 4 : structured[2, 4]), crdWidth = 8 }>",
}
X_LAYOUT = "{1,0:T(8,16)(2,1)}"


def two_of_four(matrix: scipy.sparse.csr_matrix) -> scipy.sparse.csr_matrix:
    """``matrix`` keeping the first two nonzeros of every group of four columns of a row."""
    coo = matrix.tocoo()
    order = np.lexsort((coo.col, coo.row))
    row, col = coo.row[order], coo.col[order]
    group = row.astype(np.int64) * (matrix.shape[1] // 4 + 1) + col // 4
    starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
    rank = np.arange(len(group)) - np.repeat(starts, np.diff(np.r_[starts, len(group)]))
    keep = order[rank < 2]
    return scipy.sparse.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])),
                                   shape=matrix.shape)


def spmm(enc: Encoding, layout: TiledLayout | None, feat: int):
    """The SpMM kernel over ``enc`` (``X`` stored in ``layout`` when given), built."""
    kernel = encoded_spmm(enc, feat_size=feat)
    mod = sparsetir.lower_sparse_iter(kernel.func)
    if layout is not None:
        mod = apply_tiled_layout(mod, "x", layout)
    return kernel, sparsetir.build(mod, "llvm")


def run(rows: int, cols: int, feat: int, seed: int = 0) -> dict:
    """``{(format, X's layout): largest error against scipy}`` for every format."""
    rng = np.random.default_rng(seed)
    a = scipy.sparse.random(rows, cols, density=0.15, format="csr", dtype=np.float32,
                            random_state=rng)
    keep = np.ones(rows, np.float32)
    keep[1:2] = 0
    a = (scipy.sparse.diags(keep) @ a).tocsr()                # row 1 empty (if there is one)
    a.eliminate_zeros()
    x = rng.standard_normal((cols, feat)).astype(np.float32)
    layout = TiledLayout.parse(X_LAYOUT)
    errors = {}
    for name, text in ENCODINGS.items():
        enc = Encoding.parse(text)
        matrix = two_of_four(a) if name == "2:4" else a
        tensor = SparseTensor.from_scipy(matrix, enc)
        expected = matrix @ x
        for x_layout in (None, layout):
            kernel, compiled = spmm(enc, x_layout, feat)
            operand = x if x_layout is None else x_layout.to_physical(x, fill=np.nan)
            y = np.full((rows, feat), np.nan, np.float32)
            compiled(*kernel.arguments(tensor, operand, y))
            np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
            errors[name, str(x_layout or "row-major")] = float(np.abs(y - expected).max())
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--cols", type=int, default=96)
    parser.add_argument("--feat", type=int, default=20)
    args = parser.parse_args()
    print(f"Y = A @ X, A {args.rows} x {args.cols}, X {args.cols} x {args.feat}")
    for (name, layout), error in run(args.rows, args.cols, args.feat).items():
        print(f"{name:8s} X {layout:20s} max |Y - scipy| = {error:.2e}")


if __name__ == "__main__":
    main()
