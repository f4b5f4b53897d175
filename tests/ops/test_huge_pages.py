"""Reused large gathered operands moved onto huge pages (``ops.huge_pages``): only the same
object, once it has been gathered for about as long as the move takes, only large ones, values
and results unchanged."""

import gc

import numpy as np
import pytest
import scipy.sparse

import sparsetir.ops as ops
from sparsetir.ops import huge_pages
from sparsetir.ops.huge_pages import (HUGE_PAGE, MIN_BYTES, MIN_CALLS, MOVE_SECONDS_PER_MIB,
                                      back_with_huge_pages, moved_bytes, note_gathered)


def smaps_entry(address: int) -> dict | None:
    """``AnonHugePages`` (bytes) and ``VmFlags`` (a list) of the mapping holding ``address``
    (/proc/self/smaps), None when the mapping is not found."""
    try:
        lines = open("/proc/self/smaps").read().splitlines()
    except OSError:
        return None
    entry = None
    for line in lines:
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and all(
                c in "0123456789abcdef" for c in fields[0].replace("-", "")):
            if entry is not None:
                return entry
            low, high = (int(part, 16) for part in fields[0].split("-"))
            entry = {} if low <= address < high else None
        elif entry is not None and fields[0] == "AnonHugePages:":
            entry["AnonHugePages"] = int(fields[1]) * 1024
        elif entry is not None and fields[0] == "VmFlags:":
            entry["VmFlags"] = fields[1:]
    return entry


def huge_bytes_at(address: int) -> int | None:
    """The bytes on huge pages in the mapping holding ``address``, None when not found."""
    entry = smaps_entry(address)
    return None if entry is None else entry.get("AnonHugePages")


@pytest.fixture
def recorded_moves(monkeypatch):
    """Replace the move by a recorder: the (address, nbytes) of every move asked for."""
    moves = []
    monkeypatch.setattr(huge_pages, "back_with_huge_pages",
                        lambda address, nbytes: moves.append((address, nbytes)) or nbytes)
    monkeypatch.setattr(huge_pages, "huge_pages_available", lambda: True)
    return moves


def large_array():
    return np.random.default_rng(0).standard_normal((MIN_BYTES // 4 // 64, 64)).astype(
        np.float32)


class Clock:
    """A ``time.perf_counter`` that moves only when told."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(huge_pages.time, "perf_counter", fake)
    return fake


def calls_until_moved(operand, clock, interval: float, limit: int = 1000, moves=None):
    """The call (1-based) with ``operand`` at which it moved, calls ``interval`` s apart."""
    for call in range(1, limit + 1):
        note_gathered(operand)
        if moves:
            return call
        clock.now += interval
    return None


@pytest.mark.parametrize("interval", [1.0, 0.004, 0.001, 0.0001])
def test_the_same_object_moves_once_it_was_gathered_as_long_as_the_move_takes(
        recorded_moves, clock, interval):
    X = large_array()
    move_s = MOVE_SECONDS_PER_MIB * X.nbytes / (1 << 20)
    expected = max(MIN_CALLS, -(-move_s // interval))
    assert calls_until_moved(X, clock, interval, moves=recorded_moves) == expected
    for _ in range(3 * MIN_CALLS):
        note_gathered(X)
    assert recorded_moves == [(X.__array_interface__["data"][0], X.nbytes)]
    assert moved_bytes(X) == X.nbytes


def test_new_objects_small_ones_and_strided_views_never_move(recorded_moves, clock):
    base = large_array()
    for _ in range(4 * MIN_CALLS):
        note_gathered(base.copy())                     # a new tensor each step
        note_gathered(np.ones((8, 8), np.float32))     # under MIN_BYTES
        clock.now += 1.0
    strided = np.repeat(base, 2, axis=1)[:, ::2]
    assert calls_until_moved(strided, clock, 1.0, limit=4 * MIN_CALLS) is None
    assert recorded_moves == [] and moved_bytes(strided) == 0


def test_anything_else_is_left_to_the_operators_checks(recorded_moves, clock):
    """Sparse, meta and transposed tensors and non-arrays are never moved, and noting them
    raises nothing, however often they come: the operators' checks name them."""
    torch = pytest.importorskip("torch")
    eye = torch.eye(2048)
    for junk in (eye.to_sparse(), eye.to_sparse_csr(), torch.empty(2048, 2048, device="meta"),
                 eye.t(), [1.0, 2.0], None, "X"):
        for _ in range(2 * MIN_CALLS):
            note_gathered(junk)
            clock.now += 1.0
    assert recorded_moves == []


@pytest.mark.parametrize("call", ["spmm", "copy_u_sum", "u_mul_e_sum", "u_dot_v", "sddmm"])
def test_every_operator_counts_a_call_once(recorded_moves, clock, call):
    """Each call of an operator that gathers the operand counts once (an operator calling
    another must not count twice: two counts a call would make the shortest interval 0)."""
    n, feat = MIN_BYTES // 4 // 64, 64
    A = scipy.sparse.random(8, n, density=0.001, format="csr", dtype=np.float32,
                            random_state=5)
    M = ops.SparseMatrix(A)
    gathered = np.ones((n, feat), np.float32)
    rows = np.ones((8, feat), np.float32)
    run = {"spmm": lambda: ops.spmm(M, gathered),
           "copy_u_sum": lambda: ops.copy_u_sum(M, gathered),
           "u_mul_e_sum": lambda: ops.u_mul_e_sum(M, gathered, M.values.reshape(-1, 1)),
           "u_dot_v": lambda: ops.u_dot_v(M, gathered, rows),
           "sddmm": lambda: ops.sddmm(M, rows, gathered)}[call]
    interval = 2 * MOVE_SECONDS_PER_MIB * gathered.nbytes / (1 << 20)   # 2 calls' worth
    for count in range(1, MIN_CALLS + 1):
        run()
        assert len(recorded_moves) == (count == MIN_CALLS), count
        clock.now += interval


def test_refused_operands_stay_refused_by_name_on_every_call(clock):
    """A sparse CSR tensor, or a torch.func tensor, passed again and again keeps getting the
    operator's own error, never one from the move (which reads memory they do not have)."""
    torch = pytest.importorskip("torch")
    n = MIN_BYTES // 4 // 1024
    M = ops.SparseMatrix(scipy.sparse.random(8, n, density=0.01, format="csr",
                                             dtype=np.float32, random_state=6))
    X = torch.ones(n, 1024).to_sparse_csr()
    for _ in range(2 * MIN_CALLS):
        with pytest.raises(TypeError, match="X is a sparse_csr torch tensor"):
            ops.spmm(M, X)
        clock.now += 1.0
    dense = torch.ones(n, 1024)

    def loss(x):
        for _ in range(2 * MIN_CALLS):
            with pytest.raises(TypeError, match="torch.func"):
                ops.spmm(M, x)
            clock.now += 1.0
        return x.sum()

    torch.func.grad(loss)(dense)


def test_a_dead_operand_is_forgotten(recorded_moves):
    X = large_array()
    note_gathered(X)
    key = id(X)
    assert key in huge_pages._seen
    del X
    gc.collect()
    assert key not in huge_pages._seen


def test_turned_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("SPARSETIR_HUGE_PAGES", "0")
    huge_pages.huge_pages_available.cache_clear()
    try:
        assert not huge_pages.huge_pages_available()
        assert back_with_huge_pages(0, 4 * HUGE_PAGE) == 0
    finally:
        huge_pages.huge_pages_available.cache_clear()


def test_the_move_keeps_every_value_and_reaches_the_pages():
    torch = pytest.importorskip("torch")
    X = torch.randn(3 * HUGE_PAGE // 4 + 123)          # torch: 4 KiB pages as allocated
    before = X.clone()
    moved = back_with_huge_pages(X.data_ptr(), X.nbytes)
    assert torch.equal(X, before)
    assert moved % HUGE_PAGE == 0 and moved <= X.nbytes
    assert back_with_huge_pages(X.data_ptr(), HUGE_PAGE // 2) == 0   # no whole huge page
    if moved == 0:
        pytest.skip("this kernel does not move pages on request (THP off, or before 6.1)")
    first_whole_page = -(-X.data_ptr() // HUGE_PAGE) * HUGE_PAGE    # its mapping of its own
    assert huge_bytes_at(first_whole_page) >= moved


@pytest.mark.parametrize("operator", ["spmm", "sddmm"])
def test_results_stay_right_across_the_move(operator, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(huge_pages, "MOVE_SECONDS_PER_MIB", 0.0)     # moves at MIN_CALLS
    rng = np.random.default_rng(3)
    n, feat = MIN_BYTES // 4 // 64, 64
    A = scipy.sparse.random(200, n, density=0.002, format="csr", dtype=np.float32,
                            random_state=4)
    keep = np.ones(200, np.float32)
    keep[50:60] = 0                                  # empty rows 50..59
    A = (scipy.sparse.diags(keep) @ A).tocsr()
    A.eliminate_zeros()
    A.sort_indices()                                 # the matrix's nonzero order
    M = ops.SparseMatrix(A)
    gathered = torch.from_numpy(rng.standard_normal((n, feat)).astype(np.float32))
    rows = torch.from_numpy(rng.standard_normal((200, feat)).astype(np.float32))
    if operator == "spmm":
        expected = A @ gathered.numpy()
    else:
        coo = A.tocoo()
        expected = np.einsum("ij,ij->i", rows.numpy()[coo.row], gathered.numpy()[coo.col])
    for _ in range(MIN_CALLS + 2):
        out = torch.full(expected.shape, float("nan"))
        if operator == "spmm":
            ops.spmm(M, gathered, out=out)
        else:
            ops.sddmm(M, rows, gathered, out=out)
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
    moved = back_with_huge_pages(gathered.data_ptr(), gathered.nbytes)   # already there
    assert moved_bytes(gathered) == moved


def result_mapping(tensor) -> dict:
    """``smaps_entry`` of ``tensor``'s first whole huge page (skips the test where
    /proc/self/smaps cannot tell: no such file, or no AnonHugePages or VmFlags lines)."""
    first_whole_page = -(-tensor.data_ptr() // HUGE_PAGE) * HUGE_PAGE
    found = smaps_entry(first_whole_page)
    if found is None or not {"AnonHugePages", "VmFlags"} <= set(found):
        pytest.skip("/proc/self/smaps does not say where huge pages are asked for")
    return found


def test_a_large_fresh_result_is_faulted_on_huge_pages():
    """The request reaches the result's mapping (``hg`` in its VmFlags, not in a control's),
    and the kernel then backs it with huge pages unless it has none free (a skip, naming it)."""
    torch = pytest.importorskip("torch")
    if not huge_pages.huge_pages_available():
        pytest.skip("transparent huge pages are off here")
    size = (40 << 20) // 4             # over glibc's largest mmap threshold: fresh pages
    control = torch.empty(size)
    control.fill_(1)
    if result_mapping(control)["AnonHugePages"] > 0 or "hg" in result_mapping(control)["VmFlags"]:
        pytest.skip("torch's memory is on huge pages without asking (THP always, or glibc's "
                    "hugetlb tunable)")
    result = torch.empty(size)
    huge_pages.advise_fresh_result(result)
    result.fill_(2)
    mapping = result_mapping(result)
    assert "hg" in mapping["VmFlags"]
    assert bool((result == 2).all())
    if mapping["AnonHugePages"] == 0:
        pytest.skip("the request was made, but the kernel had no free huge page (fragmented "
                    "memory)")
    assert mapping["AnonHugePages"] >= HUGE_PAGE


def test_small_results_get_no_request(monkeypatch):
    torch = pytest.importorskip("torch")
    asked = []
    monkeypatch.setattr(huge_pages, "_advise", lambda *memory: asked.append(memory))
    monkeypatch.setattr(huge_pages, "huge_pages_available", lambda: True)
    huge_pages.advise_fresh_result(torch.empty(MIN_BYTES // 4 - 1))
    assert asked == []
    large = torch.empty(MIN_BYTES // 4)
    huge_pages.advise_fresh_result(large)
    assert asked == [(large.data_ptr(), large.nbytes)]


@pytest.mark.parametrize("tracked", [False, True], ids=["plain", "autograd"])
def test_operator_results_ask_for_huge_pages_and_stay_right(tracked, monkeypatch):
    """A large torch result of ``ops.spmm`` asks for huge pages on the short path and on the
    general (autograd) path; its values match scipy's, its rows of empty matrix rows are 0,
    and the gradient still flows."""
    torch = pytest.importorskip("torch")
    asked = []
    advise = huge_pages.advise_fresh_result
    monkeypatch.setattr(huge_pages, "advise_fresh_result", lambda result: asked.append(
        result.nbytes) or advise(result))
    from sparsetir.ops import arrays
    monkeypatch.setattr(arrays, "advise_fresh_result", huge_pages.advise_fresh_result)
    rows, feat = MIN_BYTES // 4 // 64 + 100, 64
    A = scipy.sparse.random(rows, 300, density=0.01, format="csr", dtype=np.float32,
                            random_state=5)
    keep = np.ones(rows, np.float32)
    keep[7:40] = 0                                   # empty rows 7..39
    A = (scipy.sparse.diags(keep) @ A).tocsr()
    A.eliminate_zeros()
    M = ops.SparseMatrix(A)
    X = torch.from_numpy(np.random.default_rng(6).standard_normal((300, feat)).astype(
        np.float32)).requires_grad_(tracked)
    Y = ops.spmm(M, X)
    assert asked and asked[-1] == Y.nbytes
    np.testing.assert_allclose(Y.detach().numpy(), A @ X.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    assert not Y[7:40].detach().any()
    if tracked:
        Y.sum().backward()
        np.testing.assert_allclose(X.grad.numpy(), np.broadcast_to(
            np.asarray(A.sum(axis=0)).T, (300, feat)), rtol=1e-5, atol=1e-5)
