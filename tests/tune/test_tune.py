"""``sparsetir.tune``: per-matrix search, its checks, and its records on disk."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.sparse

from sparsetir import ops
from sparsetir.backend import cache_folder
from sparsetir.errors import ArgumentError, SparseTIRTypeError, SparseTIRValueError
from sparsetir.tune import cost_model, measure, records, search
from sparsetir.tune.candidates import Candidate, default, space


def _matrix(m=600, n=500, seed=0):
    """Float32 CSR, every fifth row empty, one long row (so hyb splits it)."""
    rng = np.random.default_rng(seed)
    A = scipy.sparse.random(m, n, density=0.02, format="csr", dtype=np.float32,
                            random_state=rng).tolil()
    A[3, :300] = rng.random(300).astype(np.float32) + 0.5
    A = scipy.sparse.csr_matrix(A)
    A = (scipy.sparse.diags((np.arange(m) % 5 != 0).astype(np.float32)) @ A).tocsr()
    A.eliminate_zeros()
    A.sort_indices()
    return A


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSETIR_CACHE", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("kernel", ["spmm", "spmm_unweighted", "sddmm"])
def test_every_candidate_computes_what_scipy_does(kernel):
    M = ops.SparseMatrix(_matrix())
    trial = measure.Trial(M, kernel, 16)
    for candidate in space(kernel, 16):
        bound = measure.bind(candidate, M, kernel, 16)
        trial.check(bound)                           # raises CandidateFailed when wrong
        args = measure.operands(M, kernel, 16, seed=3)
        bound(*args)
        np.testing.assert_allclose(args[-1], measure.reference(M, kernel, args),
                                   rtol=1e-4, atol=1e-4, err_msg=candidate.describe())


def test_a_wrong_candidate_is_never_chosen(cache, monkeypatch):
    M = ops.SparseMatrix(_matrix(seed=1))
    real_bind = measure.bind

    def bind_fast_wrong_ones(candidate, matrix, kernel, feat):
        if candidate != default(kernel, feat, 500):  # instant, and leaves NaN in the output
            return lambda X, Y: None
        return real_bind(candidate, matrix, kernel, feat)
    monkeypatch.setattr(search, "bind", bind_fast_wrong_ones)
    # a budget that compiling the default (1.6 s in a fresh cache) cannot use up
    report = ops.tune(M, [32], ops=("spmm",), budget_s=20)
    for outcome in report.outcomes:
        assert outcome.choice == default(outcome.kernel, 32, 500).describe()
        assert len(outcome.measured) == 1 and len(outcome.failed) == search.MEASURED
        assert all("differs" in why for why in outcome.failed.values())
    X = np.random.default_rng(2).standard_normal((500, 32)).astype(np.float32)
    np.testing.assert_allclose(ops.spmm(M, X), M.to_scipy() @ X, rtol=1e-4, atol=1e-4)


def test_tuned_calls_run_the_choice_and_stay_right(cache):
    A = _matrix(seed=2)
    M = ops.SparseMatrix(A)
    X = np.random.default_rng(3).standard_normal((500, 32)).astype(np.float32)
    before = ops.spmm(M, X)                          # prepares a call on the default kernel
    report = ops.tune(M, [32], budget_s=3)
    assert [(o.kernel, o.feat_size) for o in report.outcomes] == [
        ("spmm", 32), ("spmm_unweighted", 32), ("sddmm", 32)]
    for outcome in report.outcomes:
        assert outcome.default_s is not None and outcome.chosen_s <= outcome.default_s
        assert outcome.compile_s >= 0 and outcome.search_s > 0
    assert ("spmm", 32) in M.tuned and not M.calls and not M.numpy_calls   # dropped
    for _ in range(2):                               # prepares, then takes the short path
        out = np.full((600, 32), np.nan, np.float32)
        ops.spmm(M, X, out=out)
        np.testing.assert_allclose(out, before, rtol=1e-5, atol=1e-5)
    assert M.numpy_calls[("spmm", np.ndarray, X.dtype, X.shape)].bound is M.tuned[("spmm", 32)]
    np.testing.assert_allclose(ops.spmm(M, X, weighted=False), (A != 0) @ X, rtol=1e-4,
                               atol=1e-4)
    assert "kernel" in str(report) and "compile s" in str(report)


def test_tune_true_searches_at_the_first_call(cache):
    A = _matrix(seed=4)
    M = ops.SparseMatrix(A, tune=True)
    X = np.random.default_rng(5).standard_normal((500, 16)).astype(np.float32)
    np.testing.assert_allclose(ops.spmm(M, X), A @ X, rtol=1e-4, atol=1e-4)
    assert ("spmm", 16) in M.tuned and ("sddmm", 16) not in M.tuned


_NEW_PROCESS = textwrap.dedent("""
    import json, sys, numpy as np, scipy.sparse
    from sparsetir import ops
    A = scipy.sparse.load_npz(sys.argv[1])
    report = ops.tune(ops.SparseMatrix(A), [16], ops=("sddmm",), budget_s=2)
    o = report.outcomes[0]
    print(json.dumps({"from_record": o.from_record, "choice": o.choice,
                      "measured": len(o.measured)}))
""")


def test_a_record_is_reused_by_a_new_process(cache, tmp_path):
    path = tmp_path / "A.npz"
    scipy.sparse.save_npz(path, _matrix(seed=6))

    def run():
        done = subprocess.run([sys.executable, "-c", _NEW_PROCESS, str(path)], text=True,
                              capture_output=True, env={**os.environ}, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])
    first, second = run(), run()
    assert not first["from_record"] and first["measured"] >= 1
    assert second["from_record"] and second["measured"] == 0
    assert second["choice"] == first["choice"]


def _only_record(cache):
    (entry,) = [p for p in (cache / "tune").iterdir() if not p.name.startswith(".")]
    return entry


def test_a_corrupt_record_is_ignored(cache):
    M = ops.SparseMatrix(_matrix(seed=7))
    ops.tune(M, [16], ops=("sddmm",), budget_s=1)
    record = _only_record(cache) / records.RECORD
    record.write_text(record.read_text().replace("prefetch", "prefetcj"))   # SHA-256 differs
    again = ops.tune(ops.SparseMatrix(M), [16], ops=("sddmm",), budget_s=1).outcomes[0]
    assert not again.from_record and again.measured


@pytest.mark.parametrize("change", ["machine", "choice", "pattern", "float"])
def test_a_foreign_or_unknown_record_is_ignored(cache, change):
    M = ops.SparseMatrix(_matrix(seed=8))
    ops.tune(M, [16], ops=("sddmm",), budget_s=1)
    entry = _only_record(cache)
    record = json.loads((entry / records.RECORD).read_text())
    if change == "machine":
        record["key"]["machine"]["cpu_model"] = "another CPU"
    elif change == "pattern":
        record["key"]["pattern"] = "0" * 64
    elif change == "float":                         # equal to a candidate's, not one: the
        record["choice"]["tiles_per_thread"] *= 1.0  # bound kernel refused it mid-call
    else:
        record["choice"]["prefetch"] = 7            # no such candidate
    cache_folder.discard(entry, [records.RECORD])   # rewritten with valid checksums
    cache_folder.write_entry(entry, lambda staging: (staging / records.RECORD).write_text(
        json.dumps(record)))
    key = records.record_key(records.fingerprint(M), "sddmm", 16)
    assert records.load(key) is None
    again = ops.tune(ops.SparseMatrix(M), [16], ops=("sddmm",), budget_s=1).outcomes[0]
    assert not again.from_record


def test_candidates_are_data():
    candidate = Candidate("hyb", 16, 32, 32, 2, (1, 2, 4))
    assert Candidate.from_json(json.loads(json.dumps(candidate.to_json())), "spmm", 32) \
        is None                                      # valid form, but not in today's space
    for kernel in ("spmm", "spmm_unweighted", "sddmm"):
        for member in space(kernel, 64):
            assert Candidate.from_json(json.loads(json.dumps(member.to_json())), kernel,
                                       64) == member
    assert default("spmm", 64, 10) in space("spmm", 64)
    assert default("sddmm", 7, 10**6) in space("sddmm", 7)
    with pytest.raises(SparseTIRValueError, match="no search for kernel"):
        space("gemm", 32)


def test_the_model_orders_by_the_costs_it_names():
    stats = cost_model.MatrixStats.of(_matrix())
    cost = lambda c, feat=32: cost_model.predicted_seconds(c, "spmm", feat, stats, 2)  # noqa
    assert cost(Candidate("csr", 0, 32, 8)) < cost(Candidate("csr", 0, 0, 8))       # vector
    assert cost(Candidate("csr", 0, 32, 8)) < cost(Candidate("csr", 0, 16, 8))      # passes
    big = cost_model.MatrixStats(100_000, 1_000_000, 2_000_000,
                                 np.full(100_000, 20, np.int64))
    far = lambda c: cost_model.predicted_seconds(c, "spmm", 128, big, 2)   # noqa: E731
    assert far(Candidate("csr", 16, 64, 8)) < far(Candidate("csr", 0, 64, 8))        # prefetch
    assert stats.hyb_slots(1, (1, 2, 4)) >= stats.nnz


def test_bad_arguments_are_refused():
    M = ops.SparseMatrix(_matrix())
    with pytest.raises(SparseTIRValueError, match="operator 'gemm'"):
        ops.tune(M, [32], ops=("gemm",))
    with pytest.raises(SparseTIRValueError, match="feature sizes"):
        ops.tune(M, [0])
    with pytest.raises(SparseTIRValueError, match="budget_s"):
        ops.tune(M, [32], budget_s=float("nan"))
    with pytest.raises(SparseTIRTypeError, match="float32"):
        ops.tune(ops.SparseMatrix(_matrix().astype(np.float64)), [32])
    with pytest.raises(SparseTIRValueError, match="kernel 'nope'"):   # before any work
        ops.tune(M, [32], kernels=["spmm", "nope"])
    assert not M.tuned


def test_tune_true_with_zero_features_runs_as_untuned(cache):
    """The first call's search refused 0 features; untuned calls return (m, 0) arrays."""
    A = _matrix(seed=9)
    M = ops.SparseMatrix(A, tune=True)
    assert ops.spmm(M, np.zeros((500, 0), np.float32)).shape == (600, 0)
    assert ops.sddmm(M, np.zeros((600, 0), np.float32),
                     np.zeros((500, 0), np.float32)).tolist() == [0.0] * A.nnz
    assert not M.tuned


def test_a_record_nested_too_deep_is_ignored(cache):
    """JSON nested 100000 deep made every later tune raise RecursionError."""
    M = ops.SparseMatrix(_matrix(seed=10))
    ops.tune(M, [16], ops=("sddmm",), budget_s=1)
    entry = _only_record(cache)
    cache_folder.discard(entry, [records.RECORD])   # rewritten with valid checksums
    cache_folder.write_entry(entry, lambda staging: (staging / records.RECORD).write_text(
        "[" * 100000 + "]" * 100000))
    again = ops.tune(ops.SparseMatrix(M), [16], ops=("sddmm",), budget_s=1).outcomes[0]
    assert not again.from_record


@pytest.mark.parametrize("holding", [None, "notes.txt"])
def test_a_folder_where_the_record_belongs_is_replaced_by_a_new_search(cache, holding):
    """A folder in the place of ``record.json`` was never replaced: every later tune, in every
    process, searched again and warned that it could not store its choice. Now it is set
    aside (what the cache did not write kept there) and the new search's record is used."""
    A = _matrix(seed=11)
    ops.tune(ops.SparseMatrix(A), [16], ops=("sddmm",), budget_s=1)
    entry = _only_record(cache)
    (entry / records.RECORD).unlink()
    (entry / records.RECORD).mkdir(mode=0o700)
    if holding:
        (entry / records.RECORD / holding).write_text("mine")
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache_folder.CacheWarning)
        again = ops.tune(ops.SparseMatrix(A), [16], ops=("sddmm",), budget_s=1).outcomes[0]
    assert not again.from_record and again.measured
    assert _only_record(cache) == entry and cache_folder.read_entry(entry)
    kept = [path.relative_to(cache) for path in (cache / "tune").glob(".set-aside-*/*/*/*")]
    assert [path.parts[2:] for path in kept] == ([] if holding is None else
                                                 [(entry.name, records.RECORD, holding)])
    third = ops.tune(ops.SparseMatrix(A), [16], ops=("sddmm",), budget_s=1)
    assert third.outcomes[0].from_record and third.outcomes[0].choice == again.choice
    rng = np.random.default_rng(12)
    X = rng.standard_normal((600, 16)).astype(np.float32)
    Y = rng.standard_normal((500, 16)).astype(np.float32)
    out = np.full(A.nnz, np.nan, np.float32)
    ops.sddmm(third.matrix, X, Y, out=out)           # the recorded choice's kernel
    coo = A.tocoo()
    np.testing.assert_allclose(out, np.einsum("ij,ij->i", X[coo.row], Y[coo.col]), rtol=1e-4,
                               atol=1e-4)


def test_a_new_search_replaces_an_intact_record_beside_a_foreign_file(cache):
    """``use_records=False`` searches again; its record silently stayed the old one when the
    entry also held a file the cache did not write."""
    M = ops.SparseMatrix(_matrix(seed=13))
    ops.tune(M, [16], ops=("sddmm",), budget_s=1)
    entry = _only_record(cache)
    (entry / "notes.txt").write_text("mine")
    outcome = ops.tune(M, [16], ops=("sddmm",), budget_s=1, use_records=False).outcomes[0]
    assert json.loads((entry / records.RECORD).read_text())["measured_s"] == outcome.measured
    (aside,) = (cache / "tune").glob(".set-aside-*")
    assert (aside / entry.name / "notes.txt").read_text() == "mine"


def test_a_record_that_cannot_be_replaced_is_named_in_one_warning(cache, monkeypatch):
    key = records.record_key("0" * 64, "spmm", 16)
    choice = Candidate("csr", prefetch=16, lanes=16, tiles_per_thread=64)
    records.store(key, choice, {}, {})
    entry = _only_record(cache)
    (entry / records.RECORD).write_text("damaged")
    real_rename = os.rename

    def refuse_to_move_the_entry(source, target):
        if str(source) == str(entry):
            raise PermissionError(13, "Permission denied", str(source))
        real_rename(source, target)
    monkeypatch.setattr(os, "rename", refuse_to_move_the_entry)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records.store(key, choice, {}, {})
    assert [str(w.message).split(": [Errno")[0] for w in caught] == [
        f"sparsetir cannot store {entry}"]
    assert records.load(key) is None
    assert sorted(path.name for path in (cache / "tune").iterdir()) == [entry.name]


def test_one_name_or_size_and_repeats(cache):
    A = _matrix(seed=9)
    report = ops.tune(A, np.int64(16), ops="sddmm", budget_s=1)      # a scipy matrix: wrapped
    assert [(o.kernel, o.feat_size) for o in report.outcomes] == [("sddmm", 16)]
    assert ("sddmm", 16) in report.matrix.tuned
    twice = ops.tune(report.matrix, [16, 16], ops=("sddmm", "sddmm"), budget_s=1)
    assert len(twice.outcomes) == 1 and twice.outcomes[0].from_record
    assert "record" in str(twice)


def test_sddmm_reference_in_chunks_equals_the_whole(monkeypatch):
    M = ops.SparseMatrix(_matrix(seed=7))
    args = measure.operands(M, "sddmm", 16)
    A = M.to_scipy().tocoo()
    X, Y = (a.astype(np.float64) for a in args[:2])
    whole = np.einsum("ij,ij->i", X[A.row], Y[A.col])
    monkeypatch.setattr(measure, "REFERENCE_CHUNK", 16 * 7)        # 7 nonzeros a chunk
    np.testing.assert_allclose(measure.reference(M, "sddmm", args), whole, rtol=1e-12)


def test_operands_and_reference_are_made_once_per_case(cache, monkeypatch):
    made = []
    real = measure.reference

    def counted(*args):
        made.append(args[1])
        return real(*args)
    monkeypatch.setattr(measure, "reference", counted)
    report = ops.tune(ops.SparseMatrix(_matrix(seed=8)), [16], ops=("sddmm",), budget_s=3)
    assert len(report.outcomes[0].measured) > 1 and made == ["sddmm"]


def test_a_candidate_that_only_won_one_after_the_other_is_not_chosen(cache, monkeypatch):
    """Timed alone it looked fastest (as when the machine slowed down while the default
    ran); timed in alternation with the default it is twice as slow: the default stays."""
    M = ops.SparseMatrix(_matrix(seed=9))
    base = default("spmm", 32, 500)
    real_bind, real_time = measure.bind, search.time_calls
    slow = []

    def bind_one_slow(candidate, matrix, kernel, feat):
        bound = real_bind(candidate, matrix, kernel, feat)
        if candidate == base or slow:
            return bound
        slow.append(candidate)

        def twice(*args):
            bound(*args)
            bound(*args)
        return twice

    def time_slow_as_fast(bound, args, budget_s):
        seconds = real_time(bound, args, budget_s)
        return seconds / 100 if getattr(bound, "__name__", "") == "twice" else seconds

    monkeypatch.setattr(search, "bind", bind_one_slow)
    monkeypatch.setattr(search, "time_calls", time_slow_as_fast)
    outcome = ops.tune(M, [32], kernels=["spmm"], budget_s=3).outcomes[0]
    assert slow and min(outcome.measured, key=outcome.measured.get) == slow[0].describe()
    assert outcome.choice == base.describe() and outcome.chosen_s == outcome.default_s
    assert set(outcome.paired) == {base.describe(), slow[0].describe()}
    assert outcome.paired[base.describe()] == outcome.default_s
    assert outcome.paired[slow[0].describe()] > outcome.default_s
    record, = [json.loads(path.read_text()) for path in cache.glob("tune/*/record.json")]
    assert record["paired_s"] == outcome.paired and record["measured_s"] == outcome.measured


def test_time_pair_alternates_which_runs_first():
    order = []
    first, second = (lambda *args: order.append("a")), (lambda *args: order.append("b"))
    measure.time_pair(first, second, (), budget_s=0)
    assert order[:2] == ["a", "b"]                        # the warm-up calls
    pairs = [tuple(order[k:k + 2]) for k in range(2, len(order), 2)]
    assert len(pairs) == measure.MIN_CALLS
    assert pairs == [("a", "b"), ("b", "a")] * (measure.MIN_CALLS // 2) + [("a", "b")]


def test_a_candidate_that_fails_while_timed_is_dropped(cache, monkeypatch):
    """Checked right, then raising when timed (as a call that runs out of memory): it is
    dropped with the reason, and the search goes on with the others."""
    M = ops.SparseMatrix(_matrix(seed=10))
    base = default("spmm", 32, 500)
    real_time = search.time_calls
    timed = []

    def fail_the_first_candidate(bound, args, budget_s):
        timed.append(bound)
        if len(timed) == 2:
            raise MemoryError("no room")
        return real_time(bound, args, budget_s)

    monkeypatch.setattr(search, "time_calls", fail_the_first_candidate)
    monkeypatch.setattr(search, "MEASURED", 2)            # all fit in the budget, anywhere
    outcome = ops.tune(M, [32], kernels=["spmm"], budget_s=10).outcomes[0]
    failed, = outcome.failed.items()
    assert failed[1] == "failed while timed: no room" and failed[0] not in outcome.measured
    assert base.describe() in outcome.measured and len(outcome.measured) == search.MEASURED
    X = np.random.default_rng(3).standard_normal((500, 32)).astype(np.float32)
    np.testing.assert_allclose(ops.spmm(M, X), M.to_scipy() @ X, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", ["csr", "split", "hyb"])
def test_every_layout_refuses_an_output_over_the_matrix_arrays(layout):
    torch = pytest.importorskip("torch")          # from_numpy ignores the read-only flag
    M = ops.SparseMatrix(_matrix())
    candidate = next(c for c in space("spmm", 1) if c.layout == layout)
    bound = measure.bind(candidate, M, "spmm", 1)
    over_data = torch.from_numpy(M.data)[:600].reshape(600, 1)   # the matrix's public values
    before = over_data.clone()
    with pytest.raises(ArgumentError, match="shares memory with argument 'M.public.data'"):
        bound(np.ones((500, 1), np.float32), over_data)
    assert torch.equal(over_data, before)
