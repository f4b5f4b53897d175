"""``format_decompose`` never plants a value: rules over written buffers are refused, and
padding slots of a new format contribute nothing, however its values are filled (by the
conversion routine, or by the rule's in-kernel preprocess looking them up), with SparseTIR's
own mask-less rules as SparseTIR wrote them. Outputs and new values start as NaN."""

import numpy as np
import pytest
import scipy.sparse
from decomposed_cases import CASES, ELL_WIDTHS, FEAT, ell_unsorted
from kernel_zoo import CASES as ZOO

import sparsetir
from sparsetir import FormatRewriteError
from sparsetir.script import from_source
from sparsetir.script import tir as T
from sparsetir.stage1.bsr import bsr_rule
from sparsetir.lower.first_slots import FIRST_SLOTS_ANNOTATION


def edge_matrix(seed=0, rows=40, cols=24):
    """Random rows up to the widest ELL bucket, and the edges: empty rows, rows shorter than
    their bucket, rows whose last (or only) column is 0, a row exactly as wide as a bucket."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, max(ELL_WIDTHS) + 1, rows)
    lengths[[0, 5, rows - 1]] = 0
    special = {1: [0], 2: [0, 5], 3: [2, 7, 9], 4: list(range(8)), 6: [0, 1, 2, 3],
               7: [cols - 1], 8: [3, cols - 1]}
    columns = [special.get(r, np.sort(rng.choice(cols, size=n, replace=False)))
               for r, n in enumerate(lengths)]
    indptr = np.concatenate([[0], np.cumsum([len(c) for c in columns])]).astype(np.int32)
    indices = np.concatenate(columns).astype(np.int32)
    data = rng.uniform(0.5, 1.5, indices.size).astype(np.float32)
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(rows, cols))


def _call(name, A, seed=1):
    B = np.random.default_rng(seed).standard_normal((A.shape[1], FEAT)).astype(np.float32)
    C = np.full((A.shape[0], FEAT), np.nan, np.float32)
    args = CASES[name].arguments(A, B, C)
    CASES[name].build()(*args)
    return C, A @ B, dict(zip([p.name for p in CASES[name].func.params], args))


@pytest.mark.parametrize("name", ["ell_sparsetir", "ell_unsorted"])
def test_sparsetir_ell_rule_with_its_preprocess_equals_scipy(name):
    """SparseTIR's mask-less ELL rule, arrays from csr_to_ell (a padding slot repeats its
    row's last column): the preprocess writes 0 there, so the result is A @ B."""
    A = edge_matrix()
    C, expected, args = _call(name, A)
    np.testing.assert_allclose(C, expected, rtol=1e-5, atol=1e-5)
    buckets = sparsetir.format.csr_to_ell(A.indptr, A.indices, A.data, A.shape,
                                          list(ELL_WIDTHS))
    for width, bucket in zip(ELL_WIDTHS, buckets):     # the values csr_to_ell gives, 0 padded
        np.testing.assert_array_equal(args[f"a_{width}"], bucket.data.ravel())


def test_long_rows_cut_into_pieces_with_unsorted_axes():
    A = edge_matrix(seed=3)
    A = A + scipy.sparse.csr_matrix((np.ones(20, np.float32), (np.full(20, 9), np.arange(20))),
                                    shape=A.shape)   # row 9: 20 entries, three pieces of 8
    A.sort_indices()
    C, expected, _ = _call("ell_unsorted", A)
    np.testing.assert_allclose(C, expected, rtol=1e-5, atol=1e-5)


def test_sparsetir_padding_rule_with_its_preprocess_equals_scipy():
    C, expected, args = _call("padded_sparsetir", edge_matrix(seed=5))
    np.testing.assert_allclose(C, expected, rtol=1e-5, atol=1e-5)
    assert not np.isnan(args["a_4"]).any()


@pytest.mark.parametrize("name", ["bsr", "padded_masked", "hyb"])
def test_other_decompositions_equal_scipy(name):
    C, expected, _ = _call(name, edge_matrix(seed=2))
    np.testing.assert_allclose(C, expected, rtol=1e-5, atol=1e-5)


def test_padding_by_column_zero_as_sparsetir_pads():
    """SparseTIR's routines pad with column 0: slot 1 of row 0 is the real (0), slots 2-3
    repeat it; row 1 does not hold column 0, so its padding looks up nothing."""
    A = scipy.sparse.csr_matrix((np.array([2.0, 3.0, 5.0], np.float32), [0, 3, 3], [0, 2, 3]),
                                shape=(2, 4))
    func = sparsetir.format_decompose(ZOO["csrmm"].func, [
        _ell_rule(ell_unsorted, 4)]).specialize({"feat_size": 1})
    values = dict(a=A.data, b=np.ones((4, 1), np.float32), c=np.full((2, 1), np.nan, np.float32),
                  indptr=A.indptr, indices=A.indices, m=2, n=4, nnz=3,
                  a_4=np.full(8, np.nan, np.float32), indptr_i_4=np.array([0, 2], np.int32),
                  indices_i_4=np.array([0, 1], np.int32),
                  indices_j_4=np.array([3, 0, 0, 0, 3, 0, 0, 0], np.int32),
                  m_4=2, n_4=4, num_rows_4=2)
    sparsetir.build(func, "llvm")(*[values[p.name] for p in func.params])
    np.testing.assert_array_equal(values["a_4"], [3, 2, 0, 0, 5, 0, 0, 0])
    np.testing.assert_array_equal(values["c"].ravel(), [5, 5])


def _ell_rule(desc, width):
    return sparsetir.FormatRewriteRule(str(width), desc.specialize({"nnz_cols": width}), ["A"],
                                       ["I", "J"], ["O", "I", "J"], {"I": ["O", "I"], "J": ["J"]},
                                       lambda i, j: (0, i, j), lambda o, i, j: (i, j))


def test_preprocess_marks_only_the_innermost_sparse_axes():
    """ELL rows of one bucket may repeat a row (pieces of a long row): only the columns'
    repeats are padding."""
    func = sparsetir.format_decompose(ZOO["csrmm"].func, [_ell_rule(ell_unsorted, 4)])
    rewrite = sparsetir.extract_preprocess(func).body[0]
    assert [str(v) for v in rewrite.annotations[FIRST_SLOTS_ANNOTATION]] == ["j"]
    stage2 = sparsetir.lower_sparse_iter(func).script()
    assert FIRST_SLOTS_ANNOTATION not in stage2


@T.prim_func
def scale_in_place(a: T.handle, indptr: T.handle, indices: T.handle, m: T.int32, n: T.int32,
                   nnz: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    with T.sp_iter([I, J], "SS", "scale") as [i, j]:
        A[i, j] = A[i, j] * T.float32(2)


@T.prim_func
def rows_of_a(a: T.handle, y: T.handle, indptr: T.handle, indices: T.handle, m: T.int32,
              n: T.int32, nnz: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    Y = T.match_sparse_buffer(y, (I,), "float32")
    with T.sp_iter([I, J], "SR", "row_sum") as [i, j]:
        with T.init():
            Y[i] = T.float32(0)
        Y[i] = Y[i] + A[i, j]
    with T.sp_iter([I, J], "SS", "clear") as [i, j]:
        A[i, j] = T.float32(0)


@pytest.mark.parametrize("func, writer", [(scale_in_place, "scale"), (rows_of_a, "clear")])
def test_a_rule_over_a_buffer_the_kernel_writes_is_refused(func, writer):
    """Only loads would be redirected to the new format (A = A_bsr * 2, the stores still at
    the old positions): refused by name, the rule and the writing iteration named."""
    with pytest.raises(FormatRewriteError, match=rf"FormatRewriteRule 'bsr': buffer A is "
                                                 rf"written by iteration {writer}"):
        sparsetir.format_decompose(func, [bsr_rule("bsr", 2)])


ROW_REDUCTION = """
@T.prim_func
def {name}(a: T.handle, y: T.handle, indptr: T.handle, indices: T.handle, m: T.int32,
           n: T.int32, nnz: T.int32) -> None:
    I = T.dense_fixed(m)
    J = T.sparse_variable(I, (n, nnz), (indptr, indices), "int32")
    A = T.match_sparse_buffer(a, (I, J), "float32")
    Y = T.match_sparse_buffer(y, (I,), "float32")
    with T.sp_iter([I, J], "SR", "{name}") as [i, j]:
        with T.init():
            Y[i] = T.float32({init})
        Y[i] = {update}
"""


def row_reduction(name: str, init: str, update: str):
    """A reduction over each row of A into ``Y[i]`` (``update`` its new value)."""
    return from_source(ROW_REDUCTION.format(name=name, init=init, update=update))


row_max = row_reduction("row_max", "-1e30", "T.max(Y[i], A[i, j])")
row_exp_sum = row_reduction("row_exp_sum", "0", "Y[i] + T.exp(A[i, j])")
row_scaled_sum = row_reduction("row_scaled_sum", "1",
                               "Y[i] - A[i, j] * T.float32(3) / T.float32(2)")


@pytest.mark.parametrize("func, name", [(row_max, "row_max"), (row_exp_sum, "row_exp_sum"),
                                        (ZOO["csr_element_wise"].func, "csr_element_wise")])
def test_a_body_that_padding_would_change_is_refused(func, name):
    """Padding slots (0 in a BSR block, a repeated column in an ELL row) would join a max or
    add exp(0) = 1; a plain store would put 0 over a real element where a mask-less ELL or
    padding rule repeats its column, so plain stores are refused for every rule. By name,
    not computed."""
    with pytest.raises(FormatRewriteError, match=rf"iteration {name} cannot be decomposed"):
        sparsetir.format_decompose(func, [bsr_rule("bsr", 4)])


@pytest.mark.parametrize("name, update, expected", [
    ("row_abs_sum", "Y[i] + T.fabs(A[i, j])", lambda A: abs(A).sum(axis=1)),
    ("row_relu_sum", "Y[i] + T.if_then_else(A[i, j] > T.float32(1), A[i, j], T.float32(0))",
     lambda A: (A.multiply(A > 1)).sum(axis=1)),
    ("row_square_sum", "Y[i] + T.pow(A[i, j], T.float32(2))", lambda A: A.power(2).sum(axis=1)),
    ("row_three_terms", "Y[i] + A[i, j] + A[i, j] * T.float32(2)", lambda A: 3 * A.sum(axis=1)),
    ("row_max_relu_sum", "Y[i] + T.max(A[i, j], T.float32(0))", lambda A: A.sum(axis=1)),
    ("row_min_sum", "Y[i] + T.min(A[i, j] * T.float32(-1), T.float32(0))",
     lambda A: -A.sum(axis=1)),
    ("row_log1p_sum", "Y[i] + T.log1p(A[i, j])", lambda A: A.log1p().sum(axis=1)),
])
def test_terms_that_are_zero_at_zero_are_decomposed(name, update, expected):
    """|A|, ReLUs written with if_then_else or max and a constant 0, A ** 2, log1p:
    0 at a padding slot."""
    A = edge_matrix(seed=6, rows=10, cols=10)
    func = sparsetir.remove_preprocess(sparsetir.format_decompose(
        row_reduction(name, "0", update), [bsr_rule("bsr", 4)]))
    np.testing.assert_allclose(_bsr_row_call(func, A), np.asarray(expected(A)).ravel(),
                               rtol=1e-5)


@pytest.mark.parametrize("update", ["Y[i] + A[i, j] / A[i, j]",
                                    "Y[i] + T.max(A[i, j], T.float32(1))",
                                    "Y[i] + T.log1p(A[i, j] + T.float32(1))",
                                    "Y[i] + A[i, j] * T.log(A[i, j])",
                                    "Y[i] + A[i, j] * (T.float32(1) / A[i, j])"])
def test_a_term_that_is_nan_at_zero_is_refused(update):
    """0 / 0, 0 * log(0), 0 * (1 / 0) at a padding slot are NaN: every row of the BSR
    result was NaN (the last two were accepted as products with a vanishing factor)."""
    with pytest.raises(FormatRewriteError, match="cannot be decomposed"):
        sparsetir.format_decompose(row_reduction("row_nan", "0", update), [bsr_rule("bsr", 4)])


def _bsr_row_call(func, A):
    """Run a decomposed row reduction over A in BSR(4) (NaN-filled output); its result."""
    indptr_b, indices_b, data_b = sparsetir.format.csr_to_bsr(A.indptr, A.indices, A.data,
                                                              A.shape, 4)
    Y = np.full(A.shape[0], np.nan, np.float32)
    blocks = -(-A.shape[0] // 4), -(-A.shape[1] // 4)
    args = dict(a=A.data, y=Y, indptr=A.indptr, indices=A.indices, m=A.shape[0],
                n=A.shape[1], nnz=A.nnz, a_bsr=data_b, indptr_bsr=indptr_b,
                indices_bsr=indices_b, mb_bsr=blocks[0], nb_bsr=blocks[1],
                nnzb_bsr=indices_b.size)
    sparsetir.build(func, "llvm")(*[args[p.name] for p in func.params])
    return Y


def test_a_sum_with_the_rewritten_value_as_a_factor_is_decomposed():
    """Y[i] = 1 - sum of 1.5 A[i, j]: a subtraction, a product and a division keep padding at
    0; BSR blocks with fill-in, an empty row, a last block cut short, a NaN-filled output."""
    A = edge_matrix(seed=5, rows=10, cols=10)
    func = sparsetir.remove_preprocess(sparsetir.format_decompose(row_scaled_sum,
                                                                  [bsr_rule("bsr", 4)]))
    np.testing.assert_allclose(_bsr_row_call(func, A),
                               1 - 1.5 * np.asarray(A.sum(axis=1)).ravel(), rtol=1e-5)
