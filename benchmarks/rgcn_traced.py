"""What a training epoch of RGCN costs eagerly and under ``torch.compile``, with the traced
``RelGraphConv`` over the dense relation slots (``nn.relation_slots``) and per edge.

Two ``RelGraphConv`` layers (``in -> 16 -> classes``, basis decomposition of 3 bases,
``--relations`` synthetic relations drawn uniformly per edge, each message scaled by a random
``norm``) trained full batch with Adam on one thread. Each row builds the model afresh from one
seed and times ``--epochs`` epochs (forward, backward, step); the first two (compiling) are
left out of the median. ``per_edge`` forces the traced layer's per-edge path (``gather_mm``),
which it takes by itself only where the slots are more than ``DENSE_FACTOR`` times the edges.

Run: ``TVM_NUM_THREADS=1 .venv/bin/python benchmarks/rgcn_traced.py [--graph cora]
[--relations 6] [--rows eager slots per_edge slots_inductor]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import sparsetir.nn.relgraphconv as relgraphconv
from sparsetir.data import load_graph
from sparsetir.nn import RelGraphConv
from sparsetir.nn.relation_slots import dense_slots_fit
from sparsetir.ops import SparseMatrix

BACKENDS = {"eager": None, "slots": "aot_eager", "per_edge": "aot_eager",
            "slots_inductor": "inductor"}


class Net(torch.nn.Module):
    """Two ``RelGraphConv`` layers over a fixed graph, relations and norm."""

    def __init__(self, M, etypes, norm, in_feat, classes, relations):
        super().__init__()
        self.M, self.etypes, self.norm = M, etypes, norm
        self.conv1 = RelGraphConv(in_feat, 16, relations, "basis", 3)
        self.conv2 = RelGraphConv(16, classes, relations, "basis", 3)

    def forward(self, x):
        h = torch.relu(self.conv1(self.M, x, self.etypes, self.norm))
        return self.conv2(self.M, h, self.etypes, self.norm)


def epoch_seconds(model, x, labels, epochs: int) -> list:
    optimizer = torch.optim.Adam(model.parameters(), 0.01)
    seconds = []
    for _ in range(epochs):
        start = time.perf_counter()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), labels).backward()
        optimizer.step()
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="cora")
    parser.add_argument("--relations", type=int, default=6)
    parser.add_argument("--features", type=int, default=1433)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--rows", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    M = SparseMatrix(load_graph(args.graph))
    rng = np.random.default_rng(0)
    etypes = torch.from_numpy(rng.integers(0, args.relations, M.nnz))
    norm = torch.from_numpy(rng.random((M.nnz, 1), np.float32))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(M.shape[0], args.features, generator=generator)
    labels = torch.randint(0, 7, (M.shape[0],), generator=generator)
    print(f"{args.graph}: {M.shape[0]} nodes, {M.nnz} edges, {args.relations} relations; "
          f"dense slots taken while traced: {dense_slots_fit(M.shape[1], args.relations, M.nnz)}")
    for row in args.rows:
        relgraphconv.dense_slots_fit = (lambda *_: False) if row == "per_edge" \
            else dense_slots_fit
        torch.manual_seed(0)
        model = Net(M, etypes, norm, args.features, 7, args.relations)
        if BACKENDS[row]:
            torch._dynamo.reset()
            model = torch.compile(model, fullgraph=True, backend=BACKENDS[row])
        seconds = epoch_seconds(model, x, labels, args.epochs)
        rest = seconds[2:]
        print(f"{row:15s} first {seconds[0] * 1e3:8.1f} ms   median "
              f"{statistics.median(rest) * 1e3:7.1f} ms   min {min(rest) * 1e3:7.1f} ms")
    relgraphconv.dense_slots_fit = dense_slots_fit


if __name__ == "__main__":
    main()
