"""A 2-layer GCN (``sparsetir.nn.GraphConv``) trained full-batch across processes: each rank
holds its part of the graph (``sparsetir.distributed``) and the features of the nodes it owns;
the neighbours' rows travel through ``torch.distributed`` (gloo).

Run on one machine, two processes (plain script: ``torch.multiprocessing.spawn`` on 127.0.0.1):

    python examples/distributed_gcn.py --world-size 2

or with ``torchrun`` (one or several machines; every rank partitions the same seeded graph, or
pass ``--parts FOLDER`` saved by ``sparsetir.distributed.save``):

    torchrun --nproc-per-node 2 examples/distributed_gcn.py

The graph is the ogbn-arxiv-size synthetic graph (169,343 nodes, 1,166,243 edges, symmetric,
self-loops added) with seeded features and labels; ``--nodes`` / ``--edges`` make it smaller.
The same ``train`` runs on one process with a ``SparseMatrix``: started as a plain script,
the example then checks that it gives the ranks' losses.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import scipy.sparse
import torch
import torch.distributed as dist
from torch import nn

from sparsetir.data import power_law_graph
from sparsetir.distributed import DistSparseMatrix, load, partition, run, save
from sparsetir.nn import GraphConv
from sparsetir.ops import SparseMatrix

IN_FEATS, HIDDEN, CLASSES = 64, 32, 8


class GCN(nn.Module):
    """Two graph convolutions with a ReLU between them."""

    def __init__(self, in_feats=IN_FEATS, hidden=HIDDEN, classes=CLASSES):
        super().__init__()
        self.conv1 = GraphConv(in_feats, hidden, activation=torch.relu)
        self.conv2 = GraphConv(hidden, classes)

    def forward(self, graph, features):
        return self.conv2(graph, self.conv1(graph, features))


def make_graph(nodes: int, edges: int) -> scipy.sparse.csr_matrix:
    """The seeded power-law graph made symmetric, with a self-loop on every node, float32."""
    A = power_law_graph(nodes, edges, seed=0)
    A = ((A + A.T + scipy.sparse.identity(nodes, format="csr")) > 0).astype(np.float32)
    return A.tocsr()


def node_data(num_nodes: int, rows=None):
    """Seeded features and labels of all nodes, or of ``rows`` (global ids)."""
    rng = np.random.default_rng(1)
    features = rng.standard_normal((num_nodes, IN_FEATS)).astype(np.float32)
    labels = rng.integers(0, CLASSES, num_nodes)
    if rows is not None:
        features, labels = features[rows], labels[rows]
    return torch.from_numpy(features), torch.from_numpy(labels)


def train(graph, features, labels, num_nodes: int, epochs: int, distributed: bool,
          seconds: list | None = None) -> list:
    """Train a seeded ``GCN`` full-batch with Adam; returns each epoch's loss (the mean over
    all nodes). ``distributed``: ``graph`` is a ``DistSparseMatrix`` and ``features`` /
    ``labels`` this rank's rows; losses and parameter gradients are summed over the ranks.
    ``seconds``: a list that gets each epoch's time."""
    torch.manual_seed(0)
    model = GCN()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(epochs):
        start = time.perf_counter()
        optimizer.zero_grad()
        logits = model(graph, features)
        loss = nn.functional.cross_entropy(logits, labels, reduction="sum") / num_nodes
        loss.backward()
        total = loss.detach().clone()
        if distributed:
            dist.all_reduce(total)
            for parameter in model.parameters():
                dist.all_reduce(parameter.grad)
        optimizer.step()
        losses.append(float(total))
        if seconds is not None:
            seconds.append(time.perf_counter() - start)
    return losses


def train_rank(part, epochs: int, strategy: str, report: str | None = None) -> None:
    """What each rank runs on its ``part``: train, print the losses (rank 0) and write them to
    ``report`` (``losses-<rank>.npy``) when given."""
    DM = DistSparseMatrix(part, strategy=strategy)
    features, labels = node_data(part.num_nodes, part.owned)
    seconds = []
    losses = train(DM, features, labels, part.num_nodes, epochs, distributed=True,
                   seconds=seconds)
    if report:
        np.save(os.path.join(report, f"losses-{part.rank}.npy"), np.array(losses))
    if part.rank == 0:
        later = f"{np.median(seconds[1:]) * 1e3:.1f}" if epochs > 1 else "-"
        print(f"{part.num_parts} ranks, {strategy}: first epoch {seconds[0] * 1e3:.0f} ms "
              f"(kernels loaded or compiled), then {later} ms (median); losses "
              + " ".join(f"{loss:.4f}" for loss in losses))


def spawned_rank(rank: int, world_size: int, folder: str, epochs: int, strategy: str,
                 report: str | None = None) -> None:
    """A rank started by ``sparsetir.distributed.run``: its part is read from ``folder``."""
    del world_size
    train_rank(load(folder, rank), epochs, strategy, report)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=169_343)
    parser.add_argument("--edges", type=int, default=1_166_243)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--method", choices=("contiguous", "metis"), default="metis")
    parser.add_argument("--strategy", choices=("halo", "broadcast"), default="halo")
    parser.add_argument("--parts", help="a folder saved by sparsetir.distributed.save (each "
                        "rank reads its part; by default the graph is partitioned here)")
    args = parser.parse_args()
    if "TORCHELASTIC_RUN_ID" in os.environ:           # started by torchrun
        dist.init_process_group("gloo")
        rank, world_size = dist.get_rank(), dist.get_world_size()
        part = load(args.parts, rank) if args.parts else partition(
            make_graph(args.nodes, args.edges), world_size, args.method)[rank]
        train_rank(part, args.epochs, args.strategy)
        dist.destroy_process_group()
        return
    with tempfile.TemporaryDirectory(prefix="sparsetir-parts-") as scratch:
        folder = args.parts
        if folder is None:
            folder = os.path.join(scratch, "parts")
            save(partition(make_graph(args.nodes, args.edges), args.world_size, args.method),
                 folder)
        run(spawned_rank, args.world_size, args=(folder, args.epochs, args.strategy, scratch),
            timeout=3600)
        if args.parts is None:
            check_against_one_process(args, np.load(os.path.join(scratch, "losses-0.npy")))


def check_against_one_process(args, losses) -> None:
    """The same ``train`` on one process (a ``SparseMatrix`` of the whole graph) gives the
    losses the ranks gave, up to float32 rounding of sums taken in another order."""
    A = make_graph(args.nodes, args.edges)
    features, labels = node_data(A.shape[0])
    alone = train(SparseMatrix(A), features, labels, A.shape[0], args.epochs,
                  distributed=False)
    np.testing.assert_allclose(losses, alone, rtol=1e-4)
    print(f"one process: the same losses (largest difference "
          f"{np.max(np.abs(np.array(alone) - losses)):.1e})")


if __name__ == "__main__":
    main()
