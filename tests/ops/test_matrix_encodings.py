"""``sparsetir.ops`` on ``sparsetir.format.SparseTensor`` matrices in every 2-D encoding.

``SparseMatrix(t)``, ``ops.spmm(t, X)`` and ``ops.sddmm(t, X, Y)`` for CSR, CSC, DCSR, DCSC,
COO (AoS and SoA), BSR, BSC and 2:4 tensors (with 8- and 16-bit coordinates among them) give what
scipy gives for the same matrix; ``sddmm`` answers in the tensor's own order (``t.values``,
``t.to_coo()``), which ``SparseMatrix(t).source_order`` maps to the matrix's. Outputs start as
NaN, matrices have empty rows.
"""

import numpy as np
import pytest
import scipy.sparse

import sparsetir.ops as ops
from sparsetir.errors import SparseTIRTypeError
from sparsetir.format import Encoding, SparseTensor

M, N, FEAT = 12, 16, 4


def two_four_matrix(seed=0):
    """A 12 x 16 float32 matrix with at most 2 nonzeros in each group of 4 columns of a row,
    rows 0, 3, 6, 9 empty."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((M, N), np.float32)
    for row in range(M):
        if row % 3 == 0:
            continue
        for group in range(N // 4):
            keep = rng.choice(4, size=rng.integers(0, 3), replace=False)
            dense[row, group * 4 + keep] = rng.uniform(0.5, 1.5, keep.size)
    return scipy.sparse.csr_matrix(dense)


ENCODINGS = {
    "CSR": Encoding.named("CSR"),
    "CSR-int16": Encoding.named("CSR", pos_width=16, crd_width=16),
    "CSC": Encoding.named("CSC", crd_width=8),
    "DCSR": Encoding.named("DCSR", pos_width=32, crd_width=32),
    "DCSC": Encoding.named("DCSC"),
    "COO": Encoding.named("COO"),
    "COO-SoA": Encoding.named("COO_SOA", crd_width=8),
    "BSR": Encoding.named("BSR", block=(2, 4)),
    "BSR-column-major": Encoding.parse("(i, j) -> (i floordiv 3 : compressed, j floordiv 4 : "
                                       "compressed, j mod 4 : dense, i mod 3 : dense)"),
    "BSC": Encoding.named("BSC", block=(4, 2)),
    "2:4": Encoding.named("2:4", crd_width=8),
}


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(1)
    return (two_four_matrix(), rng.standard_normal((N, FEAT)).astype(np.float32),
            rng.standard_normal((M, FEAT)).astype(np.float32))


@pytest.mark.parametrize("name", ENCODINGS)
def test_spmm_and_sddmm_match_scipy(name, operands):
    A, X, Y = operands
    t = SparseTensor.from_scipy(A, ENCODINGS[name])
    out = np.full((M, FEAT), np.nan, np.float32)
    assert ops.spmm(t, X, out=out) is out
    np.testing.assert_allclose(out, A @ X, rtol=1e-5, atol=1e-5)
    (rows, cols), values = t.to_coo()
    got = np.full(rows.size, np.nan, np.float32)
    assert ops.sddmm(t, Y, X, out=got) is got
    np.testing.assert_allclose(got, np.einsum("pk,pk->p", Y[rows], X[cols]), rtol=1e-5,
                               atol=1e-5)
    matrix = ops.SparseMatrix(t)
    assert matrix.shape == (M, N)
    np.testing.assert_array_equal(matrix.to_scipy().toarray(), A.toarray())
    order = np.arange(matrix.nnz) if matrix.source_order is None else matrix.source_order
    np.testing.assert_array_equal(matrix.indices[order], cols)     # the caller's order mapped
    np.testing.assert_array_equal(matrix.data[order], values)


def test_csr_tensor_keeps_its_order(operands):
    """A CSR tensor's order is CSR order: nothing moves (``source_order`` None)."""
    t = SparseTensor.from_scipy(operands[0], "CSR")
    matrix = ops.SparseMatrix(t)
    assert matrix.source_order is None
    np.testing.assert_array_equal(matrix.indptr, t.positions(1))
    np.testing.assert_array_equal(matrix.indices, t.coordinates(1))


def test_block_zeros_are_entries(operands):
    """A BSR tensor's stored zeros are entries of the matrix (as MLIR stores them), so sddmm
    gives one value per stored value."""
    t = SparseTensor.from_scipy(operands[0], ENCODINGS["BSR"])
    assert t.nse > operands[0].nnz
    assert ops.SparseMatrix(t).nnz == t.nse
    assert ops.sddmm(t, operands[2], operands[1]).shape == (t.nse,)


def test_refusals():
    with pytest.raises(SparseTIRTypeError, match="2 dimensions, got a SparseTensor of shape"):
        ops.SparseMatrix(SparseTensor.from_dense(np.ones((2, 2, 2), np.float32), "CSF"))
    with pytest.raises(SparseTIRTypeError, match=r"is int64; .*astype\(np.float32\)"):
        ops.SparseMatrix(SparseTensor.from_dense(np.eye(3, dtype=np.int64), "CSR"))
