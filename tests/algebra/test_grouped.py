"""A sum of many sparse operands (a merge lattice of 2^k - 1 points): computed as a chain of
kernels under ``coiterate_emit.MAX_CASES`` (``algebra.grouped``), each checked against scipy;
a term too large alone, and a hand-written Stage I merge of eight operands, refused with
``MergeTooLargeError`` before anything is compiled."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir
import sparsetir.algebra as alg
from sparsetir.errors import MergeTooLargeError, SparseTIRTypeError, SparseTIRValueError
from sparsetir.script import from_source


def _mats(k, m=9, n=11):
    """k random matrices, matrix s with row s % m empty (and row 2 empty in every one)."""
    out = []
    for s in range(k):
        a = sp.random(m, n, density=0.3, format="csr", random_state=s).toarray()
        a[[s % m, 2]] = 0
        out.append(sp.csr_matrix(a))
    return out


def _dense(result):
    return result.to_dense() if hasattr(result, "to_dense") else np.asarray(result)


def _statement(names, signs):
    text = f"{names[0]}(i,j)"
    for name, sign in zip(names[1:], signs[1:]):
        text += f" {sign} {name}(i,j)"
    return "A(i,j) = " + text


@pytest.mark.parametrize("k,fmt,out,signs", [
    (8, "CSR", "CSR", "+"), (24, "CSR", "CSR", "+"), (6, "CSR", "CSR", "+-"),
    (5, "DCSR", "DCSR", "+-"),
    (6, "CSR", None, "+"),
    (5, "CSR", "COO", "+"),
])
def test_many_operand_sum_matches_scipy(k, fmt, out, signs):
    names = [f"M{n}" for n in range(k)]
    sign = [signs[n % len(signs)] for n in range(k)]
    formats = {name: fmt for name in names}
    if out:
        formats["A"] = out
    kernel = alg.compile(_statement(names, sign), formats=formats)
    assert isinstance(kernel, alg.GroupedKernel) and len(kernel.parts) >= 2
    mats = _mats(k)
    expected = mats[0]
    for m, s in zip(mats[1:], sign[1:]):
        expected = expected + m if s == "+" else expected - m     # scipy's left-to-right order
    result = kernel(**dict(zip(names, mats)))
    # the same association as one kernel: the same numbers, not merely close ones
    np.testing.assert_array_equal(_dense(result), expected.toarray())
    if out:
        assert result.encoding.lvl_rank == 2 and result.dim_shape == (9, 11)


def test_equal_parts_share_one_build():
    names = [f"M{n}" for n in range(8)]
    kernel = alg.compile(_statement(names, "+" * 8), formats={n: "CSR" for n in ["A"] + names})
    texts = [p.statement.text for p in kernel.parts]
    assert texts[0] == "Y(i,j) = X0(i,j) + X1(i,j) + X2(i,j) + X3(i,j)"
    assert texts[1] == texts[0] and texts[2] == "Y(i,j) = X0(i,j) + X1(i,j)"
    assert kernel.parts[0]._kernels["main"][0] is kernel.parts[1]._kernels["main"][0]
    # each part's Stage I merges at most four operands
    for part in kernel.parts:
        line = next(l for l in part.func.script().splitlines() if "sp_iter" in l)
        assert line.count(", X") + 1 <= 4 and "T.union" in line


def test_sum_of_products_and_reduction():
    mats = _mats(6)
    c = np.linspace(-1, 1, 11)
    names = [f"B{n}" for n in range(6)]
    spmv = alg.compile("a(i) = " + " + ".join(f"{n}(i,j) * c(j)" for n in names),
                       formats={n: "CSR" for n in names})
    assert isinstance(spmv, alg.GroupedKernel)
    np.testing.assert_allclose(spmv(c=c, **dict(zip(names, mats))), sum(m @ c for m in mats))
    prods = alg.compile("A(i,j) = " + " + ".join(f"B{n}(i,j) * C{n}(i,j)" for n in range(5)),
                        formats={"A": "CSR", **{f"{x}{n}": "CSR" for n in range(5) for x in "BC"}})
    mats2 = _mats(10)
    ops = {f"B{n}": mats2[n] for n in range(5)} | {f"C{n}": mats2[5 + n] for n in range(5)}
    expected = sum(mats2[n].multiply(mats2[5 + n]) for n in range(5)).toarray()
    np.testing.assert_allclose(prods(**ops).to_dense(), expected)


def test_grouped_kernel_checks_operands_by_their_names():
    names = [f"M{n}" for n in range(5)]
    kernel = alg.compile(_statement(names, "+" * 5), formats={n: "CSR" for n in ["A"] + names})
    mats = dict(zip(names, _mats(5)))
    with pytest.raises(SparseTIRValueError, match="M3's dimension 1"):
        kernel(**{**mats, "M3": sp.csr_matrix((9, 12))})
    with pytest.raises(SparseTIRValueError, match="missing operand 'M4'"):
        kernel(**{n: m for n, m in mats.items() if n != "M4"})
    with pytest.raises(SparseTIRValueError, match="computed by 2 kernels"):
        kernel.func                                            # pylint: disable=pointless-statement
    with pytest.raises(SparseTIRValueError, match="rebuild one of .parts"):
        kernel.rebuild(kernel.parts[0].func)


def test_a_term_too_large_alone_is_refused():
    formats = {x: "CSR" for x in "ABCDEFGH"}
    with pytest.raises(MergeTooLargeError, match=r"alone merges too many operands .*j: 63 points"):
        alg.compile("A(i,j) = B(i,j) * (C(i,j) + D(i,j) + E(i,j) + F(i,j) + G(i,j) + H(i,j))",
                    formats=formats)


def test_stage1_merge_of_eight_operands_is_refused_while_lowering():
    names = [f"B{n}" for n in range(8)]
    params = ", ".join(f"{n.lower()}: T.handle, {n.lower()}p: T.handle, {n.lower()}c: T.handle"
                       for n in ["A"] + names)
    sizes = ", ".join(f"{n.lower()}_nnz: T.int32" for n in ["A"] + names)
    lines = [f"@T.prim_func\ndef union8({params}, m: T.int32, n: T.int32, {sizes}):",
             "    I = T.dense_fixed(m)", "    J = T.dense_fixed(n)"]
    for x in ["A"] + names:
        lo = x.lower()
        lines.append(f'    {x}J = T.sparse_variable(I, (n, {lo}_nnz), ({lo}p, {lo}c), "int32")')
        lines.append(f'    {x} = T.match_sparse_buffer({lo}, (I, {x}J), "float64")')
    lines.append(f'    with T.sp_iter([I, T.coiterate(J, T.union({", ".join(names)}))], "SS", '
                 '"u") as [i, j]:')
    lines.append("        A[i, j] = " + " + ".join(f"{n}[i, j]" for n in names))
    func = from_source("\n".join(lines) + "\n")
    with pytest.raises(MergeTooLargeError, match="j: 255 points.*more than 96 cases"):
        sparsetir.lower_sparse_iter(func)


def test_summed_statements_sum_each_run_then_add_them():
    mats = _mats(8, 9, 9)
    names = {f"B{n}": mats[n] for n in range(4)} | {f"C{n}": mats[4 + n] for n in range(4)}
    spgemm = alg.compile("A(i,j) = " + " + ".join(f"B{n}(i,k) * C{n}(k,j)" for n in range(4)),
                         formats={"A": "CSR", **{n: "CSR" for n in names}})
    assert isinstance(spgemm, alg.GroupedKernel)
    assert spgemm.parts[-1].statement.text.startswith("Y(i,j) = X0(i,j) + X1(i,j)")
    expected = sum((mats[n] @ mats[4 + n]).toarray() for n in range(4))
    np.testing.assert_allclose(spgemm(**names).to_dense(), expected)
    total = alg.compile("s = " + " + ".join(f"B{n}(i,j)" for n in range(6)),
                        formats={f"B{n}": "CSR" for n in range(6)})
    assert isinstance(total, alg.GroupedKernel)
    out = total(**{f"B{n}": m for n, m in enumerate(mats[:6])})
    assert out.shape == () and np.isclose(out, sum(m.sum() for m in mats[:6]))


def test_grouped_kernel_saves_loads_and_pickles(tmp_path):
    names = [f"M{n}" for n in range(5)]
    kernel = alg.compile(_statement(names, "+-+-+"), formats={n: "CSR" for n in ["A"] + names})
    operands = dict(zip(names, _mats(5)))
    expected = kernel(**operands).to_dense()
    kernel.save(tmp_path / "sum5.stk")
    for again in (sparsetir.load(tmp_path / "sum5.stk"), pickle.loads(pickle.dumps(kernel))):
        assert isinstance(again, alg.GroupedKernel) and len(again.parts) == len(kernel.parts)
        np.testing.assert_array_equal(again(**operands).to_dense(), expected)


def test_grouped_kernel_checks_scipy_row_pointers_and_sizes():
    names = [f"M{n}" for n in range(5)]
    kernel = alg.compile(_statement(names, "+" * 5), formats={n: "CSR" for n in ["A"] + names})
    mats = dict(zip(names, _mats(5)))
    broken = mats["M2"].copy()
    broken.indptr = broken.indptr.copy()
    broken.indptr[4] = broken.indptr[-1] + 7                  # past len(indices)
    with pytest.raises(SparseTIRValueError, match="operand M2: .*indptr"):
        kernel(**{**mats, "M2": broken})
    with pytest.raises(SparseTIRTypeError, match="longdouble|float128"):
        alg.compile(_statement(names, "+" * 5), formats={n: "CSR" for n in names},
                    dtype=np.longdouble)


def test_a_long_sum_of_one_operand_and_of_many_coexist_with_balancing():
    b = _mats(1)[0]
    repeated = alg.compile("A(i,j) = " + " - ".join(["B(i,j)"] * 1200),
                           formats={"A": "CSR", "B": "CSR"})
    np.testing.assert_allclose(repeated(B=b).to_dense(), -1198 * b.toarray(), atol=1e-12)
    names = [f"M{n}" for n in range(20)]                     # past BALANCE_AFTER terms
    kernel = alg.compile(_statement(names, "+-" * 10), formats={n: "CSR" for n in ["A"] + names})
    assert isinstance(kernel, alg.GroupedKernel)
    mats = _mats(20)
    expected = mats[0]
    for n, m in enumerate(mats[1:], 1):
        expected = expected + m if n % 2 == 0 else expected - m
    np.testing.assert_array_equal(kernel(**dict(zip(names, mats))).to_dense(), expected.toarray())
