"""Operands and results in contradicting level orders (issue #36): the compiler converts the
fewest tensors to an admissible order (``k.plan``), so every combination of CSR, CSC, DCSR,
DCSC and COO operands and results computes ``B + C``, ``B - C``, ``B .* C`` and ``B @ C`` as
scipy does; float64 on the whole grid, float32 on a sample (each format once in each role
per operator), each through the kernel compiled
without ``dtype`` (one kernel per type). Operands are ``SparseTensor``s in their declared
formats, with empty rows and columns."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir.algebra as alg
from sparsetir.algebra.notation import NotationError
from sparsetir.format import Encoding, SparseTensor

FORMATS = ("CSR", "CSC", "DCSR", "DCSC", "COO")
OPS = {
    "add": ("A(i,j) = B(i,j) + C(i,j)", lambda b, c: b + c),
    "sub": ("A(i,j) = B(i,j) - C(i,j)", lambda b, c: b - c),
    "mul": ("A(i,j) = B(i,j) * C(i,j)", lambda b, c: b.multiply(c)),
    "matmul": ("A(i,j) = B(i,k) * C(k,j)", lambda b, c: b @ c),
}
GRID = list(itertools.product(OPS, FORMATS, FORMATS, FORMATS))
SAMPLE = [(op, FORMATS[n], FORMATS[(n + 1) % 5], FORMATS[(n + 3) % 5])   # float32: each
          for op in OPS for n in range(5)]          # format once in each role per operator


def _matrix(m, n, seed, empty_rows, empty_cols):
    a = sp.random(m, n, density=0.35, format="csr", random_state=seed).toarray()
    a[list(empty_rows)] = 0
    a[:, list(empty_cols)] = 0
    return sp.csr_matrix(a)


B = _matrix(7, 6, 0, (1, 5), (2,))
C_SAME = _matrix(7, 6, 1, (1, 3), (0, 4))
C_MUL = _matrix(6, 5, 2, (2,), (1, 3))
_KERNELS = {}


def _kernel(op, formats):
    key = (op,) + formats
    if key not in _KERNELS:
        a, b, c = formats
        _KERNELS[key] = alg.compile(OPS[op][0], formats={"A": a, "B": b, "C": c})
    return _KERNELS[key]


def _check(op, a, b, c, dtype):
    k = _kernel(op, (a, b, c))
    left, right = B.astype(dtype), (C_MUL if op == "matmul" else C_SAME).astype(dtype)
    operands = {"B": SparseTensor.from_scipy(left, b), "C": SparseTensor.from_scipy(right, c)}
    result = k(**operands)
    assert result.values.dtype == np.dtype(dtype)
    declared = Encoding.named(a)              # the result comes back in its declared format
    assert (result.encoding.level_types, result.encoding.lvl_to_dim) == \
        (declared.level_types, declared.lvl_to_dim)
    expected = OPS[op][1](left, right).toarray()
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(result.to_dense(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("op,a,b,c", GRID)
def test_every_format_float64(op, a, b, c):
    _check(op, a, b, c, "float64")


@pytest.mark.parametrize("op,a,b,c", SAMPLE)
def test_sample_float32(op, a, b, c):
    _check(op, a, b, c, "float32")
