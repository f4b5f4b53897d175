"""A search table passed to the compute of ``remove_preprocess`` that is in range but wrong
(another row for a nonzero) stops the kernel with an ``ArgumentError`` instead of giving wrong
numbers (``transform.search_tables``); the right table still gives scipy's numbers.
"""

import numpy as np
import pytest
import scipy.sparse
import tvm
from kernel_zoo import CASES

import sparsetir
from sparsetir.transform.preprocess import extract_preprocess, remove_preprocess

ROWS, COLS, FEAT = 12, 9, 4


@pytest.fixture(scope="module")
def case():
    mod = sparsetir.lower_sparse_iter(CASES["fused_sddmm"].func)
    removed = remove_preprocess(mod)
    tvm.s_tir.Schedule(removed)                      # TVM's checks hold with the new asserts
    keep = np.ones(ROWS)
    keep[[0, 4, 5, ROWS - 1]] = 0                    # empty rows: first, last, two in a row
    a = (scipy.sparse.diags(keep) @ scipy.sparse.random(ROWS, COLS, density=0.4,
                                                         random_state=0)).tocsr()
    a.eliminate_zeros()
    a.sort_indices()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, FEAT)).astype(np.float32)
    y = rng.standard_normal((COLS, FEAT)).astype(np.float32)
    args = (x, y, None, a.indptr.astype(np.int32), a.indices.astype(np.int32), ROWS, COLS,
            FEAT, a.nnz)
    table = np.full(a.nnz, -1, np.int32)
    out = np.full(a.nnz, np.nan, np.float32)
    sparsetir.build(extract_preprocess(mod), "llvm")(*args[:2], out, *args[3:], table)
    rows = np.repeat(np.arange(ROWS), np.diff(a.indptr))
    want = np.einsum("ef,ef->e", x[rows], y[a.indices])
    return sparsetir.build(removed, "llvm"), args, table, want


def run(case, table):
    compute, args, _, _ = case
    out = np.full(args[-1], np.nan, np.float32)
    compute(*args[:2], out, *args[3:], table)
    return out


def test_the_preprocess_table_gives_the_numbers(case):
    np.testing.assert_allclose(run(case, case[2]), case[3], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("edit", [
    lambda t: t.__setitem__(0, t[0] + 1),            # one entry a row too far (in range)
    lambda t: t.__setitem__(-1, t[-1] - 1),          # one entry a row too early
    lambda t: t.__setitem__(slice(None), 2),         # every entry row 1
    lambda t: t.__setitem__(0, 0),                   # before the first row
])
def test_a_wrong_table_in_range_is_refused(case, edit):
    table = case[2].copy()
    edit(table)
    with pytest.raises(sparsetir.ArgumentError, match="not the search's result"):
        run(case, table)
