"""sparsetir.algebra: co-iteration kernels against scipy/numpy (unions, intersections, nested
expressions, reductions, assembled CSR/DCSR/CSC/CSF/sparse-vector results), the Stage I round
trip, TVM's checked parallel on the Stage II, and refusals."""

import numpy as np
import pytest
import scipy.sparse as sp
import tvm
import tvm_ffi

import sparsetir
import sparsetir.algebra as alg
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError
from sparsetir.script import from_source


def _mat(m, n, density, seed, empty_rows=(1,)):
    a = sp.random(m, n, density=density, format="csr", random_state=seed).toarray()
    a[list(empty_rows)] = 0
    return sp.csr_matrix(a)


def _dense(result):
    return result.to_dense() if hasattr(result, "to_dense") else np.asarray(result)


def _check_canonical(result):
    """Every compressed level sorted, no duplicate coordinates."""
    for level in range(len(result.dim_shape)):
        pos, crd = result.positions(level), result.coordinates(level)
        if pos is None:
            continue
        for s, e in zip(pos[:-1], pos[1:]):
            assert np.all(np.diff(crd[s:e]) > 0)


CSR3 = {"A": "CSR", "B": "CSR", "C": "CSR"}


@pytest.fixture(scope="module")
def kernels():
    return {
        "add": alg.compile("A(i,j) = B(i,j) + C(i,j)", formats=CSR3),
        "sub": alg.compile("A(i,j) = B(i,j) - C(i,j)", formats=CSR3),
        "mul": alg.compile("A(i,j) = B(i,j) * C(i,j)", formats=CSR3),
        "add_dcsr": alg.compile("A(i,j) = B(i,j) + C(i,j)",
                                formats={"A": "DCSR", "B": "DCSR", "C": "DCSR"}),
        "add_csc": alg.compile("A(i,j) = B(i,j) + C(i,j)",
                               formats={"A": "CSC", "B": "CSC", "C": "CSC"}),
    }


PAIRS = {
    "random": (_mat(9, 8, 0.3, 0), _mat(9, 8, 0.3, 1, empty_rows=(1, 4))),
    "disjoint": (sp.csr_matrix(np.triu(np.ones((6, 6)), 1)), sp.csr_matrix(np.tril(np.ones((6, 6))))),
    "identical": (_mat(7, 5, 0.4, 2), _mat(7, 5, 0.4, 2)),
    "empty": (sp.csr_matrix((5, 4)), _mat(5, 4, 0.5, 3)),
    "both_empty": (sp.csr_matrix((3, 3)), sp.csr_matrix((3, 3))),
}


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "add_dcsr", "add_csc"])
def test_elementwise_against_scipy(kernels, op, pair):
    b, c = PAIRS[pair]
    result = kernels[op](B=b, C=c)
    want = {"add": b + c, "sub": b - c, "mul": b.multiply(c)}.get(op, b + c).toarray()
    np.testing.assert_allclose(_dense(result), want)
    _check_canonical(result)
    # the pattern: union / intersection of the operands' patterns, explicit zeros kept
    pb, pc = b.toarray() != 0, c.toarray() != 0
    pattern = pb & pc if op == "mul" else pb | pc
    assert result.nse == pattern.sum()


def test_sub_keeps_explicit_zeros(kernels):
    b = _mat(5, 6, 0.4, 7)
    result = kernels["sub"](B=b, C=b)
    assert result.nse == b.nnz and np.all(result.values == 0)


def test_storage_arrays_of_sparse_vectors():
    b = np.array([0.0, 1.0, 0.0, 2.0, 3.0])
    c = np.array([4.0, 0.0, 0.0, 5.0, 0.0])
    vec = {"a": "sparse", "b": "sparse", "c": "sparse"}
    union = alg.compile("a(i) = b(i) + c(i)", formats=vec)(b=b, c=c)
    assert union.positions(0).tolist() == [0, 4]
    assert union.coordinates(0).tolist() == [0, 1, 3, 4]
    assert union.values.tolist() == [4.0, 1.0, 7.0, 3.0]
    inter = alg.compile("a(i) = b(i) * c(i)", formats=vec)(b=b, c=c)
    assert inter.positions(0).tolist() == [0, 1]
    assert inter.coordinates(0).tolist() == [3]
    assert inter.values.tolist() == [10.0]


def test_nested_and_kway():
    b, c, d = _mat(8, 7, 0.3, 10), _mat(8, 7, 0.3, 11), _mat(8, 7, 0.3, 12, empty_rows=(2,))
    fm = {"A": "CSR", "B": "CSR", "C": "CSR", "D": "CSR"}
    k = alg.compile("A(i,j) = B(i,j) * C(i,j) + D(i,j)", formats=fm)
    assert [p for p in k.lattices["j"].points] == [("B", "C", "D"), ("B", "C"), ("D",)]
    np.testing.assert_allclose(_dense(k(B=b, C=c, D=d)), (b.multiply(c) + d).toarray())
    k3 = alg.compile("A(i,j) = B(i,j) + C(i,j) - 2.0 * D(i,j)", formats=fm)
    np.testing.assert_allclose(_dense(k3(B=b, C=c, D=d)), (b + c - 2 * d).toarray())


def test_dense_operand_and_dense_result():
    b, c = _mat(6, 5, 0.3, 20), np.random.default_rng(0).random((6, 5))
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"B": "CSR"})
    np.testing.assert_allclose(k(B=b, C=c), b.toarray() + c)
    k = alg.compile("A(i,j) = B(i,j) * C(i,j)", formats={"B": "CSR"})
    np.testing.assert_allclose(k(B=b, C=c), b.multiply(c).toarray())


def test_reductions():
    rng = np.random.default_rng(1)
    b = _mat(9, 6, 0.3, 30)
    x = rng.random(6)
    spmv = alg.compile("a(i) = B(i,j) * c(j)", formats={"B": "CSR"})
    np.testing.assert_allclose(spmv(B=b, c=x), b @ x)
    spmv_dcsr = alg.compile("a(i) = B(i,j) * c(j)", formats={"B": "DCSR", "c": "sparse"})
    xs = x * (rng.random(6) < 0.5)
    np.testing.assert_allclose(spmv_dcsr(B=b, c=xs), b @ xs)
    u, v = np.array([0, 1.0, 0, 2, 3]), np.array([4.0, 0, 0, 5, 1])
    dot = alg.compile("a = b(i) * c(i)", formats={"b": "sparse", "c": "sparse"})
    result = dot(b=u, c=v)
    assert result.shape == () and float(result) == 13.0
    assert float(dot(b=np.zeros(5), c=v)) == 0.0


def test_csf_elementwise():
    rng = np.random.default_rng(2)
    b = rng.random((3, 4, 5)) * (rng.random((3, 4, 5)) < 0.3)
    c = rng.random((3, 4, 5)) * (rng.random((3, 4, 5)) < 0.3)
    b[1] = 0
    fm = {"A": "CSF", "B": "CSF", "C": "CSF"}
    k = alg.compile("A(i,j,k) = B(i,j,k) * C(i,j,k)", formats=fm)
    result = k(B=b, C=c)
    np.testing.assert_allclose(_dense(result), b * c)
    _check_canonical(result)


def test_stage1_round_trip_and_parallel_schedule(kernels):
    k = kernels["add"]
    assert "T.coiterate(J, T.union(B, C))" in k.func.script()
    assert tvm_ffi.structural_equal(k.func, from_source(k.func.script()))
    mod = sparsetir.lower_sparse_iter(k.func)
    assert sorted(gv.name_hint for gv in mod.functions) == ["count", "main", "onepass"]
    sch = tvm.s_tir.Schedule(mod)            # TVM's checks on
    for fn in ("main", "count", "onepass"):
        sch.work_on(fn)
        loop = sch.get_loops(sch.get_sblock("kernel0"))[0]
        sch.parallel(loop)
    rebuilt = k.rebuild(sch.mod)
    b, c = PAIRS["random"]
    np.testing.assert_allclose(_dense(rebuilt(B=b, C=c)), (b + c).toarray())


def test_refusals():
    with pytest.raises(SparseTIRValueError, match="column 5: index j of a\\(i,j\\)"):
        alg.compile("a(i,j) = b(i)")
    with pytest.raises(SparseTIRValueError, match="format of B: 'CSR' has 2 dimensions"):
        alg.compile("A(i,j,k) = B(i,j,k) + C(i,j,k)", formats={"B": "CSR"})
    k = alg.compile("A(i,j) = B(i,j) * C(i,j)", formats={"A": "CSR", "B": "CSR", "C": "CSR"})
    with pytest.raises(SparseTIRValueError, match="C's dimension 1"):
        k(B=sp.csr_matrix((3, 4)), C=sp.csr_matrix((3, 5)))
    with pytest.raises(SparseTIRTypeError, match=r"mixed value types \(B float32, C float64\)"):
        k(B=sp.csr_matrix((3, 4), dtype=np.float32), C=sp.csr_matrix((3, 4)))
    with pytest.raises(SparseTIRValueError, match="missing operand 'C'"):
        k(B=sp.csr_matrix((3, 4)))


FORMAT_TRIPLES = [("CSR", "CSR", "DCSR"), ("DCSR", "CSR", "DCSR"), ("CSR", "DCSR", "CSR"),
                  ("COO", "COO", "CSR"), ("CSC", "CSC", "CSC")]


@pytest.mark.parametrize("formats", FORMAT_TRIPLES, ids="-".join)
def test_format_pairs_against_scipy(formats):
    fa, fb, fc = formats
    fm = {"A": fa, "B": fb, "C": fc}
    add = alg.compile("A(i,j) = B(i,j) - C(i,j)", formats=fm)
    mul = alg.compile("A(i,j) = B(i,j) * C(i,j)", formats=fm)
    for pair in ("random", "disjoint", "empty"):
        b, c = PAIRS[pair]
        np.testing.assert_allclose(_dense(add(B=b, C=c)), (b - c).toarray())
        np.testing.assert_allclose(_dense(mul(B=b, C=c)), b.multiply(c).toarray())


SPGEMM_CASES = {
    "random": (_mat(9, 7, 0.3, 40), _mat(7, 8, 0.3, 41, empty_rows=(0, 3))),
    "square_self": (_mat(12, 12, 0.2, 42), _mat(12, 12, 0.2, 42)),
    "empty_left": (sp.csr_matrix((4, 5)), _mat(5, 6, 0.5, 43)),
    "empty_product": (sp.csr_matrix(np.eye(4)[:, [0, 1, 0, 1]] * [1, 1, 0, 0]),
                      sp.csr_matrix(np.eye(4)[[2, 3, 2, 3]])),
    "hub_row": (sp.csr_matrix(np.vstack([np.ones(30), np.zeros((2, 30))])),    # marker scan
                _mat(30, 40, 0.3, 44, empty_rows=())),
    "many_runs": (sp.csr_matrix(np.vstack([np.ones(30), np.zeros((2, 30))])),  # 30 runs merged
                  sp.random(30, 4000, density=0.002, format="csr", random_state=45)),
}


@pytest.fixture(scope="module")
def spgemm():
    csr = {"A": "CSR", "B": "CSR", "C": "CSR"}
    return {"CSR": alg.compile("A(i,j) = B(i,k) * C(k,j)", formats=csr),
            "dense": alg.compile("A(i,j) = B(i,k) * C(k,j)", formats={"B": "CSR", "C": "CSR"})}


@pytest.mark.parametrize("case", sorted(SPGEMM_CASES))
def test_spgemm_against_scipy(spgemm, case):
    b, c = SPGEMM_CASES[case]
    want = (b @ c).toarray()
    result = spgemm["CSR"](B=b, C=c)
    np.testing.assert_allclose(_dense(result), want)
    _check_canonical(result)
    assert result.nse == ((b != 0).astype(int) @ (c != 0).astype(int)).nnz   # symbolic pattern
    np.testing.assert_allclose(spgemm["dense"](B=b, C=c), want)


def test_spgemm_parallel_chunks_and_lattice(spgemm):
    k = spgemm["CSR"]
    assert "T.coiterate(K, T.intersect(B, C)), T.coiterate(J, T.union(C))" in k.func.script()
    mod = sparsetir.lower_sparse_iter(k.func)
    sch = tvm.s_tir.Schedule(mod)
    sch.parallel(sch.get_loops(sch.get_sblock("kernel0"))[0])    # the chunks of rows
    b, c = SPGEMM_CASES["random"]
    np.testing.assert_allclose(_dense(k.rebuild(sch.mod)(B=b, C=c)), (b @ c).toarray())


def test_more_refusals():
    with pytest.raises(SparseTIRValueError, match="column 17: cannot read '%'"):
        alg.compile("A(i,j) = B(i,j) % C(i,j)")
    with pytest.raises(SparseTIRValueError, match="format of B: '2:4' has structured levels"):
        alg.compile("A(i,j) = B(i,j) + C(i,j)", formats={"B": "2:4"})
    with pytest.raises(SparseTIRValueError, match="format of B: level type loose_compressed"):
        alg.compile("A(i,j) = B(i,j) + C(i,j)",
                    formats={"B": "map = (d0, d1) -> (d0 : dense, d1 : loose_compressed)"})
    with pytest.raises(SparseTIRValueError, match=r"column 19: no loop order serves .* reads "
                       r"B\(i,j\) and B\(j,i\).*stored once, in one level order"):
        alg.compile("A(i,j) = B(i,j) + B(j,i)", formats={"B": "CSR"})
    k = alg.compile("a(i) = b(i) * c(i)", formats={"b": "sparse"})
    with pytest.raises(SparseTIRTypeError, match="operand c: expected a numpy array"):
        k(b=np.ones(3), c=[1.0, 2.0, 3.0])
    with pytest.raises(SparseTIRValueError, match="unknown operand 'd'"):
        k(b=np.ones(3), c=np.ones(3), d=np.ones(3))


def test_stage1_refusals():
    from sparsetir.errors import LoweringError, SparseScriptError
    k = alg.compile("A(i,j) = B(i,j) + C(i,j)", formats=CSR3)
    text = k.func.script()
    with pytest.raises(SparseScriptError, match="expected sparsetir.Merge"):
        from_source(text.replace("T.union(B, C)", "B"))
    with pytest.raises(SparseScriptError, match="must be a dense_fixed axis"):
        from_source(text.replace("T.coiterate(J,", "T.coiterate(B1,"))
    wrong = from_source(text.replace("T.union(B, C)", "T.union(B, C, A)"))
    with pytest.raises(LoweringError, match="names A, which no read indexes by j"):
        sparsetir.lower_sparse_iter(wrong)


def test_specialize_keeps_the_merge(kernels):
    k = kernels["add"]
    spec = k.func.specialize({"n_j": 8})
    assert "T.coiterate(J, T.union(B, C))" in spec.script()
    b, c = PAIRS["random"]
    np.testing.assert_allclose(_dense(k.rebuild(spec)(B=b, C=c)), (b + c).toarray())


def test_unsorted_duplicates_and_repeated_operand():
    # scipy input with unsorted columns and a duplicate entry is summed and sorted first
    b = sp.csr_matrix((np.array([1.0, 2.0, 3.0, 4.0]), np.array([3, 0, 3, 1]),
                       np.array([0, 3, 3, 4])), shape=(3, 5))
    assert not b.has_canonical_format
    square = alg.compile("A(i,j) = B(i,j) * B(i,j)", formats={"A": "CSR", "B": "CSR"})
    result = square(B=b)
    dense = b.toarray()
    np.testing.assert_allclose(_dense(result), dense * dense)
    assert result.coordinates(1).tolist() == [0, 3, 1]


MIXED_LEVELS = ["(d0 : compressed, d1 : dense, d2 : compressed)",
                "(d0 : dense, d1 : dense, d2 : compressed)",
                "(d0 : compressed, d1 : compressed, d2 : dense)",
                "(d0 : dense, d1 : compressed, d2 : dense)"]


@pytest.mark.parametrize("levels", MIXED_LEVELS)
def test_3d_operands_dense_or_compressed_per_level(levels):
    rng = np.random.default_rng(3)
    b = rng.random((3, 4, 5)) * (rng.random((3, 4, 5)) < 0.4)
    c = rng.random((3, 4, 5)) * (rng.random((3, 4, 5)) < 0.4)
    b[1] = 0
    b[:, 2] = 0
    enc = "map = (d0, d1, d2) -> " + levels
    mul = alg.compile("A(i,j,k) = B(i,j,k) * C(i,j,k)", formats={"A": "CSF", "B": enc, "C": "CSF"})
    np.testing.assert_allclose(_dense(mul(B=b, C=c)), b * c)
    add = alg.compile("A(i,j,k) = B(i,j,k) + C(i,j,k)", formats={"B": enc, "C": enc})
    np.testing.assert_allclose(add(B=b, C=c), b + c)


@pytest.mark.parametrize("fb, fc", [("DCSR", "CSR"), ("DCSR", "DCSR"), ("COO", "CSR")])
def test_csr_result_under_a_sum_over_a_sparse_outer_index(fb, fc):
    """SpGEMM into CSR with B's rows compressed: each workspace row looks B's row up."""
    k = alg.compile("A(i,j) = B(i,k) * C(k,j)", formats={"A": "CSR", "B": fb, "C": fc})
    b, c = _mat(12, 9, 0.3, 20, empty_rows=(0, 4, 11)), _mat(9, 10, 0.3, 21, empty_rows=(3,))
    result = k(B=b, C=c)
    assert result.encoding.level_types[0].kind == "dense"
    np.testing.assert_allclose(_dense(result), (b @ c).toarray())
    pos = result.positions(1)
    assert pos[1] == pos[0] and pos[5] == pos[4] and pos[12] == pos[11]    # B's empty rows
    _check_canonical(result)
    mod = sparsetir.lower_sparse_iter(k.func)
    sch = tvm.s_tir.Schedule(mod)                   # TVM's checks on
    for fn in ("main", "count"):
        sch.work_on(fn)
        sch.parallel(sch.get_loops(sch.get_sblock("kernel0"))[0])
    np.testing.assert_allclose(_dense(k.rebuild(sch.mod)(B=b, C=c)), (b @ c).toarray())


@pytest.mark.parametrize("name", ["full", "empty", "dense"])
def test_tensors_named_like_the_merges_own_markers(name):
    """A tensor may be named ``full``, ``empty`` or ``dense``, words the merge once used for
    a whole or an empty walk: ``full + B`` walked every coordinate (a CSR result of the
    union's size was overrun), ``dense .* B`` none of ``dense``'s."""
    b, c = PAIRS["random"]
    csr = {"A": "CSR", name: "CSR", "B": "CSR"}
    add = alg.compile(f"A(i,j) = {name}(i,j) + B(i,j)", formats=csr)
    assert f"T.union({name}, B)" in add.func.script()
    np.testing.assert_array_equal(_dense(add(**{name: c, "B": b})), (c + b).toarray())
    mul = alg.compile(f"A(i,j) = {name}(i,j) * B(i,j)", formats=csr)
    np.testing.assert_array_equal(_dense(mul(**{name: c, "B": b})), c.multiply(b).toarray())


def test_a_term_without_the_index_is_the_axis_in_the_merge():
    """``B(i,j) + 1``: the union names ``J`` (every coordinate); the Stage I prints and parses
    back, specializes, lowers and schedules; a merge naming another axis is refused."""
    from sparsetir.errors import SparseScriptError
    k = alg.compile("A(i,j) = B(i,j) * C(i,j) + 1", formats={"B": "CSR"})
    text = k.func.script()
    assert "T.coiterate(J, T.union(T.intersect(B, C), J))" in text
    assert from_source(text).script() == text
    assert "T.union(T.intersect(B, C), J)" in k.func.specialize({"n_j": 8}).script()
    tvm.s_tir.Schedule(sparsetir.lower_sparse_iter(k.func))
    with pytest.raises(SparseScriptError, match="the merge names axis I"):
        from_source(text.replace("T.intersect(B, C), J)", "T.intersect(B, C), I)"))
