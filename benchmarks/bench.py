"""sparsetir's operators against DGL, torch.sparse, scipy, MKL and GraphBLAS on the CPU.

Operators (float32): weighted SpMM ``Y = A @ X`` (DGL ``u_mul_e_sum``), unweighted SpMM (A's
pattern, DGL ``copy_u_sum``) and SDDMM ``dot(X[r], Y[c])`` at every nonzero (DGL ``u_dot_v``), on
the bundled graphs, a synthetic power-law graph and an R-MAT graph of ogbn-arxiv size
(``--large``: also a power-law graph of ogbn-proteins size), at feature sizes 32, 64, 128 and
256. Ours three ways: ``ours`` (a ``SparseMatrix``, the default kernels), ``ours_tuned`` (the
same matrix after ``sparsetir.ops.tune``, whose search time is reported apart as
``prepare_ms``) and ``ours_plain`` (the scipy matrix passed on every call).

Method: every (contender, graph) pair runs in a process of its own (``worker.py``), all with the
same thread count. Per graph, the harness asks every contender for a case (feature size,
operator, dtype) before it moves to the next case, in an order rotated at each case, while every
other worker is stopped (``worker_process.py``): a shared VM's speed drifts by 1.5x over seconds
to minutes, for every process alike, and timed one whole graph after another, contenders met
different phases. The cases run ``--rounds`` times (2 by default, the order reversed in the
second); a time is the median of its rounds' medians. Unless ``--load 0`` (or ``--quick``), the
whole sweep runs again beside one busy process per usable core (``background_load.py``): the
``loaded`` condition. Every library runs at its own defaults (``OMP_WAIT_POLICY`` as the
environment has it, unless ``--omp-wait-policy``). Each measurement checks the first call's
result against scipy, warms up, then times repeated whole calls (as many as fit in a time
budget, within bounds) and checks the last result again; a wrong result is an error, never a
time. Reported: the median and spread, achieved GB/s against a memory-traffic lower bound
(``workload.py``) and this machine's measured bandwidth (``machine.py``), ours' speedup over
each contender, and ours' one-off costs (``SparseMatrix(A)`` and each kernel's first call)
apart. A contender whose library is not installed is reported n/a.

Dtypes (``--dtypes``, default float32 and bfloat16): every contender runs in float32; ours,
DGL and torch.sparse (``contenders.BFLOAT16``) in bfloat16 too, from the same inputs rounded
to bfloat16, checked against the float32 result within bfloat16's tolerance (``workload``).
A library that refuses bfloat16 is reported as refusing, with its message, never as a time
(torch 2.13's CSR ``@`` and ``sampled_addmm`` refuse it on the CPU). ``--dtypes float32``
drops the bfloat16 column. Outputs (``--out``, default ``benchmarks/results/``): ``bench.csv``,
``bench.json`` (machine, settings and rows) and ``bench.png`` (needs matplotlib).

Example
-------
``.venv/bin/python benchmarks/bench.py --quick`` (cora and citeseer, feature size 32: under a
minute); ``.venv/bin/python benchmarks/bench.py`` (everything, 2 rounds, idle and loaded: about
an hour on 2 cores); ``... bench.py --load 0 --rounds 1`` (idle only, one round);
``.venv/bin/python benchmarks/bench.py --graphs pubmed --feat 64 --contenders ours dgl``;
``... bench.py --quick --dtypes bfloat16`` (the bfloat16 column alone)
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import contenders
import graphs
from background_load import busy_processes
import machine
import report
import workload
from worker_process import WorkerGone, WorkerProcess

HERE = Path(__file__).resolve().parent
QUICK = {"graphs": ["cora", "citeseer"], "feats": [32], "budget": 0.02, "min_repeat": 3,
         "max_repeat": 50, "rounds": 1, "load": 0}
FULL = {"feats": [32, 64, 128, 256], "budget": 0.15, "min_repeat": 3, "max_repeat": 400,
        "rounds": 2, "load": len(os.sched_getaffinity(0))}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="cora and citeseer, feature size 32, few repeats")
    parser.add_argument("--large", action="store_true", help="add synthetic-proteins (40 M edges)")
    parser.add_argument("--graphs", nargs="+", choices=graphs.labels(large=True))
    parser.add_argument("--feat", nargs="+", type=int, help="feature sizes (default 32 64 128 256)")
    parser.add_argument("--contenders", nargs="+", choices=contenders.NAMES,
                        default=list(contenders.NAMES))
    parser.add_argument("--dtypes", nargs="+", choices=workload.DTYPES,
                        default=list(workload.DTYPES),
                        help="float32 for every contender, bfloat16 for ours, DGL and "
                             "torch.sparse (default: both)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="threads for every contender (default: all usable cores)")
    parser.add_argument("--budget", type=float, help="seconds of timed calls per measurement")
    parser.add_argument("--rounds", type=int,
                        help="times every case is measured, the contenders in another order "
                             "each time; a time is the median of its rounds' medians "
                             "(default 2, --quick 1)")
    parser.add_argument("--load", type=int,
                        help="also measure everything beside this many busy processes "
                             "(background_load.py; default: one per usable core, --quick: 0, "
                             "0: idle only)")
    parser.add_argument("--omp-wait-policy", choices=["active", "passive"],
                        help="OMP_WAIT_POLICY for every worker (default: the environment's, "
                             "unset as users run)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    return parser.parse_args(argv)


def settings_of(args: argparse.Namespace) -> dict:
    """The run's settings: the preset (quick or full) overridden by the options given."""
    preset = dict(QUICK if args.quick else FULL)
    preset.setdefault("graphs", graphs.labels(large=args.large))
    overrides = {"graphs": args.graphs, "feats": args.feat, "budget": args.budget,
                 "rounds": args.rounds, "load": args.load}
    preset.update({k: v for k, v in overrides.items() if v is not None})
    return {**preset, "contenders": args.contenders, "threads": args.threads,
            "ops": list(workload.OPS), "dtypes": args.dtypes,
            "omp_wait_policy": args.omp_wait_policy or os.environ.get("OMP_WAIT_POLICY",
                                                                      "unset")}


def worker_env(threads: int, cache: Path, wait_policy: str = "unset") -> dict:
    """The environment of every worker: one thread count for every library, OpenMP's wait
    policy as users have it (``wait_policy``: ``"unset"`` leaves the environment's), and an
    empty kernel cache for sparsetir (so ours' first calls show the compile times).

    The wait policy decides what a library's threads do between calls, which is part of what
    its users get: with ``passive`` an OpenMP team sleeps after every call and the next call
    waits for it to wake (on a VM, often a whole scheduler tick); with the default it spins
    first. An earlier version of this harness set ``passive`` for everyone to remove outliers;
    it now measures every library at its defaults, idle and under load.
    """
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TVM_NUM_THREADS"):
        env[var] = str(threads)
    if wait_policy != "unset":
        env["OMP_WAIT_POLICY"] = wait_policy
    env["DGLBACKEND"] = "pytorch"
    env["SPARSETIR_CACHE"] = str(cache / "sparsetir")
    return env


def dtypes_of(name: str, settings: dict) -> list:
    """The dtypes of the run that contender ``name`` is measured in (bfloat16 only for
    ``contenders.BFLOAT16``)."""
    return [d for d in settings["dtypes"] if d == "float32" or name in contenders.BFLOAT16]


def start_worker(name: str, graph: str, settings: dict, cache: Path, condition: str):
    """A ``worker.py`` process for contender ``name`` on ``graph``, set up and ready."""
    cmd = [sys.executable, str(HERE / "worker.py"), "--contender", name, "--graph", graph,
           "--threads", str(settings["threads"]), "--budget", str(settings["budget"]),
           "--min-repeat", str(settings["min_repeat"]),
           "--max-repeat", str(settings["max_repeat"]), "--cache", str(cache)]
    stderr = open(cache / f"{name}-{graph}-{condition}.stderr", "w+")  # closed with the worker
    return WorkerProcess(cmd, worker_env(settings["threads"], cache, settings["omp_wait_policy"]),
                         HERE, stderr)


def run_graph(graph: str, settings: dict, cache: Path, progress,
              condition: str = "idle") -> list:
    """Every measurement on ``graph``, tagged with ``condition``: one worker per contender, set
    up one after the other, then every case (feature size, operator, dtype) asked of every
    contender in turn, ``settings["rounds"]`` times, the contenders in an order rotated at each
    case and reversed in odd rounds. Only one worker runs at a time: the others are stopped
    (``WorkerProcess.pause``) while one sets up or is timed. A worker that exits, stops
    answering or answers another case has that case reported as an error with the reason and
    is started again for its next case; one that cannot start has its cases so reported and
    is not started again on this graph (a start that hangs would cost a timeout per case)."""
    names = [n for n in settings["contenders"] if dtypes_of(n, settings)]
    workers, unstartable, records = {}, {}, []

    def worker_for(name):
        """The running worker of ``name``, started (the others stopped) if it has none; a
        contender whose worker could not start is not tried again on this graph."""
        if name in unstartable:
            raise WorkerGone(unstartable[name])
        if name not in workers:
            for other in workers.values():
                other.pause()
            try:
                workers[name] = start_worker(name, graph, settings, cache, condition)
            except WorkerGone as exc:
                unstartable[name] = f"could not start: {exc}"
                raise WorkerGone(unstartable[name]) from None
        return workers[name]

    def measured(name, feat, op, dtype) -> dict:
        case = {"contender": name, "graph": graph, "feat": feat, "op": op, "dtype": dtype}
        try:
            worker = worker_for(name)
            for other_name, other in workers.items():
                if other_name != name:
                    other.pause()
            record = json.loads(worker.ask(f"{feat} {op} {dtype}"))
            if {k: record.get(k) for k in case} != case:
                raise WorkerGone(f"answered another case: {json.dumps(record)[:200]}")
            return record
        except WorkerGone as exc:
            if name in workers:
                workers.pop(name).close()
            return {**case, "status": "error", "note": str(exc)}

    if not names:
        return records
    try:
        for name in names:
            try:
                worker_for(name)
            except WorkerGone:
                pass              # its cases try again, and say why
        cases = list(itertools.product(settings["feats"], settings["ops"], settings["dtypes"]))
        for round_, (index, (feat, op, dtype)) in itertools.product(
                range(settings["rounds"]), enumerate(cases)):
            order = names[::-1] if round_ % 2 else names
            shift = index % len(order)
            for name in order[shift:] + order[:shift]:
                if dtype in dtypes_of(name, settings):
                    records.append({**measured(name, feat, op, dtype), "condition": condition})
                    progress(records[-1])
    finally:
        for worker in workers.values():
            worker.close()
    return records


def median_of_rounds(records: list) -> list:
    """One record per (contender, graph, feature size, operator, dtype): of its rounds, the one with
    the median time (the lower middle of an even count), with ``rounds``, every round's median
    in ``round_ms`` and the first round's first call and preparation (ours compiles then, and
    ``ours_tuned`` searches; later rounds reuse both); a case that failed in any round keeps
    its failure."""
    cases = {}
    for record in records:
        key = (record["contender"], record["graph"], record["feat"], record["op"],
               record["dtype"], record["condition"])
        cases.setdefault(key, []).append(record)
    merged = []
    for rounds in cases.values():
        failed = [r for r in rounds if r["status"] != "ok"]
        if failed:
            merged.append(failed[0])
            continue
        ordered = sorted(rounds, key=lambda r: r["median_ms"])
        chosen = dict(ordered[(len(ordered) - 1) // 2])
        for first in ("first_call_ms", "prepare_ms"):   # compiled and searched, not reused
            chosen[first] = rounds[0].get(first, "")
        chosen["rounds"] = len(rounds)
        chosen["round_ms"] = [round(r["median_ms"], 5) for r in rounds]
        merged.append(chosen)
    return merged


def graph_info(label: str, settings: dict, cache: Path) -> dict:
    """Prepare graph ``label`` for the workers; its size and traffic lower bounds."""
    A = graphs.prepare(label, cache)
    return {"rows": A.shape[0], "nnz": A.nnz,
            "traffic": {(op, f, d): workload.traffic_bytes(A, op, f, dtype=d)
                        for op in settings["ops"] for f in settings["feats"]
                        for d in settings["dtypes"]},
            "no_reuse": {(op, f, d): workload.no_reuse_bytes(A, op, f, d)
                         for op in settings["ops"] for f in settings["feats"]
                         for d in settings["dtypes"]}}


def main(argv=None) -> None:
    args = parse_args(argv)
    settings = settings_of(args)
    start = time.perf_counter()
    print(f"measuring memory bandwidth with {settings['threads']} threads ...", flush=True)
    info = machine.describe(settings["threads"])
    print(report.header(info, settings), flush=True)
    conditions = ["idle"] + (["loaded"] if settings["load"] else [])
    total = len(settings["graphs"]) * len(settings["feats"]) * len(settings["ops"]) \
        * sum(len(dtypes_of(n, settings)) for n in settings["contenders"]) \
        * settings["rounds"] * len(conditions)
    count = itertools.count(1)

    def progress(r):
        if r["status"] == "ok":
            result = f"{r['median_ms']:.3f} ms (IQR {r['p25_ms']:.3f}-{r['p75_ms']:.3f})"
        else:
            result = f"{r['status']}: {r.get('note', '')}"
        print(f"[{next(count):4d}/{total}] {r['condition']} {r['graph']} f={r['feat']} "
              f"{r['op']} {r['dtype']} {r['contender']}: {result}", flush=True)

    with tempfile.TemporaryDirectory(prefix="sparsetir-bench-") as tmp:
        cache, sizes, records = Path(tmp), {}, []
        for label in settings["graphs"]:
            sizes[label] = graph_info(label, settings, cache)
            print(f"graph {label}: {sizes[label]['rows']:,} rows, {sizes[label]['nnz']:,} "
                  "nonzeros", flush=True)
        for condition in conditions:
            with (busy_processes(settings["load"]) if condition == "loaded"
                  else contextlib.nullcontext()):
                for label in settings["graphs"]:
                    records += run_graph(label, settings, cache, progress, condition)
    rows = report.finish(median_of_rounds(records), sizes, info)
    print()
    print(report.table(rows, info, settings))
    paths = report.write(rows, info, settings, args.out)
    print("\nwrote " + ", ".join(str(p) for p in paths.values())
          + ("" if "png" in paths else " (no chart: matplotlib is not installed)"))
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
