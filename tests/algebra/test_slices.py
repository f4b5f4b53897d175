"""Dimension slices (``#sparse_tensor<slice(offset, size, stride)>``) in ``sparsetir.algebra``
formats: every operand in a slice format is its window, whatever it is given as (a scipy
matrix, a numpy array, a SparseTensor in another encoding: the window of the whole value; a
SparseTensor in those slices: its own window), checked against numpy slicing; a result format
with slices, and a slice that does not fit its operand, are refused by name."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir.algebra as alg
from sparsetir.errors import SparseTIRValueError
from sparsetir.format import Encoding, SparseTensor

ROWS = "(i : #sparse_tensor<slice(1, 3, 2)>, j) -> (i : dense, j : compressed)"      # rows 1, 3, 5
BOTH = ("(i : #sparse_tensor<slice(?, 3, ?)>, j : #sparse_tensor<slice(2, ?, 3)>)"
        " -> (i : compressed, j : compressed)")                            # rows 0-2, cols 2, 5
DENSE_COLS = "(i, j : #sparse_tensor<slice(1, 2, 3)>) -> (i : dense, j : dense)"   # cols 1, 4
WINDOW = {ROWS: np.s_[1:6:2, :], BOTH: np.s_[0:3, 2::3], DENSE_COLS: np.s_[:, 1:5:3]}


def _matrix(shape=(7, 6), seed=0):
    a = sp.random(*shape, density=0.4, random_state=seed).toarray()
    a[3 % shape[0]] = 0                         # an empty row (inside the window of ROWS)
    return a


@pytest.mark.parametrize("enc", [ROWS, BOTH])
@pytest.mark.parametrize("given", ["scipy", "numpy", "csr_tensor", "window_tensor"])
def test_sliced_operand_is_its_window(enc, given):
    full = _matrix()
    window = full[WINDOW[enc]]
    other = _matrix(window.shape, seed=1)
    operand = {"scipy": sp.csr_matrix(full), "numpy": full,
               "csr_tensor": SparseTensor.from_dense(full, "CSR"),
               "window_tensor": SparseTensor.from_dense(full, enc)}[given]
    if given == "window_tensor":
        assert operand.dim_shape == window.shape
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": enc, "C": "CSR"})
    np.testing.assert_array_equal(k(B=operand, C=sp.csr_matrix(other)).to_dense(),
                                  window + other)
    mul = alg.compile("a(i) = B(i,j) * c(j)", formats={"B": enc})
    c = np.linspace(1, 2, window.shape[1])
    np.testing.assert_allclose(mul(B=operand, c=c), window @ c)


def test_dense_operand_slice_and_a_tensor_in_other_slices():
    full = _matrix()
    k = alg.compile("A(i,j) = B(i,j) * C(i,j)", formats={"A": "CSR", "B": "CSR", "C": DENSE_COLS})
    b = _matrix((7, 2), seed=3)
    np.testing.assert_array_equal(k(B=sp.csr_matrix(b), C=full).to_dense(),
                                  b * full[WINDOW[DENSE_COLS]])
    # a SparseTensor in other slices is taken as the whole tensor: its window, sliced again,
    # as SparseTensor.convert to the format gives
    rows = SparseTensor.from_dense(full, ROWS)                    # rows 1, 3, 5 of full
    k2 = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": DENSE_COLS.replace(
        "j : dense)", "j : compressed)"), "C": "CSR"})
    zero = sp.csr_matrix((3, 2))
    np.testing.assert_array_equal(k2(B=rows, C=zero).to_dense(),
                                  full[1:6:2][:, 1:5:3])
    np.testing.assert_array_equal(
        rows.convert(Encoding.parse(DENSE_COLS.replace("j : dense)", "j : compressed)")))
        .to_dense(), full[1:6:2][:, 1:5:3])


def test_result_with_slices_is_refused():
    with pytest.raises(SparseTIRValueError, match="format of A: .* has dimension slices"):
        alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": ROWS, "B": "CSR", "C": "CSR"})


def test_slice_that_does_not_fit_is_refused_by_name():
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": ROWS, "C": "CSR"})
    with pytest.raises(SparseTIRValueError, match="operand B: .*does not fit"):
        k(B=sp.csr_matrix((4, 6)), C=sp.csr_matrix((3, 6)))
    with pytest.raises(SparseTIRValueError, match="C's dimension 0 .* has size 7"):
        k(B=sp.csr_matrix((7, 6)), C=sp.csr_matrix((7, 6)))       # B is 3 rows: its window


def test_sliced_operands_of_a_chain_of_kernels():
    fulls = [_matrix(seed=s) for s in range(5)]
    names = [f"M{n}" for n in range(5)]
    k = alg.compile("A(i,j) = " + " + ".join(f"{n}(i,j)" for n in names),
                    formats={"A": "CSR", **{n: ROWS for n in names}})
    assert isinstance(k, alg.GroupedKernel)          # each operand cut once, by the chain
    np.testing.assert_array_equal(k(**{n: sp.csr_matrix(f) for n, f in zip(names, fulls)})
                                  .to_dense(), sum(f[1:6:2] for f in fulls))
