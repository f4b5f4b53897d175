"""A rank whose peer hangs or dies does not hang: its collective times out with a
``CommunicationError`` naming the rank and the operation, the run stops every process, and
none is left behind."""

import multiprocessing
import time

import numpy as np
import pytest
import torch.multiprocessing as mp

import dist_workers
from dist_graphs import small_graph
from sparsetir.distributed import partition, run
from sparsetir.errors import CommunicationError, SparseTIRTypeError, SparseTIRValueError


def test_peer_that_hangs(tmp_path):
    A = small_graph()
    start = time.monotonic()
    with pytest.raises(CommunicationError, match=r"ranks \[1\] of 2 still running"):
        run(dist_workers.hang_or_die, 2, args=(A, partition(A, 2), "hang", str(tmp_path)),
            timeout=40, collective_timeout=5)
    assert time.monotonic() - start < 60
    message = (tmp_path / "error-0.txt").read_text()
    assert message.startswith("CommunicationError: rank 0: all_reduce of the rows' shape past "
                              "the first dimension and dtype"), message     # the exchange's first
    assert "failed (a peer died, hangs or left the group" in message, message
    assert not multiprocessing.active_children()


def test_peer_that_dies(tmp_path):
    A = small_graph()
    with pytest.raises(mp.ProcessExitedException, match="process 1 terminated with exit code 3"):
        run(dist_workers.hang_or_die, 2, args=(A, partition(A, 2), "die", str(tmp_path)),
            timeout=60, collective_timeout=5)
    assert not multiprocessing.active_children()


def test_run_refuses_what_spawn_cannot_pickle():
    """A lambda or a local function cannot reach a spawned rank: refused by name before any
    process starts (was the pickler's AttributeError)."""
    with pytest.raises(SparseTIRTypeError, match="fn must be a function defined at a module"):
        run(lambda rank, world_size: None, 1)
    with pytest.raises(SparseTIRTypeError, match="args picklable"):
        run(dist_workers.check_operators, 1, args=(lambda: None,))


@pytest.mark.parametrize("arguments, problem", [
    ({"timeout": None}, "timeout must be a positive, finite number"),
    ({"timeout": float("inf")}, "timeout must be"),
    ({"collective_timeout": 0}, "collective_timeout must be"),
    ({"threads": 0}, "threads must be a positive integer"),
])
def test_run_checks_its_arguments_before_starting_a_rank(arguments, problem):
    """timeout=None raised only after the ranks started, and left them running (the script
    then never ended); a zero collective timeout failed 20-30 s later in torch."""
    A = small_graph()
    with pytest.raises(SparseTIRValueError, match=problem):
        run(dist_workers.hang_or_die, 2, args=(A, partition(A, 2), "hang", "."), **arguments)
    assert not multiprocessing.active_children()


def test_ranks_holding_parts_of_two_partitions_are_refused(tmp_path):
    """Rank 1 with a part of the same matrix partitioned by METIS, or of another matrix of
    that shape: each load passed and dist_spmm gave wrong rows without an error."""
    A = small_graph(dtype=np.float64)
    B = A.copy()
    B.data *= 10
    for other in (partition(A, 2, "metis")[1], partition(B, 2)[1]):
        with pytest.raises(mp.ProcessRaisedException,
                           match="not the parts of one partition: their partition_id"):
            run(dist_workers.spmm_on_parts, 2, args=([partition(A, 2)[0], other], [4, 4]),
                timeout=60, collective_timeout=10, threads=1)


@pytest.mark.parametrize("strategy", ["halo", "broadcast"])
def test_ranks_passing_rows_of_different_widths_are_refused(strategy):
    """8 features on rank 0, 4 on rank 1: gloo left half of rank 0's halo unwritten (a
    wrong result, no error) or aborted the process (SIGABRT)."""
    A = small_graph(dtype=np.float64)
    with pytest.raises(mp.ProcessRaisedException,
                       match="the ranks disagree on the rows' shape past the first dimension"):
        run(dist_workers.spmm_on_parts, 2, args=(partition(A, 2), [8, 4], strategy),
            timeout=60, collective_timeout=10, threads=1)


def _agreement_run(tmp_path, widths_by_rank) -> list:
    A = small_graph()
    run(dist_workers.widths_agreed_in_the_exchange, 2,
        args=(A, partition(A, 2), widths_by_rank, str(tmp_path)),
        timeout=90, collective_timeout=10, threads=1)
    return [(tmp_path / f"agree-{rank}.txt").read_text().splitlines() for rank in (0, 1)]


def test_halo_rows_agree_in_the_exchange_once_their_format_repeats(tmp_path):
    """One width, then two in turn, then two new widths on every rank: each of the 20 calls
    equals scipy's, and 6 make the explicit all_reduce: the first two (no period yet), two
    when the turns begin (the 4 after 8 breaks the period: that exchange is made again in the
    format every rank sent, then 8, 4 has no period until it repeats), and one after each
    change (6, then 16: each found in the exchange and made again)."""
    widths = [8] * 6 + [4] + [8, 4] * 3 + [6] * 4 + [16] * 3
    for lines in _agreement_run(tmp_path, [widths, widths]):
        assert lines == ["explicit checks 6"], lines


def test_halo_rows_of_any_byte_width_agree(tmp_path):
    """Rows of 7, 3 and 1 float32 features (pieces whose rows end off an 8-byte boundary:
    the trailer after them was read as int64 in place and raised on one rank only, which then
    left the ranks' histories apart and hung the next call): each call equals scipy's."""
    widths = [7] * 4 + [3, 7] * 3 + [1] * 3
    for lines in _agreement_run(tmp_path, [widths, widths]):
        assert lines[-1].startswith("explicit checks"), lines


def test_a_caller_raising_inside_the_gather_loop_on_one_rank_leaves_the_ranks_agreed():
    """Rank 0's loop over ``gather`` raises on its local piece at a call the history predicts
    (the other rank's loop completes): that exchange is settled at rank 0's next call as
    everywhere else, so later calls still compute on both (before, the ranks' histories
    differed and the next exchange aborted the process or timed out). ``X_local`` requires
    grad (``index_select`` with ``out=`` refused it)."""
    A = small_graph()
    run(dist_workers.gather_loop_with_a_raise, 2, args=(A, partition(A, 2), [8, 4] * 5, 5),
        timeout=90, collective_timeout=10, threads=1)


@pytest.mark.parametrize("changed", [4, 16])
def test_a_rank_leaving_the_agreed_format_is_refused_on_every_rank(tmp_path, changed):
    """After 4 calls of 8 features (the exchange then sends no check of its own), rank 1
    passes 4 or 16 features: both ranks raise, naming each rank's rows, and the
    next call, agreed again, computes on both (no rank was left inside a collective)."""
    agreed = [8] * 4
    for lines in _agreement_run(tmp_path, [agreed + [8, 8], agreed + [changed, 8]]):
        (refusal,) = [line for line in lines if "refused" in line]
        assert refusal.startswith("call 4 refused: the ranks disagree on the rows' shape past "
                                  "the first dimension and dtype"), refusal
        assert "rank 0: rows of shape (n, 8) of torch.float32" in refusal, refusal
        assert "rank 1: rows of shape (n, " in refusal, refusal
        assert lines[-1] == "explicit checks 2", lines


@pytest.mark.parametrize("strategy, op", [
    ("halo", "spmm"), ("broadcast", "spmm"), ("halo", "sddmm"), ("broadcast", "sddmm"),
    ("halo", "gspmm_mul"), ("halo", "gspmm_max")])
def test_rows_of_another_dtype_are_refused_on_every_rank(tmp_path, strategy, op):
    """The exchanged rows' dtype is checked after the exchange: float64 rows on rank 1 alone
    (before, refused on rank 1 alone, while rank 0 waited in the exchange until the timeout)
    raise on both ranks, as do float64 rows on both; the calls after them compute."""
    A = small_graph()
    f32, f64 = "float32", "float64"
    plan = [[f32, f32, f32, f32, f64, f32, f32], [f32, f32, f32, f32, f64, f64, f32]]
    plan[0][5] = f32                                  # call 5: rank 1 alone passes float64
    run(dist_workers.dtypes_refused_together, 2,
        args=(A, partition(A, 2), plan, strategy, op, str(tmp_path)),
        timeout=90, collective_timeout=10, threads=1)
    for rank in (0, 1):
        lines = (tmp_path / f"dtypes-{rank}.txt").read_text().splitlines()
        assert lines[:4] == [f"call {k} computed" for k in range(4)], lines
        assert lines[4] == "call 4 refused: SparseTIRTypeError", lines      # both float64
        assert lines[5].startswith("call 5 refused: "), lines               # rank 1 alone
        assert lines[6] == "call 6 computed", lines
