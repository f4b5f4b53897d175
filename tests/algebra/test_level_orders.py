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
from sparsetir.errors import SparseTIRTypeError
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


def test_plan_names_each_conversion_and_the_kernel_is_the_converted_formats_one():
    mixed = _kernel("add", ("CSR", "DCSR", "CSC"))
    assert [name for name, _, _ in mixed.plan.conversions] == ["C"]
    assert "C(i,j): declared levels j (dense), i (compressed); read as i (dense), j " \
        "(compressed)" in str(mixed.plan)
    assert "C1 = T.sparse_variable(I, (n_j, c1_nnz)" in mixed.func.script()     # C read as CSR
    both_csc = _kernel("add", ("CSR", "CSC", "CSC"))      # one conversion: the result's
    assert [name for name, _, _ in both_csc.plan.conversions] == ["A"]
    assert both_csc.plan.loop == ("j", "i")
    same = _kernel("add", ("CSR", "CSR", "CSR"))
    assert same.plan.conversions == () and str(same.plan) == "loop order: i, j"
    converted = _kernel("add", ("CSR", "CSC", "CSR"))    # B read as CSR: the all-CSR kernel
    assert converted.func.script() == same.func.script()
    spgemm = _kernel("matmul", ("CSR", "CSC", "CSR"))    # B read as CSR: Gustavson's i, k, j
    assert spgemm.plan.loop == ("i", "k", "j")
    assert [name for name, _, _ in spgemm.plan.conversions] == ["B"]


def test_a_tensor_read_in_two_orders_is_refused_naming_both_reads():
    with pytest.raises(NotationError, match=r"column 19: no loop order serves .* reads B\(i,j\) "
                       r"and B\(j,i\).*pass the tensor read in another order"):
        alg.compile("A(i,j) = B(i,j) + B(j,i)", formats={"A": "CSR", "B": "CSC"})


def test_value_type_is_the_operands_one_kernel_per_type_mixed_refused():
    k = _kernel("mul", ("DCSR", "CSC", "COO"))
    assert k.dtype == "float64" and k.typed("float32") is k.typed(np.float32)
    assert k.typed("float32").dtype == "float32" and k.typed("float64") is k
    half = k(B=B.toarray().astype(np.float16), C=C_SAME.toarray().astype(np.float16))
    assert half.values.dtype == np.float16
    np.testing.assert_allclose(half.to_dense(), B.multiply(C_SAME).toarray(), rtol=2e-3, atol=2e-3)
    with pytest.raises(SparseTIRTypeError, match=r"mixed value types \(B float32, C float64\)"):
        k(B=B.astype(np.float32), C=C_SAME)
    typed64 = alg.compile(OPS["mul"][0], formats={"A": "DCSR", "B": "CSC", "C": "COO"},
                          dtype="float64")
    with pytest.raises(SparseTIRTypeError, match="operand B: values are float32, the kernel "
                       "computes in float64.*or compile without dtype"):
        typed64(B=B.astype(np.float32), C=C_SAME.astype(np.float32))


def test_dense_operands_and_sums_take_the_operands_type():
    spmv = alg.compile("a(i) = B(i,j) * c(j)", formats={"B": "CSC"})
    c = np.linspace(-1, 1, 6, dtype=np.float32)
    out = spmv(B=B.astype(np.float32), c=c)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, B.astype(np.float32) @ c, rtol=1e-6, atol=1e-6)
    with pytest.raises(SparseTIRTypeError, match=r"mixed value types \(B float32, c float64\)"):
        spmv(B=B.astype(np.float32), c=c.astype(np.float64))


def test_three_dimensional_operands_with_dense_factors_are_converted():
    rng = np.random.default_rng(0)
    b = rng.random((4, 3, 5))
    b[b < 0.7] = 0
    b[1] = 0                                                      # an empty slice
    d, e = rng.random((3, 6)), rng.random((5, 6))
    reversed_csf = "map = (d0, d1, d2) -> (d2 : compressed, d1 : compressed, d0 : compressed)"
    mttkrp = alg.compile("A(i,j) = B(i,k,l) * D(k,j) * E(l,j)", formats={"A": "CSR", "B": reversed_csf})
    assert mttkrp.plan.loop == ("i", "k", "l", "j")
    assert [name for name, _, _ in mttkrp.plan.conversions] == ["B"]
    np.testing.assert_allclose(mttkrp(B=b, D=d, E=e).to_dense(),
                               np.einsum("ikl,kj,lj->ij", b, d, e), rtol=1e-12)


@pytest.mark.parametrize("statement, formats, converted, whole, want", [
    ("a(i) = B(i,j)", {"B": "CSC"}, ["B"], True, lambda b, c: b.sum(1)),
    ("a(i) = B(i,j) * c(j)", {"B": "CSC"}, ["B"], True, lambda b, c: b @ c),
    ("a(i) = B(i,j) - C(i,j)", {"B": "CSC", "C": "CSR"}, ["B"], True,
     lambda b, c: (b - C_SAME.toarray()).sum(1)),
    ("a(i) = B(i,j)", {"B": "DCSC"}, ["B"], False, lambda b, c: b.sum(1)),
])
def test_a_sparse_vector_of_a_column_major_operand_reads_it_row_major(statement, formats,
                                                                      converted, whole, want):
    """A sparse vector summed over a CSC operand's columns: no loop order fills it by a merge
    in the operand's own order (its rows inside its columns), so the operand is read as CSR,
    as for a matrix result; the result is then written at every row (stored whole, the empty
    rows 1 and 5 as explicit zeros), as for a CSR operand. A DCSC operand is read as DCSR,
    whose stored rows the result keeps. (The CSC ones were an internal ``LoweringError``.)"""
    k = alg.compile(statement, formats={"a": "sparse", **formats})
    assert [name for name, _, _ in k.plan.conversions] == converted
    assert k.plan.loop == ("i", "j")
    c = np.linspace(-1, 1, 6)
    operands = {name: SparseTensor.from_scipy(B if name == "B" else C_SAME, fmt)
                for name, fmt in formats.items()}
    if "c(j)" in statement:
        operands["c"] = c
    expected = want(B.toarray(), c)
    result = k(**operands)
    np.testing.assert_allclose(result.to_dense(), expected, rtol=1e-12, atol=1e-15)
    assert result.nse == (7 if whole else 5)        # rows 1 and 5 are empty in B
    dense = alg.compile(statement, formats=formats)(**operands)      # a dense result: the same
    np.testing.assert_allclose(dense, expected, rtol=1e-12, atol=1e-15)
