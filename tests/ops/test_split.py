"""The nonzero split (``ops.split``): rows longer than a tile's share cut into pieces, checked
against scipy on outputs filled with NaN, through the search's records and the operators."""

import numpy as np
import pytest
import scipy.sparse
import tvm

from sparsetir import lower_sparse_iter, ops
from sparsetir.errors import ArgumentError
from sparsetir.ops.kernels import segment_tiled_kernels
from sparsetir.ops.split import SplitLayout, SplitSpmm, bind_split
from sparsetir.schedule.operators import schedule_for
from sparsetir.tune import cost_model, measure, records
from sparsetir.tune.candidates import Candidate, space
from sparse_inputs import skewed_csr


def _hubs(m=300, n=260, hubs=(0, 41, 42, 299), seed=0):
    """Float32 CSR with empty rows and full rows (hubs) first, last and side by side."""
    rng = np.random.default_rng(seed)
    A = scipy.sparse.random(m, n, density=0.03, format="lil", dtype=np.float32,
                            random_state=seed)
    A[5, :] = 0
    A[298, :] = 0
    for row in hubs:
        A[row, :] = rng.standard_normal(n).astype(np.float32)
    return A.tocsr()


def _reference(A, kernel, args):
    return measure.reference(ops.SparseMatrix(A), kernel, args)


@pytest.mark.parametrize("kernel", ["spmm", "spmm_unweighted", "sddmm"])
@pytest.mark.parametrize("tiles", [1, 3, 16, 64])
@pytest.mark.parametrize("feat", [1, 24])
def test_split_computes_what_scipy_does(kernel, tiles, feat):
    for A in (_hubs(), skewed_csr(90, 70, seed=2)):
        M = ops.SparseMatrix(A)
        bound = bind_split(M, kernel, feat, tiles)
        args = measure.operands(M, kernel, feat, seed=tiles)        # the output all NaN
        bound(*args)
        np.testing.assert_allclose(args[-1], _reference(A, kernel, args), rtol=1e-4,
                                   atol=1e-4)


def test_the_layout_cuts_only_rows_longer_than_a_tile_share():
    A = _hubs()
    layout = SplitLayout.of(ops.SparseMatrix(A), 16)
    lengths = np.diff(A.indptr)
    assert layout.max_nnz == -(-A.nnz // 16)
    assert layout.long_rows.tolist() == np.flatnonzero(lengths > layout.max_nnz).tolist() \
        == [0, 41, 42, 299]
    assert layout.short_rows.size + layout.long_rows.size == A.shape[0]
    assert np.diff(layout.piece_ptr).max() <= layout.max_nnz
    assert np.diff(layout.fix_ptr).tolist() == [-(-260 // layout.max_nnz)] * 4
    # the copy: the short rows' nonzeros in order, then the long rows'
    short = np.concatenate([A.indices[A.indptr[r]:A.indptr[r + 1]]
                            for r in layout.short_rows])
    assert layout.indices[:layout.short_nnz].tolist() == short.tolist()
    assert layout.indices[layout.short_nnz:].tolist() == np.tile(np.arange(260), 4).tolist()


def test_a_matrix_without_long_rows_runs_one_kernel():
    M = ops.SparseMatrix(scipy.sparse.random(50, 40, density=0.1, format="csr",
                                             dtype=np.float32, random_state=1))
    assert not isinstance(bind_split(M, "spmm", 16, 2), SplitSpmm)
    assert isinstance(bind_split(ops.SparseMatrix(_hubs()), "spmm", 16, 16), SplitSpmm)


def test_torch_operands():
    torch = pytest.importorskip("torch")
    A = _hubs()
    M = ops.SparseMatrix(A)
    X = torch.randn(260, 16)
    Y = torch.full((300, 16), float("nan"))
    bind_split(M, "spmm", 16, 16)(X, Y)
    np.testing.assert_allclose(Y.numpy(), A @ X.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel", ["spmm", "sddmm"])
def test_outputs_over_the_matrix_arrays_are_refused(kernel):
    torch = pytest.importorskip("torch")          # from_numpy ignores the read-only flag
    M = ops.SparseMatrix(_hubs())
    bound = bind_split(M, kernel, 1, 16)
    over_data = torch.from_numpy(M.data)            # the matrix's public copy of its values
    args = measure.operands(M, kernel, 1)
    args = args[:-1] + (over_data if kernel == "sddmm" else over_data[:300].reshape(300, 1),)
    before = over_data.clone()
    with pytest.raises(ArgumentError, match="shares memory with argument 'M.public.data'"):
        bound(*args)
    assert torch.equal(over_data, before)


def test_the_split_spmm_has_the_bound_kernel_interface():
    M = ops.SparseMatrix(_hubs())
    bound = bind_split(M, "spmm", 16, 16)
    X, Y = np.ones((260, 16), np.float32), np.zeros((300, 16), np.float32)
    assert bound.parameters == ["x", "y"] and bound.fixed_bytes > 0
    assert 0 < bound.time(X, Y, number=2, repeat=1) < 1
    Y.fill(np.nan)                                  # the fast call must write every row
    assert bound.call_fast((X, Y))
    np.testing.assert_allclose(Y, M.to_scipy() @ X, rtol=1e-4, atol=1e-4)


def test_a_dropped_candidate_frees_its_copy():
    M = ops.SparseMatrix(_hubs())
    bind_split(M, "spmm", 16, 16)
    bind_split(M, "sddmm", 16, 16)
    assert not any(isinstance(kept, SplitLayout) for kept in M.prepared.values())


@pytest.mark.parametrize("name", ["spmm", "spmm_unweighted", "sddmm"])
def test_segment_kernels_pass_tvms_checks(name):
    func = segment_tiled_kernels()[name].specialize({"feat_size": 32})
    scheduled = schedule_for(name, lower_sparse_iter(func), 32, "llvm")
    tvm.s_tir.Schedule(scheduled)                    # TVM's own checks, with defaults
    names = [p.name for p in func.params]
    assert names.index("s") == names.index("t") + 1           # positions apart from rows


def test_split_is_offered_only_where_a_row_is_long():
    lengths = np.full(100_000, 2, np.int64)
    lengths[7] = 100_000                         # a third of the nonzeros in one row
    hubs = cost_model.MatrixStats(100_000, 100_000, int(lengths.sum()), lengths)
    even = cost_model.MatrixStats.of(scipy.sparse.diags(     # 3 per row, 128 tiles of 7
        [1, 2, 3], [-1, 0, 1], shape=(300, 300), format="csr", dtype=np.float32))
    for kernel in ("spmm", "sddmm"):
        assert any(c.layout == "split" for c in space(kernel, 32))
        assert not any(c.layout == "split"
                       for c in cost_model.ranked(space(kernel, 32), kernel, 32, even, 2))
        # at 8 threads that row bounds the CSR kernel: the split ranks first
        assert cost_model.ranked(space(kernel, 32), kernel, 32, hubs, 8)[0].layout == "split"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("kernel", ["spmm", "spmm_unweighted", "sddmm"])
def test_a_recorded_split_runs_in_the_operators_calls(cache, kernel):
    A = _hubs(seed=3)
    M = ops.SparseMatrix(A)
    key = records.record_key(records.fingerprint(M), kernel, 16)
    records.store(key, Candidate("split", 0, 16 if kernel != "sddmm" else 0, 64), {}, {})
    report = ops.tune(M, [16], kernels=[kernel])
    assert report.outcomes[0].from_record and report.outcomes[0].choice.startswith("split")
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300 if kernel == "sddmm" else 260, 16)).astype(np.float32)
    Y = rng.standard_normal((260, 16)).astype(np.float32)
    for _ in range(3):                       # the general path, then the prepared calls
        if kernel == "sddmm":
            out = np.full(A.nnz, np.nan, np.float32)
            ops.sddmm(M, X, Y, out=out)
            expected = _reference(A, "sddmm", (X, Y, out))
        else:
            out = np.full((300, 16), np.nan, np.float32)
            ops.spmm(M, X, out=out, weighted=kernel == "spmm")
            expected = _reference(A, kernel, (X, out))
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
