"""``GATConv``, ``SAGEConv`` "pool" and ``RelGraphConv`` on a ``DistSparseMatrix`` over 2 and 3
gloo processes equal the layers on the whole graph in one process, forward and backward
(``layer_workers``), and so do the operators under them (``max``, ``gsddmm``,
``edge_softmax``); what a rank's local edges cannot give is refused by name."""

import multiprocessing

import pytest
import torch

import layer_workers
from dist_graphs import small_graph
from sparsetir import nn, ops
from sparsetir.distributed import DistSparseMatrix, partition, run
from sparsetir.errors import SparseTIRTypeError, SparseTIRValueError


@pytest.mark.parametrize("world_size,method", [(2, "metis"), (3, "contiguous")])
def test_local_graph_layers_match_one_process(world_size, method):
    A = small_graph(48)
    parts = partition(A, world_size, method)
    run(layer_workers.check_local_graph_layers, world_size, args=(A, parts), timeout=240)
    assert not multiprocessing.active_children()


def test_what_local_edges_cannot_give_is_refused(group_of_one):
    A = small_graph(20)
    DM = DistSparseMatrix(partition(A, 1)[0])
    X = torch.zeros(A.shape[0], 4)
    with pytest.raises(SparseTIRValueError, match="lstm aggregator"):
        nn.SAGEConv(4, 2, "lstm")(DM, X)
    with pytest.raises(SparseTIRValueError, match="norm_by='src'"):
        ops.edge_softmax(DM, torch.zeros(DM.nnz, 1), norm_by="src")
    with pytest.raises(SparseTIRValueError, match="eids holds ids outside"):
        ops.edge_softmax(DM, torch.zeros(1, 1), eids=[DM.nnz])
    with pytest.raises(SparseTIRValueError, match="etypes has shape"):
        nn.RelGraphConv(4, 2, 3)(DM, X, torch.zeros(3, dtype=torch.int64))
    with pytest.raises(SparseTIRTypeError, match="etypes must be a torch tensor or numpy"):
        nn.RelGraphConv(4, 2, 3)(DM, X, list(range(DM.nnz)))
    with pytest.raises(SparseTIRValueError, match="lhs_data has shape"):
        ops.copy_u_max(DM, X[:-1])
