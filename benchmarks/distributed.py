"""Distributed GCN training (``examples/distributed_gcn.py``'s model) on one machine: for each
graph, partition method, world size and strategy, the epoch time split into exchange and
compute, the bytes each rank sent, and each rank's peak memory.

Every rank of a world size runs in its own process (``sparsetir.distributed.run``, gloo on
127.0.0.1, ``threads`` = usable cores / world size each), trains ``--epochs`` epochs after one
warm-up epoch, for every partition method and strategy in turn, and reports:

* ``epoch ms``: the slowest rank's mean epoch;
* ``exchange ms``: the slowest rank's time in or waiting for the exchange's collectives (the
  halo strategy's overlapped part is not counted: only its start and its wait); ``compute ms``
  = ``epoch ms`` - ``exchange ms`` of that rank (kernels, dense layers, the parameters'
  gradient all-reduce);
* ``MB sent/rank``: the mean over ranks of the bytes of its node rows it sent per epoch (forward
  and backward, both layers; ``exchange.py`` says how they are counted);
* ``peak MB``: the largest peak resident memory of a rank (``VmHWM``: the interpreter, torch,
  TVM and the kernels included); ``base MB``: the same before the rank loaded its part, so the
  difference is what the part, its features and the training took.

On a machine with 2 cores, world sizes above 2 time-share the cores: their times show the cost
of the exchange, not a speed-up.

Example
-------
``.venv/bin/python benchmarks/distributed.py`` (bundled graphs and the arxiv-size graph; long)
``.venv/bin/python benchmarks/distributed.py --graphs cora pubmed --world-sizes 1 2 --epochs 2``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse

from sparsetir.data import load_graph
from sparsetir.distributed import DistSparseMatrix, load, partition, run, save

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "distributed_gcn.py"
METHODS = ("contiguous", "metis")
STRATEGIES = ("broadcast", "halo")
ARXIV = (169_343, 1_166_243)


def example_module():
    """``examples/distributed_gcn.py`` as a module (its GCN, graph and node data)."""
    spec = importlib.util.spec_from_file_location("distributed_gcn", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def graph(name: str) -> scipy.sparse.csr_matrix:
    """A bundled graph made symmetric with self-loops, or ``"arxiv"``: the example's graph."""
    if name == "arxiv":
        return example_module().make_graph(*ARXIV)
    A = load_graph(name)
    return ((A + A.T + scipy.sparse.identity(A.shape[0], format="csr")) > 0).astype(
        np.float32).tocsr()


def peak_mb() -> float:
    """This process's peak resident memory (``VmHWM``: unlike ``ru_maxrss``, which keeps the
    parent's peak across ``fork`` and ``exec``, it starts anew in a spawned process)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rank_bench(rank, world_size, folders, epochs, report):
    """Train on each partition (``folders``: method -> folder) and strategy; write this rank's
    figures to ``report/rank-<rank>.json``."""
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    example = example_module()
    base = peak_mb()
    results = []
    for method, folder in folders.items():
        part = load(folder, rank)
        features, labels = example.node_data(part.num_nodes, part.owned)
        for strategy in STRATEGIES:
            DM = DistSparseMatrix(part, strategy=strategy)
            torch.manual_seed(0)
            model = example.GCN()
            optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

            def epoch():
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(
                    model(DM, features), labels, reduction="sum") / part.num_nodes
                loss.backward()
                for parameter in model.parameters():
                    dist.all_reduce(parameter.grad)
                optimizer.step()
            epoch()                                   # warm-up: kernels loaded
            exchange = DM.exchange(strategy)
            sent, waited = exchange.bytes_sent, exchange.seconds
            dist.barrier()
            start = time.perf_counter()
            for _ in range(epochs):
                epoch()
            seconds = (time.perf_counter() - start) / epochs
            results.append({"method": method, "strategy": strategy, "epoch_s": seconds,
                            "exchange_s": (exchange.seconds - waited) / epochs,
                            "bytes": (exchange.bytes_sent - sent) / epochs})
    peak = peak_mb()
    Path(report, f"rank-{rank}.json").write_text(json.dumps(
        {"world_size": world_size, "peak_mb": peak, "base_mb": base, "results": results}))


def measure(name: str, A, world_size: int, epochs: int, threads=None) -> list:
    """Rows of the table for graph ``name`` at ``world_size``."""
    with tempfile.TemporaryDirectory(prefix="sparsetir-dist-bench-") as scratch:
        folders = {}
        for method in METHODS:
            folders[method] = os.path.join(scratch, method)
            save(partition(A, world_size, method), folders[method])
        run(rank_bench, world_size, args=(folders, epochs, scratch), timeout=3600,
            collective_timeout=600, threads=threads)
        ranks = [json.loads(Path(scratch, f"rank-{r}.json").read_text())
                 for r in range(world_size)]
    rows = []
    for i, first in enumerate(ranks[0]["results"]):
        figures = [rank["results"][i] for rank in ranks]
        slowest = max(figures, key=lambda f: f["epoch_s"])
        rows.append({"graph": name, "nodes": A.shape[0], "edges": A.nnz,
                     "world_size": world_size, "method": first["method"],
                     "strategy": first["strategy"], "epoch_ms": slowest["epoch_s"] * 1e3,
                     "exchange_ms": slowest["exchange_s"] * 1e3,
                     "compute_ms": (slowest["epoch_s"] - slowest["exchange_s"]) * 1e3,
                     "mb_sent_per_rank": np.mean([f["bytes"] for f in figures]) / 2**20,
                     "peak_mb": max(rank["peak_mb"] for rank in ranks),
                     "base_mb": max(rank["base_mb"] for rank in ranks)})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", nargs="+", default=["cora", "citeseer", "pubmed", "arxiv"])
    parser.add_argument("--world-sizes", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, help="kernel and torch threads per rank "
                        "(default: the usable cores divided among the ranks)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    header = (f"{'graph':9s} {'P':>2s} {'method':10s} {'strategy':9s} {'epoch ms':>9s} "
              f"{'exchange':>9s} {'compute':>9s} {'MB sent/rank':>12s} {'peak MB':>8s} {'base MB':>8s}")
    print(header)
    rows = []
    for name in args.graphs:
        A = graph(name)
        for world_size in args.world_sizes:
            for row in measure(name, A, world_size, args.epochs, args.threads):
                rows.append(row)
                print(f"{name:9s} {world_size:2d} {row['method']:10s} {row['strategy']:9s} "
                      f"{row['epoch_ms']:9.1f} {row['exchange_ms']:9.1f} "
                      f"{row['compute_ms']:9.1f} {row['mb_sent_per_rank']:12.3f} "
                      f"{row['peak_mb']:8.0f} {row['base_mb']:8.0f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
