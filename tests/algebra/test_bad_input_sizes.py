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
from sparsetir.algebra import sizes, storage

PAST_INT32 = r"past the 2147483647 \(2\*\*31 - 1\) that co-iteration kernels address"


@pytest.fixture(scope="module")
def outer():
    """Outer products of two sparse vectors, per result format."""
    return {fmt: alg.compile("A(i,j) = b(i) * c(j)",
                             formats={"A": fmt, "b": "sparse", "c": "sparse"})
            for fmt in ("CSR", "DCSR", "COO")}


@pytest.mark.parametrize("fmt", ["CSR", "DCSR", "COO"])
@pytest.mark.parametrize("n, entries", [(46341, 2147488281), (65537, 4295098369)])
def test_an_outer_product_past_memory_is_refused_before_allocating(outer, fmt, n, entries,
                                                                   monkeypatch):
    """Two vectors of n nonzeros (a few hundred KiB): the result would hold n**2 entries (65,537
    wrapped to 131,073 in int32 and the kernel wrote past them; 46,341 went negative). The count
    is exact (int64), the result would take int64 positions, and on a machine of 16 GiB its
    arrays (positions, coordinates: 8 bytes each; values) are refused before they exist."""
    monkeypatch.setattr(sizes, "physical_memory", lambda: 16 * 2**30)
    b = np.ones(n)
    positions = (n + 1 if fmt == "CSR" else 2 + (n + 1) + n) + entries
    expected = positions * 8 + entries * 8
    with pytest.raises(sparsetir.SparseTIRMemoryError,
                       match=f"would hold {entries} stored values \\(int64 positions\\): "
                       f"{expected} bytes, more than this machine's 17179869184 bytes") as err:
        outer[fmt](b=b, c=b)
    assert isinstance(err.value, MemoryError)


@pytest.mark.parametrize("fmt", ["CSR", "DCSR", "COO"])
def test_an_outer_product_below_int32_is_computed(outer, fmt):
    b = np.array([0., 2., 0., -1., 3.])            # unstored: 0 and 2
    c = np.array([1.5, 0., 0., 4.])
    out = outer[fmt](b=b, c=c)
    np.testing.assert_array_equal(out.to_dense(), np.outer(b, c))
    assert out.nse == 3 * 2


def test_a_dense_result_past_memory_is_refused_before_allocating(monkeypatch):
    k = alg.compile("A(i,j) = b(i) * c(j)", formats={"b": "sparse", "c": "sparse"})
    monkeypatch.setattr(sizes, "physical_memory", lambda: 16 * 2**30)
    b = np.ones(46341)
    with pytest.raises(sparsetir.SparseTIRMemoryError, match="the result A would hold 2147488281 "
                       r"elements \(int64 positions\): 17179906248 bytes, more than"):
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


_HUGE_ROWS = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (12 * 2**30, 12 * 2**30))   # 16 GiB cannot be had
import numpy as np, scipy.sparse as sp
import sparsetir.algebra as alg
from sparsetir.format import SparseTensor
n = 2**31 - 1
B = sp.coo_matrix(([1.0, 2.0], ([0, n - 1], [0, 3])), shape=(n, 4))
k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "DCSR", "B": "CSR", "C": "DCSR"})
C = SparseTensor.from_scipy(B, "DCSR")
try:
    k(B=B if sys.argv[1] == "coo" else C, C=C)
except Exception as err:
    print(type(err).__name__, err)
"""


@pytest.mark.parametrize("given", ["coo", "dcsr"])
def test_a_row_pointer_past_int32_is_refused_before_an_operand_is_converted(given, tmp_path):
    """A CSR operand of 2**31 - 1 rows given as scipy COO or a DCSR ``SparseTensor`` (two
    entries): its conversion to CSR allocated the row pointer's 2**31 counts (16 GiB, then
    more) before the kernel's check of the row pointer. It is refused by the conversion before
    it allocates. A process of its own, its address space capped at 12 GB: a regression is a
    ``MemoryError`` there, not the machine's memory spent."""
    import subprocess
    import sys
    script = tmp_path / "huge_rows.py"
    script.write_text(_HUGE_ROWS)
    done = subprocess.run([sys.executable, str(script), given], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(
        "SparseTIRValueError the row pointer of level 1 (dimension 1) of the operand of shape "
        "(2147483647, 4) has 2147483648 elements, past the 2147483647 (2**31 - 1) that "
        "co-iteration kernels address with int32 positions; nothing was allocated"), done.stdout


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


# Results past int32 positions, computed: the switch to int64 positions lowered to a few entries

def _with_empty_rows(m, n, seed, empty):
    a = sp.random(m, n, density=0.4, format="csr", random_state=seed).toarray()
    a[empty] = 0
    return sp.csr_matrix(a)


WIDE_CASES = [      # statement, operand formats, what scipy computes
    ("A(i,j) = B(i,j) + C(i,j)", {"B": "CSR", "C": "CSR"}, "sum"),
    ("A(i,j) = B(i,j) * C(i,j)", {"B": "CSR", "C": "DCSR"}, "product"),
    ("A(i,j) = B(i,k) * C(k,j)", {"B": "CSR", "C": "CSR"}, "spgemm"),
]


def _expected(kind, B, C):
    return {"sum": lambda: (B + C).toarray(), "product": lambda: B.multiply(C).toarray(),
            "spgemm": lambda: (B @ C).toarray()}[kind]()


@pytest.mark.parametrize("statement, formats, kind, out", [
    case + (out,) for case in WIDE_CASES
    for out in (["CSR", None] if case[2] == "spgemm" else ["CSR", "DCSR", "COO", "CSC", None])])
def test_a_result_past_the_switch_is_computed_with_int64_positions(monkeypatch, out, statement,
                                                                   formats, kind):
    """With ``WIDE_POSITIONS`` lowered to 5, every result of more entries (each format, dense
    too) is filled by the kernels generated with int64 positions: scipy's numbers, 64-bit
    positions and coordinates in the result, and the int32 kernels untouched below it."""
    if out == "CSC":
        formats = {name: "CSC" for name in formats}
    k = alg.compile(statement, formats={**formats, **({"A": out} if out else {})})
    n = 9 if kind == "spgemm" else 7
    B = _with_empty_rows(7, n, 1, [0, 3])
    C = _with_empty_rows(n, 7, 2, [3, 5])
    expected = _expected(kind, B, C)
    below = k(B=B, C=C)                       # int32: 2**31 - 1 is the switch
    assert k._wide is None
    monkeypatch.setattr(sizes, "WIDE_POSITIONS", 5)
    wide = k(B=B, C=C)
    assert k._wide is not None
    for result in (below, wide):
        dense = result if out is None else result.to_dense()
        np.testing.assert_allclose(dense, expected, rtol=1e-12, atol=0)
    if out not in (None, "COO"):
        assert wide.encoding.pos_width == 64 and wide.encoding.crd_width == 64
        assert all(wide.positions(l).dtype == np.int64 for l in range(2)
                   if wide.encoding.level_types[l].kind == "compressed")
        assert below.encoding.pos_width == 32
    wide_kernels = dict(k._wide)
    k(B=B, C=C)
    assert k._wide == wide_kernels                        # built once, kept


def test_operands_past_the_switch_are_read_with_int64_positions(monkeypatch):
    """An operand of more positions than the switch is read by the int64 kernels (``count``
    too): its int32 arrays are widened, the numbers do not change."""
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "DCSR", "B": "DCSR", "C": "CSR"})
    B, C = _with_empty_rows(6, 8, 3, [1]), _with_empty_rows(6, 8, 4, [1, 4])
    monkeypatch.setattr(sizes, "WIDE_POSITIONS", min(B.nnz, C.nnz) - 1)
    result = k(B=B, C=C)
    assert result.positions(1).dtype == np.int64
    np.testing.assert_array_equal(result.to_dense(), (B + C).toarray())


def test_a_converted_operand_past_int32_takes_int64_positions(monkeypatch):
    """An operand converted to another level order (a CSC tensor read as CSR) with more stored
    entries than int32 positions hold gets int64 positions and coordinates, as one read in its
    own order does, instead of positions wrapped past 2**31 - 1 (the limit lowered here)."""
    B = _with_empty_rows(6, 8, 3, [1, 5])
    fmt = storage.level_format("CSR", 2, "B")
    coords = np.vstack(B.nonzero()).astype(np.int64)
    narrow = storage.from_coords(coords, B.data, B.shape, fmt, "float64", canonical=False)
    monkeypatch.setattr(storage, "INDEX_LIMIT", B.nnz - 1)
    wide = storage.from_coords(coords, B.data, B.shape, fmt, "float64", canonical=False)
    assert narrow.pos[1].dtype == np.int32 and wide.pos[1].dtype == np.int64
    assert wide.crd[1].dtype == np.int64
    np.testing.assert_array_equal(wide.pos[1], B.indptr)
    np.testing.assert_array_equal(wide.crd[1], B.indices)
    np.testing.assert_array_equal(wide.vals, B.data)


@pytest.mark.parametrize("statement, formats, want", [
    ("a(i) = B(i,j) * c(j)", {"a": "sparse", "B": "CSR"}, lambda b, c, e: b @ c),
    ("a(i) = B(i,j)", {"a": "sparse", "B": "CSC"}, lambda b, c, e: b.sum(1)),
    ("A(i,j) = B(i,j) + 1", {"A": "CSR", "B": "CSR"}, lambda b, c, e: b + 1),
    ("A(i,j) = B(i,j) + e(i)", {"A": "DCSR", "B": "CSR"}, lambda b, c, e: b + e[:, None]),
    ("A(i,j) = B(i,j) + e(i)", {"A": "COO", "B": "CSR"}, lambda b, c, e: b + e[:, None]),
])
def test_a_whole_result_past_the_switch_is_computed_with_int64_positions(monkeypatch, statement,
                                                                         formats, want):
    """A sparse result written at every coordinate (``k.whole``: a sparse vector of a row sum,
    a term without one of the result's indices) is computed as a dense result, and so are
    its int64 kernels (they were generated for the sparse result, whose arrays the call does
    not pass: a ``KeyError``). Every coordinate is stored, empty rows too, with 64-bit
    positions and coordinates."""
    k = alg.compile(statement, formats=formats)
    assert k.whole is not None
    b = _with_empty_rows(6, 7, 1, [0, 3])
    c, e = np.linspace(-1, 2, 7), np.arange(1., 7.)
    operands = {"B": b, **({"c": c} if "c(j)" in statement else {}),
                **({"e": e} if "e(i)" in statement else {})}
    monkeypatch.setattr(sizes, "WIDE_POSITIONS", 3)
    result = k(**operands)
    assert k._wide is not None
    expected = want(b.toarray(), c, e)
    np.testing.assert_allclose(result.to_dense(), expected, rtol=1e-12, atol=0)
    assert result.nse == expected.size
    if "COO" not in formats.values():
        assert result.encoding.pos_width == 64 and result.encoding.crd_width == 64


def test_a_csf_result_and_a_chain_of_kernels_past_the_switch(monkeypatch):
    monkeypatch.setattr(sizes, "WIDE_POSITIONS", 3)
    k = alg.compile("A(i,j,k) = b(i) * C(j,k)", formats={"A": "CSF", "b": "sparse", "C": "DCSR"})
    b = np.array([1., 0, 2])
    c = _with_empty_rows(4, 6, 3, [1]).toarray()
    np.testing.assert_array_equal(k(b=b, C=c).to_dense(), b[:, None, None] * c[None])
    names = [f"M{n}" for n in range(6)]
    chain = alg.compile("A(i,j) = " + " + ".join(f"{m}(i,j)" for m in names),
                        formats={m: "CSR" for m in ["A"] + names})
    assert isinstance(chain, alg.GroupedKernel)
    mats = [_with_empty_rows(5, 6, s, [s % 5]) for s in range(6)]
    np.testing.assert_allclose(chain(**dict(zip(names, mats))).to_dense(),
                               sum(m.toarray() for m in mats), rtol=1e-12)


def test_a_rebuilt_kernel_past_int32_is_refused_by_name(monkeypatch):
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    rebuilt = k.rebuild(k.func)
    monkeypatch.setattr(sizes, "WIDE_POSITIONS", 1)
    B = _with_empty_rows(4, 5, 1, [2])
    with pytest.raises(sparsetir.SparseTIRValueError, match="kernel from rebuild"):
        rebuilt(B=B, C=B)


@pytest.mark.skipif((sizes.physical_memory() or 0) < 64 * 2**30,
                    reason="2**31 + 1 entries take 34 GB (int64 positions and float64 values)")
def test_a_real_result_past_int32_is_computed(outer):
    """The real thing: an outer product of 46,341 x 46,341 entries (2**31 + 4,634), in CSR."""
    b = np.ones(46341)
    b[[0, 7]] = 0                               # empty rows: 46,339 x 46,341 entries
    result = outer["CSR"](b=b, c=np.arange(46341, dtype=np.float64))
    assert result.nse == 46339 * 46341 > 2**31
    indptr = result.positions(1)
    assert indptr.dtype == np.int64 and indptr[-1] == 46339 * 46341
    assert indptr[1] == 0 and indptr[8] - indptr[7] == 0
    np.testing.assert_array_equal(result.values[-46341:], np.arange(46341.0))


def test_the_int64_kernels_address_everything_in_int64():
    """IR: the kernels generated for a result past int32 take int64 sizes, positions and
    coordinates, and their pointers are int64 (no position passes through int32)."""
    from sparsetir.algebra.generate import generate
    from sparsetir.script import from_source
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    text = generate(k.statement, k.formats, "float64", index_dtype="int64").text
    module = sparsetir.lower_sparse_iter(from_source(text))
    for name in ("main", "count"):                # onepass is not built with int64 positions
        script = module[name].script()
        assert "int32" not in script, name
        assert 'ptr = T.sblock_alloc_buffer((6,), "int64", scope="local")' in script
        assert 'A1_indptr: T.Buffer(("n_i + T.int64(1)",), "int64")' in script


def test_a_dense_result_of_dense_operands_past_the_switch(monkeypatch):
    monkeypatch.setattr(sizes, "WIDE_POSITIONS", 3)
    k = alg.compile("A(i,j) = B(i,j) * C(i,j) + B(i,j)")
    B, C = np.arange(20.).reshape(4, 5), np.linspace(-1, 1, 20).reshape(4, 5)
    np.testing.assert_allclose(k(B=B, C=C), B * C + B, rtol=1e-12)   # fused multiply-add
    assert k._wide is not None


def test_the_int64_kernels_are_main_and_count(monkeypatch):
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    assert set(k._kernels) == {"main", "count", "onepass"}
    monkeypatch.setattr(sizes, "WIDE_POSITIONS", 2)
    B = _with_empty_rows(4, 5, 1, [2])
    np.testing.assert_array_equal(k(B=B, C=B).to_dense(), 2 * B.toarray())
    assert set(k._wide) == {"main", "count"}
