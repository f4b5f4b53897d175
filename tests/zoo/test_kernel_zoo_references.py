"""Checks of the kernel zoo's inputs and numpy/scipy references, without sparsetir.

Each reference of ``kernel_references`` (vectorised numpy/scipy in float64) is compared with
a second, naive implementation written here: plain Python loops that walk the kernel's
iteration (positions of each axis, coordinates for buffer accesses, linear search for
coordinates looked up on axes the loop does not iterate), accumulating in float32 in loop
order like a compiled kernel would. Naive outputs start as NaN, so an output entry the
iteration never writes cannot agree with a reference by accident. Agreement within each
case's tolerance on both sizes also shows that the tolerance covers float32 sums.
"""

from __future__ import annotations

import bisect

import numpy as np
import pytest

import kernel_references as kr
import sparse_inputs as si
from zoo_check import zoo_inputs

NAMES = sorted(kr.REFERENCE_SPECS)
F32 = np.float32


def _inputs(name: str, size: str) -> dict:
    """The seeded inputs of kernel ``name`` at ``size``."""
    return kr.REFERENCE_SPECS[name].make_inputs(si.case_rng(name, size), size)


# --------------------------------------------------------------------------------------
# Naive loop implementations
# --------------------------------------------------------------------------------------


def _row(indptr, p) -> range:
    """Positions of row ``p`` of a CSR-like axis."""
    return range(int(indptr[p]), int(indptr[p + 1]))


def _find(indptr, indices, p, coord):
    """Position of column ``coord`` in row ``p`` by linear search, or None when absent."""
    for q in _row(indptr, p):
        if indices[q] == coord:
            return q
    return None


def _nan(shape) -> np.ndarray:
    """A float32 array of NaN (entries the naive loop never writes stay NaN)."""
    return np.full(shape, np.nan, dtype=F32)


def naive_csrmm(inp):
    """[I, J, K] "SRS": C[i, k] += A[i, j] * B[j, k] over the stored j of row i."""
    f = inp["feat_size"]
    b = inp["b"].reshape(inp["n"], f)
    c = _nan((inp["m"], f))
    for i in range(inp["m"]):
        acc = np.zeros(f, F32)
        for p in _row(inp["indptr"], i):
            acc += inp["a"][p] * b[inp["indices"][p]]
        c[i] = acc
    return {"c": c.ravel()}


def naive_csrmm_dense_iter(inp):
    """[I, J_detach, K] "SRS": every column j, A[i, j] looked up in row i (0 when absent)."""
    f = inp["feat_size"]
    b = inp["b"].reshape(inp["n"], f)
    c = _nan((inp["m"], f))
    for i in range(inp["m"]):
        acc = np.zeros(f, F32)
        for j in range(inp["n"]):
            p = _find(inp["indptr"], inp["indices"], i, j)
            acc += (F32(0) if p is None else inp["a"][p]) * b[j]
        c[i] = acc
    return {"c": c.ravel()}


def naive_row_sum(inp):
    """[I, J] "SR": B[i] += A[i, j] (segment_reduce, csr_reduce)."""
    indptr = inp["indptr"]
    b = _nan(len(indptr) - 1)
    for i in range(len(b)):
        acc = F32(0)
        for p in _row(indptr, i):
            acc = F32(acc + inp["a"][p])
        b[i] = acc
    return {"b": b}


def _naive_block_rows(a_blocks, b, block_positions, num_block_rows, blk, feat):
    """C[i, bi, :] = sum over bj and the block positions of block row i of A[p, bi, bj] * B[...]."""
    c = _nan((num_block_rows, blk, feat))
    for i in range(num_block_rows):
        for bi in range(blk):
            acc = np.zeros(feat, F32)
            for bj in range(blk):
                for p, j in block_positions(i):
                    acc += a_blocks[p, bi, bj] * b[j, bj]
            c[i, bi] = acc
    return c.ravel()


def naive_bsrmm(inp):
    """[I, BI, BJ, F, J] "SSRSR": C[i, bi, f] += A[i, j, bi, bj] * B[j, bj, f]."""
    blk, f = inp["blk"], inp["feat_size"]
    a = inp["a"].reshape(-1, blk, blk)
    b = inp["b"].reshape(inp["mb"], blk, f)
    positions = lambda i: [(p, inp["indices"][p]) for p in _row(inp["indptr"], i)]  # noqa: E731
    return {"c": _naive_block_rows(a, b, positions, inp["nb"], blk, f)}


def naive_ellmm(inp):
    """[I, J, BI, BJ, F] "SRSRS" with J of fixed width ``col``: row i owns positions i*col..."""
    blk, f, col = inp["blk"], inp["feat_size"], inp["col"]
    a = inp["a"].reshape(-1, blk, blk)
    b = inp["b"].reshape(inp["mb"], blk, f)
    positions = lambda i: [(p, inp["indices"][p]) for p in range(i * col, (i + 1) * col)]  # noqa: E731
    return {"c": _naive_block_rows(a, b, positions, inp["nb"], blk, f)}


def naive_csr_element_wise(inp):
    """[I, J] "SS": B[i, j] = A[i, j] * 2.5."""
    b = _nan(inp["nnz"])
    for i in range(inp["m"]):
        for p in _row(inp["indptr"], i):
            b[p] = inp["a"][p] * F32(2.5)
    return {"b": b}


def naive_hyper_gnn(inp):
    """[I, F, J, attach(I_T, J)] "SSRR": Y[i, f] += X[i_t, f] for i_t in hyperedge j of i."""
    f = inp["feat_size"]
    x = inp["x"].reshape(inp["n"], f)
    y = _nan((inp["n"], f))
    for i in range(inp["n"]):
        acc = np.zeros(f, F32)
        for p in _row(inp["indptr"], i):
            for q in _row(inp["indptr_T"], inp["indices"][p]):
                acc += x[inp["indices_T"][q]]
        y[i] = acc
    return {"y": y.ravel()}


def naive_bmm(inp):
    """[B, I, J, K] "SSRS": Z[b, i, k] += X[b, i, j] * Y[b, j, k] through the row indptrs."""
    z = _nan(inp["nnz_ik"])
    for b in range(inp["batch_size"]):
        ni, nj, nk = (len(_row(inp[f"indptr_{axis}"], b)) for axis in "ijk")
        for i in range(ni):
            row_i = inp["indptr_i"][b] + i
            for k in range(nk):
                acc = F32(0)
                for j in range(nj):
                    x = inp["x"][inp["indptr_ij"][row_i] + j]
                    y = inp["y"][inp["indptr_jk"][inp["indptr_j"][b] + j] + k]
                    acc = F32(acc + x * y)
                z[inp["indptr_ik"][row_i] + k] = acc
    return {"z": z}


def _dot32(u, v) -> np.float32:
    """Sequential float32 dot product."""
    acc = F32(0)
    for s, t in zip(u, v):
        acc = F32(acc + s * t)
    return acc


def naive_sddmm(inp):
    """[I, J, K] "SSR": C[i, j] += A[i, k] * B[j, k], row by row."""
    f = inp["feat_size"]
    a, b = inp["a"].reshape(inp["m"], f), inp["b"].reshape(inp["n"], f)
    c = _nan(inp["nnz"])
    for i in range(inp["m"]):
        for p in _row(inp["indptr"], i):
            c[p] = _dot32(a[i], b[inp["indices"][p]])
    return {"c": c}


def naive_fused_sddmm(inp):
    """[fuse(I, J), K] "SSR": one loop over the nnz, the row of each found in indptr."""
    f = inp["feat_size"]
    a, b = inp["a"].reshape(inp["m"], f), inp["b"].reshape(inp["n"], f)
    indptr = list(inp["indptr"])
    c = _nan(inp["nnz"])
    for p in range(inp["nnz"]):
        i = bisect.bisect_right(indptr, p) - 1
        c[p] = _dot32(a[i], b[inp["indices"][p]])
    return {"c": c}


def _naive_square_sum(inp, k_iter: str, lookup):
    """[I, J, K] "SRR": B[i] += value(j position, k position of the iterated K level)."""
    b = _nan(inp["M"])
    for i in range(inp["M"]):
        acc = F32(0)
        for pj in _row(inp["indptr_j"], i):
            for pk in _row(inp[f"indptr_{k_iter}"], pj):
                acc = F32(acc + lookup(pj, pk))
        b[i] = acc
    return {"b": b}


def naive_square_sum(inp):
    """B[i] = sum of A[i, j, k] over the CSF tensor."""
    return _naive_square_sum(inp, "k", lambda pj, pk: inp["a"][pk])


def naive_square_sum_two_k(inp):
    """B[i] = sum over K1 positions of A at that coordinate in K0's fibre (0 when absent)."""

    def lookup(pj, pk1):
        q = _find(inp["indptr_k0"], inp["indices_k0"], pj, inp["indices_k1"][pk1])
        return F32(0) if q is None else inp["a"][q]

    return _naive_square_sum(inp, "k1", lookup)


def _naive_fused_reduction(inp, out_level: str):
    """Walk I, J, K, L; sum X over the levels below ``out_level`` into Y[out position]."""
    y = _nan(inp[f"nnz_{out_level}"])
    for i in range(inp["n"]):
        for pj in _row(inp["indptr_j"], i):
            acc = F32(0)
            for pk in _row(inp["indptr_k"], pj):
                if out_level == "k":
                    acc = F32(0)
                for pl in _row(inp["indptr_l"], pk):
                    acc = F32(acc + inp["x"][pl])
                if out_level == "k":
                    y[pk] = acc
            if out_level == "j":
                y[pj] = acc
    return {"y": y}


def naive_fused_reduction_4d_2d(inp):
    """[fuse(I, J), K, L] "SSRR": Y[i, j] = sum over k, l."""
    return _naive_fused_reduction(inp, "j")


def naive_fused_reduction_4d_3d(inp):
    """[fuse(I, J, K), L] "SSSR": Y[i, j, k] = sum over l."""
    return _naive_fused_reduction(inp, "k")


def _weights(inp, rels_key: str):
    """W reshaped to (relations, F_out, F_in)."""
    f = inp["feat_size"]
    return inp["w"].reshape(inp[rels_key], f, f)


def naive_rgcn_homo_forward(inp):
    """[I, F_out, J, F_in] "SSRR": Y[i, fo] += W[E[i, j], fo, fi] * X[j, fi]."""
    f = inp["feat_size"]
    w, x = _weights(inp, "r"), inp["x"].reshape(inp["n"], f)
    y = _nan((inp["m"], f))
    for i in range(inp["m"]):
        acc = np.zeros(f, F32)  # over fo
        for p in _row(inp["indptr"], i):
            for fi in range(f):
                acc += w[inp["etype"][p], :, fi] * x[inp["indices"][p], fi]
        y[i] = acc
    return {"y": y.ravel()}


def naive_rgcn_hetero_forward(inp):
    """[F_out, R, I, J, F_in] "SSSRR": for every (r, destination slot) a fresh sum is STORED
    into Y[destination] (the init of the spatial point), as the iteration reads."""
    f = inp["feat_size"]
    w, x = _weights(inp, "num_rels"), inp["x"].reshape(inp["n"], f)
    y = _nan((inp["m"], f))
    for r in range(inp["num_rels"]):
        for pi in _row(inp["indptr_i"], r):
            acc = np.zeros(f, F32)
            for pj in _row(inp["indptr_j"], pi):
                for fi in range(f):
                    acc += inp["a"][pj] * w[r, :, fi] * x[inp["indices_j"][pj], fi]
            y[inp["indices_i"][pi]] = acc
    return {"y": y.ravel()}


def naive_sparse_softmax(inp):
    """Per row: running max (from float32 min), sum of exp(a - max), then exp(a - max) / sum."""
    b = _nan(inp["nnz"])
    for i in range(inp["n"]):
        row = _row(inp["indptr"], i)
        top = F32(np.finfo(F32).min)
        for p in row:
            top = max(top, inp["a"][p])
        total = F32(0)
        for p in row:
            total = F32(total + np.exp(inp["a"][p] - top))
        for p in row:
            b[p] = np.exp(inp["a"][p] - top) / total
    return {"b": b}


def naive_csr2bsr(inp):
    """Zero every stored block, then scatter each A[i, j] into block (i//blk, j//blk)."""
    blk = inp["blk_size"]
    b = _nan((inp["nnz_out"], blk, blk))
    b[: int(inp["indptr_out"][-1])] = 0
    for i in range(inp["m_in"]):
        for p in _row(inp["indptr_in"], i):
            j = inp["indices_in"][p]
            q = _find(inp["indptr_out"], inp["indices_out"], i // blk, j // blk)
            if q is not None:
                b[q, i % blk, j % blk] = inp["a"][p]
    return {"b": b.ravel()}


NAIVE = {
    "csrmm": naive_csrmm,
    "csrmm_dense_iter": naive_csrmm_dense_iter,
    "segment_reduce": naive_row_sum,
    "csr_reduce": naive_row_sum,
    "bsrmm": naive_bsrmm,
    "ellmm": naive_ellmm,
    "csr_element_wise": naive_csr_element_wise,
    "hyper_gnn": naive_hyper_gnn,
    "bmm": naive_bmm,
    "sddmm": naive_sddmm,
    "fused_sddmm": naive_fused_sddmm,
    "square_sum": naive_square_sum,
    "square_sum_two_K": naive_square_sum_two_k,
    "fused_reduction_4d_2d": naive_fused_reduction_4d_2d,
    "fused_reduction_4d_3d": naive_fused_reduction_4d_3d,
    "rgcn_homo_forward": naive_rgcn_homo_forward,
    "rgcn_hetero_forward": naive_rgcn_hetero_forward,
    "sparse_softmax": naive_sparse_softmax,
    "csr2bsr": naive_csr2bsr,
}


# --------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------


def test_every_kernel_has_a_naive_twin():
    """The naive table covers exactly the 19 kernels of the reference set."""
    assert set(NAIVE) == set(kr.REFERENCE_SPECS)
    assert len(NAIVE) == 19


@pytest.mark.parametrize("size", si.SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_reference_matches_naive_loops(name, size):
    """Vectorised float64 reference == loop-by-loop float32 version, within the case tolerance."""
    spec = kr.REFERENCE_SPECS[name]
    inputs = _inputs(name, size)
    expected = spec.reference(inputs)
    actual = NAIVE[name](inputs)
    assert set(expected) == set(actual) == set(spec.outputs)
    for out in spec.outputs:
        np.testing.assert_allclose(
            actual[out].astype(np.float64), expected[out], rtol=spec.rtol, atol=spec.atol,
            err_msg=f"{name}/{size}: output {out}",
        )


@pytest.mark.parametrize("size", si.SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_inputs_are_flat_typed_and_deterministic(name, size):
    """Arrays are flat float32/int32, scalars are ints, and the same seed gives the same data."""
    first, second = _inputs(name, size), _inputs(name, size)
    assert first.keys() == second.keys()
    for key, value in first.items():
        if isinstance(value, np.ndarray):
            assert value.ndim == 1 and value.dtype in (np.float32, np.int32), key
            assert value.flags.c_contiguous, key
            np.testing.assert_array_equal(value, second[key], err_msg=key)
        else:
            assert type(value) is int and value == second[key], key


@pytest.mark.parametrize("size", si.SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_reference_ignores_output_contents_and_fits_output(name, size):
    """References read no output array, fill each output exactly, and are finite and non-zero."""
    spec = kr.REFERENCE_SPECS[name]
    inputs = zoo_inputs(name, size)
    expected = spec.reference(inputs)
    for out in spec.outputs:
        assert expected[out].shape == inputs[out].shape, out
        assert np.all(np.isfinite(expected[out])), out
        assert np.any(expected[out] != 0), out


@pytest.mark.parametrize("name", NAMES)
def test_reference_depends_on_every_value_input(name):
    """Changing any float input array changes some output (no input is silently ignored)."""
    spec = kr.REFERENCE_SPECS[name]
    inputs = _inputs(name, "small")
    base = spec.reference(inputs)
    value_inputs = [k for k, v in inputs.items()
                    if isinstance(v, np.ndarray) and v.dtype == np.float32 and k not in spec.outputs]
    assert value_inputs
    for key in value_inputs:
        changed = dict(inputs, **{key: inputs[key] * F32(1.5) + F32(0.25)})
        after = spec.reference(changed)
        assert any(not np.allclose(after[o], base[o]) for o in spec.outputs), key


def _check_structure(indptr, indices, num_cols, what):
    """indptr runs from 0 to len(indices) without decreasing; indices increase within rows."""
    assert indptr.dtype == np.int32 and indices.dtype == np.int32, what
    assert indptr[0] == 0 and indptr[-1] == len(indices), what
    assert np.all(np.diff(indptr) >= 0), what
    assert np.all((indices >= 0) & (indices < num_cols)), what
    for p in range(len(indptr) - 1):
        assert np.all(np.diff(indices[indptr[p]: indptr[p + 1]]) > 0), f"{what}: row {p}"


# (indptr, indices, column-count parameter) of every CSR-like axis with indices.
CSR_AXES = {
    "csrmm": [("indptr", "indices", "n")],
    "csrmm_dense_iter": [("indptr", "indices", "n")],
    "csr_reduce": [("indptr", "indices", "m")],
    "bsrmm": [("indptr", "indices", "mb")],
    "csr_element_wise": [("indptr", "indices", "n")],
    "hyper_gnn": [("indptr", "indices", "m"), ("indptr_T", "indices_T", "n")],
    "sddmm": [("indptr", "indices", "n")],
    "fused_sddmm": [("indptr", "indices", "n")],
    "square_sum": [("indptr_j", "indices_j", "N1"), ("indptr_k", "indices_k", "N2")],
    "square_sum_two_K": [("indptr_j", "indices_j", "N1"), ("indptr_k0", "indices_k0", "N2"),
                         ("indptr_k1", "indices_k1", "N2")],
    "rgcn_homo_forward": [("indptr", "indices", "n")],
    "rgcn_hetero_forward": [("indptr_i", "indices_i", "m"), ("indptr_j", "indices_j", "n")],
    "sparse_softmax": [("indptr", "indices", "n")],
    "csr2bsr": [("indptr_in", "indices_in", "n_in"), ("indptr_out", "indices_out", "n_out")],
}


@pytest.mark.parametrize("size", si.SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_structures_are_valid_and_have_empty_rows(name, size):
    """Every indptr is well formed and has an empty row; indices are sorted and in range."""
    inputs = _inputs(name, size)
    for indptr, indices, cols in CSR_AXES.get(name, []):
        _check_structure(inputs[indptr], inputs[indices], inputs[cols], f"{name}.{indices}")
    indptrs = [k for k in inputs if k.startswith("indptr")]
    if name == "ellmm":  # fixed-width rows: an "empty" row is one whose blocks are all zero
        assert not indptrs
        assert np.any(np.all(inputs["a"].reshape(inputs["nb"], -1) == 0, axis=1))
    for key in indptrs:
        assert np.any(np.diff(inputs[key]) == 0), f"{name}.{key} has no empty row"


@pytest.mark.parametrize("size", si.SIZES)
def test_hyper_gnn_transpose_is_consistent_and_has_empty_hyperedges(size):
    """(indptr_T, indices_T) is the transpose of (indptr, indices), with empty hyperedges."""
    inp = _inputs("hyper_gnn", size)
    h = si.Csr(inp["indptr"], inp["indices"], inp["m"]).to_scipy()
    h_t = si.Csr(inp["indptr_T"], inp["indices_T"], inp["n"]).to_scipy()
    assert (h.T != h_t).nnz == 0
    assert np.any(np.diff(inp["indptr_T"]) == 0)


@pytest.mark.parametrize("size", si.SIZES)
def test_rgcn_hetero_destinations_partitioned(size):
    """Each destination node is in exactly one relation, and some relation is empty."""
    inp = _inputs("rgcn_hetero_forward", size)
    assert np.array_equal(np.sort(inp["indices_i"]), np.arange(inp["m"]))
    assert np.any(np.diff(inp["indptr_i"]) == 0)


@pytest.mark.parametrize("size", si.SIZES)
def test_square_sum_two_k_lookups_hit_and_miss(size):
    """K1 differs from K0: some K1 coordinates are stored in K0's fibre, others are not."""
    inp = _inputs("square_sum_two_K", size)
    hits = [
        _find(inp["indptr_k0"], inp["indices_k0"], pj, inp["indices_k1"][pk]) is not None
        for pj in range(inp["nnz_j"]) for pk in _row(inp["indptr_k1"], pj)
    ]
    assert any(hits) and not all(hits)


@pytest.mark.parametrize("size", si.SIZES)
def test_bmm_has_degenerate_batches(size):
    """bmm covers a batch without rows, one with an empty inner dimension, one without columns."""
    inp = _inputs("bmm", size)
    ni, nj, nk = (np.diff(inp[f"indptr_{a}"]) for a in "ijk")
    assert np.any(ni == 0) and np.any((nj == 0) & (ni > 0) & (nk > 0)) and np.any((nk == 0) & (ni > 0))
    assert inp["max_len"] >= max(ni.max(), nj.max(), nk.max())


@pytest.mark.parametrize("size", si.SIZES)
def test_csr2bsr_pattern_is_scipys_and_has_empty_block_rows(size):
    """The output pattern is exactly scipy's BSR pattern of the input, with empty block rows."""
    inp = _inputs("csr2bsr", size)
    blk = inp["blk_size"]
    bsr = si.Csr(inp["indptr_in"], inp["indices_in"], inp["n_in"]).to_scipy().tobsr((blk, blk))
    bsr.sort_indices()
    np.testing.assert_array_equal(inp["indptr_out"], bsr.indptr)
    np.testing.assert_array_equal(inp["indices_out"], bsr.indices)
    assert np.any(np.diff(inp["indptr_out"]) == 0)


def test_segment_rows_fit_static_axis_bound():
    """segment_reduce rows never exceed the static length of its dense_variable axis."""
    for size in si.SIZES:
        assert np.diff(_inputs("segment_reduce", size)["indptr"]).max() <= si.SEGMENT_MAX_LEN


def test_naive_check_detects_a_wrong_reference():
    """The comparison is able to fail: a reference that drops one stored entry is caught."""
    inputs = _inputs("csrmm", "small")
    broken = dict(inputs, a=inputs["a"].copy())
    broken["a"][0] = 0
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(kr.csrmm_reference(broken)["c"], naive_csrmm(inputs)["c"],
                                   rtol=kr.REDUCTION_TOL, atol=kr.REDUCTION_TOL)
