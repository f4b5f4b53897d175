"""TACO's own small cases (test/tests-expr_storage.cpp, operands from test/test_tensors.cpp),
transcribed: the statement, the operands' formats, and TACO's expected result (its storage
arrays where the result is sparse, its dense values otherwise).

TACO's `Format({Dense, Sparse}, {1, 0})` is our "CSC", `{Sparse, Sparse}` "DCSR", `{Sparse}`
"sparse", `{Sparse, Sparse, Sparse}` "CSF"; a dense operand stored column-major in TACO is a
plain (row-major) array here, which does not change any value."""

import numpy as np
import pytest

import sparsetir.algebra as alg


def _t(shape, entries):
    """A dense array from TACO's test data: {coordinate: value}."""
    a = np.zeros(shape)
    for coord, value in entries.items():
        a[coord] = value
    return a


D = {
    "da": np.array(2.0), "db": np.array(10.0),
    "d3a": _t(3, {0: 3, 1: 2, 2: 1}), "d3b": _t(3, {0: 2, 2: 3}),
    "d5a": _t(5, {4: 3, 1: 2}), "d5b": _t(5, {0: 10, 1: 20}),
    "d5c": _t(5, {1: 100, 3: 200, 4: 300}),
    "d8a": _t(8, {0: 1, 1: 2, 2: 3, 5: 4}), "d8b": _t(8, {0: 10, 2: 20, 3: 30}),
    "d8c": _t(8, {1: 100, 3: 200, 5: 300, 7: 400}), "d8d": _t(8, {1: 100, 2: 200, 5: 300, 6: 400}),
    "d33a": _t((3, 3), {(0, 1): 2, (2, 0): 3, (2, 2): 4}),
    "d33b": _t((3, 3), {(0, 0): 10, (0, 1): 20, (2, 1): 30}),
    "d34a": _t((3, 4), {(0, 0): 2, (0, 2): 3, (2, 0): 4, (2, 3): 5}),
    "d34b": _t((3, 4), {(0, 0): 2, (0, 3): 3, (2, 0): 4, (2, 2): 5}),
    "d233a": _t((2, 3, 3), {(0, 0, 0): 2, (0, 0, 1): 3, (0, 2, 2): 4, (1, 0, 1): 5,
                            (1, 2, 0): 6, (1, 2, 2): 7}),
    "d233b": _t((2, 3, 3), {(0, 1, 0): 10, (0, 1, 2): 20, (0, 2, 1): 30, (1, 0, 2): 40,
                            (1, 2, 0): 50, (1, 2, 1): 60}),
    "d333a": _t((3, 3, 3), {(0, 0, 0): 2, (0, 0, 1): 3, (0, 2, 2): 4, (1, 0, 1): 5,
                            (1, 2, 0): 6, (1, 2, 2): 7, (2, 1, 2): 8, (2, 2, 1): 9}),
}

S = "sparse"
# (case, statement, formats, operands: name -> TACO tensor, expected)
# expected: a list of dense values, or ("storage", [(pos, crd) per compressed level], vals)
CASES = [
    ("vector_neg_sparse", "a(i) = -b(i)", {"a": S, "b": S}, {"b": "d5a"},
     ("storage", [([0, 2], [1, 4])], [-2, -3])),
    ("vector_scalar_sparse", "a(i) = b(i) * c", {"a": S, "b": S}, {"b": "d5a", "c": "da"},
     ("storage", [([0, 2], [1, 4])], [4, 6])),
    ("vector_scalar_add_dense", "a(i) = b(i) + c", {}, {"b": "d5a", "c": "da"},
     [2, 4, 2, 2, 5]),
    ("vector_elmul_sparse_dense", "a(i) = b(i) * c(i)", {"b": S}, {"b": "d5a", "c": "d5b"},
     [0, 40, 0, 0, 0]),
    ("vector_elmul_sparse", "a(i) = b(i) * c(i)", {"a": S, "b": S, "c": S},
     {"b": "d5a", "c": "d5b"}, ("storage", [([0, 1], [1])], [40])),
    ("vector_add_sparse_dense", "a(i) = b(i) + c(i)", {"b": S}, {"b": "d5a", "c": "d5b"},
     [10, 22, 0, 0, 3]),
    ("vector_add_sparse_dense_into_sparse", "a(i) = b(i) + c(i)", {"a": S, "b": S},
     {"b": "d5a", "c": "d5b"}, ("storage", [([0, 5], [0, 1, 2, 3, 4])], [10, 22, 0, 0, 3])),
    ("vector_add_sparse", "a(i) = b(i) + c(i)", {"a": S, "b": S, "c": S},
     {"b": "d5a", "c": "d5b"}, ("storage", [([0, 3], [0, 1, 4])], [10, 22, 3])),
    ("vector_composite_1", "a(i) = (b(i) + c(i)) * d(i)", {"b": S, "c": S, "d": S},
     {"b": "d8a", "c": "d8b", "d": "d8c"}, [0, 200, 0, 6000, 0, 1200, 0, 0]),
    ("vector_composite_2", "a(i) = b(i) * (c(i) + d(i))", {"b": S},
     {"b": "d8a", "c": "d8b", "d": "d8c"}, [10, 200, 60, 0, 0, 1200, 0, 0]),
    ("vector_composite_3", "a(i) = (c(i) + d(i)) * b(i)", {"c": S, "b": S},
     {"b": "d8a", "c": "d8b", "d": "d8c"}, [10, 200, 60, 0, 0, 1200, 0, 0]),
    ("vector_composite_4", "a(i) = b(i) + c(i) + d(i) * e(i)", {"b": S, "c": S, "d": S, "e": S},
     {"b": "d8a", "c": "d8b", "d": "d8c", "e": "d8d"}, [11, 10002, 23, 30, 0, 90004, 0, 0]),
    ("vector_composite_5", "a(i) = (b(i) + c(i) + d(i)) * e(i)", {"b": S, "d": S, "e": S},
     {"b": "d8a", "c": "d8b", "d": "d8c", "e": "d8d"}, [0, 10200, 4600, 0, 0, 91200, 0, 0]),
    ("vector_composite_6", "a(i) = b(i) + c(i) + d(i) + e(i)", {"b": S, "c": S, "d": S, "e": S},
     {"b": "d8a", "c": "d8b", "d": "d8c", "e": "d8d"}, [11, 202, 223, 230, 0, 604, 400, 400]),
    ("matrix_neg_dcsr", "a(i,j) = -b(i,j)", {"a": "DCSR", "b": "DCSR"}, {"b": "d33a"},
     ("storage", [([0, 2], [0, 2]), ([0, 1, 3], [1, 0, 2])], [-2, -3, -4])),
    ("matrix_elmul_dcsr", "A(i,j) = B(i,j) * C(i,j)", {"A": "DCSR", "B": "DCSR", "C": "DCSR"},
     {"B": "d33a", "C": "d33b"}, ("storage", [([0, 1], [0]), ([0, 1], [1])], [40])),
    ("matrix_add_csr_into_dense", "A(i,j) = B(i,j) + C(i,j)", {"B": "CSR", "C": "CSR"},
     {"B": "d33a", "C": "d33b"}, [10, 22, 0, 0, 0, 0, 3, 30, 4]),
    ("matrix_add_csr", "A(i,j) = B(i,j) + C(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
     {"B": "d33a", "C": "d33b"}, ("storage", [([0, 2, 2, 5], [0, 1, 0, 1, 2])],
                                  [10, 22, 3, 30, 4])),
    ("matrix_add_csc", "A(i,j) = B(i,j) + C(i,j)", {"A": "CSC", "B": "CSC", "C": "CSC"},
     {"B": "d33a", "C": "d33b"}, ("storage", [([0, 2, 4, 5], [0, 2, 0, 2, 2])],
                                  [10, 3, 22, 30, 4])),
    ("matrix_add_dcsr", "A(i,j) = B(i,j) + C(i,j)", {"A": "DCSR", "B": "DCSR", "C": "DCSR"},
     {"B": "d33a", "C": "d33b"}, ("storage", [([0, 2], [0, 2]), ([0, 2, 5], [0, 1, 0, 1, 2])],
                                  [10, 22, 3, 30, 4])),
    ("matrix_add_csr_34", "A(i,j) = B(i,j) + C(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
     {"B": "d34a", "C": "d34b"}, ("storage", [([0, 3, 3, 6], [0, 2, 3, 0, 2, 3])],
                                  [4, 3, 3, 8, 5, 5])),
    ("matrix_add_csc_34", "A(i,j) = B(i,j) + C(i,j)", {"A": "CSC", "B": "CSC", "C": "CSC"},
     {"B": "d34a", "C": "d34b"}, ("storage", [([0, 2, 2, 4, 6], [0, 2, 0, 2, 0, 2])],
                                  [4, 8, 3, 5, 3, 5])),
    ("tensor_elmul_csf", "A(i,j,m) = B(i,j,m) * C(i,j,m)", {"A": "CSF", "B": "CSF", "C": "CSF"},
     {"B": "d233a", "C": "d233b"},
     ("storage", [([0, 1], [1]), ([0, 1], [2]), ([0, 1], [0])], [300])),
    ("composite_sparse_1", "a(i) = b(i) * c(i) + d(i)", {"a": S, "b": S, "c": S, "d": S},
     {"b": "d5b", "c": "d5c", "d": "d5a"}, ("storage", [([0, 2], [1, 4])], [2002, 3])),
    ("composite_sparse_2", "a(i) = b(i) + (c(i) * d(i))", {"a": S, "b": S, "c": S, "d": S},
     {"b": "d5a", "c": "d5b", "d": "d5c"}, ("storage", [([0, 2], [1, 4])], [2002, 3])),
    ("composite_dense", "a(i) = b(i) + (c(i) * d(i))", {"b": S, "c": S, "d": S},
     {"b": "d5a", "c": "d5b", "d": "d5c"}, [0, 2002, 0, 0, 3]),
    ("residual_dense", "r(i) = b(i) - A(i,k) * x(k)", {}, {"b": "d3a", "A": "d33a", "x": "d3b"},
     [3, 2, -17]),
    ("residual_dcsr", "r(i) = b(i) - A(i,k) * x(k)", {"A": "DCSR"},
     {"b": "d3a", "A": "d33a", "x": "d3b"}, [3, 2, -17]),
    ("matrix_add_vec_mul_composite", "a(i) = alpha * ((B(i,j) + C(i,j)) * d(j))",
     {"B": "CSR", "C": "CSR"}, {"alpha": "da", "B": "d33a", "C": "d33b", "d": "d3a"},
     [148, 0, 146]),
    ("scaled_matrix_vector", "a(i) = 2.0 * (B(i,k) * c(k)) + 3.0", {},
     {"B": "d33a", "c": "d3a"}, [11, 3, 29]),
    ("axpy_csr", "a(i) = B(i,k) * c(k) + d(i)", {"B": "CSR"}, {"B": "d33a", "c": "d3a", "d": "d3b"},
     [6, 0, 16]),
    ("axpy_dcsr_sparse", "a(i) = B(i,k) * c(k) + d(i)", {"B": "DCSR", "c": S, "d": S},
     {"B": "d33a", "c": "d3a", "d": "d3b"}, [6, 0, 16]),
    ("axpy_scalars", "a(i) = alpha * B(i,k) * c(k) + beta * d(i)", {"B": "CSR"},
     {"alpha": "da", "beta": "db", "B": "d33a", "c": "d3a", "d": "d3b"}, [28, 0, 56]),
    ("vector_inner_sparse", "a = b(k) * c(k)", {"b": S, "c": S}, {"b": "d5a", "c": "d5b"}, 40),
    ("spmv_csr", "a(i) = B(i,k) * c(k)", {"B": "CSR"}, {"B": "d33a", "c": "d3b"}, [0, 0, 18]),
    ("spmv_csr_sparse", "a(i) = B(i,k) * c(k)", {"B": "CSR", "c": S}, {"B": "d33a", "c": "d3b"},
     [0, 0, 18]),
    ("spmv_dcsr_into_sparse", "a(i) = B(i,k) * c(k)", {"a": S, "B": "DCSR", "c": S},
     {"B": "d33a", "c": "d3b"}, ("storage", [([0, 2], [0, 2])], [0, 18])),
    ("matrix_sum_dcsr", "a = B(k,l)", {"B": "DCSR"}, {"B": "d33a"}, 9),
    ("matrix_mul_csr", "a(i,j) = B(i,k) * C(k,j)", {"B": "CSR", "C": "CSR"},
     {"B": "d33a", "C": "d33b"}, [0, 0, 0, 0, 0, 0, 30, 180, 0]),
    ("tensor_vector_mul", "A(i,j) = B(i,j,k) * c(k)", {"B": "CSF", "c": S},
     {"B": "d333a", "c": "d3b"}, [4, 0, 12, 0, 0, 33, 0, 24, 0]),
    ("tensor_matrix_mul", "A(i,j) = B(i,j,k) * C(j,k)", {"B": "CSF"},
     {"B": "d233a", "C": "d33a"}, [6, 0, 16, 10, 0, 46]),
    ("mttkrp", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", {"B": "CSF"},
     {"B": "d233a", "C": "d33a", "D": "d33b"}, [0, 80, 0, 180, 0, 0]),
    ("emit_avail_exprs", "A(i,j) = (b(i) + c(i)) * D(i,j)", {}, {"b": "d3a", "c": "d3b", "D": "d33a"},
     [0, 10, 0, 0, 0, 0, 12, 0, 16]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_taco_case(case):
    _, statement, formats, operands, expected = case
    kernel = alg.compile(statement, formats=formats)
    result = kernel(**{name: D[data] for name, data in operands.items()})
    if isinstance(expected, tuple):
        _, levels, values = expected
        compressed = [l for l in range(len(result.dim_shape)) if result.positions(l) is not None]
        assert len(compressed) == len(levels)
        for level, (pos, crd) in zip(compressed, levels):
            assert result.positions(level).tolist() == pos
            assert result.coordinates(level).tolist() == crd
        assert result.values.tolist() == [float(v) for v in values]
    else:
        np.testing.assert_array_equal(np.asarray(result).reshape(-1),
                                      np.asarray(expected, float).reshape(-1))
