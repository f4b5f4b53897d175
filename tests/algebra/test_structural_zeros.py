"""The semantics of unstored entries in ``sparsetir.algebra`` (``docs/coiteration.md``,
*Unstored entries*): an entry a sparse operand does not store is a structural zero, so an
expression is computed only at the coordinates its merge visits. NaN and inf in one operand at
a coordinate where a factor stores nothing do not propagate (the product, the quotient of an
unstored dividend and the summand are not computed there), while a stored entry, an explicit
zero included, is computed like any number (0 * inf is NaN). Checked against a numpy reference
that implements exactly this, for ``*``, ``/`` by a dense divisor, ``+`` and sums; a sparse
divisor is refused with the reason."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir.algebra as alg
from sparsetir.algebra import NotationError

NAN, INF = np.nan, np.inf


def _operand(values, stored):
    """A CSR matrix storing exactly ``values`` where ``stored`` (explicit zeros too)."""
    rows, cols = np.nonzero(stored)
    return sp.csr_matrix((values[rows, cols], (rows, cols)), shape=values.shape)


# B stores NaN, inf, -inf, an explicit 0 and numbers; row 2 empty. C stores NaN/inf where B does
# not, numbers where both store, inf where B's explicit 0 is.
B_VALS = np.array([[1., NAN, 0., 2., 0.], [INF, 0., 0., 0., 3.], [0., 0., 0., 0., 0.],
                   [-INF, 4., 0., 0., 5.]])
B_HAS = np.array([[1, 1, 1, 1, 0], [1, 0, 0, 0, 1], [0, 0, 0, 0, 0], [1, 1, 0, 0, 1]], bool)
C_VALS = np.array([[2., 0., INF, 3., NAN], [0., NAN, INF, 0., 2.], [NAN, INF, 1., 0., 0.],
                   [0., 2., -INF, NAN, 0.]])
C_HAS = np.array([[1, 0, 1, 1, 1], [0, 1, 1, 0, 1], [1, 1, 1, 0, 0], [0, 1, 1, 1, 0]], bool)
B, C = _operand(B_VALS, B_HAS), _operand(C_VALS, C_HAS)


def _where(mask, compute):
    with np.errstate(all="ignore"):
        return np.where(mask, compute(), 0.0)


def _times(b_has, c_has):
    """The reference of B .* C: computed where both store, a structural zero elsewhere."""
    return _where(b_has & c_has, lambda: B_VALS * C_VALS)


def _stored(result):
    coords, _ = result.to_coo()
    mask = np.zeros(result.dim_shape, bool)
    mask[tuple(coords)] = True
    return mask


@pytest.mark.parametrize("fmt", ["CSR", "DCSR"])
def test_product_of_sparse_operands(fmt):
    k = alg.compile("A(i,j) = B(i,j) * C(i,j)", formats={"A": fmt, "B": fmt, "C": fmt})
    out = k(B=B, C=C)
    np.testing.assert_array_equal(out.to_dense(), _times(B_HAS, C_HAS))
    np.testing.assert_array_equal(_stored(out), B_HAS & C_HAS)
    assert np.isnan(out.to_dense()[0, 2])          # stored 0 * stored inf: computed, NaN
    assert out.to_dense()[1, 1] == 0               # unstored B, C's NaN: not computed


def test_product_with_a_dense_operand_and_dense_result():
    k = alg.compile("A(i,j) = B(i,j) * C(i,j)", formats={"B": "CSR"})
    garbage = np.full_like(C_VALS, 7.0)
    out = k(B=B, C=C_VALS)                          # C dense: it stores every coordinate
    np.testing.assert_array_equal(out, _times(B_HAS, np.ones_like(C_HAS)))
    assert not np.array_equal(out, garbage)


def test_quotient_by_a_dense_divisor():
    k = alg.compile("A(i,j) = B(i,j) / C(i,j)", formats={"A": "CSR", "B": "CSR"})
    out = k(B=B, C=C_VALS)
    expected = _where(B_HAS, lambda: B_VALS / C_VALS)    # 1/0 = inf where B stores, 0 elsewhere
    np.testing.assert_array_equal(out.to_dense(), expected)
    np.testing.assert_array_equal(_stored(out), B_HAS)


def test_sparse_divisor_is_refused_with_the_reason():
    with pytest.raises(NotationError, match="structural zeros"):
        alg.compile("A(i,j) = B(i,j) / C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})


def test_sum_propagates_what_either_operand_stores():
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    out = k(B=B, C=C)
    expected = _where(B_HAS | C_HAS, lambda: np.where(B_HAS, B_VALS, 0) +
                      np.where(C_HAS, C_VALS, 0))
    np.testing.assert_array_equal(out.to_dense(), expected)
    np.testing.assert_array_equal(_stored(out), B_HAS | C_HAS)


@pytest.mark.parametrize("fmt", ["CSR", "DCSR"])
def test_reductions_sum_only_computed_products(fmt):
    c = np.array([INF, NAN, 1., -INF, 2.])
    spmv = alg.compile("a(i) = B(i,j) * c(j)", formats={"B": fmt})
    expected = _where(B_HAS, lambda: B_VALS * c).sum(axis=1)
    np.testing.assert_array_equal(spmv(B=B, c=c), expected)
    dot = alg.compile("s = B(i,j) * C(i,j)", formats={"B": fmt, "C": fmt})
    np.testing.assert_array_equal(dot(B=B, C=C), _times(B_HAS, C_HAS).sum())
    spgemm = alg.compile("A(i,j) = B(i,k) * D(k,j)", formats={"A": "CSR", "B": "CSR", "D": "CSR"})
    d_vals = C_VALS.T.copy()                         # 5 x 4, NaN and inf where B skips them
    d_has = C_HAS.T.copy()
    with np.errstate(all="ignore"):
        terms = np.where(B_HAS[:, :, None] & d_has[None], B_VALS[:, :, None] * d_vals[None], 0)
    out = spgemm(B=B, D=_operand(d_vals, d_has))
    np.testing.assert_array_equal(out.to_dense(), terms.sum(axis=1))



def _dense(result):
    return result.to_dense() if hasattr(result, "to_dense") else np.asarray(result)


def _computed(compute):
    """``compute()`` in IEEE arithmetic, numpy's warnings about inf and NaN silenced."""
    with np.errstate(all="ignore"):
        return compute()


# B .* C with C dense: computed where B stores only (C's NaN and inf under B's unstored
# entries, and in B's empty row 2, do not reach it); B .* C + 1 adds 1 everywhere
B_TIMES_C = _computed(lambda: np.where(B_HAS, B_VALS * C_VALS, 0.0))
B_TIMES_C_PLUS_1 = B_TIMES_C + 1.0


@pytest.mark.parametrize("term, operands, whole", [
    ("1", {}, 1.0),
    ("s", {"s": 1.0}, 1.0),
    ("e(i)", {"e": np.array([1., -2., NAN, 4.])}, np.array([[1.], [-2.], [NAN], [4.]])),
])
@pytest.mark.parametrize("fmt, out", [("CSR", None), ("CSR", "CSR"), ("DCSR", "DCSR"),
                                      ("DCSR", None)])
def test_product_plus_a_term_without_an_index(term, operands, whole, fmt, out):
    """A term that does not depend on ``j`` (a constant, a scalar operand, ``e(i)``) makes
    the walk over ``j`` whole; the product at ``B``'s unstored entries is still no term there,
    so ``C``'s NaN and inf under them do not reach the result (numpy's dense ``B * C + 1``
    would give NaN), as with a 2-D term (``+ F(i,j)``)."""
    formats = {"B": fmt, **({"A": out} if out else {})}
    k = alg.compile(f"A(i,j) = B(i,j) * C(i,j) + {term}", formats=formats)
    expected = B_TIMES_C + whole
    np.testing.assert_array_equal(_dense(k(B=B, C=C_VALS, **operands)), expected)


@pytest.mark.parametrize("fmt", ["CSR", "DCSR"])
def test_whole_sum_inside_a_product_and_a_quotient(fmt):
    """The term without ``j`` inside a factor: ``F .* (B .* C + 1)`` with ``F`` dense (the
    merge over ``j`` is ``F``'s, ``B`` is looked up), ``D .* (B .* C + 1)`` with ``D`` sparse
    (``D``'s coordinates, here ``C``'s pattern), and ``(B .* C + 1) ./ F``."""
    f = np.array([[2., INF, 1., 0.5, 3.], [1., 1., 2., 2., 1.], [4., 1., NAN, 1., 1.],
                  [1., 2., 3., 4., 5.]])
    k = alg.compile("A(i,j) = F(i,j) * (B(i,j) * C(i,j) + 1)", formats={"B": fmt})
    np.testing.assert_array_equal(k(B=B, C=C_VALS, F=f), _computed(lambda: f * B_TIMES_C_PLUS_1))
    k = alg.compile("A(i,j) = D(i,j) * (B(i,j) * C(i,j) + 1)",
                    formats={"A": fmt, "B": fmt, "D": fmt})
    out = k(B=B, C=C_VALS, D=C)
    np.testing.assert_array_equal(out.to_dense(), _where(C_HAS, lambda: C_VALS * B_TIMES_C_PLUS_1))
    np.testing.assert_array_equal(_stored(out), C_HAS)
    k = alg.compile("A(i,j) = (B(i,j) * C(i,j) + 1) / F(i,j)", formats={"A": fmt, "B": fmt})
    np.testing.assert_array_equal(k(B=B, C=C_VALS, F=f).to_dense(),
                                  _computed(lambda: B_TIMES_C_PLUS_1 / f))


def test_sparse_product_plus_a_constant_into_a_sparse_result():
    """``B .* C + 1`` with both factors and the result CSR: every coordinate is stored (the
    result is whole), ``B .* C`` computed only where both store (``C``'s NaN under an
    unstored ``B`` and ``B``'s inf under an unstored ``C`` give 1)."""
    k = alg.compile("A(i,j) = B(i,j) * C(i,j) + 1", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    out = k(B=B, C=C)
    np.testing.assert_array_equal(out.to_dense(), _times(B_HAS, C_HAS) + 1.0)
    assert _stored(out).all()


@pytest.mark.parametrize("fmt", ["CSR", "DCSR"])
def test_sums_over_a_whole_walk_add_only_computed_products(fmt):
    """A sum whose summed index walks whole (``(B .* C + 1) * 2`` over ``j``, and over both
    indices into a scalar) adds the product only where ``B`` stores: 2 at every unstored
    coordinate, all of empty row 2 included."""
    k = alg.compile("a(i) = (B(i,j) * C(i,j) + 1) * 2", formats={"B": fmt})
    np.testing.assert_array_equal(k(B=B, C=C_VALS), (B_TIMES_C_PLUS_1 * 2).sum(axis=1))
    total = alg.compile("s = (B(i,j) * C(i,j) + 1) * 2", formats={"B": fmt})
    np.testing.assert_array_equal(total(B=B, C=C_VALS), (B_TIMES_C_PLUS_1 * 2).sum())
