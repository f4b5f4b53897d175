"""``dist_spmm`` / ``dist_sddmm`` on 1, 2 and 4 gloo processes on 127.0.0.1 equal the
single-process ``sparsetir.ops`` results, values and gradients, for both strategies and both
partition methods, and so do ``GraphConv`` and ``SAGEConv`` on a ``DistSparseMatrix``
(``dist_workers``); every run is bounded in time and leaves no process behind."""

import multiprocessing

import pytest

import dist_workers
from dist_graphs import small_graph
from sparsetir.distributed import partition, run


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_operators_match_one_process(world_size):
    A = small_graph()
    dist_workers.reference(A)                 # compiles the kernels once, before the ranks
    parts = {method: partition(A, world_size, method) for method in ("contiguous", "metis")}
    run(dist_workers.check_operators, world_size, args=(A, parts), timeout=240)
    assert not multiprocessing.active_children()
