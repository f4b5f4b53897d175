"""One training process, two thread pools: a GCN epoch on Cora, idle and under background load.

Each epoch of a 2-layer GCN (1433 -> 16 -> 7, seeded random features and labels, dropout 0,
Adam) interleaves torch's dense operators (``Linear``, ``relu``, ``cross_entropy``, their
backward, the optimizer step; torch's OpenMP pool) with one sparse product ``(A + I) @ H`` per
layer forward and one ``(A + I)^T @ dY`` per layer backward, made by one of:

* ``ours``: ``sparsetir.ops.spmm`` in an ``autograd.Function`` of this script, called on
  detached tensors (forward ``spmm(M, X)``, backward ``spmm(M^T, dY)``), after
  ``sparsetir.runtime.threads.cooperate_with_torch()``: the kernels' parallel loops run on
  sparsetir's task pool (brief spinning, shares claimed one at a time);
* ``ours-tvm-pool``: the same on TVM's own thread pool at its defaults, as before that
  function (TVM's pool settings given explicitly, which makes it keep TVM's pool);
* ``ours-tvm-nospin``: TVM's pool told not to spin after its tasks and not to pin its threads
  (``TVM_THREAD_POOL_SPIN_COUNT=0 TVM_BIND_THREADS=0``), the best TVM's pool alone can do;
* ``dgl``: ``dgl.ops.copy_u_sum`` (DGL's own autograd);
* ``torch.sparse``: ``torch.sparse.mm`` on a CSR tensor (torch's autograd).

The normalisation ``D^-1/2 (A + I) D^-1/2`` is applied as dense scalings around the product, so
every case trains the same model: the final losses must agree (checked to 1e-4 relative).

Each case runs in a process of its own, idle and inside ``background_load.busy_processes(--load)``,
in ``--rounds`` rounds (each: every case idle, then every case loaded, in a rotated order), so
that a busy minute of a shared machine falls on all cases alike. A time is the median over
rounds of the median epoch (the mean epoch, which counts stalls, beside it); ``vs dgl`` is the
median over rounds of the ratio to DGL's run of the same round; ``busy`` is the process's CPU
time over wall time while idle: how many threads it kept running on average, spinning ones
included. The machine's CPU pressure (Linux PSI) before the rounds is printed: above a few
percent, other processes were competing for the cores and the idle column is not idle
(``--wait-quiet`` starts each round only once they have stopped).

Example
-------
``.venv/bin/python benchmarks/thread_pools.py`` (about two minutes on 2 idle cores);
``.venv/bin/python benchmarks/thread_pools.py --cases ours dgl --load 2 --rounds 3``;
on a shared machine: ``... thread_pools.py --rounds 15 --wait-quiet 10``;
one case alone: ``.venv/bin/python benchmarks/thread_pools.py --worker ours``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from background_load import busy_processes

PREFIX = "RESULT "
IN_FEATS, HIDDEN, CLASSES = 1433, 16, 7        # Cora's published widths

CASES = {         # the environment of each case's process
    "ours": {},
    "ours-tvm-pool": {"TVM_BIND_THREADS": "1", "TVM_THREAD_POOL_SPIN_COUNT": "300000"},
    "ours-tvm-nospin": {"TVM_BIND_THREADS": "0", "TVM_THREAD_POOL_SPIN_COUNT": "0"},
    "dgl": {"DGLBACKEND": "pytorch"},
    "torch.sparse": {},
}


def _graph():
    """Cora's ``A + I`` as float32 CSR with sorted int32 indices, and ``D^-1/2`` per node."""
    import numpy as np
    import scipy.sparse
    from sparsetir.data import load_graph

    A = load_graph("cora")
    A = (A + scipy.sparse.identity(A.shape[0], np.float32, format="csr")).tocsr()
    A.data[:] = 1
    A.sort_indices()
    A.indices = A.indices.astype(np.int32)
    A.indptr = A.indptr.astype(np.int32)
    norm = np.asarray(A.sum(axis=1)).ravel() ** -0.5
    return A, norm.astype(np.float32)


def _sparse_product(name: str, A):
    """``propagate(H)``: ``A @ H`` with autograd, made by contender ``name``, and the pool its
    parallel loops run on (``"tasks"``: sparsetir's task pool; ``"openmp"``: torch's threads;
    ``"tvm"``: TVM's pool)."""
    import numpy as np
    import torch

    if name.startswith("ours"):
        import sparsetir.ops
        from sparsetir.runtime.threads import cooperate_with_torch

        pool = cooperate_with_torch().pool      # what sparsetir.ops do before their first call
        M = sparsetir.ops.SparseMatrix(A)
        MT = sparsetir.ops.SparseMatrix(A.T.tocsr())

        class SpMM(torch.autograd.Function):
            @staticmethod
            def forward(ctx, X):
                return sparsetir.ops.spmm(M, X.detach().contiguous())

            @staticmethod
            def backward(ctx, dY):
                return sparsetir.ops.spmm(MT, dY.detach().contiguous())
        return SpMM.apply, pool
    if name == "dgl":
        import dgl
        import dgl.ops

        csc = (torch.from_numpy(A.indptr.astype(np.int64)),
               torch.from_numpy(A.indices.astype(np.int64)), torch.arange(A.nnz))
        g = dgl.graph(("csc", csc), num_nodes=A.shape[0])     # edge c -> r for A[r, c]
        g.create_formats_()
        return (lambda H: dgl.ops.copy_u_sum(g, H)), "openmp"
    if name == "torch.sparse":
        import warnings
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        csr = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                      torch.from_numpy(A.indices.astype(np.int64)),
                                      torch.from_numpy(A.data), size=A.shape,
                                      check_invariants=False)   # valid: made by scipy
        return (lambda H: torch.sparse.mm(csr, H)), "openmp"
    raise ValueError(f"unknown case {name!r}")


def run_worker(name: str, epochs: int, warmup: int) -> dict:
    """Train ``warmup + epochs`` epochs with contender ``name``; the timed epochs' figures."""
    import numpy as np
    import torch

    A, norm = _graph()
    propagate, pool = _sparse_product(name, A)
    gen = torch.Generator().manual_seed(0)
    n = A.shape[0]
    feats = torch.rand(n, IN_FEATS, generator=gen)
    labels = torch.randint(0, CLASSES, (n,), generator=gen)
    norm = torch.from_numpy(norm).reshape(-1, 1)
    layers = torch.nn.ModuleList([torch.nn.Linear(IN_FEATS, HIDDEN),
                                  torch.nn.Linear(HIDDEN, CLASSES)])
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) * 0.1)
            layer.bias.zero_()
    optimizer = torch.optim.Adam(layers.parameters(), lr=0.01)

    def epoch() -> float:
        h = feats
        for i, layer in enumerate(layers):
            h = norm * propagate(norm * layer(h))
            if i + 1 < len(layers):
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    for _ in range(warmup):
        epoch()
    times = []
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for _ in range(epochs):
        start = time.perf_counter()
        loss = epoch()
        times.append(time.perf_counter() - start)
    busy = (time.process_time() - cpu_start) / (time.perf_counter() - wall_start)
    times = np.array(times) * 1e3
    return {"case": name, "pool": pool, "median_ms": float(np.median(times)),
            "mean_ms": float(times.mean()), "busy_threads": busy, "loss": loss}


def run_case(name: str, args, extra_env: dict) -> dict:
    """``run_worker`` for case ``name`` in a fresh process with ``CASES[name]`` set (and TVM's
    pool settings of this process's environment left out)."""
    from sparsetir.runtime.threads import TVM_POOL_SETTINGS

    base = {k: v for k, v in os.environ.items() if k not in TVM_POOL_SETTINGS}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name,
           "--epochs", str(args.epochs), "--warmup", str(args.warmup)]
    proc = subprocess.run(cmd, env={**base, **CASES[name], **extra_env}, capture_output=True,
                          text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX):])
    raise RuntimeError(f"case {name} failed:\n{proc.stderr[-3000:]}")


def _parse_env(items) -> dict:
    env = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--env wants KEY=VALUE, got {item!r}")
        env[key] = value
    return env


def _cpu_pressure():
    """The share of the last 10 s in which some task waited for a CPU (Linux PSI), or None."""
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as psi:
            return float(psi.readline().split()[1].partition("=")[2])
    except (OSError, IndexError, ValueError):
        return None


def _wait_for_quiet(percent: float) -> None:
    """Return once the CPU pressure is at most ``percent`` (at once where PSI is unavailable)."""
    pressure = _cpu_pressure()
    if pressure is not None and pressure > percent:
        print(f"waiting for the CPU pressure ({pressure:.0f}%) to drop to {percent:g}%",
              file=sys.stderr, flush=True)
    while pressure is not None and pressure > percent:
        time.sleep(1)
        pressure = _cpu_pressure()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--epochs", type=int, default=200, help="timed epochs per process")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, default=len(os.sched_getaffinity(0)),
                        help="busy processes for the loaded runs (default: one per core)")
    parser.add_argument("--wait-quiet", type=float, metavar="PERCENT",
                        help="before each round, wait until the CPU pressure (PSI avg10) is at "
                             "most PERCENT: on a shared machine, rounds run when others are idle")
    parser.add_argument("--env", nargs="*", metavar="KEY=VALUE",
                        help="extra environment for every case (e.g. OMP_WAIT_POLICY=PASSIVE)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(PREFIX + json.dumps(run_worker(args.worker, args.epochs, args.warmup)), flush=True)
        return
    extra_env = _parse_env(args.env)
    results, pressures = {}, []
    for r in range(args.rounds):
        order = args.cases[r % len(args.cases):] + args.cases[:r % len(args.cases)]
        if args.wait_quiet is not None:
            _wait_for_quiet(args.wait_quiet)
        pressures.append(_cpu_pressure())
        for load in (0, args.load):
            for name in order:
                with busy_processes(load):
                    results.setdefault((name, load), []).append(run_case(name, args, extra_env))
    _print_table(args, results, extra_env, pressures)


def _print_table(args, results: dict, extra_env: dict, pressures: list) -> None:
    loads = (0, args.load)
    known = [p for p in pressures if p is not None]
    print(f"GCN on Cora, ms per epoch: median epoch (mean epoch), median of {args.rounds} "
          f"rounds of {args.epochs} epochs, each case in a process of its own; loaded: "
          f"{args.load} busy processes; {len(os.sched_getaffinity(0))} usable cores"
          + (f"; CPU pressure before the rounds (PSI avg10) {statistics.median(known):.0f}%"
             if known else "") + (f"; env {extra_env}" if extra_env else ""))
    has_dgl = "dgl" in args.cases
    print(f"{'case':<18}{'pool':<8}{'busy':>5}{'idle':>17}{'loaded':>17}{'loaded/idle':>13}"
          + (f"{'vs dgl idle':>13}{'vs dgl loaded':>15}" if has_dgl else "") + "   final loss")
    losses = []
    for name in args.cases:
        busy = statistics.median(row["busy_threads"] for row in results[(name, 0)])
        line = f"{name:<18}{results[(name, 0)][-1]['pool']:<8}{busy:5.1f}"
        medians = []
        for load in loads:
            rows = results[(name, load)]
            medians.append(statistics.median(row["median_ms"] for row in rows))
            mean = statistics.median(row["mean_ms"] for row in rows)
            line += f"{medians[-1]:8.2f} ({mean:6.2f})"
            losses += [row["loss"] for row in rows]
        line += f"{medians[1] / medians[0]:>12.2f}x"
        if has_dgl:         # per round, against DGL's run of the same round: then the median
            for load, width in zip(loads, (12, 14)):
                ratios = [ours["median_ms"] / dgl["median_ms"] for ours, dgl
                          in zip(results[(name, load)], results[("dgl", load)])]
                line += f"{statistics.median(ratios):>{width}.2f}x"
        print(line + f"   {results[(name, 0)][-1]['loss']:.6f}")
    spread = (max(losses) - min(losses)) / abs(min(losses))
    print(f"final losses of all runs agree to {spread:.1e} relative"
          + ("" if spread <= 1e-4 else "  (MISMATCH: the cases do not train the same model)"))


if __name__ == "__main__":
    main()
