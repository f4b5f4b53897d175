"""The one-pass CSR kernel (``onepass``): rows appended per chunk, the gaps closed after, for any
number of chunks; its branch-free cases; the two-pass kernels (``count``, ``main``) it replaces
still give the same arrays."""

import numpy as np
import pytest
import scipy.sparse as sp
import tvm

import sparsetir
import sparsetir.algebra as alg
import sparsetir.algebra.kernel as kernel_module

CSR3 = {"A": "CSR", "B": "CSR", "C": "CSR"}
STATEMENTS = {
    "add": ("A(i,j) = B(i,j) + C(i,j)", lambda b, c: b + c),
    "sub": ("A(i,j) = B(i,j) - C(i,j)", lambda b, c: b - c),
    "mul": ("A(i,j) = B(i,j) * C(i,j)", lambda b, c: b.multiply(c)),
    "scaled": ("A(i,j) = 2.0 * B(i,j) * C(i,j) + C(i,j)", lambda b, c: 2 * b.multiply(c) + c),
}


def _mat(m, n, density, seed, empty_rows=()):
    a = sp.random(m, n, density=density, format="csr", random_state=seed).toarray()
    a[list(empty_rows)] = 0
    return sp.csr_matrix(a)


PAIRS = {
    "random": (_mat(23, 11, 0.3, 0, (0, 5, 6)), _mat(23, 11, 0.25, 1, (5, 22))),
    "disjoint": (sp.csr_matrix(np.triu(np.ones((9, 9)), 1)),
                 sp.csr_matrix(np.tril(np.ones((9, 9))))),
    "identical": (_mat(10, 6, 0.4, 2), _mat(10, 6, 0.4, 2)),
    "one_empty": (sp.csr_matrix((7, 4)), _mat(7, 4, 0.5, 3, (2,))),
    "no_rows": (sp.csr_matrix((0, 4)), sp.csr_matrix((0, 4))),
}


@pytest.fixture(scope="module")
def kernels():
    return {name: alg.compile(stmt, formats=CSR3) for name, (stmt, _) in STATEMENTS.items()}


def _expected_arrays(b, c, name):
    """The CSR arrays ``count`` then ``main`` produce (the two-pass reference)."""
    k = alg.compile(STATEMENTS[name][0], formats=CSR3)
    del k._kernels["onepass"]
    out = k(B=b, C=c)
    return out.positions(1), out.coordinates(1), out.values


@pytest.mark.parametrize("chunks", [1, 2, 3, 7, 40])
@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_onepass_against_scipy_for_any_chunk_count(kernels, monkeypatch, name, pair, chunks):
    monkeypatch.setattr(kernel_module, "thread_count", lambda: chunks)
    b, c = PAIRS[pair]
    calls = []
    run = kernel_module.AlgebraKernel._run
    monkeypatch.setattr(kernel_module.AlgebraKernel, "_run",
                        lambda self, which, args, **options:
                        calls.append(which) or run(self, which, args, **options))
    out = kernels[name](B=b, C=c)
    assert calls == ["onepass"]                     # merged once, no count
    expected = STATEMENTS[name][1](b, c).toarray()
    np.testing.assert_allclose(out.to_scipy().toarray(), expected)
    pos, crd = out.positions(1), out.coordinates(1)
    assert pos[0] == 0 and pos[-1] == len(crd) == len(out.values)
    for s, e in zip(pos[:-1], pos[1:]):             # sorted rows, no duplicates
        assert np.all(np.diff(crd[s:e]) > 0)


@pytest.mark.parametrize("name", ["add", "mul"])
def test_onepass_gives_the_two_pass_arrays(kernels, monkeypatch, name):
    monkeypatch.setattr(kernel_module, "thread_count", lambda: 4)
    b, c = PAIRS["random"]
    out = kernels[name](B=b, C=c)
    for got, want in zip((out.positions(1), out.coordinates(1), out.values),
                         _expected_arrays(b, c, name)):
        np.testing.assert_array_equal(got, want)    # same explicit zeros kept


def test_onepass_parallelises_under_tvm_checks(kernels):
    mod = sparsetir.lower_sparse_iter(kernels["add"].func)
    assert "n_chunks" in mod["onepass"].script()
    sch = tvm.s_tir.Schedule(mod)                   # TVM's checks on
    sch.work_on("onepass")
    sch.parallel(sch.get_loops(sch.get_sblock("kernel0"))[0])
    b, c = PAIRS["random"]
    out = kernels["add"].rebuild(sch.mod)(B=b, C=c)
    np.testing.assert_allclose(out.to_scipy().toarray(), (b + c).toarray())


@pytest.mark.parametrize("chunks", [1, 3])
def test_three_operand_cases_are_selects(monkeypatch, chunks):
    """Three operands or more: the cases' values picked by ``T.Select`` (two: scipy's three-way
    branch, ``ordered_cases``); an intersection under a union stores speculatively."""
    monkeypatch.setattr(kernel_module, "thread_count", lambda: chunks)
    fm = {"A": "CSR", "B": "CSR", "C": "CSR", "D": "CSR"}
    union = alg.compile("A(i,j) = B(i,j) + C(i,j) - 2.0 * D(i,j)", formats=fm)
    mixed = alg.compile("A(i,j) = B(i,j) * C(i,j) + D(i,j)", formats=fm)
    two = sparsetir.lower_sparse_iter(alg.compile(STATEMENTS["add"][0], formats=CSR3).func)
    assert "T.Select(" not in two["onepass"].script()
    for k in (union, mixed):
        assert "T.Select(" in sparsetir.lower_sparse_iter(k.func)["onepass"].script()
    b, c = PAIRS["random"]
    d = _mat(23, 11, 0.3, 9, (1, 5))
    np.testing.assert_allclose(union(B=b, C=c, D=d).to_scipy().toarray(),
                               (b + c - 2 * d).toarray())
    np.testing.assert_allclose(mixed(B=b, C=c, D=d).to_scipy().toarray(),
                               (b.multiply(c) + d).toarray())


def test_bad_index_arrays_are_still_refused(kernels):
    b, c = PAIRS["random"]
    bad = b.copy()
    bad.indices = bad.indices.copy()
    bad.indices[0] = 99                             # past the 11 columns
    bad.has_canonical_format = True
    with pytest.raises(ValueError):
        kernels["add"](B=bad, C=c)


@pytest.mark.parametrize("chunks", [1, 2, 5, 60])
def test_spgemm_onepass_for_any_chunk_count(monkeypatch, chunks):
    monkeypatch.setattr(kernel_module, "thread_count", lambda: chunks)
    k = alg.compile("A(i,j) = B(i,k) * C(k,j)", formats=CSR3)
    b = _mat(31, 17, 0.15, 4, empty_rows=(0, 3, 30))
    c = _mat(17, 26, 0.2, 5, empty_rows=(2,))
    calls = []
    run = kernel_module.AlgebraKernel._run
    monkeypatch.setattr(kernel_module.AlgebraKernel, "_run",
                        lambda self, which, args, **options:
                        calls.append(which) or run(self, which, args, **options))
    out = k(B=b, C=c)
    assert calls == ["onepass"]
    np.testing.assert_allclose(out.to_scipy().toarray(), (b @ c).toarray())
    pos, crd = out.positions(1), out.coordinates(1)
    assert pos[-1] == len(crd) == len(out.values)
    for s, e in zip(pos[:-1], pos[1:]):
        assert np.all(np.diff(crd[s:e]) > 0)
    del k._kernels["onepass"]                       # the two-pass kernels: the same arrays
    two = k(B=b, C=c)
    np.testing.assert_array_equal(two.positions(1), pos)
    np.testing.assert_array_equal(two.coordinates(1), crd)
    np.testing.assert_allclose(two.values, out.values)


@pytest.mark.parametrize("chunks", [1, 2, 3])
def test_room_is_bounded_by_the_merge_and_the_columns(monkeypatch, chunks):
    """A row's room is what its merge can visit (an intersection: the shorter operand row) and
    never more than the result's columns, so full rows fill it exactly (moved in place)."""
    monkeypatch.setattr(kernel_module, "thread_count", lambda: chunks)
    b = sp.csr_matrix(np.vstack([np.ones((2, 5)), np.zeros((1, 5)), np.arange(15).reshape(3, 5)]))
    c = sp.csr_matrix(np.arange(1.0, 21.0).reshape(5, 4))
    spgemm = alg.compile("A(i,j) = B(i,k) * C(k,j)", formats=CSR3)
    rooms = []
    assemble = kernel_module._assemble_once
    monkeypatch.setattr(kernel_module, "_assemble_once", lambda kernel, args, names, shape, bounds:
                        rooms.append(np.diff(bounds).tolist()) or
                        assemble(kernel, args, names, shape, bounds))
    out = spgemm(B=b, C=c)
    np.testing.assert_allclose(out.to_scipy().toarray(), (b @ c).toarray())
    product = alg.compile(STATEMENTS["mul"][0], formats=CSR3)
    upper = sp.csr_matrix(np.triu(np.ones((6, 5))))
    np.testing.assert_allclose(product(B=b, C=upper).to_scipy().toarray(),
                               b.multiply(upper).toarray())
    assert rooms == [[4, 4, 0, 4, 4, 4], [5, 4, 0, 2, 1, 0]]
