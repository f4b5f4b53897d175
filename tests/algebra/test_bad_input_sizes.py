"""``sparsetir.algebra`` kernels whose results, operands or workspaces pass what int32 positions
or the machine's memory hold, malformed scipy operands and unsupported
dtypes. Each gives scipy's numbers or a clear error from ``sparsetir.errors`` (or
``MemoryError``) naming the size and the limit, raised before anything large is allocated.
(Issue #34.)
"""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir
import sparsetir.algebra as alg
from sparsetir.algebra import sizes

PAST_INT32 = r"past the 2147483647 \(2\*\*31 - 1\) that co-iteration kernels address"


@pytest.fixture(scope="module")
def outer():
    """Outer products of two sparse vectors, per result format."""
    return {fmt: alg.compile("A(i,j) = b(i) * c(j)",
                             formats={"A": fmt, "b": "sparse", "c": "sparse"})
            for fmt in ("CSR", "DCSR", "COO")}


@pytest.mark.parametrize("fmt", ["CSR", "DCSR", "COO"])
@pytest.mark.parametrize("n, entries", [(46341, 2147488281), (65537, 4295098369)])
def test_an_outer_product_past_int32_is_refused_before_allocating(outer, fmt, n, entries):
    """Two vectors of n nonzeros (a few hundred KiB): the result would hold n**2 entries (65,537
    wrapped to 131,073 in int32 and the kernel wrote past them; 46,341 went negative). The count
    is exact (int64) and the refusal comes before the result's arrays exist."""
    b = np.ones(n)
    with pytest.raises(sparsetir.SparseTIRValueError, match=f"would hold {entries} stored values, "
                       f"{PAST_INT32}"):
        outer[fmt](b=b, c=b)


@pytest.mark.parametrize("fmt", ["CSR", "DCSR", "COO"])
def test_an_outer_product_below_int32_is_computed(outer, fmt):
    b = np.array([0., 2., 0., -1., 3.])            # unstored: 0 and 2
    c = np.array([1.5, 0., 0., 4.])
    out = outer[fmt](b=b, c=c)
    np.testing.assert_array_equal(out.to_dense(), np.outer(b, c))
    assert out.nse == 3 * 2


def test_a_dense_result_past_int32_is_refused_before_allocating():
    k = alg.compile("A(i,j) = b(i) * c(j)", formats={"b": "sparse", "c": "sparse"})
    b = np.ones(46341)
    with pytest.raises(sparsetir.SparseTIRValueError, match="the dense result A has 46341 x 46341 "
                       f"= 2147488281 elements, {PAST_INT32}"):
        k(b=b, c=b)


def test_a_dense_operand_past_int32_is_refused_before_copying():
    k = alg.compile("a(i) = B(i,j) * c(j)", formats={"B": "CSR"})
    c = np.broadcast_to(np.float64(1), (2**31,))     # no memory: one element, stride 0
    with pytest.raises(sparsetir.SparseTIRValueError, match="the dense operand c has 2147483648 "
                       "elements"):
        k(B=sp.csr_matrix((1, 2**31)), c=c)


def test_the_count_is_exact_in_int64():
    """A DCSR result counted in int64: the totals of a 3-level outer product are right."""
    k = alg.compile("A(i,j,k) = b(i) * C(j,k)", formats={"A": "CSF", "b": "sparse", "C": "DCSR"})
    b = np.array([1., 0, 2])
    c = sp.random(4, 6, density=0.5, format="csr", random_state=3).toarray()
    c[1] = 0                                       # an empty row of C
    out = k(b=b, C=c)
    np.testing.assert_array_equal(out.to_dense(), b[:, None, None] * c[None])


def test_a_workspace_past_memory_is_a_memory_error(monkeypatch):
    """SpGEMM into CSR allocates a dense row of the result's columns per chunk of rows:
    refused before the call where the chunks held at once pass the machine's memory."""
    k = alg.compile("A(i,j) = B(i,k) * C(k,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    monkeypatch.setattr(sizes, "physical_memory", lambda: 10**6)
    c = sp.csr_matrix(([1.0], ([0], [99999])), shape=(2, 100000))
    with pytest.raises(MemoryError, match=r"row workspaces of A need 2400004 bytes per chunk"):
        k(B=sp.identity(2, format="csr"), C=c)
    monkeypatch.undo()
    np.testing.assert_array_equal(k(B=sp.identity(2, format="csr"), C=c).to_dense(), c.toarray())


def test_the_workspace_of_2_31_columns_is_sized_in_int64():
    """The widest result has 2**31 - 1 columns: the runs array (a start per sorted run, one
    more than the columns) is sized in int64 (``n_j + 1`` wrapped to a negative size, TVM's
    bad_alloc), and the marker is filled only in chunks that hold rows."""
    k = alg.compile("A(i,j) = B(i,k) * C(k,j)", formats={"A": "CSR", "B": "DCSR", "C": "CSR"})
    text = sparsetir.lower_sparse_iter(k.func)["main"].script()
    assert 'runs = T.sblock_alloc_buffer((T.Cast("int64", n_j) + T.int64(1),), "int32")' in text
    assert "if vchunk * ((n_i + 64 - 1) // 64) < n_i:" in text


def _csr(data, indices, indptr, shape, fmt="csr"):
    """A scipy matrix over exactly these arrays (scipy checks nothing)."""
    m = (sp.csr_matrix if fmt == "csr" else sp.csc_matrix)(shape)
    m.data, m.indices, m.indptr = (np.asarray(data, np.float64), np.asarray(indices, np.int32),
                                   np.asarray(indptr, np.int32))
    return m


MALFORMED = [
    (_csr([1., 2.], [0, 1], [0, 2], (3, 3)), "indptr has 2 entries, a CSR matrix of 3 rows needs 4"),
    (_csr([1., 2.], [0, 1], [0, 1, 2, 2, 2], (3, 3)), "indptr has 5 entries"),
    (_csr([1., 2.], [0, 1], [0, 1, 5, 5], (3, 3)),
     r"indptr must start at 0 and end at len\(indices\) = 2, got 0 and 5"),
    (_csr([1., 2.], [0, 1], [1, 1, 2, 2], (3, 3)), "must start at 0"),
    (_csr([1., 2., 3.], [0, 1, 2], [0, 2, 1, 3], (3, 3)),
     r"indptr is not monotone: indptr\[1\] = 2 > indptr\[2\] = 1"),
    (_csr([1.], [0, 1], [0, 1, 2, 2], (3, 3)), "1 values for 2 indices"),
    (_csr([1., 2.], [0, 1], [0, 1, 5, 5], (3, 3), "csc"), "a CSC matrix|must start at 0"),
]


@pytest.mark.parametrize("matrix, message", MALFORMED)
@pytest.mark.parametrize("fmt", ["CSR", "DCSR", "COO"])
def test_malformed_scipy_operands_are_refused(matrix, message, fmt):
    k = alg.compile("a(i) = B(i,j) * c(j)", formats={"B": fmt})
    with pytest.raises(sparsetir.SparseTIRValueError, match=f"operand B: .*({message})"):
        k(B=matrix, c=np.ones(3))


@pytest.mark.parametrize("indices, message", [([0, 7], r"indices\[1\] = 7 is out of range"),
                                              ([0, -1], r"indices\[1\] = -1 is out of range")])
def test_out_of_range_indices_of_a_converted_operand(indices, message):
    k = alg.compile("a(i) = B(i,j) * c(j)", formats={"B": "DCSR"})    # scipy CSR converted
    with pytest.raises(sparsetir.SparseTIRValueError, match=f"operand B: {message}"):
        k(B=_csr([1., 2.], indices, [0, 1, 2, 2], (3, 3)), c=np.ones(3))


@pytest.mark.parametrize("dtype", [np.longdouble, "float128", np.clongdouble])
def test_value_types_without_a_tvm_type_are_refused(dtype):
    with pytest.raises(sparsetir.SparseTIRTypeError, match="dtype"):
        alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"},
                    dtype=dtype)
