"""A GCN (``sparsetir.nn.GraphConv`` on a ``DistSparseMatrix``, ``examples/distributed_gcn.py``)
trained on 2 and 4 processes gives the losses of the same model trained on one process with a
``SparseMatrix``, epoch by epoch (the layers' own checks: ``dist_workers.check_layers``)."""

import importlib.util
import multiprocessing
from pathlib import Path

import numpy as np
import pytest

import dist_workers
from sparsetir import ops
from sparsetir.distributed import partition, run, save

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed_gcn.py"
spec = importlib.util.spec_from_file_location("distributed_gcn", EXAMPLE)
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
EPOCHS = 4


@pytest.mark.parametrize("world_size,method", [(2, "metis"), (4, "contiguous")])
def test_gcn_losses_match_one_process(tmp_path, world_size, method):
    A = example.make_graph(300, 1200)
    features, labels = example.node_data(A.shape[0])
    expected = example.train(ops.SparseMatrix(A), features, labels, A.shape[0], EPOCHS,
                             distributed=False)
    save(partition(A, world_size, method), tmp_path)
    run(dist_workers.train_example_rank, world_size,
        args=(str(EXAMPLE), str(tmp_path), EPOCHS, str(tmp_path)), timeout=240)
    assert not multiprocessing.active_children()
    for rank in range(world_size):
        np.testing.assert_allclose(np.load(tmp_path / f"losses-{rank}.npy"), expected,
                                   rtol=1e-4)
    assert expected[-1] < expected[0]          # it trains

