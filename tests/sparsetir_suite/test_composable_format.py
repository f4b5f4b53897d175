"""SparseTIR's ``tests/python/sparsetir/test_composable_format.py`` (HEAD 9b3f843), ported.

| SparseTIR test | status |
|---|---|
| ``test_csrmm_bsr_rewrite`` | passes with documented renames, the expected function in our form |
| ``test_csrmm_ell_rewrite`` | passes with documented renames, the expected function in our form |
| ``test_csrmm_padding_rewrite`` | passes with documented renames, the expected function in our form |

Renames (``docs/migration.md`` §1): ``tvm.sparse`` -> ``sparsetir``; ``format_decompose`` takes
and returns the ``SparseFunction`` (``mod = csrmm`` for ``tvm.IRModule.from_expr(csrmm)``,
``mod`` for ``mod["main"]``). The expected ``*_rewrite_with_preprocess`` functions
(``scripts_formats.py``) are ours: SparseTIR's give every sub-kernel its own ``T.init``, so
each format zeroes what the formats before it added to ``C``; ours initialise ``C`` once
(``csrmm_init``), give the sub-kernels an identity init, keep the iteration's axis order,
mask the padding of a last block, and write 0 at padding slots in the preprocess
(``sparsetir.first_slots``). SparseTIR compared IR only; each test here also runs the
decomposed kernel, preprocess included (values start as NaN), on the arrays of
``sparsetir.format`` and compares ``C`` with scipy. SparseTIR's own ELL arrays (padding column
0, ``sparsetir.format.compat``) break the order the rule's sorted ``J`` declares: the call
refuses them with an ``ArgumentError`` naming the row, which the ELL test checks.
"""

import numpy as np
import pytest
import scipy.sparse
import tvm
from scripts_formats import (
    bsr,
    bsr_rewrite_with_preprocess,
    ell,
    ell_rewrite_with_preprocess,
    padding,
    padding_rewrite_with_preprocess,
)
from scripts_stage1 import csrmm

import sparsetir
from sparsetir import FormatRewriteRule, format_decompose
from sparsetir.format import column_part_hyb, csr_pad, csr_to_bsr


def csr2bsr_inv_index_map(block_size):
    def func(io, jo, ii, ji):
        return io * block_size + ii, jo * block_size + ji

    return func


def csr2bsr_index_map(block_size):
    def func(i, j):
        return i // block_size, j // block_size, i % block_size, j % block_size

    return func


def csr2ell_inv_index_map(o, i, j):
    return i, j


def csr2ell_index_map(i, j):
    return 0, i, j


def test_csrmm_bsr_rewrite():
    block_size_symbol = bsr.params[-1]
    rewrites = []
    for block_size in [4, 16, 32]:
        rewrites.append(
            FormatRewriteRule(
                str(block_size),
                bsr.specialize({block_size_symbol: block_size}),
                ["A"],
                ["I", "J"],
                ["IO", "JO", "II", "JI"],
                {"I": ["IO", "II"], "J": ["JO", "JI"]},
                csr2bsr_index_map(block_size),
                csr2bsr_inv_index_map(block_size),
            )
        )
    mod = csrmm
    mod = format_decompose(mod, rewrites)
    print(mod.script())
    tvm.ir.assert_structural_equal(mod, bsr_rewrite_with_preprocess, True)
    check_numbers(mod, bsr_arrays)  # added


def test_csrmm_ell_rewrite():
    nnz_cols_symbol = ell.params[-1]
    rewrites = []
    for nnz_cols in [4, 8, 16, 32, 64, 128, 512]:
        rewrites.append(
            FormatRewriteRule(
                str(nnz_cols),
                ell.specialize({nnz_cols_symbol: nnz_cols}),
                ["A"],
                ["I", "J"],
                ["O", "I", "J"],
                {"I": ["O", "I"], "J": ["J"]},
                csr2ell_index_map,
                csr2ell_inv_index_map,
            )
        )
    mod = csrmm
    mod = format_decompose(mod, rewrites)
    tvm.ir.assert_structural_equal(mod, ell_rewrite_with_preprocess, True)
    kernel, arguments = check_numbers(mod, ell_arrays)  # added
    # added: the long rows were cut into pieces that share a row id
    assert np.bincount(ell_arrays(sample_matrix())["indices_i_512"]).max() == 3
    # added: SparseTIR's padding (column 0 after larger columns) breaks the rows' declared
    # order; the call says so instead of searching unsorted rows
    with pytest.raises(sparsetir.ArgumentError, match="indices_j_4 is not sorted within row"):
        kernel(*arguments(ell_arrays(sample_matrix(), padding_column=0)))


def csrpadding_inv_index_map(i, jo, ji):
    return i, ji


def csrpadding_index_map(i, j):
    return i, 0, j


def test_csrmm_padding_rewrite():
    pad_size_symbol = padding.params[-1]
    pad_size = 32
    rewrites = [
        FormatRewriteRule(
            str(pad_size),
            padding.specialize({pad_size_symbol: pad_size}),
            ["A"],
            ["I", "J"],
            ["I", "JO", "JI"],
            {"I": ["I"], "J": ["JO", "JI"]},
            csrpadding_index_map,
            csrpadding_inv_index_map,
        )
    ]
    mod = csrmm
    mod = format_decompose(mod, rewrites)
    tvm.ir.assert_structural_equal(mod, padding_rewrite_with_preprocess, True)
    check_numbers(mod, padding_arrays)  # added


# ---------------------------------------------------------------- added: the numbers
FEAT = 8
BSR_SIZES = (4, 16, 32)
ELL_WIDTHS = (4, 8, 16, 32, 64, 128, 512)


def sample_matrix(m=96, n=1200, seed=0):
    """A CSR matrix whose row lengths reach every ELL bucket (0 to 300, empty rows included)
    and pass the widest (rows 5 and 40: 700 and 1100 nonzeros, which ``column_part_hyb`` cuts
    into several ELL rows of 512 sharing one row id), columns sorted."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([0, 1, 3, 4, 7, 12, 30, 60, 100, 300], m)
    lengths[[5, 40]] = 700, 1100
    rows = [np.sort(rng.choice(n, k, replace=False)) for k in lengths]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = np.concatenate(rows).astype(np.int32)
    data = rng.standard_normal(indices.size).astype(np.float32)
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(m, n))


def _nan(size):
    """A new format's values, filled by the in-kernel preprocess: NaN shows a slot it misses."""
    return np.full(size, np.nan, np.float32)


def bsr_arrays(A, filled=False) -> dict:
    """Block rows of 32 rows go to the three block sizes in turn, so each nonzero is in one
    format; the preprocess reads the values from ``A`` (``filled``: ``csr_to_bsr`` did)."""
    m, n = A.shape
    out = {}
    for k, bs in enumerate(BSR_SIZES):
        part = scipy.sparse.diags(((np.arange(m) // 32) % 3 == k).astype(np.float32)) @ A
        part.eliminate_zeros()
        indptr, indices, data = csr_to_bsr(part.indptr, part.indices, part.data, A.shape, bs)
        out.update({f"a_{bs}": data.ravel() if filled else _nan(data.size),
                    f"indptr_{bs}": indptr,
                    f"indices_{bs}": indices, f"m_{bs}": indptr.size - 1,
                    f"n_{bs}": -(-n // bs), f"nnz_{bs}": indices.size})
    return out


def ell_arrays(A, padding_column=None) -> dict:
    """The ELL buckets of one column partition (``sparsetir.format.column_part_hyb``: a padding
    slot repeats its row's last column, so each row stays sorted as the rule's ``J`` declares;
    ``padding_column=0`` writes SparseTIR's padding instead)."""
    m, n = A.shape
    out = {}
    for w, b in zip(ELL_WIDTHS, column_part_hyb(m, n, A.indptr, A.indices, 1, ELL_WIDTHS)[0]):
        count = b.row_indices.size
        cols = b.col_indices if padding_column is None else np.where(b.mask, b.col_indices,
                                                                     padding_column)
        out.update({f"a_{w}": _nan(count * w), f"indptr_i_{w}": np.array([0, count], np.int32),
                    f"indices_i_{w}": b.row_indices, f"indices_j_{w}": cols.ravel(),
                    f"m_{w}": m, f"n_{w}": n, f"num_rows_{w}": count})
    return out


def padding_arrays(A) -> dict:
    """Rows padded to chunks of 32 columns (``csr_pad``: a padding slot repeats the row's last
    column)."""
    indptr, indices, _, _ = csr_pad(A.indptr, A.indices, None, A.shape, 32)
    m, n = A.shape
    return {"a_32": _nan(indices.size), "indptr_32": (indptr // 32).astype(np.int32),
            "indices_32": indices, "m_32": m, "n_32": n, "nnz_chunks_32": indices.size // 32}


def run(func, arrays: dict):
    """Build ``func`` (``feat_size`` bound to ``FEAT``) and call it on ``sample_matrix()``, a
    random ``B``, a NaN ``C`` and the new formats' ``arrays`` (filled in place by a
    preprocess); returns ``(C, B, kernel, arguments)``, ``arguments(arrays)`` laying out
    another call."""
    A = sample_matrix()
    m, n = A.shape
    B = np.random.default_rng(1).standard_normal((n, FEAT)).astype(np.float32)
    C = np.full((m, FEAT), np.nan, np.float32)
    func = func.specialize({"feat_size": FEAT})
    kernel = sparsetir.build(func, "llvm")

    def arguments(new):
        values = dict(a=A.data, b=B, c=C, indptr=A.indptr, indices=A.indices, m=m, n=n,
                      nnz=A.nnz, **new)
        return [values[p.name] for p in func.params]

    kernel(*arguments(arrays))
    return C, B, kernel, arguments


def check_numbers(func, new_arrays):
    """``func``'s ``C`` equals scipy's on the arrays ``new_arrays(A)``; returns the kernel and
    ``arguments`` of ``run``."""
    A = sample_matrix()
    C, B, kernel, arguments = run(func, new_arrays(A))
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)
    return kernel, arguments


def test_ell_rule_on_a_row_longer_than_its_width():  # added
    """A 2x3 matrix and one rule of width 2: row 0 (3 nonzeros) becomes two ELL rows of id 0,
    row 1 is empty; the decomposed kernel gives scipy's product."""
    rule = FormatRewriteRule("2", ell.specialize({ell.params[-1]: 2}), ["A"], ["I", "J"],
                             ["O", "I", "J"], {"I": ["O", "I"], "J": ["J"]}, csr2ell_index_map,
                             csr2ell_inv_index_map)
    func = format_decompose(csrmm, [rule]).specialize({"feat_size": 4})
    A = scipy.sparse.csr_matrix((np.float32([1, 2, 3]), np.int32([0, 1, 2]), np.int32([0, 3, 3])),
                                shape=(2, 3))
    (bucket,) = column_part_hyb(2, 3, A.indptr, A.indices, 1, [2])[0]
    assert bucket.row_indices.tolist() == [0, 0]
    B = np.arange(12, dtype=np.float32).reshape(3, 4)
    C = np.full((2, 4), np.nan, np.float32)
    values = dict(a=A.data, b=B, c=C, indptr=A.indptr, indices=A.indices, m=2, n=3, nnz=3,
                  a_2=np.full(4, np.nan, np.float32), indptr_i_2=np.int32([0, 2]),
                  indices_i_2=bucket.row_indices, indices_j_2=bucket.col_indices.ravel(),
                  m_2=2, n_2=3, num_rows_2=2)
    sparsetir.build(func, "llvm")(*[values[p.name] for p in func.params])
    np.testing.assert_allclose(C, A @ B)


if __name__ == "__main__":
    test_csrmm_bsr_rewrite()
    test_csrmm_ell_rewrite()
    test_csrmm_padding_rewrite()
