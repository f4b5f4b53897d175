"""``sparsetir.algebra.compile`` given statements or arguments the front end must refuse or
handle: a sparse divisor, names that clash with the generated Stage I script, constants that
overflow or divide by zero, statements without an index, wrong argument types, structured
formats. Each gives numpy's numbers or a clear error from ``sparsetir.errors`` naming the
column or the argument.
"""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir
import sparsetir.algebra as alg
from sparsetir.algebra import NotationError

CSR2 = {"A": "CSR", "B": "CSR"}
B = sp.csr_matrix(np.array([[1., 0, 2], [0, 0, 0], [0, 3, 0]]))


@pytest.mark.parametrize("statement", ["A(i,j) = B(i,j) / C(i,j)",
                                       "A(i,j) = B(i,j) / (D(i,j) + C(i,j))"])
def test_division_by_a_sparse_operand_is_refused(statement):
    with pytest.raises(NotationError, match=r"column \d+: .*divides by C.*sparse.*dense"):
        alg.compile(statement, formats={"A": "CSR", "B": "CSR", "C": "CSR"})


def test_division_by_a_dense_operand():
    k = alg.compile("A(i,j) = B(i,j) / C(i,j)", formats=CSR2)
    c = np.array([[2., 0, 4], [1, 1, 1], [1, 6, 1]])
    with np.errstate(all="ignore"):
        want = np.where(B.toarray() != 0, B.toarray() / c, 0)
    np.testing.assert_array_equal(k(B=B, C=c).to_dense(), want)


@pytest.mark.parametrize("statement, formats", [
    ("T(i,j) = B(i,j)", {"T": "CSR", "B": "CSR"}),     # tensor named T
    ("A(T,j) = B(T,j)", CSR2),                          # index named T
    ("A(B,j) = B(B,j)", CSR2),                          # index named like a tensor
    ("R(i,j) = B(i,j) + b_vals(i,j)", {"R": "CSR", "B": "CSR"}),     # names generated ones use
    ("A(i,j) = B(i,j) + I(i,j)", CSR2),                 # a tensor named like an axis
    ("A(def,j) = B(def,j)", CSR2),                      # a Python keyword
    ("kernel(i,j) = B(i,j) + n_i(i,j)", {"kernel": "CSR", "B": "CSR"}),   # generated names
    ("A(i,j) = B(i,j) + A_counts(i,j) + A_ends(i,j) + n_chunks(i,j)", {"A": "DCSR", "B": "CSR"}),
    ("A(i,I) = B(i,I)", CSR2),                          # an index named like an axis
])
def test_names_that_clash_with_the_generated_script(statement, formats):
    k = alg.compile(statement, formats=formats)
    reads = {a.name for a in k.statement.accesses}
    out = k(**{n: B if n == "B" else np.zeros((3, 3)) for n in reads})
    np.testing.assert_allclose(out.to_dense(), B.toarray())


def test_the_one_reserved_index_name():
    with pytest.raises(NotationError, match="column 3: the index name 'chunks' is reserved"):
        alg.compile("A(chunks,j) = B(chunks,j)", formats=CSR2)


@pytest.mark.parametrize("statement, column", [("A(i,j) = 1e400 * B(i,j)", 10),
                                               ("A(i,j) = B(i,j) / 0", 17),
                                               ("A(i,j) = 1e39 * B(i,j)", 10),
                                               ("A(i,j) = 1e20 * 1e20 * B(i,j)", 15),
                                               ("A(i,j) = B(i,j) / 1e-400", 17),
                                               ("A(i,j) = B(i,j) / (2 - 2)", 17),
                                               ("A(i,j) = 1e-400 * B(i,j)", 17),
                                               ("A(i,j) = B(i,j) * 0", 17),
                                               ("A(i,j) = 0 * 3 * B(i,j) + B(i,j)", 16)])
def test_infinite_constants_and_zero_factors_are_refused(statement, column):
    with pytest.raises(NotationError, match=f"column {column}: .*(finite|zero)"):
        alg.compile(statement, formats=CSR2)


def test_constants_that_fold_to_finite_numbers():
    k = alg.compile("A(i,j) = (0 * 3 + 1e-400 + 2 / 4) * B(i,j) * (1e30 * 0 + 1)", formats=CSR2)
    stored = B.toarray() != 0
    np.testing.assert_array_equal(k(B=B).to_dense()[stored], B.toarray()[stored] * 0.5)


@pytest.mark.parametrize("literal, value", [("25e-4", 25e-4), ("2.5e-3", 2.5e-3),
                                            ("1.5E3", 1.5e3), (".5e1", 5.0), ("1.e2", 100.0),
                                            ("3.4028e38", 3.4028e38), ("2.5E+1", 25.0)])
def test_float_literals_with_a_fraction_and_an_exponent(literal, value):
    k = alg.compile(f"A(i,j) = B(i,j) * {literal}", formats=CSR2)
    np.testing.assert_array_equal(k(B=B).to_dense(), B.toarray() * value)


@pytest.mark.parametrize("statement", ["s = t", "s = 3", "s() = t()"])
def test_statements_without_indices(statement):
    with pytest.raises(NotationError, match="column 1: .*no index variable"):
        alg.compile(statement)


def test_compile_argument_types():
    with pytest.raises(sparsetir.SparseTIRTypeError, match="formats"):
        alg.compile("A(i,j) = B(i,j)", formats=["A"])
    with pytest.raises(sparsetir.SparseTIRTypeError, match="formats"):
        alg.compile("A(i,j) = B(i,j)", formats={1: "CSR"})
    with pytest.raises(sparsetir.SparseTIRTypeError, match="dtype"):
        alg.compile("A(i,j) = B(i,j)", formats=CSR2, dtype="floaty")
    with pytest.raises(sparsetir.SparseTIRTypeError, match="dtype"):
        alg.compile("A(i,j) = B(i,j)", formats=CSR2, dtype="int32")


@pytest.mark.parametrize("dtype, message", [("int32", "must be a float type"),
                                            ("float128", "has no TVM type"),
                                            ("floaty", "must be a float type")])
def test_typed_refuses_what_compile_refuses(dtype, message):
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    with pytest.raises(sparsetir.SparseTIRTypeError, match=message):
        k.typed(dtype)


def test_structured_format_message():
    with pytest.raises(sparsetir.SparseTIRValueError, match="B: '2:4' has structured"):
        alg.compile("A(i,j) = B(i,j)", formats={"B": "2:4"})
