"""A rank whose peer hangs or dies does not hang: its collective times out with a
``CommunicationError`` naming the rank and the operation, the run stops every process, and
none is left behind."""

import multiprocessing
import time

import pytest
import torch.multiprocessing as mp

import dist_workers
from dist_graphs import small_graph
from sparsetir.distributed import partition, run
from sparsetir.errors import CommunicationError, SparseTIRTypeError


def test_peer_that_hangs(tmp_path):
    A = small_graph()
    start = time.monotonic()
    with pytest.raises(CommunicationError, match=r"ranks \[1\] of 2 still running"):
        run(dist_workers.hang_or_die, 2, args=(A, partition(A, 2), "hang", str(tmp_path)),
            timeout=40, collective_timeout=5)
    assert time.monotonic() - start < 60
    message = (tmp_path / "error-0.txt").read_text()
    assert message.startswith("CommunicationError: rank 0: broadcast of rows of X from rank 0 "
                              "failed (a peer died, hangs or left the group"), message
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
