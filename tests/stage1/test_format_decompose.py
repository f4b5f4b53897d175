"""``format_decompose``: csrmm written once over CSR, computed through BSR, against scipy.

Shapes are not multiples of the block size, some rows are empty, and outputs (and the new
format's data array, when the preprocess fills it) start as NaN.
"""

import numpy as np
import pytest
import scipy.sparse
from kernel_zoo import CASES

import sparsetir
import sparsetir.stage1.bsr
import tvm
from sparsetir.script.parser import parse_text
from sparsetir import FormatRewriteError, FormatRewriteRule

FEAT = 8


def bsr_rule(bs: int) -> FormatRewriteRule:
    return sparsetir.stage1.bsr.bsr_rule("bsr", bs)


def _matrix(m, n, seed=0):
    a = scipy.sparse.random(m, n, density=0.12, format="csr", dtype=np.float32,
                            random_state=seed)
    a = scipy.sparse.diags((np.arange(m) % 7 != 3).astype(np.float32)) @ a   # empty rows
    a.eliminate_zeros()
    a.sort_indices()
    return a


def _call(func, a, bs, data_bsr):
    m, n = a.shape
    indptr_b, indices_b, _ = sparsetir.format.csr_to_bsr(a.indptr, a.indices, a.data, a.shape,
                                                          bs)
    x = np.random.default_rng(1).standard_normal((n, FEAT)).astype(np.float32)
    c = np.full((m, FEAT), np.nan, np.float32)
    values = dict(a=a.data, b=x, c=c, indptr=a.indptr.astype(np.int32),
                  indices=a.indices.astype(np.int32), m=m, n=n, nnz=a.nnz, a_bsr=data_bsr,
                  indptr_bsr=indptr_b, indices_bsr=indices_b, mb_bsr=-(-m // bs),
                  nb_bsr=-(-n // bs), nnzb_bsr=indices_b.size)
    func = func.specialize({"feat_size": FEAT})
    sparsetir.build(func, "llvm")(*[values[p.name] for p in func.params])
    return c, x


@pytest.mark.parametrize("bs", [2, 4, 16, 32])
def test_bsr_decomposition_with_its_conversion_equals_scipy(bs):
    a = _matrix(70, 45)
    decomposed = sparsetir.format_decompose(CASES["csrmm"].func, [bsr_rule(bs)])
    expected_data = sparsetir.format.csr_to_bsr(a.indptr, a.indices, a.data, a.shape, bs)[2]
    data = np.full(expected_data.size, np.nan, np.float32)
    c, x = _call(decomposed, a, bs, data)
    np.testing.assert_allclose(c, a @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(data, expected_data.ravel())


def test_compute_alone_takes_converted_data():
    a, bs = _matrix(50, 33, seed=2), 4
    compute = sparsetir.remove_preprocess(
        sparsetir.format_decompose(CASES["csrmm"].func, [bsr_rule(bs)]))
    data = sparsetir.format.csr_to_bsr(a.indptr, a.indices, a.data, a.shape, bs)[2]
    c, x = _call(compute, a, bs, data.ravel())
    np.testing.assert_allclose(c, a @ x, rtol=1e-5, atol=1e-5)


def test_decomposed_structure():
    decomposed = sparsetir.format_decompose(CASES["csrmm"].func, [bsr_rule(4)])
    names = [it.name for it in decomposed.body]
    assert names == ["rewrite_A_bsr", "csrmm_init", "csrmm_bsr"]
    assert "preprocess" in decomposed.body[0].annotations
    assert decomposed.body[2].kinds == "SRSRS"
    assert [it.name for it in sparsetir.extract_preprocess(decomposed).body] == ["rewrite_A_bsr"]
    assert [it.name for it in sparsetir.remove_preprocess(decomposed).body] == \
        ["csrmm_init", "csrmm_bsr"]
    lowered = sparsetir.lower_sparse_iter(decomposed)     # Stage II passes TVM's checks
    assert "csrmm_bsr1" in lowered.script()


def test_each_sub_iteration_binds_its_own_variables():
    """Two rules: the kept variable ``k`` is bound afresh in each sub-iteration, so the
    printed function parses back equal to it (one Var bound twice would not)."""
    decomposed = sparsetir.format_decompose(CASES["csrmm"].func, [
        sparsetir.stage1.bsr.bsr_rule("b4", 4), sparsetir.stage1.bsr.bsr_rule("b8", 8)])
    ks = [it.sp_iter_vars[-1].var for it in decomposed.body if it.name.startswith("csrmm_b")]
    assert len(ks) == 2 and not ks[0].same_as(ks[1])
    parsed = parse_text(decomposed.script(), sparsetir.script.tir)
    tvm.ir.assert_structural_equal(decomposed, parsed, True)


@pytest.mark.parametrize("change,message", [
    ({"axes_before_rewrite": ["J", "I"]}, "axes are \\['I', 'J'\\]"),
    ({"buffers_to_rewrite": ["Z"]}, "buffer Z must exist"),
    ({"axes_after_rewrite": ["IO", "JO", "II", "XX"]}, "no axis XX"),
    ({"axis_map": {"I": ["IO"], "J": ["JO", "JI"]}}, "axis_map must send"),
    ({"inv_idx_map": lambda io, jo, ii, ji: (io * 4 + ji, jo * 4 + ii)}, "not the inverse"),
])
def test_bad_rules_are_refused(change, message):
    rule = bsr_rule(4)
    for key, value in change.items():
        setattr(rule, key, value)
    with pytest.raises(FormatRewriteError, match=message):
        sparsetir.format_decompose(CASES["csrmm"].func, [rule])


@pytest.mark.parametrize("args,message", [
    (([0, 1, 1], [2], [1.0], (2, 3), 0), "block size must be a positive integer"),
    (([0, 2, 1, 2], [0, 1], [1.0, 2.0], (3, 3), 2), "not monotone"),
    (([0, 1, 1], [3], [1.0], (2, 3), 2), "out of range"),
    (([0, 1, 1], [0], [1.0, 2.0], (2, 3), 2), "data has 2 values"),
])
def test_csr_to_bsr_refuses_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        sparsetir.format.csr_to_bsr(*args)
